import Hummingbird
import HTTPTypes
import NIOCore
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
    let storage: any SettingsStorage & AccountStorage & SchemaStorage & TransferStorage & AuditStorage
    let accounts: AccountService
    let credential: AdminCredential
    let quotas: QuotaKeeper
    /// The containers' push credentials.
    let pushCredentials: PushCredentialStore
    /// The containers' sign-in methods.
    let signInMethods: IdentityProviderDirectory
    let clock: ServerClock

    func addRoutes(to router: Router<StratusRequestContext>) {
        let admin = router.group("admin/1").add(middleware: AdminAuthenticationMiddleware(credential: credential))
        admin.get("containers") { request, context in
            let containers = try await storage.containers()
            return Response.jsonList("containers", containers) { container, writer in
                writer.beginObject()
                writer.field("identifier", container.identifier)
                writer.field("allowsSignUp", container.allowsSignUp)
                writer.field("created", container.createdAt)
                writer.endObject()
            }
        }
        admin.post("containers") { request, context in
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
            let container = try context.parameters.require("container")
            let body = try await request.decodeJSON(CreateTokenRequest.self, limit: 64 << 10)
            let token = try await accounts.createAPIToken(container: container, name: body.name ?? "default")
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("apiToken", token)
            writer.endObject()
            return Response.json(writer, status: .created)
        }
        admin.delete("containers/:container/tokens/:tokenID") { request, context in
            try await accounts.revokeAPIToken(
                container: try context.parameters.require("container"), id: try context.parameters.require("tokenID"))
            return Response(status: .noContent)
        }
        addSchemaRoutes(to: admin)
        admin.post("containers/:container/users") { request, context in
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
        admin.post("containers/:container/keys") { request, context in
            let container = try context.parameters.require("container")
            let body = try await request.decodeJSON(JSONValue.self, limit: 64 << 10).object()
            let environmentName: String = try body.decode("environment")
            guard let environment = ContainerEnvironment(rawValue: environmentName) else {
                throw StratusError.badRequest("environment must be development or production, not '\(environmentName)'")
            }
            let key = try await accounts.registerServerKey(
                container: container, environment: environment, publicKeyPEM: try body.decode("publicKey"))
            var writer = JSONWriter()
            Self.write(key, to: &writer)
            return Response.json(writer, status: .created)
        }
        admin.get("containers/:container/keys") { request, context in
            let container = try context.parameters.require("container")
            try await storage.requireContainer(container)
            let keys = try await storage.serverKeys(container: container)
            return Response.jsonList("keys", keys) { Self.write($0, to: &$1) }
        }
        admin.delete("containers/:container/keys/:key") { request, context in
            let container = try context.parameters.require("container")
            let keyID = try context.parameters.require("key")
            guard try await storage.revokeServerKey(id: keyID, container: container, at: accounts.now),
                let key = try await storage.serverKey(id: keyID)
            else {
                throw StratusError(.notFound, "container '\(container)' has no server-to-server key '\(keyID)'")
            }
            var writer = JSONWriter()
            Self.write(key, to: &writer)
            return Response.json(writer)
        }
        admin.get("containers/:container/users") { request, context in
            let container = try context.parameters.require("container")
            try await storage.requireContainer(container)
            return Response.jsonList("users", try await storage.users(container: container)) { Self.write($0, to: &$1) }
        }
        admin.patch("containers/:container/users/:user") { request, context in
            let container = try context.parameters.require("container")
            let recordName = try context.parameters.require("user")
            let body = try await request.decodeJSON(JSONValue.self, limit: 64 << 10).object()
            // A misspelt member would otherwise go unnoticed, and the body name nothing else.
            if let unknown = body.members.first(where: { !["disabled", "password", "emailAddress"].contains($0.key) }) {
                throw StratusError.badRequest(
                    "\(unknown.key) is not a member of a user's settings; the members are disabled, password and emailAddress")
            }
            // Each member changes what it names, and only when present.
            let disabled: Bool? = try body.decodeIfPresent("disabled")
            let password: String? = try body.decodeIfPresent("password")
            let emailAddress: String? = try body.decodeIfPresent("emailAddress")
            // Everything is checked before anything changes.
            if let emailAddress { try Self.checkEmailAddress(emailAddress) }
            guard let existing = try await storage.user(container: container, recordName: recordName) else {
                throw StratusError(.notFound, "container '\(container)' has no user '\(recordName)'")
            }
            if let password, let violation = PasswordPolicy.violation(of: password, username: existing.username) {
                throw StratusError.badRequest(violation)
            }
            // A body naming nothing else clears the address, as before disabling and passwords were here.
            if body["emailAddress"] != nil || (disabled == nil && password == nil) {
                try await storage.setEmailAddress(emailAddress, container: container, recordName: recordName)
            }
            if let password { try await accounts.resetPassword(password, container: container, recordName: recordName) }
            // Each ends the user's sessions, push tokens and push connections, on every instance.
            if let disabled { try await accounts.setDisabled(disabled, container: container, recordName: recordName) }
            guard let user = try await storage.user(container: container, recordName: recordName) else {
                throw StratusError(.notFound, "container '\(container)' has no user '\(recordName)'")
            }
            var writer = JSONWriter()
            Self.write(user, to: &writer)
            return Response.json(writer)
        }
        admin.get("containers/:container/tokens") { request, context in
            let container = try context.parameters.require("container")
            try await storage.requireContainer(container)
            return Response.jsonList("tokens", try await storage.apiTokens(container: container)) { token, writer in
                writer.beginObject()
                writer.field("id", token.hash)
                writer.field("name", token.name)
                writer.field("created", token.createdAt)
                writer.endObject()
            }
        }
        addQuotaRoutes(to: admin)
        addPushRoutes(to: admin)
        addSignInRoutes(to: admin)
        admin.get("audit") { request, context in
            let limit = min(max(request.query("limit").flatMap(Int.init) ?? 100, 1), 1_000)
            return Response.jsonList("entries", try await storage.auditEntries(limit: limit)) { entry, writer in
                writer.beginObject()
                writer.field("time", entry.time)
                writer.field("actor", entry.actor)
                writer.field("action", entry.action)
                writer.field("status", Int64(entry.status))
                writer.endObject()
            }
        }
    }

    /// `GET`, `PUT` and `DELETE …/containers/{container}/quotas`: the quotas a container is held to
    /// (its own, or the server's defaults) and what it holds; `PUT` sets members of its own (a member
    /// left out keeps its value, `null` lifts the limit), `DELETE` returns it to the defaults.
    /// `GET …/usage` lists what each account holds.
    private func addQuotaRoutes(to admin: RouterGroup<StratusRequestContext>) {
        @Sendable func answer(_ container: String) async throws -> Response {
            let quotas = try await quotas.quotas(container: container)
            let usage = try await self.quotas.usage(container: container).total
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("quotas")
            quotas.write(to: &writer)
            writer.field("serverDefaults", quotas == self.quotas.defaults)
            writer.key("usage")
            usage.write(to: &writer)
            writer.endObject()
            return Response.json(writer)
        }
        admin.get("containers/:container/quotas") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            return try await answer(container)
        }
        admin.put("containers/:container/quotas") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            let body = try await request.decodeJSON(JSONValue.self, limit: 64 << 10)
            let updated = try Quotas(json: body, over: try await quotas.quotas(container: container))
            try await quotas.setQuotas(updated, container: container)
            return try await answer(container)
        }
        admin.delete("containers/:container/quotas") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            try await quotas.setQuotas(nil, container: container)
            return try await answer(container)
        }
        admin.get("containers/:container/usage") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            let usage = try await quotas.usage(container: container)
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("total")
            usage.total.write(to: &writer)
            writer.key("accounts")
            writer.beginArray()
            // The largest first, then by name.
            let accounts = usage.byAccount.sorted { a, b in
                let (x, y) = (a.value.recordBytes + a.value.assetBytes, b.value.recordBytes + b.value.assetBytes)
                return x != y ? x > y : a.key < b.key
            }
            for (account, held) in accounts {
                writer.beginObject()
                writer.field("userRecordName", account)
                writer.field("records", held.records)
                writer.field("recordBytes", held.recordBytes)
                writer.field("assetBytes", held.assetBytes)
                writer.endObject()
            }
            writer.endArray()
            writer.endObject()
            return Response.json(writer)
        }
    }

    /// A user as the admin API shows it: never the password's hash.
    static func write(_ user: UserInfo, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("userRecordName", user.recordName)
        writer.field("username", user.username)
        writer.field("created", user.createdAt)
        writer.field("emailAddress", user.emailAddress)
        writer.field("disabled", user.disabledAt)
        writer.endObject()
    }

    /// A server-to-server key as the admin API shows it: never the key itself.
    static func write(_ key: ServerKeyInfo, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("keyID", key.keyID)
        writer.field("environment", key.environment.rawValue)
        writer.field("userRecordName", key.userRecordName)
        writer.field("created", key.createdAt)
        writer.field("revoked", key.revokedAt)
        writer.endObject()
    }

    /// Refuses what is not plausibly an e-mail address: one `@` with text on both sides, no spaces or
    /// control characters, at most 254 bytes.
    static func checkEmailAddress(_ address: String) throws {
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard address.utf8.count <= 254, parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
            !address.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 })
        else {
            throw StratusError.badRequest(
                "emailAddress must be one address (local@domain, at most 254 bytes, no spaces): '\(address)'")
        }
    }

    /// `GET|PUT …/environments/{environment}/schema` (schema language; `?format=json` for JSON),
    /// `POST …/deploy-schema` and `POST …/reset-development`.
    private func addSchemaRoutes(to admin: RouterGroup<StratusRequestContext>) {
        let schemas = SchemaAdministration(storage: storage)
        let respond = Self.respond
        admin.get("containers/:container/environments/:environment/schema") { request, context in
            let environment = try Authenticator.parse(ContainerEnvironment.self, context: context, parameter: "environment")
            return respond(
                try await schemas.export(container: try context.parameters.require("container"), environment: environment),
                request)
        }
        admin.put("containers/:container/environments/:environment/schema") { request, context in
            let environment = try Authenticator.parse(ContainerEnvironment.self, context: context, parameter: "environment")
            guard environment == .development else {
                throw StratusError.badRequest(
                    "the production schema changes only by deploying development's: import into development, then "
                        + "POST deploy-schema")
            }
            let body = try await request.collectBody(limit: 4 << 20, limitName: "the limit of a schema")
            let text = String(buffer: body)
            let schema = request.headers[.contentType]?.hasPrefix("application/json") == true
                ? try Schema(jsonBytes: Array(text.utf8), refusingNullCharacter: true) : try SchemaAdministration.parse(text)
            return respond(
                try await schemas.importSchema(schema, container: try context.parameters.require("container")), request)
        }
        admin.post("containers/:container/deploy-schema") { request, context in
            return respond(try await schemas.deploy(container: try context.parameters.require("container")), request)
        }
        admin.post("containers/:container/reset-development") { request, context in
            try await schemas.resetDevelopment(container: try context.parameters.require("container"))
            return Response(status: .noContent)
        }
    }

    /// A schema as schema-language text, or as JSON with `?format=json`.
    private static func respond(_ schema: Schema, _ request: Request) -> Response {
        if request.query("format") == "json" { return Response.json(schema) }
        return Response(
            status: .ok, headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: schema.text)))
    }

}
