import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import StratusStorage
import Synchronization

/// Firebase Cloud Messaging HTTP v1: `POST /v1/projects/{project}/messages:send` with an OAuth 2.0
/// access token that the service account's signed JWT (RS256, RFC 7523) is exchanged for at its
/// `token_uri`, cached until ``refreshMarginMilliseconds`` before it expires.
///
/// A notification goes as a high-priority data message whose `ck` member is the `ck` dictionary of
/// CloudKit's payload (as JSON text: data values are strings), which an Android app hands to the
/// sync engine; one with alert fields also carries a `notification` the system shows.
final class FCMClient: PushServiceClient {
    private let http: HTTPClient
    private let configuration: PushServiceConfiguration
    private let clock: ServerClock
    /// Access tokens by service account, with when they expire (milliseconds since 1970).
    private let tokens = Mutex<[String: (token: String, expiresAt: Int64)]>([:])

    /// How long before its expiry an access token is replaced.
    static let refreshMarginMilliseconds: Int64 = 5 * 60 * 1000
    /// The most bytes of data FCM takes in a message.
    static let maxDataBytes = 4000
    /// The scope that may send messages.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    init(http: HTTPClient, configuration: PushServiceConfiguration, clock: ServerClock) {
        self.http = http
        self.configuration = configuration
        self.clock = clock
    }

    func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        credentials: PushCredentials
    ) async -> PushOutcome {
        guard let fcm = credentials.fcm else { return .failed(reason: "unconfigured") }
        var outcome = await send(notification, userRecordName: userRecordName, to: endpoint, with: fcm)
        // An access token revoked before its time: obtain a new one and try once more.
        if case .refusedCredentials(reason: "UNAUTHENTICATED") = outcome {
            tokens.withLock { $0[fcm.clientEmail] = nil }
            outcome = await send(notification, userRecordName: userRecordName, to: endpoint, with: fcm)
        }
        return outcome
    }

    private func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        with fcm: PushCredentials.FCM
    ) async -> PushOutcome {
        let token: String
        switch await accessToken(fcm) {
        case .success(let value): token = value
        case .failure(let failure): return failure.outcome
        }
        var request = HTTPClientRequest(url: configuration.fcmURL + "/v1/projects/\(fcm.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "authorization", value: "Bearer " + token)
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(
            Self.message(
                PushPayload.fitting(notification, userRecordName: userRecordName, limit: Self.maxDataBytes),
                userRecordName: userRecordName, token: endpoint.address))
        return await PushHTTP.send(request, on: http) { answer in
            guard answer.status != 200 else { return .delivered }
            let (status, code) = Self.error(in: answer.body)
            let reason = code ?? status ?? "HTTP \(answer.status)"
            switch answer.status {
            // The app was uninstalled or the token expired; or the token is another project's.
            case 404 where code == "UNREGISTERED", 400 where code == "UNREGISTERED": return .gone(reason: reason)
            // Also what a service account of another project gives.
            case 404 where status == "NOT_FOUND", 403 where code == "SENDER_ID_MISMATCH":
                return .gone(reason: reason, certain: false)
            case 401: return .refusedCredentials(reason: "UNAUTHENTICATED")
            case 403: return .refusedCredentials(reason: reason)
            case 429, 500...599: return .retry(reason: reason, after: answer.retryAfter)
            default: return .failed(reason: reason)
            }
        }
    }

    /// The message: data carrying the `ck` dictionary, high priority on Android; and for an alert,
    /// the `notification` the system shows.
    static func message(_ notification: PushNotificationDictionary, userRecordName: String, token: String) -> ByteBuffer {
        let payload = ApplePushPayload(notification, userRecordName: userRecordName)
        var ck = JSONWriter()
        payload.writeCK(to: &ck)
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("message")
        writer.beginObject()
        writer.field("token", token)
        writer.key("data")
        writer.beginObject()
        writer.field("ck", String(decoding: ck.bytes, as: UTF8.self))
        writer.endObject()
        writer.key("android")
        writer.beginObject()
        writer.field("priority", "high")
        writer.endObject()
        if let info = notification.notificationInfo, !info.isSilent {
            writer.key("notification")
            writer.beginObject()
            writer.field("title", info.title)
            writer.field("body", info.alertBody)
            writer.endObject()
        }
        writer.endObject()
        writer.endObject()
        return ByteBuffer(bytes: writer.bytes)
    }

    /// Google's error body: `error.status` and the FCM error code in `error.details`.
    private static func error(in body: [UInt8]) -> (status: String?, code: String?) {
        guard let error = try? JSONValue.parse(body).object().decodeIfPresent("error", as: JSONValue.self)?.object()
        else { return (nil, nil) }
        let status: String? = try? error.decodeIfPresent("status")
        let details = (try? error.decodeIfPresent("details", as: [JSONValue].self)) ?? []
        let code = details.lazy.compactMap { try? $0.object().decodeIfPresent("errorCode", as: String.self) }.first
        return (status, code)
    }

    /// An access token for `fcm`'s service account: the cached one, or a new one from its
    /// `token_uri`.
    private func accessToken(_ fcm: PushCredentials.FCM) async -> Result<String, PushFailure> {
        let now = clock.milliseconds
        if let cached = tokens.withLock({ $0[fcm.clientEmail] }), cached.expiresAt - Self.refreshMarginMilliseconds > now {
            return .success(cached.token)
        }
        let assertion: String
        do {
            assertion = try JSONWebToken.sign(
                claims: { claims in
                    claims.field("iss", fcm.clientEmail)
                    claims.field("scope", Self.scope)
                    claims.field("aud", fcm.tokenURI)
                    claims.field("iat", now / 1000)
                    claims.field("exp", now / 1000 + 3600)
                }, with: .rs256(try fcm.signingKey()))
        } catch {
            return .failure(PushFailure(outcome: .refusedCredentials(reason: "the service account's key cannot sign: \(error)")))
        }
        var request = HTTPClientRequest(url: fcm.tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion))
        let answer: PushHTTP.Answer
        do {
            answer = try await PushHTTP.execute(request, on: http)
        } catch {
            return .failure(error)
        }
        switch answer.status {
        case 200:
            guard let object = try? JSONValue.parse(answer.body).object(),
                let token = try? object.decode("access_token", as: String.self)
            else {
                return .failure(PushFailure(outcome: .retry(reason: "the token endpoint answered no access_token", after: nil)))
            }
            let lifetime = (try? object.decodeIfPresent("expires_in", as: Int64.self)) ?? 3600
            tokens.withLock { $0[fcm.clientEmail] = (token, now + lifetime * 1000) }
            return .success(token)
        case 429, 500...599:
            return .failure(PushFailure(outcome: .retry(reason: "token endpoint: HTTP \(answer.status)", after: answer.retryAfter)))
        default:
            let reason = PushHTTP.string("error", in: answer.body) ?? "HTTP \(answer.status)"
            return .failure(PushFailure(outcome: .refusedCredentials(reason: "token endpoint: \(reason)")))
        }
    }
}
