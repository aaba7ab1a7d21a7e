import AsyncHTTPClient
package import Foundation
import NIOCore
import NIOHTTP1
package import StratusServer
import StratusProcess
import Testing

/// Apple's push service, Firebase Cloud Messaging and a Web Push service on loopback:
/// `scripts/push-standin.py`, which verifies each request as the real service does (the provider
/// JWT's signature, headers, payloads; the OAuth exchange; VAPID and the `aes128gcm` body, which it
/// decrypts) and records it. Tests read what arrived through its control port.
package final class PushServiceStandIn: Sendable {
    private let standIn: StandInProcess
    /// The ports of the three services (TLS, HTTP/2) and of the control API (plain HTTP).
    package let apnsPort: Int
    package let fcmPort: Int
    package let webPushPort: Int
    private let controlPort: Int
    /// The PEM file of the CA that signed the services' certificate.
    package let certificateAuthorityFile: String

    /// The server configuration's ``PushServiceConfiguration`` for these services: APNs (both
    /// environments), FCM and Web Push on loopback, their CA trusted, retries 20 ms apart.
    package var serviceConfiguration: PushServiceConfiguration {
        PushServiceConfiguration(
            apnsDevelopmentURL: "https://127.0.0.1:\(apnsPort)", apnsProductionURL: "https://127.0.0.1:\(apnsPort)",
            fcmURL: "https://127.0.0.1:\(fcmPort)", trustedCertificatesFile: certificateAuthorityFile,
            webPushHosts: ["127.0.0.1"], retryDelay: .milliseconds(20))
    }

    /// The token URI of the FCM stand-in's OAuth endpoint.
    package var fcmTokenURI: String { "https://127.0.0.1:\(fcmPort)/token" }

    /// Starts the stand-in; it ends with ``stop()``.
    package static func start() async throws -> PushServiceStandIn {
        let (standIn, ports) = try await StandInProcess.start(
            script: "push-standin.py", arguments: ["--state-dir", "{state}"], needs: "pip's h2 and cryptography")
        guard let apns = ports["apns"] as? Int, let fcm = ports["fcm"] as? Int, let webPush = ports["webpush"] as? Int,
            let control = ports["control"] as? Int, let ca = ports["ca"] as? String
        else {
            standIn.stop(signal: SIGKILL)
            throw StandInError("scripts/push-standin.py named no ports: \(ports)")
        }
        return PushServiceStandIn(
            standIn: standIn, apnsPort: apns, fcmPort: fcm, webPushPort: webPush, controlPort: control,
            certificateAuthorityFile: ca)
    }

    private init(
        standIn: StandInProcess, apnsPort: Int, fcmPort: Int, webPushPort: Int, controlPort: Int,
        certificateAuthorityFile: String
    ) {
        self.standIn = standIn
        self.apnsPort = apnsPort
        self.fcmPort = fcmPort
        self.webPushPort = webPushPort
        self.controlPort = controlPort
        self.certificateAuthorityFile = certificateAuthorityFile
    }

    /// Ends the stand-in.
    package func stop() {
        standIn.stop()
    }

    // MARK: Control

    /// The keys the services check requests against: APNs' team, key ID, the key's public half and
    /// the topic; FCM's project, service account and its public key.
    package func configure(
        apns: (teamID: String, keyID: String, publicKeyPEM: String, topic: String)? = nil,
        fcm: (projectID: String, clientEmail: String, publicKeyPEM: String)? = nil
    ) async throws {
        var body: [String: Any] = [:]
        if let apns {
            body["apns"] = ["teamID": apns.teamID, "keyID": apns.keyID, "publicKeyPEM": apns.publicKeyPEM, "topic": apns.topic]
        }
        if let fcm {
            body["fcm"] = ["projectID": fcm.projectID, "clientEmail": fcm.clientEmail, "publicKeyPEM": fcm.publicKeyPEM]
        }
        _ = try await control(.POST, "/configure", body)
    }

    /// A new Web Push subscription, as a browser makes one: its endpoint and keys.
    package func makeWebPushSubscription() async throws -> (endpoint: String, p256dh: String, auth: String) {
        let reply = try await control(.POST, "/webpush/subscriptions", [:])
        return (
            try #require(reply["endpoint"] as? String), try #require(reply["p256dh"] as? String),
            try #require(reply["auth"] as? String)
        )
    }

    /// Answers the next requests of `service` (`apns`, `fcm`, `webpush`) with `responses` (each
    /// `status`, and optionally `reason`, `token`, `times`, `retryAfter`).
    package func script(_ service: String, _ responses: [[String: Any]]) async throws {
        _ = try await control(.POST, "/script", ["service": service, "responses": responses])
    }

    /// The requests `service` received, oldest first: `token`, `headers`, `body`, `plaintext`,
    /// `errors` (every check that failed), `status`, `connection`.
    package func requests(_ service: String) async throws -> [[String: Any]] {
        try #require(try await control(.GET, "/requests?service=\(service)")["requests"] as? [[String: Any]])
    }

    /// How many connections each service accepted.
    package func connections() async throws -> [String: Int] {
        try await control(.GET, "/connections").compactMapValues { $0 as? Int }
    }

    private func control(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(controlPort)\(path)")
        request.method = method
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        guard response.status == .ok else {
            throw StandInError("the stand-in answered \(path) with \(response.status): \(String(buffer: bytes))")
        }
        return (try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
    }
}
