import HTTPTypes
import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// An authenticated request to one database: which one, and who is asking.
struct DatabaseRequest: Sendable {
    /// The container.
    var container: String
    /// The environment.
    var environment: ContainerEnvironment
    /// The database scope.
    var scope: DatabaseScope
    /// The signed-in user, if a valid `ckWebAuthToken` came with the request.
    var userRecordName: String?
    /// The device the client says it is (`X-Stratus-Device-ID`), recorded in change stamps.
    var deviceID: String?
    /// Where a user without a session signs in.
    var signInURL: String
    /// The URL clients reach this server at.
    var baseURL: String

    /// The signed-in user, or `AUTHENTICATION_REQUIRED` with the sign-in URL.
    func requireUser() throws -> String {
        guard let userRecordName else {
            throw StratusError(
                .authenticationRequired,
                "this request needs a signed-in user: pass ckWebAuthToken (the \(scope.rawValue) database"
                    + (scope == .public ? " needs one to write)" : " belongs to a user)"),
                redirectURL: signInURL)
        }
        return userRecordName
    }

    /// The database addressed; the private and shared databases need a signed-in user.
    func locator() throws -> DatabaseLocator {
        let owner = scope == .public ? DatabaseLocator.publicOwner : try requireUser()
        return DatabaseLocator(container: container, environment: environment, scope: scope, owner: owner)
    }

    /// The zone named by a request's `zoneID` (the default zone when absent). The owner, when given,
    /// must be the database's owner: other users' zones are never reachable here.
    func zoneName(_ zoneID: ZoneID?, field: String, limits: Limits) throws -> String {
        guard let zoneID else { return ZoneID.defaultZoneName }
        if let violation = limits.violation(ofName: zoneID.zoneName) {
            throw StratusError.badRequest("\(field).zoneName \(violation)")
        }
        if let owner = zoneID.ownerRecordName, owner != ZoneID.currentUserOwnerName {
            let databaseOwner = try locator().owner
            guard owner == databaseOwner else {
                throw StratusError(
                    .accessDenied,
                    "\(field).ownerRecordName '\(owner)' is not the owner of this \(scope.rawValue) database")
            }
        }
        return zoneID.zoneName
    }

    /// The path of this database's endpoints: `/database/1/{container}/{environment}/{scope}`.
    var databasePath: String {
        let encoded = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? container
        return "/database/1/\(encoded)/\(environment.rawValue)/\(scope.rawValue)"
    }

    /// The `downloadURL`s of the assets of records in `zone`, from a record's name, a field's name
    /// and the asset's checksum. The URL names the record and field, so a download is authorized like
    /// a lookup of the record; the client adds its tokens as on every request.
    func assetURL(zone: String) -> @Sendable (_ recordName: String, _ field: String, _ checksum: String) -> String {
        let prefix = baseURL + databasePath + "/assets/download/"
        let zoneQuery = "?zoneName=" + zone.queryValueEncoded + "&recordName="
        return { recordName, field, checksum in
            prefix + checksum + zoneQuery + recordName.queryValueEncoded + "&fieldName=" + field
        }
    }

    /// The wire ID of a zone of this database.
    func wireZoneID(_ name: String) throws -> ZoneID {
        ZoneID(zoneName: name, ownerRecordName: try locator().owner)
    }
}

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

    /// The database a request under `/database/1/{container}/{environment}/{database}/` addresses, and
    /// who is asking.
    func authenticate(_ request: Request, context: StratusRequestContext) throws -> DatabaseRequest {
        let container = try authenticateApp(context)
        let environment = try self.environment(context)
        guard let scope = context.caller.scope else { throw StratusError.badRequest("the path names no database") }
        return DatabaseRequest(
            container: container, environment: environment, scope: scope, userRecordName: context.caller.userRecordName,
            deviceID: request.headers[.stratusDeviceID], signInURL: signInURL(request, container: container),
            baseURL: baseURL(request))
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
        configuration.publicURL ?? "http://\(request.head.authority ?? "\(configuration.host):\(configuration.port)")"
    }

    /// The sign-in page's URL for a container, carrying the request's API token.
    func signInURL(_ request: Request, container: String) -> String {
        let token = request.query("ckAPIToken") ?? ""
        let encoded = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? container
        return "\(baseURL(request))/auth/1/\(encoded)/signin?ckAPIToken=\(token)"
    }
}

extension HTTPField.Name {
    /// The header a client uses to say which device it is.
    static let stratusDeviceID = Self("X-Stratus-Device-ID")!
    /// The `syncToken` of a `records/changes` answer, in its head, so a client reading a feed can
    /// ask for the next page before it has read this one.
    static let stratusSyncToken = Self("X-Stratus-Sync-Token")!
    /// The `moreComing` of a `records/changes` answer, in its head: `true` or `false`.
    static let stratusMoreComing = Self("X-Stratus-More-Coming")!
}
