import Foundation
import Hummingbird
import StratusModel
import StratusStorage

extension AuthEndpoints {
    /// Sign-in with identity providers under `/auth/1/{container}/`:
    /// - `signin/token`: a native app's ID token (Sign in with Apple, Google Sign-In, …) signs in;
    /// - `signin/web/{provider}` and `signin/return/{provider}`: the browser sign-in (``WebSignIn``);
    /// - `signin/apple/notifications`: Apple's server-to-server notifications;
    /// - `identities`, `identities/link`, `identities/unlink` and `password`: the signed-in
    ///   user's ways to sign in; adding one needs a sign-in of the last five minutes.
    ///
    /// A refused token counts as a failed sign-in of the client's address (the same backoff as
    /// wrong passwords), so that a client cannot try tokens without end.
    func addFederatedRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.signInWithIdentityToken) { request, context in
            let container = try authenticator.authenticateApp(context)
            let body = try await request.decodeJSON(IdentityTokenCredentials.self, limit: 64 << 10)
            let provider = try await directory.methods(container: container).provider(named: body.provider, container: container)
            let session = try await attempt([addressKey(context)], failingWith: .authenticationFailed) {
                let subject = try await directory.verify(body.identityToken, of: provider, nonce: body.nonce)
                return try await accounts.signIn(
                    subject, provider: provider, container: container, givenName: body.givenName,
                    familyName: body.familyName)
            }
            return Self.sessionResponse(session)
        }
        router.on(Endpoints.signInWebStart) { request, context in
            let container = try authenticator.authenticateApp(context)
            return try await webSignIn.start(
                provider: try context.parameters.require("provider"), container: container,
                handoff: try handoff(request, container: container), request: request)
        }
        @Sendable func finish(
            _ request: Request, _ context: StratusRequestContext, parameters: [String: String]
        ) async throws -> Response {
            let container = try await accounts.existingContainer(try context.parameters.require("container"))
            let provider = try context.parameters.require("provider")
            guard SignInMethods.isProviderName(provider) else {
                throw StratusError.badRequest("provider must be 1 to 32 lowercase letters, digits and hyphens, not '\(provider)'")
            }
            return await webSignIn.finish(
                container: container, provider: provider,
                parameters: parameters, request: request
            ) { signIn in
                try await attempt([addressKey(context)], failingWith: .authenticationFailed, signIn)
            }
        }
        router.on(Endpoints.signInReturn) { request, context in
            var parameters: [String: String] = [:]
            for (name, value) in request.uri.queryParameters where parameters[String(name)] == nil {
                parameters[String(name)] = String(value)
            }
            return try await finish(request, context, parameters: parameters)
        }
        // Apple posts its answer as a form.
        router.on(Endpoints.signInReturnPost) { request, context in
            try await finish(request, context, parameters: try await ConsoleEndpoints.form(request))
        }
        router.on(Endpoints.appleNotifications) { request, context in
            let container = try await accounts.existingContainer(try context.parameters.require("container"))
            let payload: String = try await request.decodeJSON(JSONValue.self, limit: 64 << 10).object().decode("payload")
            let apple = try await directory.methods(container: container).provider(
                named: IdentityProvider.appleName, container: container)
            let notification = try await directory.verifyAppleNotification(payload, of: apple)
            try await accounts.apply(appleNotification: notification, container: container)
            return Response(status: .ok)
        }
        router.on(Endpoints.identities) { request, context in
            let (container, user) = try signedInUser(context)
            return .json(try await linkedIdentities(container: container, user: user))
        }
        router.on(Endpoints.identitiesLink) { request, context in
            let (container, user) = try signedInUser(context)
            try await accounts.requireRecentSignIn(webAuthToken: request.query("ckWebAuthToken"), container: container)
            let body = try await request.decodeJSON(IdentityTokenCredentials.self, limit: 64 << 10)
            let provider = try await directory.methods(container: container).provider(named: body.provider, container: container)
            let identity = try await attempt([addressKey(context)], failingWith: .authenticationFailed) {
                let subject = try await directory.verify(body.identityToken, of: provider, nonce: body.nonce)
                return try await accounts.link(subject, provider: provider, container: container, userRecordName: user)
            }
            return .json(Self.linked(identity))
        }
        router.on(Endpoints.identitiesUnlink) { request, context in
            let (container, user) = try signedInUser(context)
            let body = try await request.decodeJSON(UnlinkIdentityRequest.self, limit: 64 << 10)
            try await accounts.unlink(
                issuer: body.issuer, subject: body.subject, container: container, userRecordName: user,
                passwordsEnabled: try await directory.methods(container: container).passwordsEnabled)
            return .json(try await linkedIdentities(container: container, user: user))
        }
        router.on(Endpoints.setPassword) { request, context in
            let (container, user) = try signedInUser(context)
            try await requirePasswords(container)
            try await accounts.requireRecentSignIn(webAuthToken: request.query("ckWebAuthToken"), container: container)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            // A taken username counts as a failed guess of this address, as at sign-up.
            try await attempt([addressKey(context)], failingWith: .exists) {
                try await accounts.setPassword(
                    username: body.username, password: body.password, container: container, userRecordName: user)
            }
            return .json(try await linkedIdentities(container: container, user: user))
        }
    }

    private func signedInUser(_ context: StratusRequestContext) throws -> (container: String, user: String) {
        let container = try authenticator.authenticateApp(context)
        guard let user = context.caller.userRecordName else {
            throw StratusError(.authenticationRequired, "sign in first: pass ckWebAuthToken")
        }
        return (container, user)
    }

    private func linkedIdentities(container: String, user: String) async throws -> LinkedIdentities {
        let identities = try await accounts.identities(container: container, userRecordName: user)
        let hasPassword = try await accounts.storage.user(container: container, recordName: user).map(AccountService.hasPassword)
        return LinkedIdentities(identities: identities.map(Self.linked), hasPassword: hasPassword ?? false)
    }

    /// An identity as the wire shows it.
    static func linked(_ identity: FederatedIdentity) -> LinkedIdentity {
        LinkedIdentity(
            provider: identity.provider, issuer: identity.issuer, subject: identity.subject,
            emailAddress: identity.emailAddress, emailVerified: identity.emailVerified, created: identity.createdAt,
            lastSignIn: identity.lastSignInAt)
    }
}

extension AccountService {
    /// Acts on one of Apple's notifications about a user of Sign in with Apple, unless it was seen
    /// before (its `jti`) or is older than the identity (a notification about an earlier account):
    /// - `account-delete` (the user deleted their Apple account): the account is deleted when Apple
    ///   was its only way in; otherwise the Apple identity is unlinked and the user signed out;
    /// - `consent-revoked` (the user stopped using Sign in with Apple with the app): the user is
    ///   signed out everywhere (sessions, push registrations), as Apple asks; their next Apple
    ///   sign-in asks for consent again;
    /// - `email-disabled` and `email-enabled`: whether Apple's relay forwards mail is noted.
    ///
    /// A subject no account has is ignored.
    func apply(appleNotification notification: IdentityProviderDirectory.AppleNotification, container: String) async throws {
        guard try await storage.claimNonce(
            Secrets.hash("apple-notification\n\(container)\n\(notification.id)"), expiresAt: notification.issued * 1000 + 2 * 86_400_000,
            now: now)
        else { return }
        let event = notification.event
        let type: String = try event.decode("type")
        let subject: String = try event.decode("sub")
        guard let identity = try await storage.identity(container: container, issuer: IdentityProvider.appleIssuer, subject: subject)
        else { return }
        // Apple writes the time in seconds or milliseconds since 1970; clocks differ by up to the skew.
        let written: Int64 = try event.decodeIfPresent("event_time") ?? now
        let eventTime = written < 100_000_000_000 ? written * 1000 : written
        guard eventTime + IdentityProviderDirectory.clockSkewSeconds * 1000 >= identity.createdAt else { return }
        let user = identity.userRecordName
        switch type {
        case "account-delete":
            let others = try await storage.identities(container: container, userRecordName: user).count - 1
            let hasPassword = try await storage.user(container: container, recordName: user).map(Self.hasPassword) ?? false
            if others == 0, !hasPassword {
                try await deleteAccount(container: container, recordName: user)
            } else {
                _ = try await storage.unlinkIdentity(container: container, issuer: identity.issuer, subject: subject)
                try await signOutEverywhere(container: container, recordName: user)
            }
        case "consent-revoked":
            try await signOutEverywhere(container: container, recordName: user)
        case "email-disabled", "email-enabled":
            try await storage.recordIdentitySignIn(
                container: container, issuer: identity.issuer, subject: subject,
                emailAddress: try event.decodeIfPresent("email"), emailVerified: type == "email-enabled",
                at: identity.lastSignInAt)
        default:
            break
        }
    }

    /// Ends a user's sessions, push registrations and push connections, on every instance.
    func signOutEverywhere(container: String, recordName: String) async throws {
        let ended = try await storage.endSessions(container: container, recordName: recordName)
        await revoke(CredentialRevocation(container: container, userRecordName: recordName, sessionHashes: ended))
    }
}
