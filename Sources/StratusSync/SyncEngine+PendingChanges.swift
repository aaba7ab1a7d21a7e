public import Foundation
public import Stratus

extension SyncEngine {
    /// A record to save or delete on the server (CloudKit's `CKSyncEngine.PendingRecordZoneChange`).
    /// The engine keeps only the ID: it asks the delegate for the record when it sends.
    public enum PendingRecordZoneChange: Hashable, Sendable, Codable {
        case saveRecord(Record.ID)
        case deleteRecord(Record.ID)

        /// The record the change is about.
        public var recordID: Record.ID {
            switch self {
            case .saveRecord(let recordID), .deleteRecord(let recordID): recordID
            }
        }
    }

    /// A zone to save or delete on the server (CloudKit's `CKSyncEngine.PendingDatabaseChange`).
    public enum PendingDatabaseChange: Hashable, Sendable, Codable {
        case saveZone(RecordZone)
        case deleteZone(RecordZone.ID)

        /// The zone the change is about.
        public var zoneID: RecordZone.ID {
            switch self {
            case .saveZone(let zone): zone.zoneID
            case .deleteZone(let zoneID): zoneID
            }
        }

        private enum CodingKeys: String, CodingKey {
            case saveZone, deleteZone
        }

        // A zone is stored by its ID: the server creates a zone from its ID alone.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let zoneID = try container.decodeIfPresent(RecordZone.ID.self, forKey: .saveZone) {
                self = .saveZone(RecordZone(zoneID: zoneID))
            } else {
                self = .deleteZone(try container.decode(RecordZone.ID.self, forKey: .deleteZone))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .saveZone(let zone): try container.encode(zone.zoneID, forKey: .saveZone)
            case .deleteZone(let zoneID): try container.encode(zoneID, forKey: .deleteZone)
            }
        }
    }

    /// Where a change the engine tracks stands: what ``State`` reports beyond CloudKit's pending lists.
    public enum ChangeStatus: Sendable {
        /// Waiting for the next send.
        case pending
        /// In a request to the server right now.
        case inFlight
        /// The last attempt failed for a reason that passes (the network, a throttle, an unavailable
        /// server, a busy zone); the engine sends it again after `retryDate`.
        case waitingToRetry(error: CloudError, retryDate: Date)
        /// The server refused it, so it is no longer pending: `sentRecordZoneChanges` or
        /// `sentDatabaseChanges` reported why. Add it again once the cause is fixed (merge the server
        /// record for `serverRecordChanged`, save the zone for `zoneNotFound`); adding or removing
        /// it clears the failure.
        case failed(CloudError)
    }

    /// A change the engine tracks, and where it stands.
    public struct TrackedChange<Change: Hashable & Sendable>: Sendable {
        /// The change.
        public let change: Change
        /// Where it stands.
        public let status: ChangeStatus
    }
}

/// What becomes of a change the server did not apply.
enum FailureDisposition: Sendable {
    /// It stays pending, to be sent again after the date.
    case retry(Date)
    /// It stays pending, waiting for the next send (it failed only because another item did).
    case keepPending
    /// It stops being pending and is kept as failed.
    case refuse
}

/// A change the engine queues, keyed by the item it changes: one change per item.
protocol QueueableChange: Hashable, Sendable, Codable {
    associatedtype Key: Hashable & Sendable
    var key: Key { get }
}

extension SyncEngine.PendingRecordZoneChange: QueueableChange {
    var key: Record.ID { recordID }
}

extension SyncEngine.PendingDatabaseChange: QueueableChange {
    var key: RecordZone.ID { zoneID }
}

/// The pending changes of one kind, in the order they were added, one per item, and the changes the
/// server refused.
///
/// Each entry carries the version of the state when it was last added. A send notes the version
/// before it asks for a batch; the server's confirmation removes an entry only when it was not added
/// again since, so an edit made while its previous version was in flight stays pending.
struct ChangeQueue<Change: QueueableChange>: Sendable {
    enum Attempt: Sendable {
        case waiting
        case inFlight
        // Boxed: a `CloudError` holds records inline, and every entry of a long queue would carry
        // its size, copied with the entry each time the queue is read.
        indirect case retrying(CloudError, Date)
    }

    private struct Entry: Sendable {
        var change: Change
        var version: UInt64
        var attempt: Attempt
    }

    private struct Failure: Sendable {
        var change: Change
        var error: CloudError
        var order: UInt64
    }

    /// Entries in order; removed entries leave a hole until the next compaction.
    private var entries: [Entry?] = []
    private var positions: [Change.Key: Int] = [:]
    private var holes = 0
    private var failures: [Change.Key: Failure] = [:]
    private var failureCount: UInt64 = 0

    init() {}

    var isEmpty: Bool { positions.isEmpty }

    /// The pending changes, in order.
    var changes: [Change] { entries.compactMap { $0?.change } }

    /// Every pending change and every refused one, with its status.
    var tracked: [SyncEngine.TrackedChange<Change>] {
        let pending = entries.compactMap { entry -> SyncEngine.TrackedChange<Change>? in
            guard let entry else { return nil }
            let status: SyncEngine.ChangeStatus =
                switch entry.attempt {
                case .waiting: .pending
                case .inFlight: .inFlight
                case .retrying(let error, let date): .waitingToRetry(error: error, retryDate: date)
                }
            return .init(change: entry.change, status: status)
        }
        let refused = failures.values.sorted { $0.order < $1.order }.map {
            SyncEngine.TrackedChange(change: $0.change, status: .failed($0.error))
        }
        return pending + refused
    }

    /// The status of the change pending or refused for `key`.
    func status(of change: Change) -> SyncEngine.ChangeStatus? {
        if let position = positions[change.key], let entry = entries[position], entry.change == change {
            return switch entry.attempt {
            case .waiting: .pending
            case .inFlight: .inFlight
            case .retrying(let error, let date): .waitingToRetry(error: error, retryDate: date)
            }
        }
        if let failure = failures[change.key], failure.change == change { return .failed(failure.error) }
        return nil
    }

    /// Adds `change`, replacing another change of the same item (a delete replaces a save and the
    /// reverse); adding a change already pending keeps its place.
    mutating func add(_ change: Change, version: UInt64) {
        failures[change.key] = nil
        if let position = positions[change.key], let entry = entries[position] {
            if entry.change == change {
                entries[position]?.version = version
                return
            }
            removeEntry(at: position)
        }
        positions[change.key] = entries.count
        entries.append(Entry(change: change, version: version, attempt: .waiting))
    }

    /// Removes `change` if it is pending, and forgets its failure.
    mutating func remove(_ change: Change) {
        if let position = positions[change.key], entries[position]?.change == change { removeEntry(at: position) }
        if failures[change.key]?.change == change { failures[change.key] = nil }
    }

    /// Marks `change` as in a request now.
    mutating func markInFlight(_ change: Change) {
        update(change) { $0.attempt = .inFlight }
    }

    /// The first `limit` pending changes that satisfy `predicate`, in order.
    func prefix(_ limit: Int, where predicate: (Change) -> Bool) -> [Change] {
        var result: [Change] = []
        for entry in entries where result.count < limit {
            if let change = entry?.change, predicate(change) { result.append(change) }
        }
        return result
    }

    /// Whether a pending change satisfies `predicate`.
    func contains(where predicate: (Change) -> Bool) -> Bool {
        entries.contains { $0.map { predicate($0.change) } ?? false }
    }

    /// The server confirmed `change` as it was when the state was at `version`.
    mutating func confirm(_ change: Change, sentAt version: UInt64) {
        guard let position = positions[change.key], let entry = entries[position], entry.change == change else { return }
        if entry.version <= version {
            removeEntry(at: position)
        } else {
            entries[position]?.attempt = .waiting
        }
    }

    /// The server did not apply `change` as it was when the state was at `version`.
    mutating func settle(_ change: Change, failedWith error: CloudError, _ disposition: FailureDisposition, sentAt version: UInt64) {
        switch disposition {
        case .retry(let date): update(change) { $0.attempt = .retrying(error, date) }
        case .keepPending: update(change) { $0.attempt = .waiting }
        case .refuse: refuse(change, error: error, sentAt: version)
        }
    }

    /// Unless `change` was added again since `version`, it stops being pending and is kept as failed.
    private mutating func refuse(_ change: Change, error: CloudError, sentAt version: UInt64) {
        if let position = positions[change.key], let entry = entries[position], entry.change == change {
            guard entry.version <= version else {
                entries[position]?.attempt = .waiting
                return
            }
            removeEntry(at: position)
        }
        failureCount += 1
        failures[change.key] = Failure(change: change, error: error, order: failureCount)
    }

    /// Puts every change in flight back to waiting (after a cancelled request).
    mutating func resetInFlight() {
        for position in entries.indices {
            if case .inFlight? = entries[position]?.attempt { entries[position]?.attempt = .waiting }
        }
    }

    private mutating func update(_ change: Change, _ body: (inout Entry) -> Void) {
        guard let position = positions[change.key], var entry = entries[position], entry.change == change else { return }
        body(&entry)
        entries[position] = entry
    }

    private mutating func removeEntry(at position: Int) {
        guard let entry = entries[position] else { return }
        positions[entry.change.key] = nil
        entries[position] = nil
        holes += 1
        if holes > 64, holes * 2 > entries.count { compact() }
    }

    private mutating func compact() {
        entries = entries.filter { $0 != nil }
        positions = [:]
        for (position, entry) in entries.enumerated() {
            if let entry { positions[entry.change.key] = position }
        }
        holes = 0
    }
}

extension ChangeQueue: Codable {
    private enum CodingKeys: String, CodingKey {
        case pending, failed
    }

    private struct StoredFailure: Codable {
        var change: Change
        var error: StoredError
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        for change in try container.decode([Change].self, forKey: .pending) { add(change, version: 0) }
        for failure in try container.decode([StoredFailure].self, forKey: .failed) {
            settle(failure.change, failedWith: failure.error.cloudError, .refuse, sentAt: 0)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(changes, forKey: .pending)
        let refused = failures.values.sorted { $0.order < $1.order }
        try container.encode(refused.map { StoredFailure(change: $0.change, error: StoredError($0.error)) }, forKey: .failed)
    }
}

/// A `CloudError` as the state stores it: its code and words.
struct StoredError: Codable, Sendable {
    var code: Int
    var message: String
    var serverErrorCode: String?

    init(_ error: CloudError) {
        code = error.code.rawValue
        message = error.message
        serverErrorCode = error.serverErrorCode
    }

    var cloudError: CloudError {
        var error = CloudError(CloudError.Code(rawValue: code) ?? .internalError, message)
        error.serverErrorCode = serverErrorCode
        return error
    }
}
