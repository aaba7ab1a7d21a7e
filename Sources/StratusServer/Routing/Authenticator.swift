import HTTPTypes
import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// Reads the caller that ``AuthenticationMiddleware`` verified into what handlers need: the API
/// token names the container, the web auth token the user.
struct Authenticator: Sendable {
    let configuration: ServerConfiguration

    /// The container of the path, whose API token came with the request (checked by the middleware).
    func authenticateApp(_ context: StratusRequestContext) throws -> String {
        guard let container = context.caller.container else {
            throw StratusError(.authenticationFailed, "ckAPIToken is required: pass the container's API token")
        }
        return container
    }

    /// The database a request under `/database/1/{container}/{environment}/{database}/` addresses (or
    /// `scope`, for an endpoint of the environment that reaches a user's databases), and who is asking.
    func authenticate(
        _ request: Request, context: StratusRequestContext, scope: DatabaseScope? = nil
    ) throws -> DatabaseRequest {
        let container = try authenticateApp(context)
        let environment = try self.environment(context)
        guard let scope = scope ?? context.caller.scope else { throw StratusError.badRequest("the path names no database") }
        return DatabaseRequest(
            container: container, environment: environment, scope: scope, userRecordName: context.caller.userRecordName,
            deviceID: request.headers[.stratusDeviceID], signedByServerKey: context.caller.serverKeyID != nil,
            makeSignInURL: { signInURL(request, container: container) }, baseURL: baseURL(request))
    }

    /// The environment the path names (checked by the middleware).
    func environment(_ context: StratusRequestContext) throws -> ContainerEnvironment {
        guard let environment = context.caller.environment else {
            throw StratusError.badRequest("the path names no environment")
        }
        return environment
    }

    /// The value of a path parameter naming one of `T`'s cases; `BAD_REQUEST` listing them otherwise.
    static func parse<T: WireEnum>(_ type: T.Type, context: some RequestContext, parameter: String) throws -> T {
        try parse(type, try context.parameters.require(parameter), parameter: parameter)
    }

    /// `raw` as one of `T`'s cases; `BAD_REQUEST` naming `parameter` and listing them otherwise.
    static func parse<T: WireEnum>(_ type: T.Type, _ raw: String, parameter: String) throws -> T {
        guard let value = T(rawValue: raw) else {
            throw StratusError.badRequest(
                "\(parameter) '\(raw)' is not one of " + T.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return value
    }

    /// The URL clients reach this server at: the configured public URL, or the request's host.
    func baseURL(_ request: Request) -> String {
        configuration.publicURL ?? "\(configuration.scheme)://\(request.head.authority ?? "\(configuration.host):\(configuration.port)")"
    }

    /// The sign-in page's URL for a container, carrying the request's API token and, when the request
    /// came from a web page whose origin the callback rule admits (its `Origin` header), that origin:
    /// the page, opened as a popup, posts the new token back to it.
    func signInURL(_ request: Request, container: String) -> String {
        let token = request.query("ckAPIToken") ?? ""
        let encoded = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? container
        var url = "\(baseURL(request))/auth/1/\(encoded)/signin?ckAPIToken=\(token)"
        if let origin = request.headers[.origin].flatMap({ openerOrigin($0, request: request) }) {
            url += "&origin=" + origin.queryValueEncoded
        }
        return url
    }

    /// `raw` when it is an origin a sign-in popup may post the token to, for this request's server
    /// (``SignInCallback/openerOrigin(_:serverOrigin:serverAuthority:)``).
    func openerOrigin(_ raw: String, request: Request) -> String? {
        SignInCallback.openerOrigin(
            raw, serverOrigin: configuration.publicURL.flatMap(SignInCallback.origin(of:)),
            serverAuthority: request.head.authority)
    }
}
