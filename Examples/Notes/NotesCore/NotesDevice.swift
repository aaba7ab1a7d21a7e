public import ExampleSupport
public import Foundation
public import Stratus
public import StratusSync

/// One device of the notes app from seed 000: a single note in the custom zone `Notes` of the
/// user's private database, its text stored as an asset, with `modified` and `version` fields,
/// synced by a ``SyncEngine``.
///
/// - Edits are saved locally first and sent when the server is reachable (offline mode); the
///   engine's journal keeps a waiting edit through a crash.
/// - Conflicts are resolved by the latest `modified`: the newer edit wins, on either side.
/// - A note written by a newer version of the app (a larger `version`) is refused, not
///   overwritten or misread.
///
/// The state directory holds `device.json` and `session.json` (see ``DeviceDirectory``),
/// `note.json` (the note and the engine's state), `note.txt` (the text uploaded as the record's
/// asset) and `journal` (the engine's pending changes).
public actor NotesDevice: SyncEngineDelegate {
    /// The data version this build of the app reads and writes.
    public static let currentVersion = 1
    /// The zone holding the note.
    public static let zoneID = RecordZone.ID(zoneName: "Notes")
    /// The note's record.
    public static let recordID = Record.ID(recordName: "note", zoneID: zoneID)

    /// How to reach the server and as whom.
    public typealias Account = DeviceDirectory.Account

    /// What a sync did.
    public enum SyncOutcome: Equatable, Sendable {
        /// The note is the same here and on the server.
        case synced
        /// The server could not be reached; local edits wait in the state directory.
        case offline(String)
    }

    /// Why the app refuses to go on.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The server's note was written by a newer version of the app.
        case newerVersion(Int)

        public var description: String {
            switch self {
            case .newerVersion(let version):
                "the note was written by a newer version of Notes (data version \(version); this one reads "
                    + "\(NotesDevice.currentVersion)): update the app on this device to read or change it"
            }
        }
    }

    /// What `note.json` holds.
    struct State: Codable {
        /// The note; `nil` until one is written or fetched.
        var note: LocalNote?
        /// The sync engine's state.
        var stateSerialization: SyncEngine.State.Serialization?
        /// The data version of the server's note when a newer app wrote it: until a note this app
        /// reads arrives, every sync says so (the note shown is not the server's).
        var newerVersionOnServer: Int?
    }

    let directory: DeviceDirectory
    /// This process's claim on the device's directory, held as long as the device is open.
    private let lock: DeviceLock
    let container: Container
    let deviceID: String
    let appVersion: Int
    private var state: State
    private var engine: SyncEngine!
    /// Why the last sync refused the server's note.
    private var refusal: Failure?
    /// A failure of the last sync that the device does not resolve by itself.
    private var unresolved: CloudError?

    /// The device whose state is in `stateDirectory`, as set up by ``signUp(_:)`` or ``signIn(_:)``.
    /// `appVersion` is the data version this device's app writes (tests use it to play an older
    /// or newer app).
    ///
    /// - Throws: ``DeviceDirectory/NotSetUp`` when the directory has no device.
    public init(stateDirectory: URL, appVersion: Int = NotesDevice.currentVersion) async throws {
        directory = DeviceDirectory(stateDirectory)
        // Claimed before anything is read: another process's last write lands before, or not at all.
        lock = try directory.claim(app: "notes")
        let device = try directory.device(app: "notes")
        container = device.container
        deviceID = device.setup.deviceID
        self.appVersion = appVersion
        state = try directory.read(State.self, from: "note.json") ?? State()
        engine = try SyncEngine(
            SyncEngine.Configuration(
                database: container.privateCloudDatabase, stateSerialization: state.stateSerialization, delegate: self,
                automaticallySync: false, journalURL: directory.file("journal")))
    }

    /// Creates the account and sets this state directory up as a device of it.
    @discardableResult
    public static func signUp(_ account: Account) async throws -> NotesDevice {
        try await DeviceDirectory.setUp(account, app: "notes", .signUp)
        return try await NotesDevice(stateDirectory: account.stateDirectory)
    }

    /// Signs in and sets this state directory up as a device of the account.
    @discardableResult
    public static func signIn(_ account: Account) async throws -> NotesDevice {
        try await DeviceDirectory.setUp(account, app: "notes", .signIn)
        return try await NotesDevice(stateDirectory: account.stateDirectory)
    }

    /// The note as this device has it.
    public var note: LocalNote? { state.note }

    /// This device's ID, stored in the notes it edits.
    public var id: String { deviceID }

    /// Replaces the note's text, saves it locally, and sends it if the server is reachable.
    /// `date` is when the edit happened (now by default).
    @discardableResult
    public func edit(_ text: String, at date: Date = Date()) async throws -> SyncOutcome {
        // The engine learns of the edit first: once `add` returns, the edit survives a crash.
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID)])
        state.note = LocalNote(
            text: text, modified: date, version: appVersion, editedOn: deviceID, needsPush: true,
            systemFields: state.note?.systemFields)
        try saveState()
        return try await sync()
    }

    /// Sends a local edit that waits, then applies the changes other devices made.
    @discardableResult
    public func sync() async throws -> SyncOutcome {
        refusal = nil
        unresolved = nil
        do {
            do {
                try await engine.sendChanges()
            } catch let error as CloudError where error.code == .partialFailure {
                // Each failure was resolved as it was reported, or kept in `refusal` or `unresolved`.
            }
            if let refusal { throw refusal }
            try await engine.fetchChanges()
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        if let refusal = refusal ?? state.newerVersionOnServer.map(Failure.newerVersion) { throw refusal }
        if let unresolved { throw unresolved }
        return .synced
    }

    /// Follows the other devices' edits as they happen: subscribes to notes (once per account),
    /// then syncs whenever a notification says something changed, or the push channel says some may
    /// have been missed, and calls `onChange` with the note each time it changed. Runs until the
    /// task is cancelled, or throws when the session ends.
    public func watch(_ onChange: @Sendable (LocalNote?) async -> Void) async throws {
        try await container.privateCloudDatabase.save(
            Subscription.query(
                recordType: "Note", subscriptionID: "notes",
                notificationInfo: Subscription.NotificationInfo(shouldSendContentAvailable: true)))
        for try await _ in container.notifications() {
            let before = state.note
            if case .offline = try await sync() { continue }
            if state.note != before { await onChange(state.note) }
        }
    }

    // MARK: - SyncEngineDelegate

    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            state.stateSerialization = update.stateSerialization
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords where record.recordID == Self.recordID {
                state.note?.needsPush = false
                state.note?.systemFields = record.encodeSystemFields()
            }
            for failure in sent.failedRecordSaves where failure.record.recordID == Self.recordID {
                resolve(failure.error, state: syncEngine.state)
            }
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications where modification.record.recordID == Self.recordID {
                // A local edit still to send wins or loses when it is sent, by `modified`.
                guard state.note?.needsPush != true, let fetched = readableNote(modification.record) else { continue }
                state.note = fetched
                state.newerVersionOnServer = nil
            }
            if changes.deletions.contains(where: { $0.recordID == Self.recordID }), state.note?.needsPush != true {
                state.note = nil
                state.newerVersionOnServer = nil
            }
        default:
            return
        }
        do {
            try saveState()
        } catch {
            unresolved = CloudError(.internalError, "note.json could not be written: \(error)")
        }
    }

    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            await self.recordToSave(recordID)
        }
    }

    /// Resolves a refused save of the note: creates the zone, or settles a conflict by `modified`.
    private func resolve(_ error: CloudError, state engineState: SyncEngine.State) {
        switch error.code {
        case .zoneNotFound:
            // The zone is created on the first save, as in the seed.
            state.note?.systemFields = nil
            engineState.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.zoneID))])
            engineState.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID)])
        case .serverRecordChanged:
            guard let server = error.serverRecord, let note = state.note else { return }
            guard let theirs = readableNote(server) else {
                // A newer app's note: this edit is refused for good, not kept to be sent over it
                // once the server's note is readable again.
                if refusal != nil { state.note?.needsPush = false }
                return
            }
            if note.modified > theirs.modified {
                // This edit is newer: write it over the server's version, based on that version.
                state.note?.systemFields = server.encodeSystemFields()
                engineState.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID)])
            } else {
                // The server's edit is newer: it wins, and this device takes it.
                state.note = theirs
            }
        case .unknownItem:
            // Deleted on the server: create it again.
            state.note?.systemFields = nil
            engineState.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID)])
        default:
            if !error.keepsChangesPending { unresolved = error }
        }
    }

    /// The note's record to save, its text written to `note.txt` as the asset; `nil`, and no
    /// longer pending, when there is no edit to send.
    private func recordToSave(_ recordID: Record.ID) -> Record? {
        guard recordID == Self.recordID, let note = state.note, note.needsPush,
            (try? note.text.write(to: directory.file("note.txt"), atomically: true, encoding: .utf8)) != nil
        else {
            engine.state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
            return nil
        }
        var record =
            note.systemFields.flatMap { try? Record(systemFieldsData: $0) }
            ?? Record(recordType: "Note", recordID: Self.recordID)
        record["text"] = Asset(fileURL: directory.file("note.txt"))
        record["modified"] = note.modified
        record["version"] = note.version
        record["editedOn"] = note.editedOn
        return record
    }

    /// The note a record holds; `nil`, with the reason noted, for a note written by a newer app
    /// or whose text is missing.
    private func readableNote(_ record: Record) -> LocalNote? {
        let version = record["version", as: Int.self] ?? 1
        guard version <= appVersion else {
            refusal = .newerVersion(version)
            state.newerVersionOnServer = version
            return nil
        }
        guard let file = (record["text"] as? Asset)?.fileURL, let text = try? String(contentsOf: file, encoding: .utf8) else {
            unresolved = CloudError(.assetNotAvailable, "the note's text could not be downloaded")
            return nil
        }
        return LocalNote(
            text: text,
            modified: record["modified"] as? Date ?? record.modificationDate ?? Date(timeIntervalSince1970: 0),
            version: version, editedOn: record["editedOn"] as? String, needsPush: false,
            systemFields: record.encodeSystemFields())
    }

    private func saveState() throws {
        try directory.write(state, to: "note.json")
    }
}
