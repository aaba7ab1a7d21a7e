import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import StratusStorage
import Synchronization

/// Web Push (RFC 8030): CloudKit's payload, `{"aps": …, "ck": …}`, encrypted to the subscription's
/// key (RFC 8291, `aes128gcm`) and posted to its endpoint with the container's VAPID authorization
/// (RFC 8292), which a service worker decrypts and hands to the app.
final class WebPushClient: PushServiceClient {
    private let http: HTTPClient
    private let clock: ServerClock
    /// VAPID tokens by key and push service origin, with when they expire (milliseconds since 1970).
    private let tokens = Mutex<[String: (token: String, expiresAt: Int64)]>([:])

    /// How long a push service keeps a message for a device that is offline, in seconds.
    static let timeToLiveSeconds = 24 * 3600
    /// How long a VAPID token is valid (RFC 8292 allows at most 24 hours).
    static let tokenLifetimeSeconds: Int64 = 12 * 3600

    init(http: HTTPClient, clock: ServerClock) {
        self.http = http
        self.clock = clock
    }

    func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        credentials: PushCredentials
    ) async -> PushOutcome {
        guard let webPush = credentials.webPush else { return .failed(reason: "unconfigured") }
        guard let url = URLComponents(string: endpoint.address), let scheme = url.scheme, let host = url.host else {
            return .gone(reason: "the endpoint is not a URL")
        }
        let origin = scheme + "://" + host + (url.port.map { ":\($0)" } ?? "")
        let body: [UInt8]
        let authorization: String
        do {
            let key = try webPush.signingKey()
            authorization = try vapidAuthorization(origin: origin, subject: webPush.subject, key: key)
        } catch {
            return .refusedCredentials(reason: "the VAPID key cannot sign: \(error)")
        }
        do {
            let fitting = PushPayload.fitting(
                notification, userRecordName: userRecordName, limit: WebPushEncryption.maxPlaintextBytes)
            body = try WebPushEncryption.encrypt(
                ApplePushPayload(fitting, userRecordName: userRecordName).jsonBytes,
                userAgentPublicKey: endpoint.publicKey ?? "", authSecret: endpoint.authSecret ?? "")
        } catch {
            return .gone(reason: "the subscription's keys are unusable: \(error)")
        }
        var request = HTTPClientRequest(url: endpoint.address)
        request.method = .POST
        request.headers.add(name: "authorization", value: authorization)
        request.headers.add(name: "content-encoding", value: "aes128gcm")
        request.headers.add(name: "content-type", value: "application/octet-stream")
        request.headers.add(name: "ttl", value: String(Self.timeToLiveSeconds))
        let silent = notification.notificationInfo?.isSilent ?? true
        request.headers.add(name: "urgency", value: silent ? "normal" : "high")
        if silent { request.headers.add(name: "topic", value: Self.topic(notification)) }
        request.body = .bytes(ByteBuffer(bytes: body))
        return await PushHTTP.send(request, on: http) { answer in
            let reason = "HTTP \(answer.status)"
            switch answer.status {
            case 200...299: return .delivered
            // The subscription ended.
            case 404, 410: return .gone(reason: reason)
            // Made for another VAPID key (the container's was replaced), or the container's key refused.
            case 401, 403: return .gone(reason: reason, certain: false)
            case 429, 500...599: return .retry(reason: reason, after: answer.retryAfter)
            default: return .failed(reason: reason)
            }
        }
    }

    /// `vapid t=<JWT>, k=<public key>` for the push service at `origin` (RFC 8292 §3): the token
    /// signed less than half its lifetime ago, or a new one.
    private func vapidAuthorization(origin: String, subject: String, key: P256.Signing.PrivateKey) throws -> String {
        let now = clock.milliseconds
        let publicKey = Base64URL.encode(key.publicKey.x963Representation)
        let cacheKey = publicKey + " " + origin
        if let cached = tokens.withLock({ $0[cacheKey] }), cached.expiresAt - Self.tokenLifetimeSeconds * 500 > now {
            return "vapid t=\(cached.token), k=\(publicKey)"
        }
        let expiry = now / 1000 + Self.tokenLifetimeSeconds
        let token = try JSONWebToken.sign(
            claims: { claims in
                claims.field("aud", origin)
                claims.field("exp", expiry)
                claims.field("sub", subject)
            }, with: .es256(key))
        tokens.withLock { $0[cacheKey] = (token, expiry * 1000) }
        return "vapid t=\(token), k=\(publicKey)"
    }

    /// The `Topic` that makes a push service keep only the newest silent message per subscription:
    /// at most 32 base64url characters (RFC 8030 §5.4).
    static func topic(_ notification: PushNotificationDictionary) -> String {
        let id = notification.databaseScope.rawValue + ":" + notification.subscriptionID
        return String(Base64URL.encode(SHA256.hash(data: Data(id.utf8))).prefix(32))
    }
}

/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content coding (RFC 8188), as a
/// single record.
enum WebPushEncryption {
    enum Failure: Error, CustomStringConvertible {
        case badKey(String)

        var description: String {
            switch self {
            case .badKey(let what): what
            }
        }
    }

    /// The record size written in the header: the one record holds the whole payload.
    static let recordSize: UInt32 = 4096
    /// The most plaintext one record holds, and the body stays within the 4,096 bytes push services
    /// take: the header (86 bytes), the delimiter and the tag come on top.
    static let maxPlaintextBytes = 4096 - 86 - 1 - 16

    /// `plaintext` encrypted to the subscription's `p256dh` key and `auth` secret (base64url): the
    /// header (salt, record size, the sender's ephemeral public key) and the one record.
    static func encrypt(
        _ plaintext: [UInt8], userAgentPublicKey: String, authSecret: String,
        ephemeralKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(),
        salt: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    ) throws -> [UInt8] {
        guard let userAgentKey = Base64URL.decode(userAgentPublicKey), userAgentKey.count == 65 else {
            throw Failure.badKey("keys.p256dh must be an uncompressed P-256 point (65 bytes) in base64url")
        }
        guard let auth = Base64URL.decode(authSecret), auth.count == 16 else {
            throw Failure.badKey("keys.auth must be 16 bytes in base64url")
        }
        let userAgent: P256.KeyAgreement.PublicKey
        do {
            userAgent = try P256.KeyAgreement.PublicKey(x963Representation: userAgentKey)
        } catch {
            throw Failure.badKey("keys.p256dh is not a point of P-256")
        }
        let shared = try ephemeralKey.sharedSecretFromKeyAgreement(with: userAgent)
        let senderKey = ephemeralKey.publicKey.x963Representation
        // RFC 8291 §3.3: the input keying material from the shared secret and the auth secret.
        let keyInfo = Data("WebPush: info".utf8) + [0] + userAgentKey + senderKey
        let inputKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: shared.withUnsafeBytes { Data($0) }), salt: auth, info: keyInfo,
            outputByteCount: 32)
        // RFC 8188 §2.2–2.3: the content encryption key and nonce from the salt.
        let contentKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: inputKey, salt: salt, info: Data("Content-Encoding: aes128gcm".utf8) + [0],
            outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: inputKey, salt: salt, info: Data("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        // The last (and only) record ends with the delimiter 2.
        let sealed = try AES.GCM.seal(
            plaintext + [2], using: contentKey, nonce: try AES.GCM.Nonce(data: nonce.withUnsafeBytes { Data($0) }))
        var body = salt
        withUnsafeBytes(of: recordSize.bigEndian) { body += $0 }
        body.append(UInt8(senderKey.count))
        body += senderKey
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }
}
