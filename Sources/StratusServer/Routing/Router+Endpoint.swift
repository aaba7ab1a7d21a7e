import HTTPTypes
import Hummingbird
import StratusModel

extension RouterMethods where Context == StratusRequestContext {
    /// Routes an endpoint of the table (``Endpoints``) to `handler`, at its method and its whole path.
    @discardableResult
    func on<Body, Answer>(
        _ endpoint: Endpoint<Body, Answer>,
        use handler: @escaping @Sendable (Request, StratusRequestContext) async throws -> Response
    ) -> Self {
        on(RouterPath(endpoint.erased.routerPath), method: HTTPRequest.Method(endpoint.method.rawValue)!, use: handler)
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
