import Foundation
import StratusServer
import StratusTestSupport
import Testing

/// Record dictionaries and feed requests in the shapes Apple's web library writes and reads.
@Suite("CloudKit wire: record dictionaries as Apple writes them")
struct RecordShapeTests {
    static func create(_ names: [String], type: String) -> [[String: Any]] {
        names.map { ["operationType": "create", "record": ["recordType": type, "recordName": $0, "fields": ["n": ["value": 1]]]] }
    }

    @Test("live records in a change feed say deleted: false and carry deviceID; desiredRecordTypes filters records/changes and changes/zone")
    func feeds() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            let saved = try await server.database(
                "private", "records/modify",
                ["zoneID": ["zoneName": "Z"], "operations": Self.create(["a"], type: "Note") + Self.create(["b"], type: "Photo")],
                user: user)
            #expect(saved.status == 200, "\(saved.text)")

            let changes = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Z"], "desiredRecordTypes": ["Photo"]], user: user)
            #expect(changes.records.map { $0["recordName"] as? String } == ["b"], "\(changes.text)")
            #expect(changes.records.first?["deleted"] as? Bool == false)
            for stamp in ["created", "modified"] {
                #expect((changes.records.first?[stamp] as? [String: Any])?["deviceID"] as? String == "",
                        "\(stamp) always carries deviceID, empty when the writer named no device")
            }

            let zones = try await server.database(
                "private", "changes/zone", ["zones": [["zoneID": ["zoneName": "Z"]]], "desiredRecordTypes": ["Note"]], user: user)
            let zoneRecords = (zones.zones.first?["records"] as? [[String: Any]]) ?? []
            #expect(zoneRecords.map { $0["recordName"] as? String } == ["a"], "\(zones.text)")
        }
    }

    @Test("filters and sorts name system fields with systemFieldName")
    func systemFieldNames() async throws {
        // Creation times one second apart, in an order that is not the names' order.
        let clock = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            let (user, _) = try await server.signUp("ann")
            for name in ["b-first", "c-second", "a-third"] {
                clock.advance(bySeconds: 1)
                let reply = try await server.database(
                    "public", "records/modify", ["operations": Self.create([name], type: "Item")], user: user)
                #expect(reply.status == 200, "\(reply.text)")
            }
            let sorted = try await server.database(
                "public", "records/query",
                ["query": ["recordType": "Item", "sortBy": [["systemFieldName": "createdTimestamp", "ascending": false]]]],
                user: user)
            #expect(sorted.records.compactMap { $0["recordName"] as? String } == ["a-third", "c-second", "b-first"], "\(sorted.text)")

            let byName = try await server.database(
                "public", "records/query",
                ["query": ["recordType": "Item", "filterBy": [[
                    "systemFieldName": "recordName", "comparator": "EQUALS",
                    "fieldValue": ["value": ["recordName": "c-second"], "type": "REFERENCE"],
                ]]]],
                user: user)
            #expect(byName.records.compactMap { $0["recordName"] as? String } == ["c-second"], "\(byName.text)")

            let unknown = try await server.database(
                "public", "records/query",
                ["query": ["recordType": "Item", "sortBy": [["systemFieldName": "size"]]]], user: user)
            #expect(unknown.status == 400 && unknown.reason.contains("systemFieldName"), "\(unknown.text)")
        }
    }
}
