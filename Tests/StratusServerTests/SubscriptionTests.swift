import Foundation
import StratusModel
import StratusStorage
import StratusTestSupport
import Testing

@Suite("subscriptions endpoints")
struct SubscriptionTests {
    func modify(_ server: TestServer, _ database: String, user: String, _ operations: [[String: Any]]) async throws
        -> TestServer.Reply
    {
        try await server.database(database, "subscriptions/modify", ["operations": operations], user: user)
    }

    func create(_ subscription: [String: Any]) -> [String: Any] { ["operationType": "create", "subscription": subscription] }

    var subscriptions: (TestServer.Reply) -> [[String: Any]] { { $0.body["subscriptions"] as? [[String: Any]] ?? [] } }

    @Test("create, list, look up, update and delete; IDs are per user")
    func lifecycle() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            try await server.createZone("Notes", user: alice)
            let created = try await modify(server, "private", user: alice, [
                create(["subscriptionID": "notes", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]]),
                create(["subscriptionType": "database", "notificationInfo": ["shouldSendContentAvailable": true]]),
                create([
                    "subscriptionID": "urgent", "subscriptionType": "query",
                    "query": ["recordType": "Note", "filterBy": [["comparator": "GREATER_THAN", "fieldName": "priority",
                                                                   "fieldValue": ["value": 5]]],
                              "sortBy": [["fieldName": "priority"]]],
                    "firesOn": ["delete", "create"], "zoneID": ["zoneName": "Notes"],
                    "notificationInfo": ["alertBody": "Urgent!", "desiredKeys": ["title"]],
                ]),
            ])
            #expect(created.status == 200, "\(created.text)")
            let items = subscriptions(created)
            #expect(items.count == 3)
            let generated = try #require(items[1]["subscriptionID"] as? String)
            #expect(UUID(uuidString: generated) != nil, "a create without an ID gets a UUID")
            #expect((items[0]["zoneID"] as? [String: Any])?["ownerRecordName"] as? String != nil, "zone IDs carry their owner")
            #expect(items[2]["firesOn"] as? [String] == ["create", "delete"])
            let sortBy = (items[2]["query"] as? [String: Any])?["sortBy"] as? [Any]
            #expect(sortBy?.isEmpty != false, "subscriptions do not sort")

            let listed = try await server.database("private", "subscriptions/list", user: alice)
            #expect(subscriptions(listed).compactMap { $0["subscriptionID"] as? String }.sorted() == [generated, "notes", "urgent"].sorted())
            #expect(subscriptions(try await server.database("private", "subscriptions/list", user: bob)).isEmpty)

            let looked = try await server.database(
                "private", "subscriptions/lookup", ["subscriptions": [["subscriptionID": "urgent"], ["subscriptionID": "nope"]]],
                user: alice)
            #expect(subscriptions(looked).first?["subscriptionType"] as? String == "query")
            #expect(subscriptions(looked).last?["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(subscriptions(looked).last?["subscriptionID"] as? String == "nope")
            let bobLooks = try await server.database(
                "private", "subscriptions/lookup", ["subscriptions": [["subscriptionID": "urgent"]]], user: bob)
            #expect(subscriptions(bobLooks).first?["serverErrorCode"] as? String == "NOT_FOUND", "bob cannot see alice's")

            let updated = try await modify(server, "private", user: alice, [
                ["operationType": "update", "subscription": ["subscriptionID": "notes", "subscriptionType": "database"]],
                ["operationType": "update", "subscription": ["subscriptionID": "ghost", "subscriptionType": "database"]],
            ])
            #expect(subscriptions(updated).first?["subscriptionType"] as? String == "database")
            #expect(subscriptions(updated).last?["serverErrorCode"] as? String == "NOT_FOUND")

            let deleted = try await modify(server, "private", user: alice, [
                ["operationType": "delete", "subscription": ["subscriptionID": "notes"]],
                ["operationType": "delete", "subscription": ["subscriptionID": "notes2"]],
            ])
            #expect(subscriptions(deleted).first?["subscriptionID"] as? String == "notes")
            #expect(subscriptions(deleted).last?["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(subscriptions(try await server.database("private", "subscriptions/list", user: alice)).count == 2)
        }
    }

    @Test("a user keeps at most 1,000 subscriptions in a database; changing or deleting one is always possible")
    func boundedPerUser() async throws {
        try await withServer { server async throws in
            let (alice, aliceName) = try await server.signUp("alice")
            let bob = try await server.signUp("bob").token
            func query(_ id: String) -> [String: Any] {
                ["subscriptionID": id, "subscriptionType": "query", "query": ["recordType": "Post"]]
            }
            // The first 200 through the API; the rest straight into storage, which is what the API
            // saves (a thousand through HTTP took longer than a request may on a loaded machine).
            let batch = try await modify(server, "public", user: alice, (0..<200).map { create(query("s\($0)")) })
            #expect(batch.status == 200 && !batch.text.contains("serverErrorCode"), "\(batch.text.prefix(300))")
            let publicDatabase = DatabaseLocator(
                container: server.container, environment: .development, scope: .public, owner: DatabaseLocator.publicOwner)
            for index in 200..<Limits.maxSubscriptionsPerDatabase {
                try await server.storage.saveSubscription(
                    StoredSubscription(
                        database: publicDatabase, subscriber: aliceName,
                        definition: SubscriptionDictionary(
                            subscriptionID: "s\(index)", subscriptionType: .query, query: Query(recordType: "Post")),
                        createdAt: 1))
            }
            #expect(try await server.storage.subscriptions(in: publicDatabase, subscriber: aliceName).count
                == Limits.maxSubscriptionsPerDatabase)
            let over = try await modify(server, "public", user: alice, [
                create(query("one-more")), ["operationType": "update", "subscription": query("s0")],
            ])
            #expect(subscriptions(over).map { $0["serverErrorCode"] as? String } == ["LIMIT_EXCEEDED", nil], "\(over.text)")
            let swapped = try await modify(server, "public", user: alice, [
                ["operationType": "delete", "subscription": ["subscriptionID": "s1"]], create(query("one-more")),
            ])
            #expect(!swapped.text.contains("serverErrorCode"), "\(swapped.text)")
            let others = try await modify(server, "public", user: bob, [create(query("s0"))])
            #expect(!others.text.contains("serverErrorCode"), "the bound is each user's: \(others.text)")
        }
    }

    @Test("each database takes only the kinds CloudKit allows, and bad subscriptions are refused naming the rule")
    func rules() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            let query: [String: Any] = ["subscriptionType": "query", "query": ["recordType": "Note"]]
            for (database, subscription, rule) in [
                ("shared", query, "query subscriptions are available in the public and private databases"),
                ("public", ["subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]], "private and shared databases; the public one"),
                ("public", ["subscriptionType": "database"], "private and shared databases"),
                ("private", ["subscriptionType": "zone"], "zoneID is required"),
                ("private", ["subscriptionType": "zone", "zoneID": ["zoneName": "_defaultZone"]], "default zone has no change feed"),
                ("private", ["subscriptionType": "database", "firesOnce": true], "firesOnce applies to query subscriptions"),
                ("private", ["subscriptionType": "query"], "query is required"),
                ("private", ["subscriptionType": "query", "query": ["recordType": "Note"], "firesOn": []], "at least one"),
                ("private", ["subscriptionType": "query", "query": ["recordType": "Note"], "firesOn": ["explode"]], "create, update, delete"),
                ("private", ["subscriptionType": "nonsense"], "query, zone, database"),
                ("private", ["subscriptionID": "x"], "subscriptionType is required"),
                ("private", ["subscriptionType": "query", "query": ["recordType": "Note"],
                             "notificationInfo": ["desiredKeys": ["a", "b", "c", "d"]]], "at most 3"),
                ("private", ["subscriptionType": "query", "query": ["recordType": "Note", "filterBy": [
                    ["comparator": "NEAR", "fieldName": "place", "fieldValue": ["value": ["latitude": 1, "longitude": 2]]]]]],
                 "distance"),
            ] as [(String, [String: Any], String)] {
                let reply = try await modify(server, database, user: alice, [create(subscription)])
                #expect(reply.status == 400, "\(database) \(subscription): \(reply.text)")
                #expect(reply.reason.contains(rule), "\(reply.reason) should name '\(rule)'")
            }
            let missingZone = try await modify(server, "private", user: alice, [
                create(["subscriptionType": "zone", "zoneID": ["zoneName": "Nope"]])])
            #expect(subscriptions(missingZone).first?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")
            let twice = try await modify(server, "private", user: alice, [
                create(["subscriptionID": "a", "subscriptionType": "database"]),
                create(["subscriptionID": "a", "subscriptionType": "database"])])
            #expect(twice.status == 400 && twice.reason.contains("appears twice"))
            let anonymous = try await server.database("public", "subscriptions/list")
            #expect(anonymous.status == 421, "subscriptions belong to a signed-in user")
            #expect(subscriptions(try await server.database("private", "subscriptions/list", user: alice)).isEmpty,
                    "nothing was saved by the refused requests")
        }
    }
}
