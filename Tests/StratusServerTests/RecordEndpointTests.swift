import NIOHTTP1
import Foundation
import StratusTestSupport
import Testing

@Suite("records/modify and records/lookup")
struct RecordEndpointTests {
    @Test("every operation type and its error paths")
    func operationTypes() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)

            let created = try await server.modify(
                [operation("create", "n1", fields: ["title": ["value": "Hello"], "count": ["value": 1, "type": "INT64"]])],
                zone: "Notes", user: alice)
            #expect(created.status == 200)
            let record = try #require(created.records.first)
            let tag1 = try #require(record["recordChangeTag"] as? String)
            #expect(record["recordType"] as? String == "Note")
            #expect((record["fields"] as? [String: Any])?["title"] as? [String: String] == ["value": "Hello", "type": "STRING"])
            #expect((record["created"] as? [String: Any])?["userRecordName"] != nil)

            let exists = try await server.modify([operation("create", "n1")], zone: "Notes", user: alice)
            #expect(exists.records.first?["serverErrorCode"] as? String == "EXISTS")

            let conflict = try await server.modify(
                [operation("update", "n1", recordType: nil, tag: "stale", fields: ["title": ["value": "X"]])],
                zone: "Notes", user: alice)
            let conflictItem = try #require(conflict.records.first)
            #expect(conflictItem["serverErrorCode"] as? String == "CONFLICT")
            #expect(conflictItem["recordName"] as? String == "n1")
            let serverRecord = try #require(conflictItem["serverRecord"] as? [String: Any])
            #expect(serverRecord["recordChangeTag"] as? String == tag1, "CONFLICT carries the current server record")

            let updated = try await server.modify(
                [operation("update", "n1", recordType: nil, tag: tag1, fields: ["title": ["value": "Bye"], "count": ["value": NSNull()]])],
                zone: "Notes", user: alice)
            let updatedRecord = try #require(updated.records.first)
            let tag2 = try #require(updatedRecord["recordChangeTag"] as? String)
            #expect(tag2 != tag1)
            #expect((updatedRecord["fields"] as? [String: Any])?.keys.sorted() == ["title"], "null removes a field")

            let notFound = try await server.modify(
                [operation("update", "ghost", recordType: nil, tag: "x"), operation("delete", "ghost2", recordType: nil, tag: "x"),
                 operation("forceDelete", "ghost3", recordType: nil), operation("replace", "ghost4", tag: "x")],
                zone: "Notes", user: alice, atomic: false)
            #expect(notFound.records.map { $0["serverErrorCode"] as? String } == ["NOT_FOUND", "NOT_FOUND", "NOT_FOUND", "NOT_FOUND"])

            let forced = try await server.modify(
                [operation("forceUpdate", "n1", recordType: nil, fields: ["extra": ["value": 2.5]]),
                 operation("forceUpdate", "n2", fields: ["title": ["value": "new"]]),
                 operation("forceReplace", "n3", fields: ["title": ["value": "three"]])],
                zone: "Notes", user: alice)
            #expect(forced.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(forced.text)")
            #expect((forced.records[0]["fields"] as? [String: Any])?.keys.sorted() == ["extra", "title"])
            let tag3 = try #require(forced.records[0]["recordChangeTag"] as? String)

            let replaced = try await server.modify(
                [operation("replace", "n1", recordType: nil, tag: tag3, fields: ["body": ["value": "only"]])],
                zone: "Notes", user: alice)
            #expect((replaced.records.first?["fields"] as? [String: Any])?.keys.sorted() == ["body"])
            let tag4 = try #require(replaced.records.first?["recordChangeTag"] as? String)
            let replaceConflict = try await server.modify(
                [operation("replace", "n1", recordType: nil, tag: tag3)], zone: "Notes", user: alice)
            #expect(replaceConflict.records.first?["serverErrorCode"] as? String == "CONFLICT")
            let forceReplaced = try await server.modify(
                [operation("forceReplace", "n1", recordType: nil, fields: [:])], zone: "Notes", user: alice)
            #expect((forceReplaced.records.first?["fields"] as? [String: Any])?.isEmpty == true)
            let tag5 = try #require(forceReplaced.records.first?["recordChangeTag"] as? String)
            #expect(tag5 != tag4)

            let deleteConflict = try await server.modify([operation("delete", "n1", recordType: nil, tag: tag4)], zone: "Notes", user: alice)
            #expect(deleteConflict.records.first?["serverErrorCode"] as? String == "CONFLICT")
            let deleted = try await server.modify(
                [operation("delete", "n1", recordType: nil, tag: tag5), operation("forceDelete", "n2", recordType: nil)],
                zone: "Notes", user: alice)
            #expect(deleted.records.map { $0["deleted"] as? Bool } == [true, true])

            let lookup = try await server.database(
                "private", "records/lookup",
                ["zoneID": ["zoneName": "Notes"], "records": [["recordName": "n1"], ["recordName": "n3"]]], user: alice)
            #expect(lookup.records.first?["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(lookup.records.last?["recordName"] as? String == "n3")
        }
    }

    @Test("an atomic batch in a custom zone fails as a whole and writes nothing")
    func atomicFailure() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            _ = try await server.modify([operation("create", "taken")], zone: "Z", user: alice)
            let before = try await server.readFeed(zone: "Z", user: alice)

            let reply = try await server.modify(
                [operation("create", "a"), operation("create", "taken"), operation("create", "b")], zone: "Z", user: alice)
            #expect(reply.status == 200)
            #expect(reply.records.map { $0["serverErrorCode"] as? String } == ["ATOMIC_ERROR", "EXISTS", "ATOMIC_ERROR"])
            #expect(reply.records.map { $0["recordName"] as? String } == ["a", "taken", "b"])
            let lookup = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "a"], ["recordName": "b"]]],
                user: alice)
            #expect(lookup.records.allSatisfy { $0["serverErrorCode"] as? String == "NOT_FOUND" })
            let after = try await server.readFeed(zone: "Z", user: alice, token: before.token)
            #expect(after.records.isEmpty, "a failed atomic batch adds nothing to the change feed")

            let nonAtomic = try await server.modify(
                [operation("create", "a"), operation("create", "taken"), operation("create", "b")], zone: "Z", user: alice,
                atomic: false)
            #expect(nonAtomic.records.map { $0["serverErrorCode"] as? String } == [nil, "EXISTS", nil])

            let defaultZone = try await server.modify(
                [operation("create", "d1"), operation("create", "d1x"), operation("forceDelete", "nope", recordType: nil)],
                user: alice)
            #expect(defaultZone.records.map { $0["serverErrorCode"] as? String } == [nil, nil, "NOT_FOUND"],
                    "the default zone is never atomic")
        }
    }

    @Test("desiredKeys, numbersAsStrings, every field type, server-assigned names")
    func fieldsAndOptions() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let asset = try #require(try await AssetTests.upload(server, [1, 2, 3], user: alice).body["singleFile"])
            let fields: [String: Any] = [
                "s": ["value": "text", "type": "STRING"],
                "i": ["value": 9_007_199_254_740_993 as Int64, "type": "INT64"],
                "d": ["value": 1.25, "type": "DOUBLE"],
                "t": ["value": 1_454_976_000_000 as Int64, "type": "TIMESTAMP"],
                "b": ["value": "AAEC", "type": "BYTES"],
                "r": ["value": ["recordName": "other", "action": "DELETE_SELF"], "type": "REFERENCE"],
                "l": ["value": ["latitude": 52.5, "longitude": 13.4], "type": "LOCATION"],
                "a": ["value": asset, "type": "ASSETID"],
                "sl": ["value": ["x", "y"], "type": "STRING_LIST"],
                "il": ["value": [1, 2], "type": "INT64_LIST"],
                "e": ["value": [Any](), "type": "UNKNOWN_LIST"],
            ]
            let reply = try await server.modify([operation("create", nil, fields: fields)], user: alice)
            let record = try #require(reply.records.first)
            let name = try #require(record["recordName"] as? String)
            #expect(UUID(uuidString: name) != nil, "create without a name gets a UUID")
            let stored = try #require(record["fields"] as? [String: [String: Any]])
            #expect(Set(stored.keys) == Set(fields.keys))
            for (key, value) in fields {
                #expect(stored[key]?["type"] as? String == (value as! [String: Any])["type"] as? String, "\(key)")
            }
            #expect(stored["i"]?["value"] as? Int64 == 9_007_199_254_740_993)

            let lookup = try await server.database(
                "private", "records/lookup",
                ["records": [["recordName": name]], "desiredKeys": ["i", "d"], "numbersAsStrings": true], user: alice)
            let trimmed = try #require(lookup.records.first?["fields"] as? [String: [String: Any]])
            #expect(Set(trimmed.keys) == ["i", "d"])
            #expect(trimmed["i"]?["value"] as? String == "9007199254740993")
            #expect(trimmed["d"]?["value"] as? String == "1.25")

            let none = try await server.database(
                "private", "records/lookup", ["records": [["recordName": name, "desiredKeys": []]]], user: alice)
            #expect(none.records.first?["fields"] == nil && none.records.first?["recordChangeTag"] != nil)

            let inferred = try await server.modify(
                [operation("create", "inferred", fields: [
                    "s": ["value": "x"], "n": ["value": 3], "f": ["value": 3.5], "flag": ["value": true],
                    "ref": ["value": ["recordName": "x"]], "loc": ["value": ["latitude": 1, "longitude": 2]],
                    "list": ["value": [1.5, 2.5]],
                ])], user: alice)
            let types = (inferred.records.first?["fields"] as? [String: [String: Any]])?.mapValues { $0["type"] as? String }
            #expect(types == ["s": "STRING", "n": "INT64", "f": "DOUBLE", "flag": "INT64", "ref": "REFERENCE",
                              "loc": "LOCATION", "list": "DOUBLE_LIST"])
        }
    }
}

@Suite("reference actions")
struct ReferenceActionTests {
    @Test("VALIDATE answers VALIDATING_REFERENCE_ERROR; DELETE_SELF deletions reach other devices' feeds")
    func referenceActions() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            let reference = { (target: String, action: String) -> [String: Any] in
                ["parent": ["value": ["recordName": target, "action": action], "type": "REFERENCE"]]
            }
            let missing = try await server.modify(
                [operation("create", "orphan", fields: reference("ghost", "VALIDATE"))], zone: "Z", user: alice)
            #expect(missing.records.first?["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
            _ = try await server.modify(
                [operation("create", "list"), operation("create", "item", fields: reference("list", "DELETE_SELF"))],
                zone: "Z", user: alice)
            let before = try await server.readFeed(zone: "Z", user: alice)
            _ = try await server.modify([operation("forceDelete", "list", recordType: nil)], zone: "Z", user: alice)
            let after = try await server.readFeed(zone: "Z", user: alice, token: before.token)
            #expect(Set(after.records.compactMap { $0["recordName"] as? String }) == ["list", "item"])
            #expect(after.records.allSatisfy { $0["deleted"] as? Bool == true })

            // A reference in a list binds as one alone does, and keeps binding after the record is
            // saved again without it being sent.
            _ = try await server.modify(
                [operation("create", "album"),
                 operation("create", "photo", fields: ["albums": ["value": [["recordName": "album", "action": "DELETE_SELF"]],
                                                                  "type": "REFERENCE_LIST"]])],
                zone: "Z", user: alice)
            let edited = try await server.modify(
                [operation("forceUpdate", "photo", fields: ["title": ["value": "x"]])], zone: "Z", user: alice)
            #expect(edited.records.first?["serverErrorCode"] == nil, "\(edited.text)")
            _ = try await server.modify([operation("forceDelete", "album", recordType: nil)], zone: "Z", user: alice)
            let photo = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "photo"]]], user: alice)
            #expect(photo.records.first?["serverErrorCode"] as? String == "NOT_FOUND", "\(photo.text)")

            let crossZone = try await server.modify(
                [operation("create", "x", fields: ["p": ["value": ["recordName": "y", "zoneID": ["zoneName": "Other"],
                                                                  "action": "DELETE_SELF"], "type": "REFERENCE"]])],
                zone: "Z", user: alice)
            #expect(crossZone.status == 400 && crossZone.reason.contains("own zone"))
        }
    }
}

@Suite("zones")
struct ZoneEndpointTests {
    @Test("list, lookup, create, delete; deleting removes records and shows in database changes")
    func zoneLifecycle() async throws {
        try await withServer { server async throws in
            let (alice, aliceName) = try await server.signUp("alice")

            let initial = try await server.database("private", "zones/list", user: alice)
            #expect(initial.zones.count == 1)
            let defaultZone = try #require(initial.zones.first?["zoneID"] as? [String: Any])
            #expect(defaultZone["zoneName"] as? String == "_defaultZone")
            #expect(defaultZone["ownerRecordName"] as? String == aliceName)
            let dbStart = try await server.database("private", "changes/database", [String: Any](), user: alice)
            let dbToken = try #require(dbStart.syncToken)

            try await server.createZone("A", user: alice)
            try await server.createZone("B", user: alice)
            _ = try await server.modify([operation("create", "r1"), operation("create", "r2")], zone: "B", user: alice)
            let listed = try await server.database("private", "zones/list", user: alice)
            #expect(listed.zones.compactMap { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String } == ["_defaultZone", "A", "B"])
            #expect(listed.zones[1]["atomic"] as? Bool == true && listed.zones[1]["syncToken"] is String)

            let lookup = try await server.database(
                "private", "zones/lookup", ["zones": [["zoneName": "A"], ["zoneName": "missing"]]], user: alice)
            #expect(lookup.zones.first?["zoneID"] != nil && lookup.zones.first?["serverErrorCode"] == nil)
            #expect(lookup.zones.last?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")

            let delete = try await server.database(
                "private", "zones/modify",
                ["operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": "B"]]],
                                ["operationType": "delete", "zone": ["zoneID": ["zoneName": "B"]]],
                                ["operationType": "delete", "zone": ["zoneID": ["zoneName": "_defaultZone"]]]]],
                user: alice)
            #expect(delete.zones.map { $0["deleted"] as? Bool } == [true, nil, nil])
            #expect(delete.zones.map { $0["serverErrorCode"] as? String } == [nil, "ZONE_NOT_FOUND", "BAD_REQUEST"])
            let lookupDeleted = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "B"], "records": [["recordName": "r1"]]], user: alice)
            #expect(lookupDeleted.status == 404 && lookupDeleted.code == "ZONE_NOT_FOUND")

            let changes = try await server.database("private", "changes/database", ["syncToken": dbToken], user: alice)
            let changed = changes.zones.map { (($0["zoneID"] as? [String: Any])?["zoneName"] as? String ?? "", $0["deleted"] as? Bool ?? false) }
            #expect(changed.map(\.0) == ["A", "B"] && changed.map(\.1) == [false, true])
            #expect(changes.moreComing == false)
            let legacy = try await server.database("private", "zones/changes", ["metaSyncToken": dbToken], user: alice)
            #expect(legacy.zones.count == 2, "zones/changes reads the same feed")
            let empty = try await server.database("private", "changes/database", ["syncToken": try #require(changes.syncToken)], user: alice)
            #expect(empty.zones.isEmpty)
        }
    }
}
