import Foundation
import StratusTestSupport
import Testing

/// Apple's reference: a field's `type` "is optional when saving". Without it, a value takes the
/// type the schema already has for the field.
@Suite("CloudKit wire: field values without type")
struct UntypedFieldTests {
    static func save(_ server: TestServer, user: String, _ name: String, _ fields: [String: Any]) async throws
        -> TestServer.Reply
    {
        try await server.database(
            "private", "records/modify",
            ["zoneID": ["zoneName": "Z"],
             "operations": [["operationType": "forceReplace", "record": ["recordType": "Event", "recordName": name, "fields": fields]]]],
            user: user)
    }

    @Test("an untyped save into typed fields takes each field's type; only an unknown field is inferred from its JSON")
    func untypedSaves() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            let typed = try await Self.save(server, user: user, "typed", [
                "when": ["value": 1_700_000_000_000, "type": "TIMESTAMP"],
                "ratio": ["value": 2.5, "type": "DOUBLE"],
                "blob": ["value": "aGk=", "type": "BYTES"],
                "moments": ["value": [1, 2], "type": "TIMESTAMP_LIST"],
                "weights": ["value": [1.5], "type": "DOUBLE_LIST"],
            ])
            #expect(typed.status == 200 && typed.records.first?["serverErrorCode"] == nil, "\(typed.text)")

            let untyped = try await Self.save(server, user: user, "untyped", [
                "when": ["value": 1_700_000_123_000],
                "ratio": ["value": 3],
                "blob": ["value": "aGVsbG8="],
                "moments": ["value": [5, 6]],
                "weights": ["value": [2, 3]],
                "count": ["value": 3],
            ])
            #expect(untyped.status == 200 && untyped.records.first?["serverErrorCode"] == nil, "\(untyped.text)")
            let fields = try #require(untyped.records.first?["fields"] as? [String: [String: Any]], "\(untyped.text)")
            #expect(fields["when"]?["type"] as? String == "TIMESTAMP")
            #expect(fields["when"]?["value"] as? Int == 1_700_000_123_000)
            #expect(fields["ratio"]?["type"] as? String == "DOUBLE")
            #expect(fields["blob"]?["type"] as? String == "BYTES" && fields["blob"]?["value"] as? String == "aGVsbG8=")
            #expect(fields["moments"]?["type"] as? String == "TIMESTAMP_LIST")
            #expect(fields["weights"]?["type"] as? String == "DOUBLE_LIST")
            #expect(fields["count"]?["type"] as? String == "INT64", "a field the schema does not know is inferred")

            // A later typed save into the same fields is still accepted: nothing was mistyped.
            let again = try await Self.save(server, user: user, "again", [
                "ratio": ["value": 4.0, "type": "DOUBLE"], "when": ["value": 1, "type": "TIMESTAMP"],
            ])
            #expect(again.status == 200 && again.records.first?["serverErrorCode"] == nil, "\(again.text)")

            // A value its JSON cannot make into the field's type is refused, naming the field.
            let wrong = try await Self.save(server, user: user, "wrong", ["when": ["value": "tomorrow"]])
            let reason = wrong.records.first?["reason"] as? String ?? wrong.reason
            #expect(wrong.records.first?["serverErrorCode"] != nil || wrong.status == 400, "\(wrong.text)")
            #expect(reason.contains("when"), "\(wrong.text)")
        }
    }
}
