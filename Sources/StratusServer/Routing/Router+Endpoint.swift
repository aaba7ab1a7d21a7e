import HTTPTypes
import Hummingbird
import StratusModel

extension RouterMethods where Context == StratusRequestContext {
    /// Routes an endpoint of the table (``Endpoints``) to `handler`, at its method and its whole path.
    /// A database endpoint cannot be routed here: ``on(_:authorizedBy:use:)`` routes it behind its
    /// declared access.
    @discardableResult
    func on<Body, Answer>(
        _ endpoint: Endpoint<Body, Answer>,
        use handler: @escaping @Sendable (Request, StratusRequestContext) async throws -> Response
    ) -> Self {
        precondition(
            endpoint.base != .database || DatabaseRoutes.environmentOperations.contains(endpoint.erased),
            "\(endpoint.path) is a database endpoint: route it with on(_:authorizedBy:use:)")
        return route(endpoint.erased, use: handler)
    }

    /// Routes `endpoint` at its method and its whole path.
    func route(
        _ endpoint: AnyEndpoint, use handler: @escaping @Sendable (Request, StratusRequestContext) async throws -> Response
    ) -> Self {
        on(RouterPath(endpoint.routerPath), method: HTTPRequest.Method(endpoint.method.rawValue)!, use: handler)
    }
}

extension AnyEndpoint {
    /// The path as Hummingbird's router writes it: parameters as `:name`, without the leading `/`.
    var routerPath: String {
        template.dropFirst().split(separator: "/").map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : segment
        }.joined(separator: "/")
    }
}
