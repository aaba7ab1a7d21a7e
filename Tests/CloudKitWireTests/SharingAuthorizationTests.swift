import Foundation
import StratusServer
import StratusTestSupport
import Testing

/// The authorization table of docs/protocol.md ("Who may do what", in "Sharing"), read from the
/// document and checked cell by cell: every shared-database request × {owner, read-write, read-only,
/// removed, never invited, no user}.
@Suite("CloudKit wire: who may do what with a shared zone")
struct SharingAuthorizationTests {
    /// The columns of the table, in order.
    enum Caller: String, CaseIterable {
        case owner, readWrite = "read-write", readOnly = "read-only", removed, neverInvited = "never invited"
        case noUser = "no user"
    }

    /// The table's rows: the request and the expected outcome per caller.
    static func table() throws -> [(request: String, expected: [Caller: String])] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        let begin = try #require(document.range(of: "<!-- sharing-authorization-matrix:begin -->"))
        let end = try #require(document.range(of: "<!-- sharing-authorization-matrix:end -->"))
        let lines = document[begin.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        let header = lines[0].split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        let callers = try header.dropFirst().map { try #require(Caller(rawValue: $0), "unknown column '\($0)'") }
        return lines.dropFirst(2).map { line in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let request = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            return (request, Dictionary(uniqueKeysWithValues: zip(callers, cells.dropFirst())))
        }
    }

    /// A shared zone in the states the columns need: the owner's zone with a record, shared with a
    /// read-write, a read-only and a removed participant, each of whom accepted.
    struct Scene {
        let zone: String
        let shortGUID: String
    }

    static func scene(_ zone: String, people: [Caller: (token: String, recordName: String)], on server: TestServer)
        async throws -> Scene
    {
        let owner = people[.owner]!
        try await server.createZone(zone, user: owner.token)
        _ = try await server.modify([operation("create", "r1", recordType: "Photo")], zone: zone, user: owner.token)
        func share(_ invited: [Caller]) -> [String: Any] {
            let participants = invited.map { caller -> [String: Any] in
                [
                    "type": "USER", "permission": caller == .readWrite ? "READ_WRITE" : "READ_ONLY",
                    "userIdentity": ["userRecordName": people[caller]!.recordName],
                ]
            }
            return [
                "operationType": "forceReplace",
                "record": ["recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share", "participants": participants]
                    as [String: Any],
            ]
        }
        let saved = try await server.modify([share([.readWrite, .readOnly, .removed])], zone: zone, user: owner.token)
        let shortGUID = try #require(saved.records.first?["shortGUID"] as? String, "\(saved.text)")
        for caller in [Caller.readWrite, .readOnly, .removed] {
            let accepted = try await server.database(
                "public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: people[caller]!.token)
            #expect(accepted.status == 200, "\(accepted.text)")
        }
        let removed = try await server.modify([share([.readWrite, .readOnly])], zone: zone, user: owner.token)
        #expect(removed.status == 200, "\(removed.text)")
        return Scene(zone: zone, shortGUID: shortGUID)
    }

    /// Runs `request` as `caller` and names the outcome as the table does.
    static func outcome(
        of request: String, by caller: Caller, in scene: Scene, people: [Caller: (token: String, recordName: String)],
        on server: TestServer
    ) async throws -> String {
        let owner = people[.owner]!
        let isOwner = caller == .owner
        let database = isOwner ? "private" : "shared"
        let user = caller == .noUser ? nil : people[caller]!.token
        let zoneID: [String: Any] =
            isOwner ? ["zoneName": scene.zone] : ["zoneName": scene.zone, "ownerRecordName": owner.recordName]
        func call(_ operation: String, _ body: Any?, in database: String = database) async throws -> TestServer.Reply {
            try await server.database(database, operation, body, user: user)
        }
        func modify(_ type: String, _ record: [String: Any]) async throws -> TestServer.Reply {
            try await call("records/modify", ["zoneID": zoneID, "operations": [["operationType": type, "record": record]]])
        }
        func lists(_ reply: TestServer.Reply) -> String {
            guard reply.status == 200 else { return reply.code ?? "HTTP \(reply.status)" }
            return reply.zones.contains {
                ($0["zoneID"] as? [String: Any])?["zoneName"] as? String == scene.zone && $0["deleted"] as? Bool != true
            } ? "allowed" : "absent"
        }
        let reply: TestServer.Reply
        switch request {
        case "zones/list": return lists(try await call("zones/list", nil))
        case "changes/database": return lists(try await call("changes/database", [String: Any]()))
        case "zones/lookup": reply = try await call("zones/lookup", ["zones": [zoneID]])
        case "records/lookup": reply = try await call("records/lookup", ["zoneID": zoneID, "records": [["recordName": "r1"]]])
        case "records/query": reply = try await call("records/query", ["zoneID": zoneID, "query": ["recordType": "Photo"]])
        case "records/changes": reply = try await call("records/changes", ["zoneID": zoneID])
        case "changes/zone": reply = try await call("changes/zone", ["zones": [["zoneID": zoneID]]])
        case "records/modify: create": reply = try await modify("create", ["recordName": "new", "recordType": "Photo"])
        case "records/modify: update":
            reply = try await modify("forceUpdate", ["recordName": "r1", "fields": ["n": ["value": 1]]])
        case "records/modify: delete": reply = try await modify("forceDelete", ["recordName": "r1"])
        case "records/modify: change the share":
            reply = try await modify(
                "forceUpdate", ["recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share", "publicPermission": "NONE"])
        case "records/modify: delete the share": reply = try await modify("forceDelete", ["recordName": "cloudkit.zoneshare"])
        case "assets/upload":
            reply = try await call(
                "assets/upload", ["zoneID": zoneID, "tokens": [["recordType": "Photo", "fieldName": "image"]]])
        case "subscriptions/modify: zone":
            reply = try await call(
                "subscriptions/modify",
                ["operations": [["operationType": "create", "subscription": ["subscriptionType": "zone", "zoneID": zoneID]]]])
        case "records/resolve":
            reply = try await call("records/resolve", ["shortGUIDs": [["value": scene.shortGUID]]], in: "public")
        default:
            Issue.record("the table names a request the test does not know: '\(request)'")
            return "unknown"
        }
        guard reply.status == 200 else { return reply.code ?? "HTTP \(reply.status)" }
        for key in ["records", "zones", "subscriptions", "results"] {
            if let code = (reply.body[key] as? [[String: Any]])?.first?["serverErrorCode"] as? String { return code }
        }
        return "allowed"
    }

    @Test("every cell of the documented table holds, on a fresh share per cell")
    func matrix() async throws {
        let table = try Self.table()
        #expect(table.count >= 15, "the table lists every shared-database request")
        try await withServer { server in
            var people: [Caller: (token: String, recordName: String)] = [:]
            for caller in Caller.allCases where caller != .noUser {
                people[caller] = try await server.signUp(caller.rawValue.replacingOccurrences(of: " ", with: "-"))
            }
            for (row, entry) in table.enumerated() {
                for (column, caller) in Caller.allCases.enumerated() {
                    let scene = try await Self.scene("Z\(row)-\(column)", people: people, on: server)
                    let outcome = try await Self.outcome(of: entry.request, by: caller, in: scene, people: people, on: server)
                    #expect(outcome == entry.expected[caller], "\(entry.request) by \(caller.rawValue)")
                }
            }
        }
    }
}
