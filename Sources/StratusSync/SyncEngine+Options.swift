public import Stratus

extension SyncEngine {
    /// Why the engine syncs (CloudKit's `CKSyncEngine.SyncReason`).
    public enum SyncReason: Sendable, Hashable {
        /// The engine decided to: a push, new pending changes, a timer, a retry.
        case scheduled
        /// The app called ``SyncEngine/fetchChanges(_:)`` or ``SyncEngine/sendChanges(_:)``.
        case manual
    }

    /// How to fetch (CloudKit's `CKSyncEngine.FetchChangesOptions`).
    public struct FetchChangesOptions: Sendable, Hashable {
        /// Which zones to fetch.
        public enum Scope: Sendable, Hashable {
            case all
            case zoneIDs([RecordZone.ID])
            case allExcluding([RecordZone.ID])

            /// Whether the scope covers `zoneID`.
            public func contains(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(zoneID)
                }
            }
        }

        /// Which zones to fetch.
        public var scope: Scope
        /// Zones to fetch first.
        public var prioritizedZoneIDs: [RecordZone.ID]

        /// Creates options.
        public init(scope: Scope = .all, prioritizedZoneIDs: [RecordZone.ID] = []) {
            self.scope = scope
            self.prioritizedZoneIDs = prioritizedZoneIDs
        }
    }

    /// How to send (CloudKit's `CKSyncEngine.SendChangesOptions`).
    public struct SendChangesOptions: Sendable, Hashable {
        /// Which pending changes to send.
        public enum Scope: Sendable, Hashable {
            case all
            case zoneIDs([RecordZone.ID])
            case allExcluding([RecordZone.ID])
            case recordIDs([Record.ID])

            /// Whether the scope covers the record `recordID`.
            public func contains(_ recordID: Record.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(recordID.zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(recordID.zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains(recordID)
                }
            }

            /// Whether the scope covers a pending change.
            public func contains(_ pendingChange: PendingRecordZoneChange) -> Bool {
                contains(pendingChange.recordID)
            }

            /// Whether the scope covers a zone (for pending database changes).
            func covers(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains { $0.zoneID == zoneID }
                }
            }
        }

        /// Which pending changes to send.
        public var scope: Scope

        /// Creates options.
        public init(scope: Scope = .all) {
            self.scope = scope
        }
    }

    /// A fetch's reason and options (CloudKit's `CKSyncEngine.FetchChangesContext`).
    public struct FetchChangesContext: Sendable {
        public let reason: SyncReason
        public let options: FetchChangesOptions
    }

    /// A send's reason and options (CloudKit's `CKSyncEngine.SendChangesContext`).
    public struct SendChangesContext: Sendable {
        public let reason: SyncReason
        public let options: SendChangesOptions
    }
}
