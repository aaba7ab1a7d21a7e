import Crypto
import Foundation
import Logging
import NIOHTTP1
import Stratus
import StratusServer
import StratusTestSupport
import Testing
import WSClient

@Suite("SDK: subscriptions and notifications")
struct NotificationTests {
    @Test("registerForRemoteNotifications(apnsToken:) registers the device; the silent push APNs delivers reads back as a RemoteNotification of its database")
    func apnsRegistration() async throws {
        let standIn = try await PushServiceStandIn.start()
        defer { standIn.stop() }
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.pushServices = standIn.serviceConfiguration
        try await withServer(configuration) { server in
            let key = P256.Signing.PrivateKey()
            let set = try await server.request(
                .PUT, "/admin/1/containers/\(server.container)/push/apns/development",
                body: ["teamID": "TEAM123456", "keyID": "KEY1234567", "privateKey": key.pemRepresentation, "topic": "com.example.notes"],
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(set.status == 200, "\(set.text)")
            try await standIn.configure(apns: ("TEAM123456", "KEY1234567", key.publicKey.pemRepresentation, "com.example.notes"))
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = try await server.device(of: "mei")
            let zone = try await laptop.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            _ = try await phone.privateCloudDatabase.save(Subscription.recordZone(zoneID: zone, subscriptionID: "notes"))
            let deviceToken = Data((0..<32).map { UInt8($0) })
            try await phone.registerForRemoteNotifications(apnsToken: deviceToken, environment: .development)

            var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone))
            record["title"] = "Pay rent"
            _ = try await laptop.privateCloudDatabase.save(record)
            let hex = deviceToken.map { String(format: "%02x", $0) }.joined()
            var pushes: [[String: Any]] = []
            #expect(await eventually {
                pushes = ((try? await standIn.requests("apns")) ?? []).filter { $0["token"] as? String == hex }
                return !pushes.isEmpty
            })
            let push = try #require(pushes.first)
            #expect(push["errors"] as? [String] == [], "\(push)")
            let body = try JSONSerialization.data(withJSONObject: try #require(push["body"] as? [String: Any]))
            let notification = try #require(RemoteNotification(payload: body))
            #expect(notification.containerIdentifier == server.container)
            #expect(notification.databaseScope == .private && notification.subscriptionID == "notes" && notification.zoneName == "Notes")
            #expect(RemoteNotification(userInfo: try #require(push["body"] as? [String: Any])) == notification)
            // FCM's data carries the same dictionary as JSON text.
            let ck = try JSONSerialization.data(withJSONObject: try #require((push["body"] as? [String: Any])?["ck"]))
            #expect(RemoteNotification(userInfo: ["ck": String(decoding: ck, as: UTF8.self)]) == notification)
            #expect(RemoteNotification(payload: Data(#"{"aps": {"alert": "hi"}}"#.utf8)) == nil)
        }
    }

    @Test("subscriptions: save, fetch, list, delete, and per-item errors")
    func subscriptions() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let urgent = Subscription.query(
                recordType: "Note", predicate: .greaterThanOrEquals("priority", 5), subscriptionID: "urgent",
                options: [.firesOnRecordCreation, .firesOnce], zoneID: zone,
                notificationInfo: Subscription.NotificationInfo(alertBody: "Urgent", desiredKeys: ["title"]))
            #expect(try await database.save(urgent) == urgent)
            try await database.save(Subscription.recordZone(zoneID: zone, subscriptionID: "notes"))
            try await database.save(Subscription.database(subscriptionID: "all"))
            try await database.save(Subscription.query(recordType: "Note", subscriptionID: "anywhere"))

            #expect(try await database.subscription(for: "urgent") == urgent)
            let anywhere = try await database.subscription(for: "anywhere")
            guard case .query(_, _, let options, let zoneID) = anywhere.kind else {
                Issue.record("expected a query subscription")
                return
            }
            #expect(zoneID == nil, "no zone means every zone")
            #expect(options == [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion])
            #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["all", "anywhere", "notes", "urgent"])

            #expect(try await database.deleteSubscription(withID: "all") == "all")
            let missing = await cloudError { _ = try await database.subscription(for: "all") }
            #expect(missing?.code == .unknownItem)
            let results = try await database.modifySubscriptions(saving: [], deleting: ["anywhere", "ghost"])
            #expect(results.partialFailure?.partialErrorsByItemID?[.subscription("ghost")]?.code == .unknownItem)
            let refused = await cloudError {
                try await container.publicCloudDatabase.save(Subscription.database(subscriptionID: "x"))
            }
            #expect(refused?.code == .invalidArguments)
            #expect(refused?.message.contains("private and shared") == true)
        }
    }

    @Test("a change on one device reaches the other device's notifications, and not the device that made it")
    func notifiesOtherDevices() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            try await phone.privateCloudDatabase.save(Subscription.recordZone(zoneID: zone, subscriptionID: "notes"))
            try await phone.privateCloudDatabase.save(
                Subscription.query(
                    recordType: "Note", subscriptionID: "titles", zoneID: zone,
                    notificationInfo: Subscription.NotificationInfo(desiredKeys: ["title"])))
            let laptopEvents = PushEventCollector(laptop)
            let phoneEvents = PushEventCollector(phone)
            #expect(await laptopEvents.wait { $0.gaps == 1 }, "a first connection reports that earlier notifications were not heard")
            #expect(await phoneEvents.wait { $0.gaps == 1 })

            var note = Record(recordType: "Note", recordID: .init(recordName: "n1", zoneID: zone))
            note["title"] = "Buy milk"
            _ = try await phone.privateCloudDatabase.save(note)
            #expect(await laptopEvents.wait { $0.notifications.count == 2 })
            let zoneNotification = try #require(laptopEvents.notifications.first { $0.notificationType == .recordZone })
            #expect(zoneNotification.subscriptionID == "notes")
            #expect(zoneNotification.recordZoneID == zone, "zone IDs come back with the current-user owner")
            #expect(zoneNotification.databaseScope == .private)
            #expect(zoneNotification.isSilent)
            let query = try #require(laptopEvents.notifications.first { $0.notificationType == .query })
            #expect(query.recordID == note.recordID)
            #expect(query.queryNotificationReason == .recordCreated)
            #expect(query.recordFields["title"] == .string("Buy milk"))

            // The other way round. The hub handles events in order, so had the phone been told of
            // its own change, those notifications would come before these (no wait proves a silence).
            var edit = try await laptop.privateCloudDatabase.record(for: note.recordID)
            edit["title"] = "Buy oat milk"
            _ = try await laptop.privateCloudDatabase.save(edit)
            #expect(await phoneEvents.wait { $0.notifications.count >= 2 })
            #expect(
                phoneEvents.notifications.first { $0.notificationType == .query }?.queryNotificationReason == .recordUpdated,
                "the device that made the change is not told of it")
            #expect(phoneEvents.notifications.count == 2)
            #expect(laptopEvents.notifications.count == 2)
        }
    }

    @Test("the long-poll transport delivers the same notifications")
    func longPolling() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            var configuration = Container.Configuration(deviceID: "laptop", pushTransport: .longPolling)
            configuration.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(20))
            let laptop = Container(
                identifier: server.container, serverURL: URL(string: server.baseURL)!, apiToken: server.apiToken,
                session: phone.session, configuration: configuration)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            try await phone.privateCloudDatabase.save(Subscription.database(subscriptionID: "all"))
            let events = PushEventCollector(laptop)
            // The device's queue is attached before the connection says it is connected.
            #expect(await events.wait { $0.gaps == 1 })
            _ = try await phone.privateCloudDatabase.save(Record(recordType: "Note", zoneID: zone))
            #expect(await events.wait { $0.notifications.count == 1 })
            #expect(events.notifications.first?.notificationType == .database)
        }
    }

    @Test("after a server restart the stream reconnects by itself, reports the gap, and goes on")
    func reconnects() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            try await phone.privateCloudDatabase.save(Subscription.recordZone(zoneID: zone, subscriptionID: "notes"))
            let events = PushEventCollector(laptop)
            #expect(await events.wait { $0.gaps == 1 })

            try await server.stop()
            _ = try await server.restart()
            #expect(await events.wait(for: .seconds(30)) { $0.gaps == 2 }, "the reconnection reports that notifications may be lost")
            _ = try await phone.privateCloudDatabase.save(Record(recordType: "Note", zoneID: zone))
            #expect(await events.wait { $0.notifications.count == 1 })
            #expect(!events.ended)
            events.stop()
        }
    }

    @Test("an unauthenticated socket is refused; signing out ends the stream with notAuthenticated")
    func authentication() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let ann = try await server.signedInContainer("ann", device: "anns-phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let events = PushEventCollector(laptop)
            #expect(await events.wait { $0.gaps == 1 })

            // Raw sockets: no credentials, another user's session, an unknown token.
            let token = try #require(try await pushToken(server, user: phone))
            for query in [
                "", "?ckAPIToken=\(server.apiToken)",
                "?ckAPIToken=\(server.apiToken)&ckWebAuthToken=\(ann.session!.webAuthToken)",
            ] {
                await #expect(throws: WebSocketClientError.webSocketUpgradeFailed) {
                    try await WebSocketClient.connect(
                        url: "\(server.baseURL)/push/1/\(token)\(query)", logger: Logger(label: "test")
                    ) { _, _, _ in }
                }
            }
            await #expect(throws: WebSocketClientError.webSocketUpgradeFailed) {
                try await WebSocketClient.connect(
                    url: "\(server.baseURL)/push/1/forged?ckAPIToken=\(server.apiToken)&ckWebAuthToken=\(phone.session!.webAuthToken)",
                    logger: Logger(label: "test")
                ) { _, _, _ in }
            }

            try await laptop.signOut()
            #expect(await events.wait { $0.ended }, "the server closes the channel of a session that ended")
            #expect(events.error?.code == .notAuthenticated)
        }
    }

    /// A push token registered to `user`'s session.
    private func pushToken(_ server: TestServer, user: Container) async throws -> String? {
        let query = ["ckAPIToken": server.apiToken, "ckWebAuthToken": user.session!.webAuthToken]
        let created = try await server.request(
            .POST, "/database/1/\(server.container)/development/tokens/create", body: [String: Any](), query: query)
        let token = created.body["apnsToken"] as? String
        _ = try await server.request(
            .POST, "/database/1/\(server.container)/development/tokens/register", body: ["apnsToken": token ?? ""],
            query: query)
        return token
    }
}
