import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StratusModel
import StratusStorage
import Tracing

/// Gives every request its ID and, once it is answered, counts it in the metrics, appends it to
/// the request log and logs it: the answer carries the ID in `X-Stratus-Request-ID` (and, when it
/// is an error, as its `uuid`), and every log line written while handling it carries it as
/// `request`. A change an administrator made (the admin token, a console session) is written to
/// the audit log, with who and when, before it is answered.
struct ObservabilityMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    let metrics: ServerMetrics
    let log: RequestLog
    let audit: any AuditStorage
    let clock: ServerClock
    /// Whether each request is a span of swift-distributed-tracing (`stratus serve --otel`), named by
    /// its route, with its method, status and ID; never its path or query, which may hold tokens.
    let tracesRequests: Bool

    /// Path parameters that are secrets (a push token, a share link's GUID): the log shows the
    /// pattern's name instead of the value.
    static let secretParameters: Set<Substring> = ["{token}", "{shortGUID}"]

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard tracesRequests else { return try await observe(request, context: context, next: next) }
        return try await withSpan(request.method.rawValue, ofKind: .server) { span in
            let response = try await observe(request, context: context, next: next)
            span.operationName = "\(request.method.rawValue) \(context.endpointPath ?? "NotFound")"
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["http.route"] = context.endpointPath ?? "NotFound"
            span.attributes["http.response.status_code"] = Int(response.status.code)
            span.attributes["stratus.request_id"] = context.trace.id
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        }
    }

    private func observe(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        let trace = context.trace
        context.logger[metadataKey: "request"] = "\(trace.id)"
        let start = ContinuousClock.now
        var response = try await next(request, context)
        let duration = ContinuousClock.now - start
        response.headers[.stratusRequestID] = trace.id
        let endpoint = context.endpointPath ?? "NotFound"
        let traced = trace.current
        metrics.requestAnswered(
            endpoint: endpoint, method: request.method.rawValue, status: response.status.code,
            errorCode: traced.errorCode?.rawValue, duration: duration)
        let entry = RequestLogEntry(
            id: trace.id, time: clock.milliseconds, method: request.method.rawValue,
            path: Self.loggedPath(request.uri.path, endpoint: endpoint), endpoint: endpoint,
            status: response.status.code, errorCode: traced.errorCode?.rawValue, reason: traced.reason,
            milliseconds: duration.milliseconds,
            address: traced.caller.address, container: traced.caller.container,
            userRecordName: traced.caller.userRecordName, deviceID: request.headers[.stratusDeviceID])
        log.append(entry)
        if let actor = traced.actor, ![.get, .head, .options].contains(request.method) {
            var action = "\(entry.method) \(entry.path)"
            if let user = traced.caller.userRecordName { action += " as \(user)" }
            let audited = AuditEntry(
                time: entry.time, actor: "\(actor) from \(traced.caller.address)", action: action, status: entry.status)
            do {
                try await audit.appendAuditEntry(audited)
            } catch {
                // The change is made; that its record is missing must not go unnoticed.
                context.logger.error(
                    "an administrative change could not be written to the audit log",
                    metadata: ["actor": "\(audited.actor)", "action": "\(audited.action)", "error": "\(error)"])
            }
        }
        // A refused request is logged at `info`, with its error: the log alone tells why a client fails.
        let level: Logger.Level = entry.status >= 400 ? .info : .debug
        guard context.logger.logLevel <= level else { return response }
        var metadata: Logger.Metadata = [
            "method": "\(entry.method)", "path": "\(entry.path)", "status": "\(entry.status)", "ms": "\(entry.milliseconds)",
        ]
        if let code = entry.errorCode { metadata["error"] = "\(code)" }
        if let reason = entry.reason { metadata["reason"] = "\(reason)" }
        context.logger.log(level: level, "answered", metadata: metadata)
        return response
    }

    /// Paths whose remainder is a secret (a push token, a share link's GUID), for requests that
    /// matched no route.
    static let secretPrefixes = ["/push/1/", "/share/"]

    /// Whether the route pattern `endpoint` holds a secret parameter, read in place: the pattern of
    /// every request is asked, and splitting it into segments cost more than the rest of the log entry.
    static func hasSecretParameter(_ endpoint: String) -> Bool {
        var endpoint = endpoint
        return endpoint.withUTF8 { bytes in
            secretParameters.contains { secret in
                secret.utf8.count <= bytes.count
                    && (0...bytes.count - secret.utf8.count).contains { start in
                        bytes[start] == UInt8(ascii: "{")
                            && bytes[start..<start + secret.utf8.count].elementsEqual(secret.utf8)
                    }
            }
        }
    }

    /// `path` with the values of secret parameters replaced by their names.
    static func loggedPath(_ path: String, endpoint: String) -> String {
        if let prefix = secretPrefixes.first(where: path.hasPrefix), endpoint == "NotFound" { return prefix + "…" }
        // Most routes have no secret parameter: their path is logged as it is, without splitting it.
        guard hasSecretParameter(endpoint) else { return path }
        let pattern = endpoint.split(separator: "/")
        let segments = path.split(separator: "/")
        guard segments.count == pattern.count else { return endpoint }
        return "/" + zip(pattern, segments).map { secretParameters.contains($0) ? $0 : $1 }.joined(separator: "/")
    }
}

extension HTTPField.Name {
    /// The ID of the request an answer is for: the `uuid` of its error, and its key in the console's
    /// request log.
    static let stratusRequestID = Self("X-Stratus-Request-ID")!
}
