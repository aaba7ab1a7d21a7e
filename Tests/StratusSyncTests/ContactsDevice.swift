import Foundation
import Stratus
import StratusSync
import StratusTestSupport
import Testing

/// One device of an app that keeps a list of contacts in a zone, synced by a ``SyncEngine`` the
/// way Apple's sync-engine sample does it: the local store is in memory, each contact keeps the
/// system fields of its last known record, and the delegate resolves conflicts by ``ConflictPolicy``.
actor ContactsDevice: SyncEngineDelegate {
    /// Which value a conflict keeps.
    enum ConflictPolicy {
        /// The server's value replaces the local one.
        case serverWins
        /// The local value is saved again over the server's record.
        case localWins
    }

    static let zoneID = RecordZone.ID(zoneName: "Contacts")

    let name: String
    let container: Container
    private(set) var engine: SyncEngine!
    /// The contacts: record name → name.
    private(set) var contacts: [String: String] = [:]
    /// The system fields of each contact's last known record.
    private var systemFields: [String: Data] = [:]
    /// The unsent contacts of users who signed out, by user record name, with their system fields.
    private var parked: [String: [String: (name: String, systemFields: Data?)]] = [:]
    private(set) var stateSerialization: SyncEngine.State.Serialization?
    private(set) var events: [SyncEngine.Event] = []
    var conflictPolicy: ConflictPolicy
    /// Called before each batch is made, with the number of batches asked for so far.
    private var beforeBatch: (@Sendable (Int) async -> Void)?
    private var batchesAsked = 0
    /// An edit the user makes right after the next batch was made, while it is on its way.
    private var editWhileSending: (recordName: String, value: String)?
    /// Called with every event, after the device handled it.
    private var eventObserver: (@Sendable (SyncEngine.Event) -> Void)?

    init(
        _ name: String, container: Container, automaticallySync: Bool = false,
        stateSerialization: SyncEngine.State.Serialization? = nil, journalURL: URL? = nil,
        conflictPolicy: ConflictPolicy = .serverWins, configure: (inout SyncEngine.Configuration) -> Void = { _ in }
    ) async throws {
        self.name = name
        self.container = container
        self.conflictPolicy = conflictPolicy
        self.stateSerialization = stateSerialization
        var configuration = SyncEngine.Configuration(
            database: container.privateCloudDatabase, stateSerialization: stateSerialization, delegate: self,
            automaticallySync: automaticallySync, journalURL: journalURL)
        configure(&configuration)
        engine = try SyncEngine(configuration)
    }

    // MARK: - What the user does

    /// Saves a contact. While the zone is missing on the server, the save fails with
    /// `zoneNotFound`, and the device queues the zone and the save again.
    func save(_ recordName: String, _ value: String) {
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.recordID(recordName))])
        contacts[recordName] = value
    }

    /// Deletes a contact.
    func delete(_ recordName: String) {
        engine.state.add(pendingRecordZoneChanges: [.deleteRecord(Self.recordID(recordName))])
        contacts[recordName] = nil
        systemFields[recordName] = nil
    }

    /// Creates the zone on the next send.
    func createZone() {
        engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.zoneID))])
    }

    /// Deletes the zone and every contact in it, here and on the server.
    func deleteZone() {
        engine.state.add(pendingDatabaseChanges: [.deleteZone(Self.zoneID)])
        contacts = [:]
        systemFields = [:]
    }

    func sendChanges() async throws { try await engine.sendChanges() }
    func fetchChanges() async throws { try await engine.fetchChanges() }

    func setConflictPolicy(_ policy: ConflictPolicy) { conflictPolicy = policy }
    func setBeforeBatch(_ action: @escaping @Sendable (Int) async -> Void) { beforeBatch = action }
    func setEditWhileSending(_ recordName: String, _ value: String) { editWhileSending = (recordName, value) }
    func observeEvents(_ observer: @escaping @Sendable (SyncEngine.Event) -> Void) { eventObserver = observer }
    func clearEvents() { events = [] }

    static func recordID(_ recordName: String) -> Record.ID { Record.ID(recordName: recordName, zoneID: zoneID) }

    // MARK: - SyncEngineDelegate

    /// The contacts whose record the server had: those with system fields.
    func recordsHeld(inZone zoneID: RecordZone.ID, syncEngine: SyncEngine) async -> [Record.ID: String] {
        guard zoneID == Self.zoneID else { return [:] }
        return Dictionary(uniqueKeysWithValues: systemFields.keys.map { (Self.recordID($0), "Contact") })
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        events.append(event)
        defer { eventObserver?(event) }
        switch event {
        case .stateUpdate(let update):
            stateSerialization = update.stateSerialization
        case .accountChange(let change):
            switch change.changeType {
            case .signIn:
                // Upload what was made while nobody was signed in.
                guard !contacts.isEmpty else { break }
                syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: Self.zoneID))])
                syncEngine.state.add(pendingRecordZoneChanges: contacts.keys.sorted().map { .saveRecord(Self.recordID($0)) })
            case .signOut(let previousUser), .switchAccounts(let previousUser, _):
                // The previous user's unsent contacts are kept for them, the rest leave.
                let unsent = Set(change.parkedRecordZoneChanges.map(\.recordID.recordName))
                parked[previousUser.recordName, default: [:]].merge(
                    contacts.filter { unsent.contains($0.key) }.map { ($0.key, ($0.value, systemFields[$0.key])) }
                ) { $1 }
                contacts = [:]
                systemFields = [:]
            }
            let currentUser: Record.ID? = switch change.changeType {
            case .signIn(let user), .switchAccounts(_, let user): user
            case .signOut: nil
            }
            if let currentUser, let kept = parked.removeValue(forKey: currentUser.recordName) {
                for (recordName, (name, fields)) in kept {
                    contacts[recordName] = name
                    systemFields[recordName] = fields
                }
            }
        case .fetchedDatabaseChanges(let changes):
            for deletion in changes.deletions where deletion.zoneID == Self.zoneID {
                contacts = [:]
                systemFields = [:]
            }
        case .fetchedRecordZoneChanges(let changes):
            let pending = Set(syncEngine.state.pendingRecordZoneChanges)
            for modification in changes.modifications {
                let record = modification.record
                let recordName = record.recordID.recordName
                systemFields[recordName] = record.encodeSystemFields()
                // A local edit not sent yet is newer than what the server has: keep it.
                if !pending.contains(.saveRecord(record.recordID)), !pending.contains(.deleteRecord(record.recordID)) {
                    contacts[recordName] = record["name", as: String.self]
                }
            }
            for deletion in changes.deletions {
                contacts[deletion.recordID.recordName] = nil
                systemFields[deletion.recordID.recordName] = nil
                syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(deletion.recordID)])
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                systemFields[record.recordID.recordName] = record.encodeSystemFields()
            }
            for failure in sent.failedRecordSaves {
                let recordID = failure.record.recordID
                switch failure.error.code {
                case .serverRecordChanged:
                    guard let server = failure.error.serverRecord else { continue }
                    systemFields[recordID.recordName] = server.encodeSystemFields()
                    switch conflictPolicy {
                    case .serverWins: contacts[recordID.recordName] = server["name", as: String.self]
                    case .localWins: syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
                    }
                case .zoneNotFound:
                    systemFields[recordID.recordName] = nil
                    syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: recordID.zoneID))])
                    syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
                case .unknownItem:
                    // Deleted on the server since it was fetched: create it again.
                    systemFields[recordID.recordName] = nil
                    syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
                default:
                    break
                }
            }
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        batchesAsked += 1
        await beforeBatch?(batchesAsked)
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        let batch = await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            await self.recordToSave(recordID)
        }
        if let edit = editWhileSending {
            editWhileSending = nil
            save(edit.recordName, edit.value)
        }
        return batch
    }

    /// The record to save for a contact, with the system fields last known; `nil` (and no longer
    /// pending) when the contact is gone.
    private func recordToSave(_ recordID: Record.ID) -> Record? {
        guard let value = contacts[recordID.recordName] else {
            engine.state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
            return nil
        }
        var record =
            systemFields[recordID.recordName].flatMap { try? Record(systemFieldsData: $0) }
            ?? Record(recordType: "Contact", recordID: recordID)
        record["name"] = value
        return record
    }

    // MARK: - What tests read

    /// The `sentRecordZoneChanges` events so far.
    var sentRecordZoneChanges: [SyncEngine.Event.SentRecordZoneChanges] {
        events.compactMap { if case .sentRecordZoneChanges(let sent) = $0 { sent } else { nil } }
    }

    /// The `fetchedRecordZoneChanges` events so far.
    var fetchedRecordZoneChanges: [SyncEngine.Event.FetchedRecordZoneChanges] {
        events.compactMap { if case .fetchedRecordZoneChanges(let fetched) = $0 { fetched } else { nil } }
    }

    /// The kinds of the events so far, in order, e.g. `willSendChanges`.
    var eventKinds: [String] { events.map(\.kind) }
}

extension SyncEngine.Event {
    /// The event's case name.
    var kind: String {
        switch self {
        case .stateUpdate: "stateUpdate"
        case .accountChange: "accountChange"
        case .fetchedDatabaseChanges: "fetchedDatabaseChanges"
        case .fetchedRecordZoneChanges: "fetchedRecordZoneChanges"
        case .sentDatabaseChanges: "sentDatabaseChanges"
        case .sentRecordZoneChanges: "sentRecordZoneChanges"
        case .willFetchChanges: "willFetchChanges"
        case .willFetchRecordZoneChanges: "willFetchRecordZoneChanges"
        case .didFetchRecordZoneChanges: "didFetchRecordZoneChanges"
        case .didFetchChanges: "didFetchChanges"
        case .willSendChanges: "willSendChanges"
        case .didSendChanges: "didSendChanges"
        }
    }
}
