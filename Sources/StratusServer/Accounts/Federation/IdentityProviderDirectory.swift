import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
package import StratusStorage
import Synchronization

/// The sign-in methods of every container (kept in the storage's settings, read again at most every
/// ``refreshMilliseconds``), and what the providers publish: OpenID Connect discovery documents and
/// key sets, fetched when first needed and kept.
///
/// A key set is fetched again after ``keySetLifetimeMilliseconds``, or when a token names a key it
/// lacks (a provider rotating its keys), such refreshes at most once per
/// ``keySetRefreshMilliseconds``: a stream of tokens with made-up `kid`s costs the provider one
/// request a minute, never one per token.
/// Concurrent needs of one document share one fetch.
package final class IdentityProviderDirectory: Sendable {
    private let storage: any SettingsStorage
    private let clock: ServerClock
    private let methods = Mutex<[String: (methods: SignInMethods, read: Int64)]>([:])
    private let documents = Mutex<[String: Document]>([:])
    /// When each key set was last fetched again for a token naming a key it lacked.
    private let refreshes = Mutex<[String: Int64]>([:])

    static let refreshMilliseconds: Int64 = 10_000
    static let keySetLifetimeMilliseconds: Int64 = 3_600_000
    static let keySetRefreshMilliseconds: Int64 = 60_000
    /// How long a document that could not be read is not asked for again.
    static let failureRestMilliseconds: Int64 = 15_000
    /// How far apart the provider's clock and this server's may be when times in a token are checked.
    static let clockSkewSeconds: Int64 = 60

    /// What is known of a document at a URL: the last good copy, the fetch under way, the last
    /// failure.
    private struct Document {
        var good: (value: JSONValue, fetched: Int64)?
        var pending: Task<JSONValue, any Error>?
        var failedAt: Int64?

        /// Notes how `task` ended (once: the first waiter to hear of it settles it).
        mutating func settle(_ task: Task<JSONValue, any Error>, with result: Result<JSONValue, any Error>, at now: Int64) {
            guard pending == task else { return }
            pending = nil
            switch result {
            case .success(let value):
                good = (value, now)
                failedAt = nil
            case .failure:
                failedAt = now
            }
        }
    }

    /// Every provider's documents, for the life of the process: a fetch gives up after 10 seconds.
    private static let http = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(10))))

    /// The sign-in methods kept in `storage`, read again by `clock`.
    package init(storage: any SettingsStorage, clock: ServerClock) {
        self.storage = storage
        self.clock = clock
    }

    /// The setting that keeps `container`'s sign-in methods.
    static func settingKey(_ container: String) -> String { "signin:\(container)" }

    // MARK: Sign-in methods

    /// `container`'s sign-in methods: passwords only until the operator configures others.
    package func methods(container: String) async throws -> SignInMethods {
        if let cached = methods.withLock({ $0[container] }), clock.milliseconds - cached.read < Self.refreshMilliseconds {
            return cached.methods
        }
        return try await read(container: container)
    }

    private func read(container: String) async throws -> SignInMethods {
        let now = clock.milliseconds
        let stored = try await storage.setting(Self.settingKey(container))
        let methods = try stored.map(SignInMethods.init(stored:)) ?? SignInMethods()
        self.methods.withLock { $0[container] = (methods, now) }
        return methods
    }

    /// Changes `container`'s sign-in methods as stored now.
    package func update(container: String, _ change: (inout SignInMethods) throws -> Void) async throws -> SignInMethods {
        var methods = try await read(container: container)
        try change(&methods)
        try await storage.setSetting(Self.settingKey(container), to: methods.storedJSON())
        self.methods.withLock { $0[container] = (methods, clock.milliseconds) }
        return methods
    }

    // MARK: Provider documents

    /// Where a provider signs users in, trades codes and publishes its keys.
    struct Endpoints: Sendable {
        var authorization: String
        var token: String
        var keys: String
    }

    /// `provider`'s endpoints: Apple's are fixed (its key set's URL may be a stand-in's); an OpenID
    /// Connect provider's come from its discovery document, whose `issuer` must be the one
    /// configured (OpenID Connect Discovery §4.3).
    func endpoints(of provider: IdentityProvider) async throws -> Endpoints {
        if provider.isApple {
            return Endpoints(
                authorization: IdentityProvider.appleIssuer + "/auth/authorize", token: IdentityProvider.appleIssuer + "/auth/token",
                keys: provider.keysURL ?? IdentityProvider.appleIssuer + "/auth/keys")
        }
        let base = provider.issuer.hasSuffix("/") ? String(provider.issuer.dropLast()) : provider.issuer
        let url = base + "/.well-known/openid-configuration"
        let document = try await fetch(url, maxAge: Self.keySetLifetimeMilliseconds).object()
        let issuer: String? = try? document.decode("issuer")
        guard issuer == provider.issuer else {
            throw Self.unavailable("\(url) names the issuer '\(issuer ?? "")', not '\(provider.issuer)'")
        }
        // The document is the provider's: it may point this server at loopback only when the
        // operator's issuer is there too.
        let loopback = URLComponents(string: provider.issuer)?.host.map(SignInMethods.isLoopback) ?? false
        do {
            return Endpoints(
                authorization: try SignInMethods.checkedURL(
                    document.decode("authorization_endpoint"), field: "authorization_endpoint", loopback: loopback),
                token: try SignInMethods.checkedURL(document.decode("token_endpoint"), field: "token_endpoint", loopback: loopback),
                keys: try SignInMethods.checkedURL(document.decode("jwks_uri"), field: "jwks_uri", loopback: loopback))
        } catch {
            throw Self.unavailable("\(url) is not a usable discovery document: \(error)")
        }
    }

    /// The signature keys at `url`; with `refreshing`, fetched again unless a refresh was made in
    /// the last ``keySetRefreshMilliseconds``. A failed refresh keeps the keys known.
    func keys(at url: String, refreshing: Bool) async throws -> [JSONWebKey] {
        var maxAge = Self.keySetLifetimeMilliseconds
        if refreshing {
            let now = clock.milliseconds
            let allowed = refreshes.withLock { refreshes in
                guard now - (refreshes[url] ?? .min / 2) >= Self.keySetRefreshMilliseconds else { return false }
                refreshes[url] = now
                return true
            }
            if allowed { maxAge = 0 }
        }
        do {
            return try JSONWebKey.keySet(from: try await fetch(url, maxAge: maxAge))
        } catch let error as StratusError {
            throw error
        } catch {
            throw Self.unavailable("\(url) is not a key set (JWKS): \(error)")
        }
    }

    /// The JSON at `url`: as fetched less than `maxAge` ago, else fetched now (concurrent needs
    /// share one fetch). A failed fetch answers the last good document when there is one, and is
    /// not tried again for ``failureRestMilliseconds``.
    private func fetch(_ url: String, maxAge: Int64) async throws -> JSONValue {
        let now = clock.milliseconds
        enum Next {
            case known(JSONValue)
            case failed
            case wait(Task<JSONValue, any Error>)
        }
        let next: Next = documents.withLock { documents in
            var entry = documents[url] ?? Document()
            defer { documents[url] = entry }
            if let good = entry.good, now - good.fetched < maxAge { return .known(good.value) }
            if let failed = entry.failedAt, now - failed < Self.failureRestMilliseconds {
                return entry.good.map { .known($0.value) } ?? .failed
            }
            if let task = entry.pending { return .wait(task) }
            let task = Task { try await Self.download(url) }
            entry.pending = task
            return .wait(task)
        }
        switch next {
        case .known(let value):
            return value
        case .failed:
            throw Self.unavailable("\(url) could not be read a moment ago; try again shortly")
        case .wait(let task):
            do {
                let value = try await task.value
                documents.withLock { $0[url, default: Document()].settle(task, with: .success(value), at: now) }
                return value
            } catch {
                let good = documents.withLock { documents in
                    documents[url, default: Document()].settle(task, with: .failure(error), at: now)
                    return documents[url]?.good?.value
                }
                if let good { return good }
                throw error
            }
        }
    }

    private static func download(_ url: String) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "accept", value: "application/json")
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .seconds(10))
        } catch {
            throw unavailable("\(url) could not be reached: \(error)")
        }
        guard response.status == .ok else { throw unavailable("\(url) answered \(response.status.code)") }
        do {
            return try JSONValue.parse(Array(buffer: try await response.body.collect(upTo: 256 << 10)))
        } catch {
            throw unavailable("\(url) did not answer JSON")
        }
    }

    /// A provider that cannot be consulted now: the sign-in may be tried again later.
    static func unavailable(_ reason: String) -> StratusError {
        StratusError(.tryAgainLater, "the identity provider cannot be consulted: \(reason)")
    }

    // MARK: Verification

    /// A token of `provider` whose signature is checked: its algorithm first (before anything
    /// else), then the key that signed it (refreshing the key set once when the token names a key
    /// it lacks), then the signature.
    private func signedToken(_ token: String, of provider: IdentityProvider) async throws -> IdentityToken {
        let parsed = try IdentityToken(compact: token)
        let url = try await endpoints(of: provider).keys
        var key = parsed.signingKey(in: try await keys(at: url, refreshing: false))
        if key == nil { key = parsed.signingKey(in: try await keys(at: url, refreshing: true)) }
        guard let key else {
            throw IdentityToken.refusal(
                "names the key '\(IdentityToken.quoted(parsed.keyID ?? ""))', which is not in \(provider.name)'s key set for \(parsed.algorithm)")
        }
        try parsed.verifySignature(with: key)
        return parsed
    }

    /// Checks an ID token of `provider`: its signature (``signedToken(_:of:)``), then `iss`,
    /// `aud`, the times, and the nonce: the token's must be ``IdentityProvider/expectedNonce(for:)``
    /// of `nonce`.
    func verify(_ token: String, of provider: IdentityProvider, nonce: String) async throws -> IdentityToken.Subject {
        let subject = try await signedToken(token, of: provider).verifyClaims(
            issuer: provider.issuer, audiences: Set(provider.clientIDs), now: clock.milliseconds,
            skewSeconds: Self.clockSkewSeconds)
        let expected = provider.expectedNonce(for: nonce)
        guard let claimed = subject.nonce,
            Secrets.constantTimeEquals(Array(claimed.utf8), Array(expected.utf8))
        else {
            throw IdentityToken.refusal(
                "carries a nonce that does not match the one sent"
                    + (provider.hashesNonce ? " (the token's must be the SHA-256 in hex of the value sent)" : ""))
        }
        return subject
    }

    /// One of Apple's server-to-server notifications, checked.
    struct AppleNotification: Sendable {
        /// Its `jti`, unique per notification.
        var id: String
        /// When Apple issued it (`iat`), in seconds since 1970.
        var issued: Int64
        /// The event: `type`, `sub`, `event_time` and, for the e-mail events, `email`.
        var event: JSONObject
    }

    /// One of Apple's server-to-server notifications (`{"payload": "<JWT>"}`), once its signature,
    /// `iss`, `aud` and `iat` (within a day) are checked.
    func verifyAppleNotification(_ payload: String, of provider: IdentityProvider) async throws -> AppleNotification {
        let token = try await signedToken(payload, of: provider)
        try token.verifyIssuer(provider.issuer, audiences: Set(provider.clientIDs))
        let seconds = clock.milliseconds / 1000
        guard let issued = try? token.claims.decode("iat", as: Int64.self),
            issued <= seconds + Self.clockSkewSeconds, issued > seconds - 86_400
        else { throw IdentityToken.refusal("was not issued within the last day (iat)") }
        guard let id = try? token.claims.decode("jti", as: String.self), (1...255).contains(id.utf8.count) else {
            throw IdentityToken.refusal("has no jti, which tells one notification from another")
        }
        guard let events = try? token.claims.decode("events", as: String.self),
            let event = try? JSONValue.parse(Array(events.utf8)).object()
        else { throw IdentityToken.refusal("has no events claim (a JSON object in a string)") }
        return AppleNotification(id: id, issued: issued, event: event)
    }

    /// Sends `request` to a provider (a code exchange) and reads its JSON answer, whatever the
    /// status: a refusal's answer says why (`error`, `error_description`).
    func post(_ request: HTTPClientRequest) async throws -> JSONValue {
        let response: HTTPClientResponse
        do {
            response = try await Self.http.execute(request, timeout: .seconds(10))
        } catch {
            throw Self.unavailable("\(request.url) could not be reached: \(error)")
        }
        guard let body = try? await response.body.collect(upTo: 256 << 10), let answer = try? JSONValue.parse(Array(buffer: body))
        else {
            throw Self.unavailable("\(request.url) answered \(response.status.code) without JSON")
        }
        return answer
    }
}
