import Hummingbird
import StratusModel
import StratusStorage

/// The body of `POST /admin/1/containers`.
struct CreateContainerRequest: JSONDecodable {
    var identifier: String
    var allowsSignUp: Bool?

    init(json: JSONValue) throws {
        let object = try json.object()
        identifier = try object.decode("identifier")
        allowsSignUp = try object.decodeIfPresent("allowsSignUp")
    }
}

/// The body of `POST /admin/1/containers/{container}/tokens`.
struct CreateTokenRequest: JSONDecodable {
    var name: String?

    init(json: JSONValue) throws {
        name = try json.object().decodeIfPresent("name")
    }
}

/// Management endpoints under `/admin/1/`, guarded by the admin token
/// (`Authorization: Bearer <adminToken>`).
struct AdminEndpoints: Sendable {
    /// The settings key of the admin token's hash.
    static let adminTokenHashSetting = "admin_token_hash"

    let storage: any StratusStorage
    let accounts: AccountService

    func addRoutes(to router: Router<some RequestContext>) {
        let admin = router.group("admin/1")
        admin.get("containers") { request, _ in
            try await authenticate(request)
            let containers = try await storage.containers()
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("containers")
            writer.beginArray()
            for container in containers {
                writer.beginObject()
                writer.field("identifier", container.identifier)
                writer.field("allowsSignUp", container.allowsSignUp)
                writer.field("created", container.createdAt)
                writer.endObject()
            }
            writer.endArray()
            writer.endObject()
            return Response.json(writer)
        }
        admin.post("containers") { request, _ in
            try await authenticate(request)
            let body = try await request.decodeJSON(CreateContainerRequest.self, limit: 64 << 10)
            let container = try await accounts.createContainer(body.identifier, allowsSignUp: body.allowsSignUp ?? true)
            let token = try await accounts.createAPIToken(container: container.identifier)
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("identifier", container.identifier)
            writer.field("allowsSignUp", container.allowsSignUp)
            writer.field("apiToken", token)
            writer.endObject()
            return Response.json(writer, status: .created)
        }
        admin.post("containers/:container/tokens") { request, context in
            try await authenticate(request)
            let container = try context.parameters.require("container")
            let body = try await request.decodeJSON(CreateTokenRequest.self, limit: 64 << 10)
            let token = try await accounts.createAPIToken(container: container, name: body.name ?? "default")
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("apiToken", token)
            writer.endObject()
            return Response.json(writer, status: .created)
        }
        admin.post("containers/:container/users") { request, context in
            try await authenticate(request)
            let container = try context.parameters.require("container")
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            let user = try await accounts.createUser(container: container, username: body.username, password: body.password)
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("userRecordName", user.recordName)
            writer.field("username", user.username)
            writer.endObject()
            return Response.json(writer, status: .created)
        }
    }

    private func authenticate(_ request: Request) async throws {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw StratusError(.authenticationFailed, "the admin API needs 'Authorization: Bearer <adminToken>'")
        }
        let presented = Secrets.hash(String(header.dropFirst("Bearer ".count)))
        guard let stored = try await storage.setting(Self.adminTokenHashSetting),
            Secrets.constantTimeEquals(Array(presented.utf8), Array(stored.utf8))
        else {
            throw StratusError(.authenticationFailed, "the admin token is not valid")
        }
    }
}
