import Foundation
import StratusModel

/// One of a container's databases: public, private or shared (CloudKit's `CKDatabase`).
///
/// Get one from ``Container/publicCloudDatabase``, ``Container/privateCloudDatabase`` or
/// ``Container/sharedCloudDatabase``. Every call is `async` and throws ``CloudError``; calls that
/// take many items return a result per item, and split their work into requests within the server's
/// limits.
public struct Database: Sendable {
    /// Which database (CloudKit's `CKDatabase.Scope`).
    public enum Scope: String, Sendable, Hashable, CaseIterable {
        /// Shared by every user of the app; readable without signing in.
        case `public`
        /// The signed-in user's own data.
        case `private`
        /// Zones other users shared with the signed-in user.
        case shared
    }

    /// Which database this is.
    public let databaseScope: Scope
    /// The container the database belongs to.
    public let container: Container

    init(scope: Scope, container: Container) {
        self.databaseScope = scope
        self.container = container
    }

    var connection: Connection { container.connection }

    /// Calls `operation` of this database with `body`.
    func call<Response: JSONDecodable>(
        _ operation: AnyEndpoint, body: some JSONWritable, idempotent: Bool, as type: Response.Type
    ) async throws -> Response {
        try await connection.call(.database(databaseScope, operation), body: body, idempotent: idempotent, as: type)
    }

    // MARK: Zone IDs on the wire

    /// The owner name the server writes for this database's own zones.
    private var ownerOnServer: String? {
        databaseScope == .public ? ZoneID.currentUserOwnerName : connection.session?.userRecordName
    }

    /// The wire form of a zone ID: the signed-in user's zones leave the owner out.
    func wireZoneID(_ zoneID: RecordZone.ID) -> ZoneID {
        ZoneID(
            zoneName: zoneID.zoneName,
            ownerRecordName: zoneID.ownerName == RecordZone.ID.currentUserOwnerName ? nil : zoneID.ownerName)
    }

    /// A zone ID from the server: the database owner's own zones get
    /// ``RecordZone/ID/currentUserOwnerName``, as the IDs an app builds do.
    func zoneID(_ wire: ZoneID) -> RecordZone.ID {
        let owner = wire.ownerRecordName
        let isOwn = owner == nil || owner == ZoneID.currentUserOwnerName || owner == ownerOnServer
        return RecordZone.ID(zoneName: wire.zoneName, ownerName: isOwn ? RecordZone.ID.currentUserOwnerName : owner!)
    }

    /// `items` grouped by the zone `zone` gives each, in the order each zone first appears.
    static func groupedByZone<Item>(_ items: [Item], zone: (Item) -> RecordZone.ID) -> [(RecordZone.ID, [Item])] {
        var order: [RecordZone.ID] = []
        var groups: [RecordZone.ID: [Item]] = [:]
        for item in items {
            let zoneID = zone(item)
            if groups[zoneID] == nil { order.append(zoneID) }
            groups[zoneID, default: []].append(item)
        }
        return order.map { ($0, groups[$0]!) }
    }
}

extension Array {
    /// The array cut into consecutive slices of at most `size` elements.
    func chunked(into size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: Swift.max(1, size)).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
