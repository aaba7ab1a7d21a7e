import Hummingbird
import StratusModel
import StratusStorage

extension AdminEndpoints {
    /// `…/containers/{container}/signin`: how the container's users sign in, and
    /// `…/users/{user}/identities`: the providers' identities of a user. Secrets (a client secret,
    /// Apple's private key) go in and never come out; every `signin` route answers what `GET`
    /// shows.
    ///
    /// - `PUT …/signin/passwords`: `{"enabled": false}` turns password sign-up and sign-in off.
    /// - `PUT …/signin/apple`: Sign in with Apple (``SignInMethods/apple(json:at:)``).
    /// - `PUT …/signin/oidc/{name}`: an OpenID Connect provider
    ///   (``SignInMethods/openIDConnect(name:json:at:)``); a body without `clientSecret` keeps the
    ///   secret set before (`null` removes it).
    /// - `DELETE …/signin/apple`, `DELETE …/signin/oidc/{name}`: removes a provider; its users'
    ///   identities stay, and sign in again once it is back.
    /// - `GET …/users/{user}/identities`; `DELETE …/users/{user}/identities?issuer=…&subject=…`
    ///   unlinks one (the operator may take a user's last one).
    /// - `DELETE …/users/{user}`: deletes the account and its private data.
    func addSignInRoutes(to admin: RouterGroup<StratusRequestContext>) {
        @Sendable func update(
            _ context: StratusRequestContext, _ change: @escaping (inout SignInMethods) throws -> Void
        ) async throws -> Response {
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            var writer = JSONWriter()
            try await signInMethods.update(container: container, change).summary(to: &writer)
            return Response.json(writer)
        }
        admin.get("containers/:container/signin") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            var writer = JSONWriter()
            try await signInMethods.methods(container: container).summary(to: &writer)
            return Response.json(writer)
        }
        admin.put("containers/:container/signin/passwords") { request, context in
            let enabled: Bool = try await request.decodeJSON(JSONValue.self, limit: 64 << 10).object().decode("enabled")
            return try await update(context) { $0.passwordsEnabled = enabled }
        }
        admin.put("containers/:container/signin/apple") { request, context in
            let apple = try SignInMethods.apple(
                json: try await request.decodeJSON(JSONValue.self, limit: 64 << 10), at: clock.milliseconds)
            return try await update(context) { $0.set(apple) }
        }
        admin.put("containers/:container/signin/oidc/:name") { request, context in
            let json = try await request.decodeJSON(JSONValue.self, limit: 64 << 10)
            var provider = try SignInMethods.openIDConnect(
                name: try context.parameters.require("name"), json: json, at: clock.milliseconds)
            // A body without clientSecret keeps the one set (it is never shown, so cannot be sent back).
            let keepsSecret = (try? json.object().members["clientSecret"]) == nil
            return try await update(context) { methods in
                if keepsSecret { provider.clientSecret = methods.providers.first { $0.name == provider.name }?.clientSecret }
                methods.set(provider)
            }
        }
        admin.delete("containers/:container/signin/apple") { request, context in
            try await update(context) { methods in
                guard methods.providers.contains(where: { $0.name == IdentityProvider.appleName }) else {
                    throw StratusError(.notFound, "Sign in with Apple is not configured")
                }
                methods.providers.removeAll { $0.name == IdentityProvider.appleName }
            }
        }
        admin.delete("containers/:container/signin/oidc/:name") { request, context in
            let name = try context.parameters.require("name")
            return try await update(context) { methods in
                guard name != IdentityProvider.appleName, methods.providers.contains(where: { $0.name == name }) else {
                    throw StratusError(.notFound, "no OpenID Connect provider is named '\(name)'")
                }
                methods.providers.removeAll { $0.name == name }
            }
        }
        admin.get("containers/:container/users/:user/identities") { request, context in
            let (container, user) = try await existingUser(context)
            let identities = try await accounts.identities(container: container, userRecordName: user)
            return Response.jsonList("identities", identities) { identity, writer in
                AuthEndpoints.linked(identity).write(to: &writer)
            }
        }
        admin.delete("containers/:container/users/:user/identities") { request, context in
            let (container, user) = try await existingUser(context)
            guard let issuer = request.query("issuer"), let subject = request.query("subject") else {
                throw StratusError.badRequest("issuer and subject (query parameters) name the identity to unlink")
            }
            try await accounts.revokeIdentity(issuer: issuer, subject: subject, container: container, userRecordName: user)
            let identities = try await accounts.identities(container: container, userRecordName: user)
            return Response.jsonList("identities", identities) { identity, writer in
                AuthEndpoints.linked(identity).write(to: &writer)
            }
        }
        admin.delete("containers/:container/users/:user") { request, context in
            let (container, user) = try await existingUser(context)
            try await accounts.deleteAccount(container: container, recordName: user)
            return Response(status: .noContent)
        }
    }

    private func existingUser(_ context: StratusRequestContext) async throws -> (container: String, user: String) {
        let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
        let user = try context.parameters.require("user")
        guard try await storage.user(container: container, recordName: user) != nil else {
            throw StratusError(.notFound, "container '\(container)' has no user '\(user)'")
        }
        return (container, user)
    }
}
