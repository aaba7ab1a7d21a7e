import Crypto
import Foundation
package import StratusModel
package import StratusStorage
import Synchronization
import _CryptoExtras

/// What a container sends device pushes with, set by the operator through the admin API: an APNs
/// token-signing key per environment, an FCM service account, and a VAPID key pair for Web Push.
/// Private keys go in and are never shown again: ``summary(to:health:)`` writes everything else.
package struct PushCredentials: Sendable, Equatable {
    /// An APNs token-signing key (a `.p8` file from the Apple developer account) and the app it
    /// pushes to.
    package struct APNs: Sendable, Equatable {
        var teamID: String
        var keyID: String
        /// The `.p8` file's text: a PKCS #8 P-256 private key in PEM.
        var privateKey: String
        /// The app's bundle ID (`apns-topic`).
        var topic: String
        var updatedAt: Int64

        func signingKey() throws -> P256.Signing.PrivateKey {
            try P256.Signing.PrivateKey(pemRepresentation: privateKey)
        }
    }

    /// A Google service account allowed to send through FCM HTTP v1, as its JSON key file gives it.
    package struct FCM: Sendable, Equatable {
        var projectID: String
        var clientEmail: String
        /// The service account's RSA private key in PEM.
        var privateKey: String
        /// Where access tokens are obtained (`token_uri`).
        var tokenURI: String
        var updatedAt: Int64

        func signingKey() throws -> _RSA.Signing.PrivateKey {
            try _RSA.Signing.PrivateKey(pemRepresentation: privateKey)
        }
    }

    /// The container's VAPID key pair (RFC 8292): web apps subscribe with its public key.
    package struct WebPush: Sendable, Equatable {
        /// The P-256 private key, raw 32 bytes in base64url.
        var privateKey: String
        /// Who the push services may contact: a `mailto:` or `https:` URL.
        var subject: String
        var updatedAt: Int64

        func signingKey() throws -> P256.Signing.PrivateKey {
            guard let raw = Base64URL.decode(privateKey) else {
                throw StratusError(.internalError, "the stored VAPID key is not base64url")
            }
            return try P256.Signing.PrivateKey(rawRepresentation: raw)
        }

        /// The public key as web apps pass it to `PushManager.subscribe` (`applicationServerKey`):
        /// the uncompressed point in base64url.
        package var publicKey: String {
            (try? signingKey()).map { Base64URL.encode($0.publicKey.x963Representation) } ?? ""
        }
    }

    package var apnsDevelopment: APNs?
    package var apnsProduction: APNs?
    package var fcm: FCM?
    package var webPush: WebPush?

    var isEmpty: Bool { apnsDevelopment == nil && apnsProduction == nil && fcm == nil && webPush == nil }

    /// Whether pushes of `channel` can be sent.
    func configures(_ channel: PushEndpointInfo.Channel) -> Bool { updatedAt(channel) != nil }

    /// When `channel`'s credentials were set; `nil` when they are not.
    func updatedAt(_ channel: PushEndpointInfo.Channel) -> Int64? {
        switch channel {
        case .apnsDevelopment: apnsDevelopment?.updatedAt
        case .apnsProduction: apnsProduction?.updatedAt
        case .fcm: fcm?.updatedAt
        case .webPush: webPush?.updatedAt
        }
    }

    /// Whether `channel`'s credentials are the same in `other`.
    func hasSameCredentials(for channel: PushEndpointInfo.Channel, as other: PushCredentials) -> Bool {
        switch channel {
        case .apnsDevelopment: apnsDevelopment == other.apnsDevelopment
        case .apnsProduction: apnsProduction == other.apnsProduction
        case .fcm: fcm == other.fcm
        case .webPush: webPush == other.webPush
        }
    }

    /// Removes `channel`'s credentials.
    package mutating func remove(_ channel: PushEndpointInfo.Channel) {
        switch channel {
        case .apnsDevelopment: apnsDevelopment = nil
        case .apnsProduction: apnsProduction = nil
        case .fcm: fcm = nil
        case .webPush: webPush = nil
        }
    }

    // MARK: What the operator sends

    /// APNs credentials from `PUT …/push/apns/{environment}`: `teamID`, `keyID` (ten letters or
    /// digits each, as Apple issues them), `privateKey` (the `.p8` file's text) and `topic` (the
    /// bundle ID).
    package static func apns(json: JSONValue, at now: Int64) throws -> APNs {
        let object = try json.object()
        let credentials = APNs(
            teamID: try object.decode("teamID"), keyID: try object.decode("keyID"),
            privateKey: try object.decode("privateKey"), topic: try object.decode("topic"), updatedAt: now)
        for (field, value) in [("teamID", credentials.teamID), ("keyID", credentials.keyID)] {
            guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw StratusError.badRequest("\(field) must be the ten letters and digits Apple issued, not '\(value)'")
            }
        }
        guard (1...255).contains(credentials.topic.utf8.count), !credentials.topic.contains(where: \.isWhitespace) else {
            throw StratusError.badRequest("topic must be the app's bundle ID (1 to 255 characters, no spaces)")
        }
        do {
            _ = try credentials.signingKey()
        } catch {
            throw StratusError.badRequest(
                "privateKey must be the text of the .p8 key file (a P-256 private key, -----BEGIN PRIVATE KEY-----)")
        }
        return credentials
    }

    /// FCM credentials from `PUT …/push/fcm`: the service account's JSON key file as Google
    /// gives it (`type` `service_account`, `project_id`, `client_email`, `private_key`, and
    /// `token_uri`, Google's by default).
    package static func fcm(json: JSONValue, at now: Int64) throws -> FCM {
        let object = try json.object()
        let type: String = try object.decode("type")
        guard type == "service_account" else {
            throw StratusError.badRequest("type must be 'service_account' (the JSON key file of a Google service account)")
        }
        let credentials = FCM(
            projectID: try object.decode("project_id"), clientEmail: try object.decode("client_email"),
            privateKey: try object.decode("private_key"),
            tokenURI: try object.decodeIfPresent("token_uri") ?? "https://oauth2.googleapis.com/token", updatedAt: now)
        guard !credentials.projectID.isEmpty, credentials.projectID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
        else {
            throw StratusError.badRequest("project_id must be a Firebase project ID (letters, digits and hyphens)")
        }
        guard credentials.clientEmail.contains("@") else {
            throw StratusError.badRequest("client_email must be the service account's e-mail address")
        }
        guard URLComponents(string: credentials.tokenURI)?.scheme == "https" else {
            throw StratusError.badRequest("token_uri must be an https URL")
        }
        do {
            _ = try credentials.signingKey()
        } catch {
            throw StratusError.badRequest("private_key must be the service account's RSA private key in PEM")
        }
        return credentials
    }

    /// A new VAPID key pair for `POST …/push/webpush`, with its `subject`.
    package static func webPush(json: JSONValue, at now: Int64) throws -> WebPush {
        let subject: String = try json.object().decode("subject")
        guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://"), subject.utf8.count <= 255 else {
            throw StratusError.badRequest(
                "subject must be a mailto: or https: URL the push services can reach the operator at (RFC 8292 §2.1)")
        }
        return WebPush(
            privateKey: Base64URL.encode(P256.Signing.PrivateKey().rawRepresentation), subject: subject, updatedAt: now)
    }

    // MARK: Stored form

    /// The stored form of `channel`'s credentials, every key as the operator gave it; `nil` when
    /// the channel has none.
    func storedJSON(of channel: PushEndpointInfo.Channel) -> String? {
        var writer = JSONWriter()
        writer.beginObject()
        switch channel {
        case .apnsDevelopment, .apnsProduction:
            guard let apns = channel == .apnsDevelopment ? apnsDevelopment : apnsProduction else { return nil }
            writer.field("teamID", apns.teamID)
            writer.field("keyID", apns.keyID)
            writer.field("privateKey", apns.privateKey)
            writer.field("topic", apns.topic)
            writer.field("updated", apns.updatedAt)
        case .fcm:
            guard let fcm else { return nil }
            writer.field("projectID", fcm.projectID)
            writer.field("clientEmail", fcm.clientEmail)
            writer.field("privateKey", fcm.privateKey)
            writer.field("tokenURI", fcm.tokenURI)
            writer.field("updated", fcm.updatedAt)
        case .webPush:
            guard let webPush else { return nil }
            writer.field("privateKey", webPush.privateKey)
            writer.field("subject", webPush.subject)
            writer.field("updated", webPush.updatedAt)
        }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    init() {}

    /// Reads the stored form of each channel's credentials.
    init(stored: [PushEndpointInfo.Channel: String]) throws {
        for (channel, text) in stored {
            let object = try JSONValue.parse(Array(text.utf8)).object()
            switch channel {
            case .apnsDevelopment, .apnsProduction:
                let apns = APNs(
                    teamID: try object.decode("teamID"), keyID: try object.decode("keyID"),
                    privateKey: try object.decode("privateKey"), topic: try object.decode("topic"),
                    updatedAt: try object.decode("updated"))
                if channel == .apnsDevelopment { apnsDevelopment = apns } else { apnsProduction = apns }
            case .fcm:
                fcm = FCM(
                    projectID: try object.decode("projectID"), clientEmail: try object.decode("clientEmail"),
                    privateKey: try object.decode("privateKey"), tokenURI: try object.decode("tokenURI"),
                    updatedAt: try object.decode("updated"))
            case .webPush:
                webPush = WebPush(
                    privateKey: try object.decode("privateKey"), subject: try object.decode("subject"),
                    updatedAt: try object.decode("updated"))
            }
        }
    }

    // MARK: What the admin API shows

    /// Everything but the private keys, with each channel's health on this instance.
    package func summary(to writer: inout JSONWriter, health: [PushEndpointInfo.Channel: PushChannelHealth]) {
        writer.beginObject()
        for channel in PushEndpointInfo.Channel.allCases {
            writer.key(channel.rawValue)
            guard let updated = updatedAt(channel) else {
                writer.null()
                continue
            }
            writer.beginObject()
            switch channel {
            case .apnsDevelopment, .apnsProduction:
                let apns = channel == .apnsDevelopment ? apnsDevelopment! : apnsProduction!
                writer.field("teamID", apns.teamID)
                writer.field("keyID", apns.keyID)
                writer.field("topic", apns.topic)
            case .fcm:
                writer.field("projectID", fcm!.projectID)
                writer.field("clientEmail", fcm!.clientEmail)
            case .webPush:
                writer.field("publicKey", webPush!.publicKey)
                writer.field("subject", webPush!.subject)
            }
            writer.field("updated", updated)
            let health = health[channel] ?? PushChannelHealth()
            writer.field("healthy", health.problem == nil)
            writer.field("problem", health.problem)
            writer.field("lastSuccess", health.lastSuccess)
            writer.field("lastFailure", health.lastFailure)
            writer.endObject()
        }
        writer.endObject()
    }
}

/// How a container's push channel fares on this instance.
package struct PushChannelHealth: Sendable, Equatable {
    /// Why sends stopped: the service refused the credentials. `nil` while they work.
    var problem: String?
    /// When the problem was seen, in milliseconds since 1970.
    var problemAt: Int64?
    /// When a push last went through, in milliseconds since 1970.
    var lastSuccess: Int64?
    /// When a push last failed for any reason, in milliseconds since 1970.
    var lastFailure: Int64?
}

/// The push credentials of every container, kept in the storage's settings (a setting per channel,
/// so that instances changing different channels at once keep both changes) and read again at
/// most every ``refreshMilliseconds`` (a change reaches every instance within that time, this one
/// at once), and how each channel fares here.
package final class PushCredentialStore: Sendable {
    private let storage: any SettingsStorage
    private let clock: ServerClock
    private let cache = Mutex<[String: (credentials: PushCredentials, read: Int64)]>([:])
    private let health = Mutex<[String: [PushEndpointInfo.Channel: PushChannelHealth]]>([:])

    /// How long credentials read are used before they are read again.
    static let refreshMilliseconds: Int64 = 10_000
    /// How long a channel whose credentials were refused rests before it is tried again, when the
    /// operator changes nothing.
    static let unhealthyRestMilliseconds: Int64 = 300_000

    package init(storage: any SettingsStorage, clock: ServerClock) {
        self.storage = storage
        self.clock = clock
    }

    private static func settingKey(_ container: String, _ channel: PushEndpointInfo.Channel) -> String {
        "push:\(container):\(channel.rawValue)"
    }

    /// `container`'s credentials; empty when it has none.
    package func credentials(container: String) async throws -> PushCredentials {
        if let cached = cache.withLock({ $0[container] }), clock.milliseconds - cached.read < Self.refreshMilliseconds {
            return cached.credentials
        }
        return try await read(container: container)
    }

    /// `container`'s credentials as stored now.
    private func read(container: String) async throws -> PushCredentials {
        let now = clock.milliseconds
        var stored: [PushEndpointInfo.Channel: String] = [:]
        for channel in PushEndpointInfo.Channel.allCases {
            if let text = try await storage.setting(Self.settingKey(container, channel)), !text.isEmpty { stored[channel] = text }
        }
        let credentials = try PushCredentials(stored: stored)
        cache.withLock { $0[container] = (credentials, now) }
        return credentials
    }

    /// Changes `container`'s credentials, as stored now (not as cached: another instance may have
    /// changed another channel's), writing only the channels that change; a channel whose
    /// credentials change is healthy again.
    package func update(container: String, _ change: (inout PushCredentials) throws -> Void) async throws -> PushCredentials {
        var credentials = try await read(container: container)
        let before = credentials
        try change(&credentials)
        for channel in PushEndpointInfo.Channel.allCases where !before.hasSameCredentials(for: channel, as: credentials) {
            try await storage.setSetting(Self.settingKey(container, channel), to: credentials.storedJSON(of: channel) ?? "")
        }
        cache.withLock { $0[container] = (credentials, clock.milliseconds) }
        health.withLock { health in
            for channel in PushEndpointInfo.Channel.allCases where !before.hasSameCredentials(for: channel, as: credentials) {
                health[container]?[channel] = nil
            }
        }
        return credentials
    }

    // MARK: Health

    /// How each of `container`'s channels fares here.
    package func health(container: String) -> [PushEndpointInfo.Channel: PushChannelHealth] {
        health.withLock { $0[container] ?? [:] }
    }

    /// Whether pushes of `channel` may be sent with `credentials`: not while the service refuses
    /// them, until they change (here or on another instance) or ``unhealthyRestMilliseconds`` pass.
    func maySend(container: String, channel: PushEndpointInfo.Channel, with credentials: PushCredentials) -> Bool {
        let now = clock.milliseconds
        return health.withLock { health in
            guard let at = health[container]?[channel]?.problemAt else { return true }
            return now - at >= Self.unhealthyRestMilliseconds || (credentials.updatedAt(channel) ?? 0) > at
        }
    }

    /// Whether `credentials` of `channel` delivered a push here since they were set: then an
    /// answer that the address is gone is about the address, not about the credentials.
    func haveDelivered(container: String, channel: PushEndpointInfo.Channel, with credentials: PushCredentials) -> Bool {
        health.withLock { health in
            guard let success = health[container]?[channel]?.lastSuccess else { return false }
            return success >= (credentials.updatedAt(channel) ?? 0)
        }
    }

    /// Notes a push that went through.
    func succeeded(container: String, channel: PushEndpointInfo.Channel) {
        let now = clock.milliseconds
        health.withLock { health in
            var entry = health[container]?[channel] ?? PushChannelHealth()
            entry.problem = nil
            entry.problemAt = nil
            entry.lastSuccess = now
            health[container, default: [:]][channel] = entry
        }
    }

    /// Notes a push that failed; with `problem`, the service refused the credentials, and the
    /// channel rests.
    func failed(container: String, channel: PushEndpointInfo.Channel, problem: String? = nil) {
        let now = clock.milliseconds
        health.withLock { health in
            var entry = health[container]?[channel] ?? PushChannelHealth()
            entry.lastFailure = now
            if let problem {
                entry.problem = problem
                entry.problemAt = now
            }
            health[container, default: [:]][channel] = entry
        }
    }

    /// How many of the channels with credentials are refused by their service here, over every
    /// container (for `/metrics`).
    var unhealthyChannels: Int {
        health.withLock { $0.values.reduce(0) { $0 + $1.values.count(where: { $0.problem != nil }) } }
    }
}
