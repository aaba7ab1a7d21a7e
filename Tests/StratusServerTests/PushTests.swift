import Foundation
import NIOHTTP1
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

/// A device that long-polls its push URL.
struct PollingDevice {
    let server: TestServer
    let user: String
    let token: String

    /// Creates a push token and registers it to `user` as device `deviceID`.
    static func register(_ server: TestServer, user: String, deviceID: String) async throws -> PollingDevice {
        let created = try await server.request(
            .POST, "/database/1/\(server.container)/development/tokens/create", body: [String: Any](),
            query: ["ckAPIToken": server.apiToken])
        #expect(created.status == 200, "\(created.text)")
        let token = try #require(created.body["apnsToken"] as? String)
        #expect((created.body["webcourierURL"] as? String)?.hasSuffix("/push/1/\(token)") == true)
        let registered = try await server.request(
            .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": token],
            query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": user], headers: ["X-Stratus-Device-ID": deviceID])
        #expect(registered.status == 200, "\(registered.text)")
        return PollingDevice(server: server, user: user, token: token)
    }

    /// One long poll: the notifications and whether some may have been missed.
    func poll(timeout: Int = 0) async throws -> (notifications: [[String: Any]], missed: Bool) {
        let reply = try await server.request(
            .GET, "/push/1/\(token)",
            query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": user, "timeout": String(timeout)])
        #expect(reply.status == 200, "\(reply.text)")
        return (reply.body["notifications"] as? [[String: Any]] ?? [], reply.body["missedNotifications"] as? Bool ?? false)
    }

    /// The subscription IDs of the notifications a short poll returns.
    func fired(timeout: Int = 1) async throws -> [String] {
        try await poll(timeout: timeout).notifications.compactMap { $0["subscriptionID"] as? String }.sorted()
    }
}

@Suite("push notifications")
struct PushTests {
    func subscribe(_ server: TestServer, _ database: String = "private", user: String, _ subscription: [String: Any])
        async throws
    {
        let reply = try await server.database(
            database, "subscriptions/modify", ["operations": [["operationType": "create", "subscription": subscription]]],
            user: user)
        #expect(reply.status == 200 && !reply.text.contains("serverErrorCode"), "\(reply.text)")
    }

    func note(_ name: String, priority: Int, title: String = "t") -> [String: Any] {
        operation("create", name, fields: ["priority": ["value": priority], "title": ["value": title]])
    }

    @Test("each subscription kind fires for exactly its changes, to its owner's other devices only")
    func firing() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            try await server.createZone("Notes", user: alice)
            try await server.createZone("Other", user: alice)
            try await server.createZone("Notes", user: bob)
            try await subscribe(server, user: alice, [
                "subscriptionID": "urgent", "subscriptionType": "query", "zoneID": ["zoneName": "Notes"],
                "query": ["recordType": "Note", "filterBy": [
                    ["comparator": "GREATER_THAN_OR_EQUALS", "fieldName": "priority", "fieldValue": ["value": 5]]]],
                "firesOn": ["create", "delete"], "notificationInfo": ["desiredKeys": ["title"], "alertBody": "Urgent"]])
            try await subscribe(server, user: alice, ["subscriptionID": "notes-zone", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]])
            try await subscribe(server, user: alice, ["subscriptionID": "everything", "subscriptionType": "database"])
            try await subscribe(server, user: bob, ["subscriptionID": "bob-everything", "subscriptionType": "database"])
            let phone = try await PollingDevice.register(server, user: alice, deviceID: "phone")
            let laptop = try await PollingDevice.register(server, user: alice, deviceID: "laptop")
            let bobsPhone = try await PollingDevice.register(server, user: bob, deviceID: "bobs-phone")
            for device in [phone, laptop, bobsPhone] {
                #expect(try await device.poll().missed, "a device new to the server may have missed notifications")
            }

            // A matching note created on the phone: the laptop hears all three subscriptions; the phone
            // (which made the change) and bob hear nothing.
            _ = try await server.modify([note("n1", priority: 7, title: "Pay rent")], zone: "Notes", user: alice, device: "phone")
            let first = try await laptop.poll(timeout: 2)
            #expect(first.notifications.compactMap { $0["subscriptionID"] as? String }.sorted() == ["everything", "notes-zone", "urgent"])
            let query = try #require(first.notifications.first { $0["subscriptionID"] as? String == "urgent" })
            #expect(query["notificationType"] as? String == "query")
            #expect(query["recordName"] as? String == "n1")
            #expect(query["queryNotificationReason"] as? String == "recordCreated")
            #expect(query["databaseScope"] as? String == "private")
            #expect((query["zoneID"] as? [String: Any])?["zoneName"] as? String == "Notes")
            #expect(((query["recordFields"] as? [String: Any])?["title"] as? [String: Any])?["value"] as? String == "Pay rent")
            #expect((query["recordFields"] as? [String: Any])?["priority"] == nil, "only desiredKeys are copied")
            #expect((query["notificationInfo"] as? [String: Any])?["alertBody"] as? String == "Urgent")
            #expect(try await phone.fired(timeout: 0) == [])
            #expect(try await bobsPhone.fired(timeout: 0) == [])

            // A note that does not match, an update (not in firesOn), another zone, the default zone.
            _ = try await server.modify([note("n2", priority: 1)], zone: "Notes", user: alice, device: "phone")
            #expect(try await laptop.fired() == ["everything", "notes-zone"])
            _ = try await server.modify(
                [operation("forceUpdate", "n1", fields: ["priority": ["value": 9]])], zone: "Notes", user: alice, device: "laptop")
            #expect(try await phone.fired() == ["everything", "notes-zone"], "the update came from the laptop, so the phone hears")
            #expect(try await laptop.fired(timeout: 0) == [])
            _ = try await server.modify([note("o1", priority: 9)], zone: "Other", user: alice, device: "phone")
            #expect(try await laptop.fired() == ["everything"])
            _ = try await server.modify([note("d1", priority: 9)], user: alice, device: "phone")
            #expect(try await laptop.fired(timeout: 1) == [], "the default zone takes part in no subscription")

            // Deleting a matching note fires the query subscription, without record fields.
            _ = try await server.modify([operation("forceDelete", "n1", recordType: nil)], zone: "Notes", user: alice, device: "phone")
            let deletion = try await laptop.poll(timeout: 2).notifications
            let deleted = try #require(deletion.first { $0["subscriptionID"] as? String == "urgent" })
            #expect(deleted["queryNotificationReason"] as? String == "recordDeleted")
            #expect(deleted["recordFields"] == nil)

            // Bob's own change reaches bob's devices but the device that made it; alice hears nothing.
            let bobsLaptop = try await PollingDevice.register(server, user: bob, deviceID: "bobs-laptop")
            _ = try await bobsLaptop.poll()
            _ = try await server.modify([note("b1", priority: 9)], zone: "Notes", user: bob, device: "bobs-phone")
            #expect(try await bobsLaptop.fired() == ["bob-everything"])
            #expect(try await bobsPhone.fired(timeout: 0) == [])
            #expect(try await laptop.fired(timeout: 0) == [])

            // Zones: creating and deleting one fires the database subscription; deleting Notes its zone one.
            let created = try await server.database(
                "private", "zones/modify", ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "New"]]]]],
                user: alice, headers: ["X-Stratus-Device-ID": "phone"])
            #expect(created.status == 200)
            #expect(try await laptop.fired() == ["everything"])
            _ = try await server.database(
                "private", "zones/modify", ["operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": "Notes"]]]]],
                user: alice, headers: ["X-Stratus-Device-ID": "phone"])
            #expect(try await laptop.fired() == ["everything", "notes-zone"])
        }
    }

    @Test("a public query subscription notifies its subscriber of anyone's matching records")
    func publicDatabase() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            try await subscribe(server, "public", user: bob, [
                "subscriptionID": "news", "subscriptionType": "query",
                "query": ["recordType": "Post", "filterBy": [
                    ["comparator": "EQUALS", "fieldName": "tag", "fieldValue": ["value": "news"]]]]])
            let bobsPhone = try await PollingDevice.register(server, user: bob, deviceID: "bobs-phone")
            let alicesPhone = try await PollingDevice.register(server, user: alice, deviceID: "alices-phone")
            _ = try await bobsPhone.poll()
            _ = try await alicesPhone.poll()
            _ = try await server.modify(
                [operation("create", "p1", recordType: "Post", fields: ["tag": ["value": "news"]]),
                 operation("create", "p2", recordType: "Post", fields: ["tag": ["value": "gossip"]])],
                user: alice, database: "public", device: "alices-phone")
            let notifications = try await bobsPhone.poll(timeout: 2).notifications
            #expect(notifications.compactMap { $0["recordName"] as? String } == ["p1"])
            #expect(notifications.first?["databaseScope"] as? String == "public")
            #expect(try await alicesPhone.fired(timeout: 0) == [], "alice did not subscribe")
            // A device ID is the client's word and shows in record stamps: alice naming bob's phone
            // as hers does not keep bob's phone from hearing of her post.
            _ = try await server.modify(
                [operation("create", "p3", recordType: "Post", fields: ["tag": ["value": "news"]])],
                user: alice, database: "public", device: "bobs-phone")
            #expect(try await bobsPhone.poll(timeout: 2).notifications.compactMap { $0["recordName"] as? String } == ["p3"])

            // A subscription ID is unique within its database only: bob's private "news" and public
            // "news" wait side by side for his phone, neither replacing the other.
            try await subscribe(server, user: bob, ["subscriptionID": "news", "subscriptionType": "query", "query": ["recordType": "Note"]])
            _ = try await server.modify(
                [operation("create", "p4", recordType: "Post", fields: ["tag": ["value": "news"]])],
                user: alice, database: "public", device: "alices-phone")
            _ = try await server.modify([operation("create", "n1")], user: bob, device: "bobs-laptop")
            let both = try await bobsPhone.poll(timeout: 2).notifications
            #expect(Set(both.compactMap { $0["databaseScope"] as? String }) == ["public", "private"], "\(both)")
        }
    }

    @Test("firesOnce deletes the subscription when it fires")
    func firesOnce() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribe(server, user: alice, [
                "subscriptionID": "once", "subscriptionType": "query", "zoneID": ["zoneName": "Notes"],
                "query": ["recordType": "Note"], "firesOnce": true])
            let laptop = try await PollingDevice.register(server, user: alice, deviceID: "laptop")
            _ = try await laptop.poll()
            _ = try await server.modify([note("n1", priority: 1), note("n2", priority: 2)], zone: "Notes", user: alice, device: "phone")
            #expect(try await laptop.fired() == ["once"], "once per batch too")
            let listed = try await server.database("private", "subscriptions/list", user: alice)
            #expect((listed.body["subscriptions"] as? [Any])?.isEmpty == true, "the subscription deleted itself")
            _ = try await server.modify([note("n3", priority: 3)], zone: "Notes", user: alice, device: "phone")
            #expect(try await laptop.fired() == [])
        }
    }

    @Test("a burst of 1,000 writes to an away device coalesces to a bounded queue that still leads to every change")
    func coalescing() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.pushQueueLimit = 5
        try await withServer(configuration) { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribe(server, user: alice, ["subscriptionID": "zone", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]])
            try await subscribe(server, user: alice, [
                "subscriptionID": "each", "subscriptionType": "query", "zoneID": ["zoneName": "Notes"], "query": ["recordType": "Note"]])
            let laptop = try await PollingDevice.register(server, user: alice, deviceID: "laptop")
            _ = try await laptop.poll()
            for index in 0..<1_000 {
                _ = try await server.modify([note("n\(index)", priority: index)], zone: "Notes", user: alice, device: "phone")
            }
            let burst = try await laptop.poll(timeout: 2)
            #expect(burst.notifications.count == 2, "one waiting notification per subscription and zone: \(burst.notifications.count)")
            #expect(!burst.missed)
            let last = try #require(burst.notifications.first { $0["subscriptionID"] as? String == "each" })
            #expect(last["recordName"] as? String == "n999", "the latest one wins")
            // The notification is a hint: fetching with the device's token brings every change.
            #expect(try await server.readFeed(zone: "Notes", user: alice).records.count == 1_000)

            // More subscriptions firing than the queue holds: the oldest are dropped, and the device hears it missed some.
            for zone in 0..<7 {
                try await server.createZone("Z\(zone)", user: alice)
                try await subscribe(server, user: alice, ["subscriptionID": "z\(zone)", "subscriptionType": "zone", "zoneID": ["zoneName": "Z\(zone)"]])
            }
            _ = try await laptop.poll(timeout: 0)
            for zone in 0..<7 {
                _ = try await server.modify([note("x", priority: 1)], zone: "Z\(zone)", user: alice, device: "phone")
            }
            let overflow = try await laptop.poll(timeout: 2)
            #expect(overflow.notifications.count == 5)
            #expect(overflow.missed, "dropped notifications are reported")
            #expect(overflow.notifications.compactMap { $0["subscriptionID"] as? String } == ["z2", "z3", "z4", "z5", "z6"])
            // The metrics count what was dropped.
            let figures = try await MetricsTests.scrape(server, token: server.credentials.adminToken)
            #expect(figures.value("stratus_notifications_dropped_total") == 2)
            #expect(figures.value("stratus_notifications_sent_total") == 7)
        }
    }

    @Test("the push URL refuses unknown, unregistered and other users' tokens, and missing credentials")
    func authentication() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            let device = try await PollingDevice.register(server, user: alice, deviceID: "phone")
            func poll(_ token: String, _ query: [String: String]) async throws -> TestServer.Reply {
                try await server.request(.GET, "/push/1/\(token)", query: query.merging(["timeout": "0"]) { $1 })
            }
            let unknown = try await poll("not-a-token", ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(unknown.status == 401 && unknown.reason.contains("unknown"))
            let created = try await server.request(
                .POST, "/database/1/\(server.container)/development/tokens/create", body: [String: Any](),
                query: ["ckAPIToken": server.apiToken])
            let unregistered = try await poll(
                try #require(created.body["apnsToken"] as? String), ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(unregistered.status == 401 && unregistered.reason.contains("tokens/register"))
            let noUser = try await poll(device.token, ["ckAPIToken": server.apiToken])
            #expect(noUser.status == 401 && noUser.reason.contains("ckWebAuthToken"))
            let otherUser = try await poll(device.token, ["ckAPIToken": server.apiToken, "ckWebAuthToken": bob])
            #expect(otherUser.status == 401 && otherUser.reason.contains("another user"))
            let noApp = try await poll(device.token, ["ckWebAuthToken": alice])
            #expect(noApp.status == 401 && noApp.reason.contains("ckAPIToken"))
            let badTimeout = try await server.request(
                .GET, "/push/1/\(device.token)", query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice, "timeout": "600"])
            #expect(badTimeout.status == 400 && badTimeout.reason.contains("timeout"))
            let register = try await server.request(
                .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": "forged"],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(register.status == 404 && register.reason.contains("tokens/create"))
            let anonymousRegister = try await server.request(
                .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": device.token],
                query: ["ckAPIToken": server.apiToken])
            #expect(anonymousRegister.status == 421)

            // Someone who learns alice's token cannot take it over; alice keeps her device.
            let takeover = try await server.request(
                .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": device.token],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": bob])
            #expect(takeover.status == 403 && takeover.code == "ACCESS_DENIED", "\(takeover.text)")
            #expect(try await poll(device.token, ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice]).status == 200)
            let again = try await server.request(
                .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": device.token],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(again.status == 200, "the owner may register her token again: \(again.text)")
        }
    }

    @Test("an owner deleting a shared zone tells its participants, even when nothing was written to it since the server started")
    func sharedZoneDeletedAfterRestart() async throws {
        try await withServer { server in
            let ada = try await server.signUp("ada").token
            let (bob, bobName) = try await server.signUp("bob")
            try await server.createZone("Album", user: ada)
            let participant: [String: Any] = [
                "type": "USER", "permission": "READ_ONLY", "acceptanceStatus": "INVITED",
                "userIdentity": ["lookupInfo": ["userRecordName": bobName]],
            ]
            let saved = try await server.modify(
                [["operationType": "create", "record": [
                    "recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share", "participants": [participant]]]],
                zone: "Album", user: ada)
            let shortGUID = try #require(saved.records.first?["shortGUID"] as? String, "\(saved.text)")
            let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: bob)
            #expect(accepted.status == 200, "\(accepted.text)")
            try await subscribe(server, "shared", user: bob, ["subscriptionID": "everything", "subscriptionType": "database"])

            try await server.stop()
            let restarted = try await server.restart()
            let phone = try await PollingDevice.register(restarted, user: bob, deviceID: "bob-phone")
            _ = try await phone.poll()
            let deleted = try await restarted.database(
                "private", "zones/modify", ["operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": "Album"]]]]],
                user: ada)
            #expect(deleted.status == 200, "\(deleted.text)")
            #expect(try await phone.fired() == ["everything"], "the zone left bob's shared database")
        }
    }

    @Test("a participant of a share rooted at a record hears of changes to its records only, and of being removed")
    func rootedShareNotifications() async throws {
        try await withServer { server in
            let (ada, adaName) = try await server.signUp("ada")
            let (bob, bobName) = try await server.signUp("bob")
            try await server.createZone("Trips", user: ada)
            func record(_ name: String, type: String = "Photo", parent: String?) -> [String: Any] {
                var record: [String: Any] = ["recordName": name, "recordType": type, "fields": ["caption": ["value": name]]]
                record["parent"] = parent.map { ["recordName": $0] } ?? NSNull()
                return record
            }
            func save(_ operationType: String, _ records: [[String: Any]]) async throws {
                let saved = try await server.modify(
                    records.map { ["operationType": operationType, "record": $0] }, zone: "Trips", user: ada)
                #expect(saved.status == 200 && !saved.text.contains("serverErrorCode"), "\(saved.text)")
            }
            func share(_ name: String = "share-album", root: String = "album", participants: [[String: Any]]) -> [String: Any] {
                ["recordName": name, "recordType": "cloudkit.share", "forRecord": ["recordName": root],
                 "participants": participants]
            }
            let invitation: [String: Any] = [
                "type": "USER", "permission": "READ_ONLY", "acceptanceStatus": "INVITED",
                "userIdentity": ["lookupInfo": ["userRecordName": bobName]]]
            try await save("create", [record("album", type: "Album", parent: nil), record("p1", parent: "album"),
                                      record("loose", type: "Album", parent: nil)])
            try await save("create", [share(participants: [invitation])])
            func accept(_ share: String) async throws {
                let looked = try await server.database(
                    "private", "records/lookup", ["zoneID": ["zoneName": "Trips"], "records": [["recordName": share]]],
                    user: ada)
                let shortGUID = try #require(looked.records.first?["shortGUID"] as? String, "\(looked.text)")
                let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: bob)
                #expect(accepted.status == 200, "\(accepted.text)")
            }
            try await accept("share-album")
            try await subscribe(server, "shared", user: bob, ["subscriptionID": "all", "subscriptionType": "database"])
            try await subscribe(server, "shared", user: bob, [
                "subscriptionID": "albums", "subscriptionType": "zone", "recordType": "Album",
                "zoneID": ["zoneName": "Trips", "ownerRecordName": adaName]])
            let phone = try await PollingDevice.register(server, user: bob, deviceID: "bob-phone")
            _ = try await phone.poll()

            try await save("forceUpdate", [record("loose", type: "Album", parent: nil)])
            try await save("create", [record("elsewhere", parent: "loose")])
            #expect(try await phone.fired() == [], "the owner's records outside the share are not bob's to hear of")
            try await save("create", [record("p2", parent: "album")])
            #expect(try await phone.fired() == ["all"], "a photo joined the share; no album changed")
            try await save("forceUpdate", [record("album", type: "Album", parent: nil)])
            #expect(try await phone.fired() == ["albums", "all"])
            try await save("forceUpdate", [record("p1", parent: "loose")])
            #expect(try await phone.fired() == ["all"], "p1 left the share: bob's copy goes")
            try await save("create", [record("trip", type: "Shelf", parent: nil)])
            try await save("create", [share("share-trip", root: "trip", participants: [invitation])])
            #expect(try await phone.fired() == [], "an invitation bob has not accepted tells him nothing")
            try await accept("share-trip")
            #expect(try await phone.fired() == ["all"], "the share he accepted joins his shared database")
            try await save("create", [record("t1", parent: "trip")])
            #expect(try await phone.fired() == ["all"])
            try await save("forceUpdate", [share(participants: [])])
            #expect(try await phone.fired() == ["all"], "bob was removed from the share")
        }
    }

    @Test("after a server restart a device hears that it may have missed notifications, then receives new ones")
    func restart() async throws {
        try await withServer { server in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribe(server, user: alice, ["subscriptionID": "zone", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]])
            let laptop = try await PollingDevice.register(server, user: alice, deviceID: "laptop")
            #expect(try await laptop.poll().missed)
            #expect(try await !laptop.poll().missed, "the same process can vouch for its queue")
            try await server.stop()
            let restarted = try await server.restart()
            let again = PollingDevice(server: restarted, user: alice, token: laptop.token)
            #expect(try await again.poll().missed, "a new process cannot vouch for what happened while it was down")
            _ = try await restarted.modify([note("n1", priority: 1)], zone: "Notes", user: alice, device: "phone")
            #expect(try await again.fired() == ["zone"], "tokens and subscriptions survive the restart")
        }
    }
}
