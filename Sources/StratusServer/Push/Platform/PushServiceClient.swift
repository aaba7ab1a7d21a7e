import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import StratusModel
import StratusStorage

/// How a push service answered one push.
enum PushOutcome: Sendable, Equatable {
    /// The service took it.
    case delivered
    /// The address is no longer valid (the app was removed, the subscription ended): forget it.
    /// `certain` is false for answers that a mistake in the container's credentials also gives (a
    /// wrong topic, project or environment): those forget the address only once the same
    /// credentials delivered a push.
    case gone(reason: String, certain: Bool = true)
    /// The service is busy or failing: try again, after `after` when it said.
    case retry(reason: String, after: Duration?)
    /// The service refused the container's credentials: stop sending on this channel until they change.
    case refusedCredentials(reason: String)
    /// This push cannot be delivered as it is; the next one may.
    case failed(reason: String)

    /// The reason, for logs and metrics; `nil` when delivered.
    var reason: String? {
        switch self {
        case .delivered: nil
        case .gone(let reason, _), .retry(let reason, _), .refusedCredentials(let reason), .failed(let reason): reason
        }
    }
}

/// One push service's wire: turns a notification into the request the service takes, and its
/// answer into a ``PushOutcome``. Never throws: a connection that fails is an outcome too.
protocol PushServiceClient: Sendable {
    /// Sends `notification`, which `userRecordName` receives, to `endpoint` with `credentials`.
    func send(
        _ notification: PushNotificationDictionary, userRecordName: String, to endpoint: PushEndpointInfo,
        credentials: PushCredentials
    ) async -> PushOutcome
}

/// Where the push services are, and whom to trust: Apple's, Google's and the browsers' services by
/// default; stand-ins for tests or an air-gapped relay otherwise.
public struct PushServiceConfiguration: Sendable {
    /// APNs for the `development` environment (`https://api.sandbox.push.apple.com`).
    public var apnsDevelopmentURL: String
    /// APNs for the `production` environment (`https://api.push.apple.com`).
    public var apnsProductionURL: String
    /// FCM HTTP v1 (`https://fcm.googleapis.com`); access tokens come from the service account's
    /// `token_uri`.
    public var fcmURL: String
    /// A PEM file of certificates trusted besides the system's, for services behind a private CA.
    public var trustedCertificatesFile: String?
    /// The hosts Web Push subscriptions may point at: a host matches when it is one of these or ends
    /// with `.` and one of them. The browsers' services by default (Google, Mozilla, Apple,
    /// Microsoft), so that a client cannot make the server post to any address it likes.
    public var webPushHosts: [String]
    /// The wait before the first retry of a push the service could not take (429, 5xx, no answer);
    /// each further retry waits twice as long, with jitter.
    public var retryDelay: Duration
    /// How often a push is tried before it is dropped (pushes are hints: the next fetch recovers).
    public var maxAttempts: Int
    /// How many push endpoints one user keeps; registering one more forgets the least recently
    /// registered.
    public var endpointsPerUser: Int

    /// The real services.
    public init(
        apnsDevelopmentURL: String = "https://api.sandbox.push.apple.com",
        apnsProductionURL: String = "https://api.push.apple.com", fcmURL: String = "https://fcm.googleapis.com",
        trustedCertificatesFile: String? = nil,
        webPushHosts: [String] = ["fcm.googleapis.com", "push.services.mozilla.com", "push.apple.com", "notify.windows.com"],
        retryDelay: Duration = .seconds(1), maxAttempts: Int = 4, endpointsPerUser: Int = 20
    ) {
        self.apnsDevelopmentURL = apnsDevelopmentURL
        self.apnsProductionURL = apnsProductionURL
        self.fcmURL = fcmURL
        self.trustedCertificatesFile = trustedCertificatesFile
        self.webPushHosts = webPushHosts
        self.retryDelay = retryDelay
        self.maxAttempts = maxAttempts
        self.endpointsPerUser = endpointsPerUser
    }

    /// Whether a Web Push subscription may point at `host`.
    func allowsWebPush(host: String) -> Bool {
        let host = host.lowercased()
        return webPushHosts.contains { allowed in
            let allowed = allowed.lowercased()
            return host == allowed || host.hasSuffix("." + allowed)
        }
    }
}

/// What the push clients share: the HTTP client (HTTP/2 where the service speaks it, so that one
/// connection per service carries many pushes at once) and how a response is read.
enum PushHTTP {
    /// How long a push may take until its answer.
    static let timeout = TimeAmount.seconds(30)

    /// The client of every push service, trusting `configuration`'s certificates besides the
    /// system's.
    static func makeClient(_ configuration: PushServiceConfiguration) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = configuration.trustedCertificatesFile {
            tls.additionalTrustRoots = [.file(file)]
        }
        var http = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(30)))
        http.httpVersion = .automatic
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
    }

    /// What a service answered: the status, its `Retry-After` and up to 64 KiB of the body.
    struct Answer {
        var status: Int
        var retryAfter: Duration?
        var body: [UInt8]
    }

    /// Sends `request` and reads the answer; a request that got no answer throws the outcome to
    /// retry (``PushFailure``).
    static func execute(_ request: HTTPClientRequest, on client: HTTPClient) async throws(PushFailure) -> Answer {
        do {
            let response = try await client.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 64 << 10)
            // A service asking for more than a minute gets a minute: pushes are hints, and a waiting
            // push holds its device's next one.
            let retryAfter = response.headers.first(name: "retry-after").flatMap(Int.init).map {
                Duration.seconds(min(60, max(0, $0)))
            }
            return Answer(status: Int(response.status.code), retryAfter: retryAfter, body: Array(buffer: body))
        } catch {
            throw PushFailure(outcome: .retry(reason: "unreachable: \(error)", after: nil))
        }
    }

    /// Sends a push and reads its answer with `outcome`; a push that got no answer is to be retried.
    static func send(
        _ request: HTTPClientRequest, on client: HTTPClient, outcome: (Answer) -> PushOutcome
    ) async -> PushOutcome {
        do {
            return outcome(try await execute(request, on: client))
        } catch {
            return error.outcome
        }
    }

    /// The member `key` of a JSON object body, if the body is one and has it as a string.
    static func string(_ key: String, in body: [UInt8]) -> String? {
        guard let object = try? JSONValue.parse(body).object() else { return nil }
        return try? object.decodeIfPresent(key)
    }
}

/// CloudKit's payload sized for a service: the notification as it is, or without the record's
/// desired fields when they would make CloudKit's `{"aps", "ck"}` JSON larger than `limit` bytes
/// (the app fetches the record anyway).
enum PushPayload {
    static func fitting(_ notification: PushNotificationDictionary, userRecordName: String, limit: Int)
        -> PushNotificationDictionary
    {
        guard notification.recordFields != nil,
            ApplePushPayload(notification, userRecordName: userRecordName).jsonBytes.count > limit
        else { return notification }
        var pruned = notification
        pruned.recordFields = nil
        return pruned
    }
}

/// A push that could not even be answered, as the outcome it leads to.
struct PushFailure: Error {
    var outcome: PushOutcome
}
