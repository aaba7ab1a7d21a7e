import Crypto
import Foundation
import NIOHTTP1
import StratusModel
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing
import _CryptoExtras

/// Devices woken through their platform's push service, against stand-ins on loopback that check
/// every request as the real services do (`scripts/push-standin.py`).
@Suite("device push: APNs, FCM and Web Push")
struct DevicePushTests {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.notes"
    /// Device tokens as APNs issues them: 64 hexadecimal digits.
    static func deviceToken(_ seed: Int) -> String { String(format: "%064x", seed) }

    /// A server whose push services are the stand-in's, with `configure` applied to its
    /// configuration first.
    func withPushServer(
        configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: (TestServer, PushServiceStandIn) async throws -> Void
    ) async throws {
        let standIn = try await PushServiceStandIn.start()
        defer { standIn.stop() }
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.pushServices = standIn.serviceConfiguration
        configure(&configuration)
        try await withServer(configuration) { server in try await body(server, standIn) }
    }

    func admin(_ server: TestServer, _ method: HTTPMethod, _ path: String, _ body: Any? = nil) async throws
        -> TestServer.Reply
    {
        try await server.request(
            method, "/admin/1/containers/\(server.container)/\(path)", body: body,
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
    }

    /// Sets the container's APNs key for `environment` on the server, and its public half on the
    /// stand-in (or another key's, to see the credentials refused).
    @discardableResult
    func configureAPNs(
        _ server: TestServer, _ standIn: PushServiceStandIn, environment: String = "development",
        standInKnowsAnotherKey: Bool = false
    ) async throws -> P256.Signing.PrivateKey {
        let key = P256.Signing.PrivateKey()
        let reply = try await admin(
            server, .PUT, "push/apns/\(environment)",
            ["teamID": Self.teamID, "keyID": Self.keyID, "privateKey": key.pemRepresentation, "topic": Self.topic])
        #expect(reply.status == 200, "\(reply.text)")
        let known = standInKnowsAnotherKey ? P256.Signing.PrivateKey() : key
        try await standIn.configure(
            apns: (Self.teamID, Self.keyID, known.publicKey.pemRepresentation, Self.topic))
        return key
    }

    func subscribeToZone(_ server: TestServer, user: String, zone: String = "Notes", info: [String: Any]? = nil) async throws {
        var subscription: [String: Any] = [
            "subscriptionID": "notes-\(zone)", "subscriptionType": "zone", "zoneID": ["zoneName": zone],
        ]
        if let info { subscription["notificationInfo"] = info }
        let reply = try await server.database(
            "private", "subscriptions/modify", ["operations": [["operationType": "create", "subscription": subscription]]],
            user: user)
        #expect(reply.status == 200 && !reply.text.contains("serverErrorCode"), "\(reply.text)")
    }

    func register(_ server: TestServer, user: String, device: String, _ body: [String: Any]) async throws -> TestServer.Reply {
        try await server.request(
            .POST, "/device/1/\(server.container)/development/tokens/register", body: body,
            query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": user], headers: ["X-Stratus-Device-ID": device])
    }

    func save(_ server: TestServer, _ name: String, user: String, device: String, zone: String = "Notes") async throws {
        let reply = try await server.modify(
            [operation("create", name, fields: ["title": ["value": name]])], zone: zone, user: user, device: device)
        #expect(reply.status == 200 && !reply.text.contains("serverErrorCode"), "\(reply.text)")
    }

    /// The requests `service` received for `token`, once at least `count` arrived.
    func requests(
        _ standIn: PushServiceStandIn, _ service: String, token: String, count: Int = 1
    ) async throws -> [[String: Any]] {
        var found: [[String: Any]] = []
        _ = await eventually {
            found = ((try? await standIn.requests(service)) ?? []).filter { $0["token"] as? String == token }
            return found.count >= count
        }
        return found
    }

    @Test("a change on one device reaches the other's APNs token as CloudKit's silent push, checked as Apple checks it; the changing device hears nothing")
    func apnsSilentPush() async throws {
        try await withPushServer { server, standIn in
            try await configureAPNs(server, standIn)
            let (alice, aliceID) = try await server.signUp("alice")
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            let phone = Self.deviceToken(1)
            let laptop = Self.deviceToken(2)
            let registered = try await register(server, user: alice, device: "phone", ["apnsToken": phone, "apnsEnvironment": "development"])
            #expect(registered.status == 200, "\(registered.text)")
            #expect(registered.body["apnsToken"] as? String == phone && registered.body["webcourierURL"] == nil)
            #expect(try await register(server, user: alice, device: "laptop", ["apnsToken": laptop]).status == 200)

            try await save(server, "n1", user: alice, device: "laptop")
            let pushes = try await requests(standIn, "apns", token: phone)
            let push = try #require(pushes.first)
            #expect(push["errors"] as? [String] == [], "\(push)")
            #expect(push["status"] as? Int == 200)
            let headers = try #require(push["headers"] as? [String: String])
            #expect(headers["apns-push-type"] == "background")
            #expect(headers["apns-priority"] == "5")
            #expect(headers["apns-topic"] == Self.topic)
            #expect(headers["apns-collapse-id"] == "private:notes-Notes")
            let body = try #require(push["body"] as? [String: Any])
            #expect(body["aps"] as? [String: Int] == ["content-available": 1])
            let ck = try #require(body["ck"] as? [String: Any])
            #expect(ck["cid"] as? String == server.container)
            #expect(ck["ckuserid"] as? String == aliceID)
            let zone = try #require(ck["fet"] as? [String: Any])
            #expect(zone["sid"] as? String == "notes-Notes" && zone["zid"] as? String == "Notes" && zone["dbs"] as? Int == 1)
            // The laptop made the change: nothing went to its token.
            #expect(try await standIn.requests("apns").filter { $0["token"] as? String == laptop }.isEmpty)

            // The admin API shows the channel healthy, and never the key.
            let status = try await admin(server, .GET, "push")
            let development = try #require(status.body["apns-development"] as? [String: Any])
            #expect(development["healthy"] as? Bool == true && development["lastSuccess"] != nil, "\(status.text)")
            #expect(development["teamID"] as? String == Self.teamID && !status.text.contains("PRIVATE KEY"))
            #expect(status.body["apns-production"] is NSNull)
        }
    }

    @Test("an alert subscription sends a visible push (apns-push-type alert, priority 10) with its text")
    func apnsAlert() async throws {
        try await withPushServer { server, standIn in
            try await configureAPNs(server, standIn)
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice, info: ["alertBody": "Notes changed", "soundName": "default"])
            let phone = Self.deviceToken(7)
            #expect(try await register(server, user: alice, device: "phone", ["apnsToken": phone]).status == 200)
            try await save(server, "n1", user: alice, device: "laptop")
            let push = try #require(try await requests(standIn, "apns", token: phone).first)
            #expect(push["errors"] as? [String] == [], "\(push)")
            let headers = try #require(push["headers"] as? [String: String])
            #expect(headers["apns-push-type"] == "alert" && headers["apns-priority"] == "10")
            #expect(headers["apns-collapse-id"] == nil, "alerts are each shown")
            let aps = try #require((push["body"] as? [String: Any])?["aps"] as? [String: Any])
            #expect((aps["alert"] as? [String: Any])?["body"] as? String == "Notes changed")
            #expect(aps["sound"] as? String == "default")
        }
    }

    @Test("an unregistered token (410) and a bad one (400 BadDeviceToken) are deleted; a 503 burst is retried until it goes through")
    func apnsFeedback() async throws {
        try await withPushServer { server, standIn in
            try await configureAPNs(server, standIn)
            let (alice, aliceID) = try await server.signUp("alice")
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            let (gone, bad, busy) = (Self.deviceToken(10), Self.deviceToken(11), Self.deviceToken(12))
            for (token, device) in [(gone, "gone"), (bad, "bad"), (busy, "busy")] {
                #expect(try await register(server, user: alice, device: device, ["apnsToken": token]).status == 200)
            }
            // The credentials deliver first: an answer that the address is gone is then about the address.
            try await save(server, "n0", user: alice, device: "laptop")
            for token in [gone, bad, busy] { _ = try await requests(standIn, "apns", token: token) }
            try await standIn.script("apns", [
                ["status": 410, "reason": "Unregistered", "token": gone],
                ["status": 400, "reason": "BadDeviceToken", "token": bad],
                ["status": 503, "reason": "ServiceUnavailable", "token": busy, "times": 2],
            ])
            try await save(server, "n1", user: alice, device: "laptop")
            let retried = try await requests(standIn, "apns", token: busy, count: 4)
            #expect(retried.map { $0["status"] as? Int } == [200, 503, 503, 200])
            #expect(await eventually {
                let left = (try? await server.storage.pushEndpoints(
                    container: server.container, environment: .development, userRecordName: aliceID)) ?? []
                return left.map(\.address) == [busy]
            }, "the 410 and 400 tokens are forgotten")

            // The next change goes to the one token left.
            try await save(server, "n2", user: alice, device: "laptop")
            #expect(try await requests(standIn, "apns", token: busy, count: 5).count == 5)
            #expect(try await standIn.requests("apns").filter { $0["token"] as? String == gone }.count == 2)
            let metrics = try await server.request(
                .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(metrics.text.contains(#"stratus_device_pushes_total{channel="apns-development",outcome="gone",reason="Unregistered"} 1"#), "\(metrics.text)")
            #expect(metrics.text.contains(#"outcome="retry",reason="ServiceUnavailable"} 2"#))

            // The console shows the channel working, and each device left with its channel and last result.
            let session = try await ConsoleTests.signIn(server)
            let people = try await server.request(
                .GET, "/console/containers/\(server.container)/people", query: ["user": aliceID],
                headers: ["Cookie": session.cookie])
            #expect(people.text.contains("<td>busy</td><td>development</td><td>apns-development</td>"), "\(people.text)")
            #expect(people.text.contains("<td>delivered</td>"), "\(people.text)")
            #expect(!people.text.contains("<td>gone</td><td>development</td>"), "a deleted endpoint is not listed")
            let container = try await server.request(
                .GET, "/console/containers/\(server.container)", headers: ["Cookie": session.cookie])
            #expect(container.text.contains("<td>apns-development</td>") && container.text.contains("<td>working</td>"))
            #expect(!container.text.contains("PRIVATE KEY"))
        }
    }

    @Test("credentials APNs refuses (403 InvalidProviderToken) mark the channel unhealthy and stop its sends until the key changes")
    func apnsRefusedCredentials() async throws {
        try await withPushServer { server, standIn in
            try await configureAPNs(server, standIn, standInKnowsAnotherKey: true)
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            let phone = Self.deviceToken(20)
            #expect(try await register(server, user: alice, device: "phone", ["apnsToken": phone]).status == 200)
            try await save(server, "n1", user: alice, device: "laptop")
            let refused = try #require(try await requests(standIn, "apns", token: phone).first)
            #expect(refused["status"] as? Int == 403 && refused["reason"] as? String == "InvalidProviderToken", "\(refused)")
            var status = try await admin(server, .GET, "push")
            var development = try #require(status.body["apns-development"] as? [String: Any])
            #expect(development["healthy"] as? Bool == false && development["problem"] as? String == "InvalidProviderToken", "\(status.text)")
            let session = try await ConsoleTests.signIn(server)
            let page = try await server.request(
                .GET, "/console/containers/\(server.container)", headers: ["Cookie": session.cookie])
            #expect(page.text.contains("refused by the service: InvalidProviderToken"), "\(page.text)")
            let health = try await server.request(.GET, "/console/health", headers: ["Cookie": session.cookie])
            #expect(health.text.contains("1: see each container"), "\(health.text)")

            // Resting: the next two changes are dropped as refused like the first (once the metric
            // counts all three, nothing more can be on its way) and send nothing.
            try await save(server, "n2", user: alice, device: "laptop")
            try await save(server, "n3", user: alice, device: "laptop", zone: "Notes")
            #expect(await eventually(within: .seconds(30)) {
                let metrics = try? await server.request(
                    .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
                return metrics?.text.contains(
                    #"stratus_device_pushes_dropped_total{channel="apns-development",reason="refused-credentials"} 3"#) == true
            })
            #expect(try await standIn.requests("apns").count == 1)

            // A new key, which the service knows: healthy again, and pushes flow.
            try await configureAPNs(server, standIn)
            status = try await admin(server, .GET, "push")
            development = try #require(status.body["apns-development"] as? [String: Any])
            #expect(development["healthy"] as? Bool == true)
            try await save(server, "n4", user: alice, device: "laptop")
            let pushes = try await requests(standIn, "apns", token: phone, count: 2)
            #expect(pushes.last?["status"] as? Int == 200)
        }
    }

    @Test("1,000 devices of a user get their pushes over a bounded number of HTTP/2 connections")
    func apnsManyDevices() async throws {
        try await withPushServer(configure: { $0.pushServices.endpointsPerUser = 1_000 }) { server, standIn in
            try await configureAPNs(server, standIn)
            let alice = try await server.signUp("alice").token
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            for seed in 0..<1_000 {
                let reply = try await register(server, user: alice, device: "device-\(seed)", ["apnsToken": Self.deviceToken(1_000 + seed)])
                try #require(reply.status == 200, "\(reply.text)")
            }
            try await save(server, "n1", user: alice, device: "writer")
            var received: [[String: Any]] = []
            #expect(await eventually(within: .seconds(120)) {
                received = (try? await standIn.requests("apns")) ?? []
                return received.count >= 1_000
            }, "\(received.count) of 1,000 pushes arrived")
            #expect(received.allSatisfy { ($0["errors"] as? [String])?.isEmpty == true && $0["status"] as? Int == 200 })
            #expect(Set(received.compactMap { $0["token"] as? String }).count == 1_000)
            let connections = try await standIn.connections()["apns"] ?? 0
            #expect((1...4).contains(connections), "\(connections) connections")
        }
    }

    @Test("FCM: the service account's JWT is exchanged for an access token (cached), and a high-priority data message carries the ck dictionary")
    func fcm() async throws {
        try await withPushServer { server, standIn in
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let account: [String: Any] = [
                "type": "service_account", "project_id": "notes-demo", "private_key_id": "k1",
                "private_key": key.pkcs8PEMRepresentation, "client_email": "push@notes-demo.iam.gserviceaccount.com",
                "token_uri": standIn.fcmTokenURI,
            ]
            let set = try await admin(server, .PUT, "push/fcm", account)
            #expect(set.status == 200 && !set.text.contains("PRIVATE KEY"), "\(set.text)")
            try await standIn.configure(
                fcm: ("notes-demo", "push@notes-demo.iam.gserviceaccount.com", key.publicKey.pemRepresentation))
            let (alice, aliceID) = try await server.signUp("alice")
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            let token = "fcm-token-" + String(repeating: "x", count: 140)
            #expect(try await register(server, user: alice, device: "android", ["fcmToken": token]).status == 200)

            try await save(server, "n1", user: alice, device: "laptop")
            try await save(server, "n2", user: alice, device: "laptop")
            let sends = try await requests(standIn, "fcm", token: token, count: 2)
            for send in sends {
                #expect(send["errors"] as? [String] == [], "\(send)")
                #expect(send["status"] as? Int == 200)
            }
            let message = try #require((sends.first?["body"] as? [String: Any])?["message"] as? [String: Any])
            #expect((message["android"] as? [String: Any])?["priority"] as? String == "high")
            let ckText = try #require((message["data"] as? [String: String])?["ck"])
            let ck = try #require(try JSONSerialization.jsonObject(with: Data(ckText.utf8)) as? [String: Any])
            #expect(ck["ckuserid"] as? String == aliceID && (ck["fet"] as? [String: Any])?["sid"] as? String == "notes-Notes")
            let exchanges = try await standIn.requests("fcm").filter { $0["path"] as? String == "/token" }
            #expect(exchanges.count == 1, "the access token is reused")
            #expect(exchanges.allSatisfy { ($0["errors"] as? [String])?.isEmpty == true })
        }
    }

    @Test("Web Push: the body decrypts with the subscription's key (RFC 8291) and the VAPID JWT verifies (RFC 8292); foreign push services are refused")
    func webPush() async throws {
        try await withPushServer { server, standIn in
            let created = try await admin(server, .POST, "push/webpush", ["subject": "mailto:ops@example.com"])
            let publicKey = try #require((created.body["webpush"] as? [String: Any])?["publicKey"] as? String, "\(created.text)")
            let (alice, aliceID) = try await server.signUp("alice")
            // Web apps read the key from tokens/create.
            let token = try await server.request(
                .POST, "/device/1/\(server.container)/development/tokens/create", body: [:],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(token.body["webPushPublicKey"] as? String == publicKey)
            try await server.createZone("Notes", user: alice)
            try await subscribeToZone(server, user: alice)
            let subscription = try await standIn.makeWebPushSubscription()
            let registered = try await register(
                server, user: alice, device: "browser",
                ["webPushSubscription": ["endpoint": subscription.endpoint, "keys": ["p256dh": subscription.p256dh, "auth": subscription.auth]]])
            #expect(registered.status == 200, "\(registered.text)")

            try await save(server, "n1", user: alice, device: "laptop")
            let id = try #require(subscription.endpoint.split(separator: "/").last.map(String.init))
            let push = try #require(try await requests(standIn, "webpush", token: id).first)
            #expect(push["errors"] as? [String] == [], "\(push)")
            #expect(push["status"] as? Int == 201)
            let plaintext = try #require(push["plaintext"] as? [String: Any])
            #expect(plaintext["aps"] as? [String: Int] == ["content-available": 1])
            #expect((plaintext["ck"] as? [String: Any])?["ckuserid"] as? String == aliceID)
            let headers = try #require(push["headers"] as? [String: String])
            #expect(headers["ttl"] == "86400" && headers["content-encoding"] == "aes128gcm")

            // A subscription on a host that is not a known push service is refused, naming the rule.
            let foreign = try await register(
                server, user: alice, device: "browser",
                ["webPushSubscription": ["endpoint": "https://attacker.example/hook", "keys": ["p256dh": subscription.p256dh, "auth": subscription.auth]]])
            #expect(foreign.status == 400 && foreign.text.contains("posts only to the push services"), "\(foreign.text)")
        }
    }

    @Test("registrations and credentials are checked, naming the field and the rule; endpoints are the user's own")
    func validation() async throws {
        try await withPushServer { server, _ in
            let alice = try await server.signUp("alice").token
            for (body, fragment) in [
                (["apnsToken": "not-a-token"], "nor an APNs device token"),
                (["fcmToken": "has space"], "fcmToken must be"),
                (["apnsToken": Self.deviceToken(1), "fcmToken": "t"], "exactly one of"),
                (["webPushSubscription": ["endpoint": "https://127.0.0.1/x", "keys": ["p256dh": "AAAA", "auth": "AAAA"]]], "keys.p256dh"),
                (["webPushSubscription": ["endpoint": "http://127.0.0.1/x", "keys": ["p256dh": "AAAA", "auth": "AAAA"]]], "https URL"),
            ] as [([String: Any], String)] {
                let reply = try await register(server, user: alice, device: "d", body)
                #expect(reply.status == 400 || reply.status == 404, "\(reply.text)")
                #expect(reply.text.contains(fragment), "\(reply.text)")
            }
            let anonymous = try await server.request(
                .POST, "/device/1/\(server.container)/development/tokens/register", body: ["apnsToken": Self.deviceToken(1)],
                query: ["ckAPIToken": server.apiToken])
            #expect(anonymous.status == 421, "a device token is registered to a signed-in user only")

            for (path, body, fragment) in [
                ("push/apns/development", ["teamID": "short", "keyID": Self.keyID, "privateKey": "x", "topic": "a"], "teamID must be"),
                ("push/apns/development", ["teamID": Self.teamID, "keyID": Self.keyID, "privateKey": "x", "topic": "a"], "privateKey must be"),
                ("push/apns/staging", ["teamID": Self.teamID], "development or production"),
                ("push/fcm", ["type": "user"], "service_account"),
            ] as [(String, [String: Any], String)] {
                let reply = try await admin(server, .PUT, path, body)
                #expect(reply.status == 400 && reply.text.contains(fragment), "\(path): \(reply.text)")
            }
            let subject = try await admin(server, .POST, "push/webpush", ["subject": "ops@example.com"])
            #expect(subject.status == 400 && subject.text.contains("mailto:"), "\(subject.text)")
            let anonymousAdmin = try await server.request(.GET, "/admin/1/containers/\(server.container)/push")
            #expect(anonymousAdmin.status == 401)
        }
    }

    @Test(
        "two instances on one PostgreSQL database: each push goes out once, from the instance that handled the change",
        .enabled(if: TestServer.usesPostgres))
    func twoInstances() async throws {
        try await withPushServer { first, standIn in
            var configuration = first.configuration
            configuration.port = 0
            configuration.metrics = ServerMetrics()
            let second = try await TestServer.start(directory: first.directory, configuration: configuration)
            do {
                try await configureAPNs(first, standIn)
                let alice = try await first.signUp("alice").token
                try await first.createZone("Notes", user: alice)
                try await subscribeToZone(first, user: alice)
                let phone = Self.deviceToken(30)
                #expect(try await register(second, user: alice, device: "phone", ["apnsToken": phone]).status == 200)

                // Alternate the instance the changes go through; wait for each push before the next.
                for (index, server) in [first, second, first].enumerated() {
                    try await save(server, "n\(index)", user: alice, device: "laptop")
                    _ = try await requests(standIn, "apns", token: phone, count: index + 1)
                }
                func delivered(_ server: TestServer) async throws -> String {
                    let metrics = try await server.request(
                        .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
                    return metrics.text.split(separator: "\n").first {
                        $0.hasPrefix("stratus_device_pushes_total{") && $0.contains(#"outcome="delivered""#)
                    }.map { String($0.split(separator: " ").last ?? "") } ?? "0"
                }
                #expect(try await delivered(first) == "2")
                #expect(try await delivered(second) == "1")
                #expect(try await standIn.requests("apns").count == 3, "never twice")
            } catch {
                try? await second.stop()
                throw error
            }
            try await second.stop()
        }
    }
}
