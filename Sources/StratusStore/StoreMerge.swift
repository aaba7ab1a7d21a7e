public import Foundation
public import GRDB

/// What wins when the server's record and a change of the same row not yet sent disagree: seed
/// 001's four merge policies, with Core Data's names. "Store" is the server's record (what the
/// persistent store receives), "object" the local, unsent change. docs/store.md has the table.
public enum StoreMergePolicy: Sendable, Hashable {
    /// Column by column: a column only one side changed since their common ancestor takes that
    /// side's value; a column both changed takes the server's. A row deleted on one side and
    /// changed on the other takes the server's side.
    case mergeByPropertyStoreTrump
    /// Column by column: a column only one side changed takes that side's value; a column both
    /// changed takes the local one. A row deleted on one side and changed on the other takes the
    /// local side. The default.
    case mergeByPropertyObjectTrump
    /// The local row wins whole, its deletion included: it is sent over the server's record.
    case overwrite
    /// The server's record wins whole, its deletion included: the local change is dropped.
    case rollback

    /// The row that results, as mirrored column values; `nil` when the row ends deleted.
    func resolve(_ conflict: StoreConflict) -> [String: DatabaseValue]? {
        switch self {
        case .overwrite: return conflict.local
        case .rollback: return conflict.server
        case .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump:
            let serverWins = self == .mergeByPropertyStoreTrump
            guard let local = conflict.local else { return serverWins ? conflict.server : nil }
            guard let server = conflict.server else { return serverWins ? nil : local }
            let ancestor = conflict.ancestor ?? [:]
            var merged: [String: DatabaseValue] = [:]
            for column in Set(local.keys).union(server.keys).union(ancestor.keys) {
                let before: DatabaseValue = ancestor[column] ?? .null
                let localChanged = (local[column] ?? .null) != before
                let serverChanged = (server[column] ?? .null) != before
                merged[column] = localChanged && (!serverChanged || !serverWins) ? local[column] : server[column]
            }
            return merged
        }
    }
}

/// A row the server and this device both changed since they last agreed: each side's mirrored
/// column values (key and local columns left out, `NULL` columns absent), `nil` for a side that
/// deleted it.
public struct StoreConflict: Sendable {
    /// The table of the row.
    public var table: String
    /// The row's key.
    public var rowID: UUID
    /// The values the server and this device last agreed on: the server's record as last fetched
    /// or saved by this device; `nil` when they never agreed (the row is new on both sides). The
    /// store keeps a BLOB over 1 KiB of it by its SHA-256 only: when a side still holds that value,
    /// the ancestor holds it too; when both sides changed it, the ancestor's is a marker unequal to
    /// any value, to compare with, never to write back.
    public var ancestor: [String: DatabaseValue]?
    /// The local row, with its unsent change; `nil` when it was deleted here.
    public var local: [String: DatabaseValue]?
    /// The server's record; `nil` when it was deleted there.
    public var server: [String: DatabaseValue]?
}

/// A table's own merge: the values the row is to hold after `conflict`, or `nil` to delete it.
/// Whatever it returns is written locally and, where it differs from the server's, sent.
public typealias StoreCustomMerge = @Sendable (_ conflict: StoreConflict) -> [String: DatabaseValue]?
