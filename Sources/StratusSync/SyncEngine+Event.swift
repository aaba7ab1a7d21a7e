public import Stratus

extension SyncEngine {
    /// What happened in the engine (CloudKit's `CKSyncEngine.Event`), delivered in order.
    public enum Event: Sendable {
        /// The engine's state changed: persist `serialization` and pass it back at the next launch.
        case stateUpdate(StateUpdate)
        /// The signed-in account changed; the engine reset its state.
        case accountChange(AccountChange)
        /// Zones were created, changed or deleted on the server.
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        /// Records were changed or deleted on the server: apply them to the local store.
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        /// Zones were saved or deleted on the server, or failed to be.
        case sentDatabaseChanges(SentDatabaseChanges)
        /// Records were saved or deleted on the server, or failed to be.
        case sentRecordZoneChanges(SentRecordZoneChanges)
        /// A fetch starts.
        case willFetchChanges(WillFetchChanges)
        /// The fetch of one zone's changes starts.
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        /// The fetch of one zone's changes ended, with an error when it failed.
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        /// A fetch ended.
        case didFetchChanges(DidFetchChanges)
        /// A send starts.
        case willSendChanges(WillSendChanges)
        /// A send ended.
        case didSendChanges(DidSendChanges)

        /// The engine's state to persist.
        public struct StateUpdate: Sendable {
            public let stateSerialization: State.Serialization
        }

        /// An account change (CloudKit's `CKSyncEngine.Event.AccountChange`). The engine's state
        /// starts over for the user now signed in, but no change is dropped: the previous user's
        /// changes not yet sent are parked for them (``parkedRecordZoneChanges``) and pending again
        /// when they sign in on this device again (``restoredRecordZoneChanges``); changes made
        /// while nobody was signed in go to the user who signs in.
        public struct AccountChange: Sendable {
            /// What changed.
            public enum ChangeType: Sendable, Hashable {
                /// A user signed in where nobody was.
                case signIn(currentUser: Record.ID)
                /// The user signed out.
                case signOut(previousUser: Record.ID)
                /// Another user signed in.
                case switchAccounts(previousUser: Record.ID, currentUser: Record.ID)
            }
            public let changeType: ChangeType
            /// The previous user's record changes that were not sent, kept for them: keep their
            /// records (off the screen of the user now signed in) to hand them to the engine when
            /// that user signs in again, or hand them to your user and call
            /// ``SyncEngine/State/discardParkedChanges(ofUser:)``.
            public let parkedRecordZoneChanges: [PendingRecordZoneChange]
            /// The current user's record changes parked when they signed out on this device, pending
            /// again: bring back their records, which the engine asks for to send them.
            public let restoredRecordZoneChanges: [PendingRecordZoneChange]
        }

        /// Zones changed on the server.
        public struct FetchedDatabaseChanges: Sendable {
            /// A zone that was created, or whose records changed.
            public struct Modification: Sendable, Hashable {
                public let zoneID: RecordZone.ID
            }
            /// A zone that is gone.
            public struct Deletion: Sendable, Hashable {
                /// Why a zone is gone.
                public enum Reason: Sendable, Hashable {
                    case deleted
                }
                public let zoneID: RecordZone.ID
                public let reason: Reason
            }
            public let modifications: [Modification]
            public let deletions: [Deletion]
        }

        /// Records changed on the server, in the order they changed.
        public struct FetchedRecordZoneChanges: Sendable {
            /// A record created or changed: its latest state.
            public struct Modification: Sendable, Hashable {
                public let record: Record
            }
            /// A deleted record.
            public struct Deletion: Sendable, Hashable {
                public let recordID: Record.ID
                public let recordType: String
            }
            public let modifications: [Modification]
            public let deletions: [Deletion]
        }

        /// What a send did to zones.
        public struct SentDatabaseChanges: Sendable {
            /// A zone that could not be saved, and why.
            public struct FailedZoneSave: Sendable {
                public let zone: RecordZone
                public let error: CloudError
            }
            public let savedZones: [RecordZone]
            public let failedZoneSaves: [FailedZoneSave]
            public let deletedZoneIDs: [RecordZone.ID]
            public let failedZoneDeletes: [RecordZone.ID: CloudError]
        }

        /// What a send did to records.
        public struct SentRecordZoneChanges: Sendable {
            /// A record that could not be saved, and why: `serverRecordChanged` (merge into
            /// `error.serverRecord` and add the save again), `zoneNotFound` (add `saveZone` and the
            /// save again), a transient error (the engine retries it by itself)…
            public struct FailedRecordSave: Sendable {
                public let record: Record
                public let error: CloudError
            }
            /// The records as saved, with their new change tags: keep their system fields.
            public let savedRecords: [Record]
            public let failedRecordSaves: [FailedRecordSave]
            public let deletedRecordIDs: [Record.ID]
            public let failedRecordDeletes: [Record.ID: CloudError]
        }

        public struct WillFetchChanges: Sendable {
            public let context: FetchChangesContext
        }

        public struct WillFetchRecordZoneChanges: Sendable {
            public let zoneID: RecordZone.ID
        }

        public struct DidFetchRecordZoneChanges: Sendable {
            public let zoneID: RecordZone.ID
            /// Why the zone's fetch failed; `nil` when it succeeded.
            public let error: CloudError?
        }

        public struct DidFetchChanges: Sendable {
            public let context: FetchChangesContext
        }

        public struct WillSendChanges: Sendable {
            public let context: SendChangesContext
        }

        public struct DidSendChanges: Sendable {
            public let context: SendChangesContext
        }
    }
}
