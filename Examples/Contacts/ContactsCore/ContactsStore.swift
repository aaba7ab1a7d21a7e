public import ExampleSupport
public import Foundation
public import Stratus
public import StratusSync

/// The contacts app of Apple's sync-engine sample, on Stratus: a list of contacts in the zone
/// `Contacts` of the user's private database, kept on the device in one JSON file and synced by a
/// ``SyncEngine``.
///
/// - Edits are committed locally and sent when the server is reachable; nothing is lost meanwhile,
///   not even to a crash: each edit is added to the engine's state, which journals it, before the
///   contact is written.
/// - Conflicts keep the newer edit (each contact carries when the user last changed it), on
///   either side.
/// - Signing in uploads the contacts made while signed out; signing out or switching accounts
///   clears them from the screen, keeping those not sent yet for their user, whose next sign-in on
///   this device sends them; deleting the zone on one device clears it on the others.
public actor ContactsStore: SyncEngineDelegate {
    /// The zone holding the contacts.
    public static let zoneID = RecordZone.ID(zoneName: "Contacts")
    /// The record type of a contact.
    public static let recordType = "Contact"

    /// A contact.
    public struct Contact: Codable, Hashable, Sendable, Identifiable {
        /// The contact's record name.
        public let id: String
        /// The contact's name.
        public var name: String
        /// When a user last changed the contact, on whichever device: conflicts keep the later change.
        public var modified: Date
    }

    /// What a sync did.
    public enum SyncOutcome: Equatable, Sendable {
        /// The device has sent and fetched everything.
        case synced
        /// The server could not be reached; edits wait on the device.
        case offline(String)
    }

    /// What the device keeps in `contacts.json`.
    struct AppData: Codable {
        struct Entry: Codable {
            var contact: Contact
            /// The system fields of the contact's last known record, so saves are based on it.
            var systemFields: Data?
        }

        var contacts: [String: Entry] = [:]
        var stateSerialization: SyncEngine.State.Serialization?
        /// The contacts a user who signed out on this device had not sent, by user record name:
        /// they come back, and go out, when that user signs in here again.
        var parked: [String: [String: Entry]]?
    }

    let directory: DeviceDirectory
    /// This process's claim on the device's directory, held as long as the device is open.
    private let lock: DeviceLock
    /// The container the device syncs with.
    public let container: Container
    private var data: AppData
    private var engine: SyncEngine!
    /// Called after fetched changes altered the contacts.
    private var onChange: (@Sendable ([Contact]) async -> Void)?
    /// A change the server refused that the store does not resolve by itself, from the last sync.
    private var unresolved: CloudError?
    /// Why the last write of `contacts.json` after a sync event failed.
    private var persistFailure: (any Error)?

    /// The device whose state is in `stateDirectory`, set up by ``signUp(_:)`` or ``signIn(_:)``.
    /// With `automaticallySync`, the engine syncs by itself (``watch(_:)``).
    public init(stateDirectory: URL, automaticallySync: Bool = false) async throws {
        directory = DeviceDirectory(stateDirectory)
        // Claimed before anything is read: another process's last write lands before, or not at all.
        lock = try directory.claim(app: "contacts")
        container = try directory.device(app: "contacts").container
        data = try directory.read(AppData.self, from: "contacts.json") ?? AppData()
        engine = try SyncEngine(
            SyncEngine.Configuration(
                database: container.privateCloudDatabase, stateSerialization: data.stateSerialization, delegate: self,
                automaticallySync: automaticallySync, journalURL: directory.file("journal")))
    }

    /// Creates the account and sets `account`'s state directory up as a device of it.
    public static func signUp(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "contacts", .signUp)
    }

    /// Signs in and sets `account`'s state directory up as a device of it.
    public static func signIn(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "contacts", .signIn)
    }

    // MARK: - Reading and editing

    /// The contacts, by name.
    public var contacts: [Contact] {
        data.contacts.values.map(\.contact).sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    /// The changes the engine still has to send, and those the server refused.
    public var syncStatus: [SyncEngine.TrackedChange<SyncEngine.PendingRecordZoneChange>] {
        engine.state.trackedRecordZoneChanges
    }

    /// Adds a contact and commits it on the device.
    @discardableResult
    public func add(name: String, at date: Date = Date()) throws -> Contact {
        try commit(Contact(id: UUID().uuidString, name: name, modified: date))
    }

    /// Renames the contact `id`.
    public func rename(_ id: String, to name: String, at date: Date = Date()) throws {
        guard var contact = data.contacts[id]?.contact else { throw Self.unknownContact(id) }
        contact.name = name
        contact.modified = date
        try commit(contact)
    }

    /// Deletes the contact `id`.
    public func delete(_ id: String) throws {
        guard data.contacts[id] != nil else { throw Self.unknownContact(id) }
        // The engine learns of the change first: once `add` returns, the change survives a crash.
        engine.state.add(pendingRecordZoneChanges: [.deleteRecord(Self.recordID(id))])
        data.contacts[id] = nil
        try saveData()
    }

    /// Deletes every contact, here, on the server and (at their next sync) on the other devices.
    public func deleteAll() throws {
        engine.state.add(pendingDatabaseChanges: [.deleteZone(Self.zoneID)])
        data.contacts = [:]
        try saveData()
    }

    @discardableResult
    private func commit(_ contact: Contact) throws -> Contact {
        var contact = contact
        // The server keeps dates to the millisecond: compare edits at that precision.
        contact.modified = Date(timeIntervalSince1970: (contact.modified.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID(contact.id))])
        data.contacts[contact.id, default: AppData.Entry(contact: contact)].contact = contact
        try saveData()
        return contact
    }

    // MARK: - Syncing

    /// Sends the waiting edits, then fetches the other devices'.
    ///
    /// - Returns: ``SyncOutcome/offline(_:)`` when the server could not be reached.
    /// - Throws: A ``CloudError`` the store could not resolve, such as an invalid record.
    public func sync() async throws -> SyncOutcome {
        unresolved = nil
        do {
            do {
                try await engine.sendChanges()
            } catch let error as CloudError where error.code == .partialFailure {
                // Each failure was handled as it was reported, or kept in `unresolved`.
            }
            try await engine.fetchChanges()
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        if let persistFailure { throw persistFailure }
        if let unresolved { throw unresolved }
        return .synced
    }

    /// Calls `onChange` with the contacts each time the engine fetched changes to them, until the
    /// task is cancelled. Open the store with `automaticallySync` so that the engine fetches when
    /// the server notifies it.
    public func watch(_ onChange: @escaping @Sendable ([Contact]) async -> Void) async {
        self.onChange = onChange
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
        self.onChange = nil
    }

    // MARK: - SyncEngineDelegate

    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            data.stateSerialization = update.stateSerialization
            persist()
        case .accountChange(let change):
            switch change.changeType {
            case .signIn(let currentUser):
                // What was written while nobody was signed in, and what this user left unsent on
                // this device at an earlier session, goes out.
                data.contacts.merge(takeParked(of: currentUser)) { _, parked in parked }
                guard !data.contacts.isEmpty else { break }
                syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.zoneID))])
                syncEngine.state.add(pendingRecordZoneChanges: data.contacts.keys.sorted().map { .saveRecord(Self.recordID($0)) })
            case .signOut(let previousUser):
                park(change.parkedRecordZoneChanges, of: previousUser)
            case .switchAccounts(let previousUser, let currentUser):
                park(change.parkedRecordZoneChanges, of: previousUser)
                // The engine has this user's parked changes pending again.
                data.contacts = takeParked(of: currentUser)
                if !data.contacts.isEmpty { syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.zoneID))]) }
            }
            persist()
        case .fetchedDatabaseChanges(let changes):
            guard changes.deletions.contains(where: { $0.zoneID == Self.zoneID }) else { break }
            data.contacts = [:]
            persist()
            await onChange?(contacts)
        case .fetchedRecordZoneChanges(let changes):
            apply(changes, state: syncEngine.state)
            persist()
            await onChange?(contacts)
        case .sentRecordZoneChanges(let sent):
            handle(sent, state: syncEngine.state)
            persist()
        default:
            break
        }
    }

    /// Takes the previous user's contacts off the device, keeping those the engine parked for them.
    private func park(_ changes: [SyncEngine.PendingRecordZoneChange], of user: Record.ID) {
        let unsent = Set(changes.map(\.recordID.recordName))
        let kept = data.contacts.filter { unsent.contains($0.key) }
        data.contacts = [:]
        guard !kept.isEmpty else { return }
        data.parked = (data.parked ?? [:]).merging([user.recordName: kept]) { earlier, now in earlier.merging(now) { $1 } }
    }

    /// The contacts kept for `user` at an earlier session on this device, no longer kept apart.
    private func takeParked(of user: Record.ID) -> [String: AppData.Entry] {
        defer { if data.parked?.isEmpty == true { data.parked = nil } }
        return data.parked?.removeValue(forKey: user.recordName) ?? [:]
    }

    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            await self.recordToSave(recordID)
        }
    }

    /// Applies fetched changes: the newer of the local and the fetched contact wins.
    private func apply(_ changes: SyncEngine.Event.FetchedRecordZoneChanges, state: SyncEngine.State) {
        for modification in changes.modifications {
            let record = modification.record
            guard let fetched = Self.contact(from: record) else { continue }
            if let local = data.contacts[fetched.id]?.contact, local.modified > fetched.modified {
                // The local edit is newer and still to be sent: base it on the fetched record.
                data.contacts[fetched.id]?.systemFields = record.encodeSystemFields()
                continue
            }
            state.remove(pendingRecordZoneChanges: [.saveRecord(record.recordID)])
            data.contacts[fetched.id] = AppData.Entry(contact: fetched, systemFields: record.encodeSystemFields())
        }
        for deletion in changes.deletions {
            state.remove(pendingRecordZoneChanges: [.saveRecord(deletion.recordID)])
            data.contacts[deletion.recordID.recordName] = nil
        }
    }

    /// Keeps what the server saved, and resolves what it refused.
    private func handle(_ sent: SyncEngine.Event.SentRecordZoneChanges, state: SyncEngine.State) {
        for record in sent.savedRecords {
            data.contacts[record.recordID.recordName]?.systemFields = record.encodeSystemFields()
        }
        for failure in sent.failedRecordSaves {
            let recordID = failure.record.recordID
            let id = recordID.recordName
            switch failure.error.code {
            case .serverRecordChanged:
                guard let server = failure.error.serverRecord, let theirs = Self.contact(from: server) else { continue }
                if let local = data.contacts[id]?.contact, local.modified > theirs.modified {
                    // This edit is newer: save it again over the server's version.
                    data.contacts[id]?.systemFields = server.encodeSystemFields()
                    state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
                } else {
                    data.contacts[id] = AppData.Entry(contact: theirs, systemFields: server.encodeSystemFields())
                }
            case .zoneNotFound:
                // The zone is created on the first save, then the contact saved again.
                data.contacts[id]?.systemFields = nil
                state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: recordID.zoneID))])
                state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            case .unknownItem:
                // Deleted on the server since this device fetched it: create it again.
                data.contacts[id]?.systemFields = nil
                state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            default:
                // Passing failures are retried by the engine; anything else is the app's to see.
                if !failure.error.keepsChangesPending { unresolved = failure.error }
            }
        }
    }

    /// The record to save for a contact; `nil`, and no longer pending, when it is gone.
    private func recordToSave(_ recordID: Record.ID) -> Record? {
        guard let entry = data.contacts[recordID.recordName] else {
            engine.state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
            return nil
        }
        var record =
            entry.systemFields.flatMap { try? Record(systemFieldsData: $0) }
            ?? Record(recordType: Self.recordType, recordID: recordID)
        record["name"] = entry.contact.name
        record["modified"] = entry.contact.modified
        return record
    }

    private static func contact(from record: Record) -> Contact? {
        guard let name = record["name", as: String.self] else { return nil }
        return Contact(
            id: record.recordID.recordName, name: name,
            modified: record["modified", as: Date.self] ?? record.modificationDate ?? .distantPast)
    }

    static func recordID(_ id: String) -> Record.ID { Record.ID(recordName: id, zoneID: zoneID) }

    /// The contact whose ID is `id` or starts with it (in any case), as `list` and `add` print IDs.
    public func resolve(_ id: String) throws -> String {
        if data.contacts[id] != nil { return id }
        let matches = data.contacts.keys.filter { $0.lowercased().hasPrefix(id.lowercased()) }
        guard matches.count == 1 else {
            if matches.isEmpty { throw Self.unknownContact(id) }
            throw CloudError(.invalidArguments, "\(matches.count) contacts' IDs start with \(id); give more of the ID")
        }
        return matches[0]
    }

    static func unknownContact(_ id: String) -> CloudError {
        CloudError(.unknownItem, "there is no contact \(id) on this device; 'contacts list' shows their IDs")
    }

    private func saveData() throws {
        try directory.write(data, to: "contacts.json")
    }

    /// Saves after a sync event. A failure leaves the previous file, whose older state makes the
    /// engine send or fetch again what followed; the next ``sync()`` reports it.
    private func persist() {
        do {
            try saveData()
            persistFailure = nil
        } catch {
            persistFailure = error
        }
    }
}
