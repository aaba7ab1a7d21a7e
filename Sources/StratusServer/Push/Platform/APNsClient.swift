import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import StratusStorage
import Synchronization

/// Apple's push service over HTTP/2 with token-based authentication: a provider JWT (ES256, `kid`
/// the key's ID, `iss` the team ID) signed once and reused for up to ``tokenLifetimeMilliseconds``
/// (Apple refuses tokens older than an hour and more than one new token per 20 minutes), and the
/// payload CloudKit sends, `{"aps": …, "ck": …}` (``ApplePushPayload``).
///
/// A silent notification goes as `apns-push-type: background` with priority 5 and a collapse ID per
/// subscription, so that the device keeps only the newest of each; one with alert fields
/// (`alertBody`, `soundName`, `shouldBadge`, …) as a visible `alert` push with priority 10.
final class APNsClient: PushServiceClient {
    private let http: HTTPClient
    private let configuration: PushServiceConfiguration
    private let clock: ServerClock
    /// Provider tokens by signing key (``tokenKey(_:)``), with when they were signed.
    private let tokens = Mutex<[String: (token: String, issuedAt: Int64)]>([:])

    /// How long a provider token is used before a new one is signed.
    static let tokenLifetimeMilliseconds: Int64 = 50 * 60 * 1000
    /// The largest payload APNs takes.
    static let maxPayloadBytes = 4096

    init(http: HTTPClient, configuration: PushServiceConfiguration, clock: ServerClock) {
        self.http = http
        self.configuration = configuration
        self.clock = clock
    }

    func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        credentials: PushCredentials
    ) async -> PushOutcome {
        let (apns, base) =
            endpoint.channel == .apnsDevelopment
            ? (credentials.apnsDevelopment, configuration.apnsDevelopmentURL)
            : (credentials.apnsProduction, configuration.apnsProductionURL)
        guard let apns else { return .failed(reason: "unconfigured") }
        var outcome = await send(notification, userRecordName: userRecordName, to: endpoint, with: apns, base: base)
        // Apple says the token is stale (a clock that jumped): sign a new one and try once more.
        if case .refusedCredentials(reason: "ExpiredProviderToken") = outcome {
            tokens.withLock { $0[Self.tokenKey(apns)] = nil }
            outcome = await send(notification, userRecordName: userRecordName, to: endpoint, with: apns, base: base)
        }
        return outcome
    }

    private func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        with apns: PushCredentials.APNs, base: String
    ) async -> PushOutcome {
        let token: String
        do {
            token = try providerToken(apns)
        } catch {
            return .refusedCredentials(reason: "the key cannot sign: \(error)")
        }
        let silent = notification.notificationInfo?.isSilent ?? true
        var request = HTTPClientRequest(url: base + "/3/device/" + endpoint.address)
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer " + token)
        request.headers.add(name: "apns-topic", value: apns.topic)
        request.headers.add(name: "apns-push-type", value: silent ? "background" : "alert")
        request.headers.add(name: "apns-priority", value: silent ? "5" : "10")
        if silent { request.headers.add(name: "apns-collapse-id", value: Self.collapseID(notification)) }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(
            ByteBuffer(
                bytes: ApplePushPayload(
                    PushPayload.fitting(notification, userRecordName: userRecordName, limit: Self.maxPayloadBytes),
                    userRecordName: userRecordName
                ).jsonBytes))
        return await PushHTTP.send(request, on: http) { answer in
            let reason = PushHTTP.string("reason", in: answer.body) ?? "HTTP \(answer.status)"
            switch answer.status {
            case 200: return .delivered
            // The app was removed from the device, or the token is not one of this app's.
            case 410: return .gone(reason: reason)
            // Also what a wrong topic or environment in the container's credentials gives.
            case 400 where ["BadDeviceToken", "DeviceTokenNotForTopic"].contains(reason):
                return .gone(reason: reason, certain: false)
            case 403
            where ["InvalidProviderToken", "MissingProviderToken", "ExpiredProviderToken", "BadCertificateEnvironment",
                "BadCertificate"].contains(reason):
                return .refusedCredentials(reason: reason)
            case 429, 500...599: return .retry(reason: reason, after: answer.retryAfter)
            default: return .failed(reason: reason)
            }
        }
    }

    /// The provider token of `apns`'s key: the one signed less than ``tokenLifetimeMilliseconds``
    /// ago, or a new one.
    private func providerToken(_ apns: PushCredentials.APNs) throws -> String {
        let now = clock.milliseconds
        let key = Self.tokenKey(apns)
        // Under the lock: sends that find the token stale together sign one new token, not one each
        // (Apple refuses frequent token updates).
        return try tokens.withLock { tokens in
            if let cached = tokens[key], now - cached.issuedAt < Self.tokenLifetimeMilliseconds { return cached.token }
            let token = try JSONWebToken.sign(
                claims: { claims in
                    claims.field("iss", apns.teamID)
                    claims.field("iat", now / 1000)
                }, keyID: apns.keyID, with: .es256(try apns.signingKey()))
            tokens[key] = (token, now)
            return token
        }
    }

    /// Which provider tokens a key signs: its team, ID and the key itself (an operator who fixes a
    /// wrongly pasted key keeps its ID).
    private static func tokenKey(_ apns: PushCredentials.APNs) -> String {
        [apns.teamID, apns.keyID, apns.privateKey].joined(separator: "\u{0}")
    }

    /// The subscription's collapse ID: its ID when that fits APNs' 64 bytes, else a digest of it.
    static func collapseID(_ notification: PushNotificationDictionary) -> String {
        let id = notification.databaseScope.rawValue + ":" + notification.subscriptionID
        guard id.utf8.count > 64 else { return id }
        return SHA256.hash(data: Data(id.utf8)).prefix(32).map { String(format: "%02x", $0) }.joined()
    }
}
