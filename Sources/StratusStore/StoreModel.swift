/// The tables of an app's database that a ``StratusStore`` knows, and which of them are mirrored to
/// the server: seed 001's "configurations", a cloud part and a local part. One table may be split
/// across both: its ``StoreTable/localColumns`` stay on the device.
public struct StoreModel: Sendable, Equatable {
    /// The declared tables.
    public var tables: [StoreTable]

    /// A model of `tables`.
    public init(_ tables: [StoreTable]) {
        self.tables = tables
    }

    /// The declared table named `name`.
    public func table(named name: String) -> StoreTable? {
        tables.first { $0.name == name }
    }

    /// The tables mirrored to the server.
    public var syncedTables: [StoreTable] { tables.filter(\.isSynced) }
}

/// One table of the app's database, as the store sees it.
public struct StoreTable: Sendable, Equatable {
    /// Where the table's rows live.
    public enum Configuration: Sendable, Equatable {
        /// Mirrored to the server as records of `recordType`.
        case synced(recordType: String)
        /// Kept on the device alone.
        case localOnly
    }

    /// The table's name in SQLite.
    public var name: String
    /// Whether it is mirrored, and as which record type.
    public var configuration: Configuration
    /// Its references to rows of other tables (to-one relationships), each with its inverse.
    public var relationships: [StoreRelationship]
    /// Columns of a synced table that stay on the device (an entity split across both
    /// configurations): changing only them is not a change to mirror.
    public var localColumns: Set<String>

    /// A table mirrored to the server as records of `recordType` (the table's name by default).
    public static func synced(
        _ name: String, recordType: String? = nil, relationships: [StoreRelationship] = [], localColumns: Set<String> = []
    ) -> StoreTable {
        StoreTable(
            name: name, configuration: .synced(recordType: recordType ?? name), relationships: relationships,
            localColumns: localColumns)
    }

    /// A table that never leaves the device.
    public static func localOnly(_ name: String, relationships: [StoreRelationship] = []) -> StoreTable {
        StoreTable(name: name, configuration: .localOnly, relationships: relationships, localColumns: [])
    }

    /// Whether the table is mirrored.
    public var isSynced: Bool {
        if case .synced = configuration { true } else { false }
    }
}

/// A to-one relationship: a column holding the UUID of a row of `destination` (or null), and the
/// name of the to-many relationship that is its inverse on the destination, as Core Data requires
/// of mirrored relationships. The server sees it as the related row's record name, not as a
/// `REFERENCE` (for the reason Core Data avoids them: a reference's delete rules would act on the
/// server behind the store's back).
public struct StoreRelationship: Sendable, Equatable {
    /// The column holding the related row's UUID.
    public var column: String
    /// The related table.
    public var destination: String
    /// The name of the inverse, to-many relationship on `destination`.
    public var inverse: String
    /// Whether the relationship is ordered; mirrored relationships cannot be (CloudKit has no order).
    public var ordered: Bool

    /// A relationship through `column` to `destination`, whose inverse is `inverse`.
    public static func reference(
        _ column: String, to destination: String, inverse: String, ordered: Bool = false
    ) -> StoreRelationship {
        StoreRelationship(column: column, destination: destination, inverse: inverse, ordered: ordered)
    }
}
