/// A zone of records in a database (CloudKit's `CKRecordZone`).
///
/// Every database has a default zone. Custom zones, which exist in the private database, add a
/// change feed (``Database/recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)``) and
/// atomic batches.
public struct RecordZone: Hashable, Sendable {
    /// Identifies a zone: its name and the user who owns it (CloudKit's `CKRecordZone.ID`).
    public struct ID: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The name of every database's default zone.
        public static let defaultZoneName = "_defaultZone"
        /// The owner name that stands for the signed-in user (CloudKit's `CKCurrentUserDefaultName`).
        public static let currentUserOwnerName = "__defaultOwner__"
        /// The default zone of the signed-in user's database.
        public static let `default` = ID()

        /// The zone's name, unique in its database: printable ASCII, at most 255 characters.
        public var zoneName: String
        /// The record name of the user who owns the zone; ``currentUserOwnerName`` for the signed-in user.
        public var ownerName: String

        /// Creates a zone ID; the owner defaults to the signed-in user.
        public init(zoneName: String = defaultZoneName, ownerName: String = currentUserOwnerName) {
            self.zoneName = zoneName
            self.ownerName = ownerName
        }

        /// Whether this is the default zone.
        public var isDefault: Bool { zoneName == Self.defaultZoneName }

        public var description: String {
            ownerName == Self.currentUserOwnerName ? zoneName : "\(zoneName) (owner \(ownerName))"
        }
    }

    /// What a zone supports (CloudKit's `CKRecordZone.Capabilities`).
    public struct Capabilities: OptionSet, Hashable, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// The zone has a change feed.
        public static let fetchChanges = Capabilities(rawValue: 1)
        /// Batches in the zone can succeed or fail as a whole.
        public static let atomic = Capabilities(rawValue: 2)
    }

    /// The zone's ID.
    public let zoneID: ID
    /// What the zone supports: custom zones have ``Capabilities/fetchChanges`` and
    /// ``Capabilities/atomic``, default zones nothing.
    public internal(set) var capabilities: Capabilities
    /// The zone's current position in its change feed, as the server last reported it. Reading the
    /// feed from here skips everything already in the zone.
    public internal(set) var currentChangeToken: ServerChangeToken?

    /// A zone of the signed-in user's private database, to save with `Database.save(_:)`.
    public init(zoneName: String) {
        self.init(zoneID: ID(zoneName: zoneName))
    }

    /// A zone with the given ID.
    public init(zoneID: ID) {
        self.zoneID = zoneID
        self.capabilities = zoneID.isDefault ? [] : [.fetchChanges, .atomic]
        self.currentChangeToken = nil
    }
}
