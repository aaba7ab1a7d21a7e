public import Foundation
import Logging
public import Stratus
import Synchronization

/// Keeps a database in sync with the app's local store (CloudKit's `CKSyncEngine`).
///
/// The app tells the engine what changed locally (``State/add(pendingRecordZoneChanges:)``), hands it
/// the records when it asks (``SyncEngineDelegate/nextRecordZoneChangeBatch(_:syncEngine:)``), and
/// applies what the engine fetched (``SyncEngineDelegate/handleEvent(_:syncEngine:)``). The engine
/// sends and fetches, in batches that fit the server's limits; retries what fails for passing
/// reasons, honouring the server's `retryAfter`; fetches when the server pushes a notification;
/// and reports everything as ``Event``s, one at a time, in order.
///
/// Use one engine per database: one for the private database, one for the shared database.
///
/// ```swift
/// let engine = try SyncEngine(SyncEngine.Configuration(
///     database: container.privateCloudDatabase, stateSerialization: savedState, delegate: store))
/// engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID)])
/// ```
///
/// With ``Configuration/automaticallySync`` (the default) the engine starts working as soon as it
/// is created, like CloudKit's: it saves a database subscription, listens for notifications,
/// fetches, and sends what is pending. It stops when it is released.
///
/// ## Never losing a change
/// A pending change is removed only once the server confirmed it. With a
/// ``Configuration/journalURL``, a change added with ``State/add(pendingRecordZoneChanges:)`` is on
/// disk when the call returns, so it survives the process dying before the app persisted the next
/// ``Event/stateUpdate(_:)``. The app's part: call `add` before it commits the local edit, persist
/// each `stateUpdate` before returning from `handleEvent`, and pass the last persisted state and
/// the same journal at the next launch. A change confirmed by the server but not yet persisted as
/// sent is sent again after a crash; the engine recognises a save the server already holds and
/// reports it as saved.
public final class SyncEngine: Sendable {
    /// How an engine is set up (CloudKit's `CKSyncEngine.Configuration`).
    public struct Configuration: Sendable {
        /// The database to sync: a private or shared database (the public database has no change feeds).
        public var database: Database
        /// The state the app persisted from the last `stateUpdate` event; `nil` at the first launch.
        public var stateSerialization: State.Serialization?
        /// Receives the events and provides the records to send. The engine holds it weakly.
        public var delegate: any SyncEngineDelegate
        /// Whether the engine syncs by itself (`true` by default): a notification from the server
        /// starts a fetch, new pending changes start a send, failures are retried, and a fetch runs
        /// after ``catchUpInterval`` of silence. Without it, only ``SyncEngine/fetchChanges(_:)`` and
        /// ``SyncEngine/sendChanges(_:)`` sync (tests use this to play several devices in turn).
        public var automaticallySync: Bool
        /// The database subscription the engine listens through; `nil` (the default) makes the
        /// engine save and reuse its own, `stratus-sync-<scope>`.
        public var subscriptionID: Subscription.ID?
        /// A file where the engine writes every change the app adds or removes before the call
        /// returns, so that pending changes survive the process dying between two persisted
        /// `stateUpdate`s. Keep it beside the persisted state, one per engine; `nil` (the default)
        /// keeps changes in memory until the next `stateUpdate`, as CloudKit does. An engine holds
        /// its journal locked while it lives: a second engine on the same journal (another process
        /// of the app on the same files, say) is refused, as it would write over the first's changes.
        public var journalURL: URL?
        /// How long a send waits after a change is added, to take later changes in the same
        /// request (2 ms by default). Changes added while a send runs go in the next one.
        public var sendDebounce: Duration
        /// How long after the last fetch the engine fetches again by itself, in case a
        /// notification was lost (5 minutes by default).
        public var catchUpInterval: Duration
        /// How the engine reaches the server; `nil` (the default) is ``database`` itself. Another
        /// ``SyncTransport`` may stand in: one that forwards to the database and fails on cue, in a
        /// test of the engine's retries.
        public var transport: (any SyncTransport)?
        /// The time the engine schedules by (``SystemSyncClock`` by default).
        public var clock: any SyncClock

        /// A configuration for `database`, starting from `stateSerialization`, reporting to `delegate`.
        public init(
            database: Database, stateSerialization: State.Serialization?, delegate: any SyncEngineDelegate,
            automaticallySync: Bool = true, subscriptionID: Subscription.ID? = nil, journalURL: URL? = nil
        ) {
            self.database = database
            self.stateSerialization = stateSerialization
            self.delegate = delegate
            self.automaticallySync = automaticallySync
            self.subscriptionID = subscriptionID
            self.journalURL = journalURL
            self.sendDebounce = .milliseconds(2)
            self.catchUpInterval = .seconds(300)
            self.clock = SystemSyncClock()
        }
    }

    /// The database the engine syncs.
    public let database: Database
    /// How the engine reaches the server: the database, through the calls ``SyncTransport`` names.
    let transport: any SyncTransport
    /// The time the engine schedules by.
    let clock: any SyncClock
    /// What the engine has to do, and where each change stands.
    public let state: State

    weak let delegate: (any SyncEngineDelegate)?
    /// What the engine keeps of its configuration: not the delegate, which it holds weakly (a
    /// delegate usually holds its engine).
    let settings: Settings
    let logger: Logger
    let operations = SerialOperations()
    let schedule: Mutex<Schedule>
    let wakeup = Wakeup()
    private let backgroundTasks = Mutex<[Task<Void, Never>]>([])

    /// Creates an engine; with ``Configuration/automaticallySync`` it starts syncing at once.
    ///
    /// - Throws: When the journal cannot be opened or read.
    public init(_ configuration: Configuration) throws {
        settings = Settings(
            automaticallySync: configuration.automaticallySync, subscriptionID: configuration.subscriptionID,
            sendDebounce: configuration.sendDebounce)
        database = configuration.database
        transport = configuration.transport ?? configuration.database
        clock = configuration.clock
        delegate = configuration.delegate
        logger = transport.logger
        state = try State(
            serialization: configuration.stateSerialization, journalURL: configuration.journalURL, logger: logger)
        schedule = Mutex(Schedule(catchUpInterval: configuration.catchUpInterval, now: configuration.clock.now))
        // At the first launch, the state is the signed-in user's: the changes the app adds before
        // the engine first checks the account are theirs, not those of whoever signs in next.
        if configuration.stateSerialization == nil, let user = transport.signedInUserRecordName { state.adopt(user: user) }
        state.setOnAdd { [weak self] in self?.changesAdded() }
        startBackgroundWork()
    }

    deinit {
        for task in backgroundTasks.withLock({ $0 }) { task.cancel() }
    }

    /// Fetches the changes on the server: the database's zone changes, then the record changes of
    /// each zone in `options`' scope that has some, reporting them in events (up to 1,000
    /// changes each, gathered from the pages read).
    ///
    /// - Throws: `CloudError` when the fetch stopped early (after reporting what it fetched):
    ///   `notAuthenticated` when no user is signed in, a transient error the engine retries by
    ///   itself when it syncs automatically. `CancellationError` after ``cancelOperations()``.
    public func fetchChanges(_ options: FetchChangesOptions = FetchChangesOptions()) async throws {
        try await operations.run { [self] in
            try await fetch(FetchChangesContext(reason: .manual, options: options))
        }
    }

    /// Sends the pending changes in `options`' scope: zones first, then the records the delegate
    /// provides, batch by batch, reporting each batch in a `sentRecordZoneChanges` event.
    ///
    /// - Throws: `CloudError` when the send stopped early (after reporting what it sent):
    ///   `notAuthenticated` when no user is signed in, or a transient error that failed a whole
    ///   request (the changes stay pending). `CancellationError` after ``cancelOperations()``.
    public func sendChanges(_ options: SendChangesOptions = SendChangesOptions()) async throws {
        try await operations.run { [self] in
            try await send(SendChangesContext(reason: .manual, options: options))
        }
    }

    /// Runs `operation` as one of the engine's operations: after the fetches and sends asked for
    /// before it, and before those asked for after. A delegate that also reads the server by other
    /// means (StratusStore polls the public database, which has no change feed) applies what it reads
    /// here, so that it never interleaves with a send's answers. `operation` must not ask the engine
    /// to fetch or send: that would wait for itself.
    public func performExclusively<Value: Sendable>(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await operations.run(operation)
    }

    /// Cancels the fetches and sends running or waiting, and returns when they ended. Changes in
    /// flight stay pending.
    public func cancelOperations() async {
        await operations.cancelAll()
    }

    /// Stops the engine: its scheduled syncs and its listening for notifications end, and the
    /// fetches and sends running or waiting are cancelled (changes in flight stay pending). Returns
    /// once none of them runs. The engine syncs again only when asked to.
    public func close() async {
        let tasks = backgroundTasks.withLock { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in tasks { task.cancel() }
        wakeup.signal()
        for task in tasks { await task.value }
        await operations.cancelAll()
    }

    /// The settings of ``Configuration`` the engine works by.
    struct Settings: Sendable {
        let automaticallySync: Bool
        let subscriptionID: Subscription.ID?
        let sendDebounce: Duration
    }

    // MARK: - Events

    /// Hands `event` to the delegate and waits until it handled it.
    func emit(_ event: Event, to delegate: any SyncEngineDelegate) async {
        await delegate.handleEvent(event, syncEngine: self)
    }

    /// Hands the state to the delegate to persist; once it did, the journal drops what the state includes.
    func emitStateUpdate(to delegate: any SyncEngineDelegate) async {
        let serialization = state.serialization()
        await delegate.handleEvent(.stateUpdate(.init(stateSerialization: serialization)), syncEngine: self)
        state.persisted(serialization)
    }

    // MARK: - Account

    /// Compares the signed-in user with the state's: on a change, resets the state as CloudKit
    /// does and reports an `accountChange`. Returns whether a user is signed in.
    func checkAccount(_ delegate: any SyncEngineDelegate) async -> Bool {
        let current = transport.signedInUserRecordName
        let (stateUser, adoptedUser) = state.withSnapshot { ($0.userRecordName, $0.adoptedUserRecordName) }
        guard current != stateUser else { return current != nil }
        // Before its first check, a new state belongs to the user signed in when it started.
        let previous = stateUser ?? adoptedUser
        let change: Event.AccountChange.ChangeType
        switch (previous, current) {
        case (nil, let current?): change = .signIn(currentUser: Record.ID(recordName: current))
        case (let previous?, let current?) where previous == current: change = .signIn(currentUser: Record.ID(recordName: current))
        case (let previous?, nil): change = .signOut(previousUser: Record.ID(recordName: previous))
        case (let previous?, let current?):
            change = .switchAccounts(previousUser: Record.ID(recordName: previous), currentUser: Record.ID(recordName: current))
        case (nil, nil): return false
        }
        let (parked, restored) = state.changeUser(to: current)
        logger.info(
            "sync engine: the account changed",
            metadata: ["stratus.change": "\(change)", "stratus.parked": "\(parked.count)", "stratus.restored": "\(restored.count)"])
        await emit(
            .accountChange(.init(changeType: change, parkedRecordZoneChanges: parked, restoredRecordZoneChanges: restored)),
            to: delegate)
        await emitStateUpdate(to: delegate)
        return current != nil
    }

    /// Checks, before a request is sent or an answer handed to the delegate, that the account the
    /// state belongs to is still the one signed in. When another signed in (or nobody is) while an
    /// operation went on, its next request would carry the new session, writing the old account's
    /// records into the new one's database or its answer into the old one's store: the change is
    /// handled now (``checkAccount(_:)``) and the operation ends with ``accountChangedMidway``.
    func requireSameAccount(_ delegate: any SyncEngineDelegate) async throws {
        guard transport.signedInUserRecordName != state.withSnapshot({ $0.userRecordName }) else { return }
        _ = await checkAccount(delegate)
        throw Self.accountChangedMidway
    }

    /// The error of an operation that ended because the signed-in account changed while it ran.
    static let accountChangedMidway = CloudError(
        .operationCancelled, "the signed-in account changed during the operation, which ended there")

    /// The error of an operation tried with nobody signed in.
    static let notSignedIn = CloudError(
        .notAuthenticated, "no user is signed in to the container; sign in, then fetch or send again")

    // MARK: - Background work

    /// With automatic sync: the scheduler, and the listener that turns notifications into fetches.
    private func startBackgroundWork() {
        guard settings.automaticallySync else { return }
        let wakeup = wakeup
        let transport = transport
        let clock = clock
        let engine = Weak(self)
        let tasks = [
            Task {
                while !Task.isCancelled {
                    guard let next = engine.value?.nextScheduledWork() else { return }
                    switch next {
                    case .wait(let deadline): await wakeup.wait(until: deadline, on: clock)
                    case .run(let work): await engine.value?.runScheduled(work)
                    }
                }
            },
            Task { await Self.listenForNotifications(transport, clock: clock, engine: engine) },
        ]
        backgroundTasks.withLock { $0 = tasks }
    }
}
