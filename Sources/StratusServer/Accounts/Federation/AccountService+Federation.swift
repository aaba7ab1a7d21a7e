import Foundation
import HummingbirdBcrypt
import NIOPosix
import StratusModel
package import StratusStorage

/// Accounts known by an identity provider: found by the provider's (issuer, subject), never by an
/// e-mail address alone.
extension AccountService {
    /// How long after a token expires its nonce stays used: longer than any instance's clock may
    /// be behind, so that no instance takes the token again.
    static let nonceMarginSeconds: Int64 = 600

    /// Uses up the nonce of a verified token, so that the token cannot sign in again; refused when
    /// it was used before, on any instance.
    private func claimNonce(of subject: IdentityToken.Subject, container: String) async throws {
        guard let nonce = subject.nonce,
            try await storage.claimNonce(
                Secrets.hash("\(container)\n\(subject.issuer)\n\(nonce)"),
                expiresAt: (subject.expires + Self.nonceMarginSeconds) * 1000, now: now)
        else {
            throw IdentityToken.refusal("was used before (its nonce was seen); sign in again for a new token")
        }
    }

    /// Signs in the user `subject` names at `provider`, creating the account on the first sign-in
    /// when the container allows sign-up. An e-mail address the provider verified, of a provider
    /// trusted with addresses (``IdentityProvider/trustsEmail``), is recorded for a new account (for discovery, which stays off until the user turns it on); a token whose
    /// address belongs to another account creates nothing: the user signs in to that account and
    /// links the provider there. `givenName` and `familyName` (which Apple gives the app, not the
    /// token, on the first sign-in only) name a new account.
    func signIn(
        _ subject: IdentityToken.Subject, provider: IdentityProvider, container: String, givenName: String?,
        familyName: String?
    ) async throws -> IssuedSession {
        let info = try await storage.requireContainer(container)
        try await claimNonce(of: subject, container: container)
        if let identity = try await storage.identity(container: container, issuer: subject.issuer, subject: subject.subject) {
            return try await signIn(subject, linkedTo: identity, container: container)
        }
        guard info.allowsSignUp else {
            throw StratusError(.accessDenied, "container '\(container)' does not allow sign-up; ask an admin for an account")
        }
        try await refuseAddressOfAnotherAccount(subject, provider: provider, container: container)
        let user = UserInfo(
            container: container, recordName: Secrets.makeUserRecordName(),
            username: "id:" + Secrets.hash("\(subject.issuer)\n\(subject.subject)").prefix(32),
            passwordHash: try await unusablePasswordHash(), createdAt: now,
            emailAddress: provider.trustsEmail && subject.emailVerified ? subject.emailAddress : nil,
            givenName: Self.name(givenName) ?? Self.name(subject.givenName),
            familyName: Self.name(familyName) ?? Self.name(subject.familyName))
        do {
            try await storage.createUser(
                user, identity: identity(of: subject, provider: provider, container: container, user: user.recordName))
        } catch let error as StratusError where error.code == .exists {
            // Another first sign-in of the same person made the account a moment ago.
            guard let identity = try await storage.identity(container: container, issuer: subject.issuer, subject: subject.subject)
            else { throw error }
            return try await signIn(subject, linkedTo: identity, container: container)
        }
        return try await issueSession(for: user)
    }

    /// Signs in the user `identity` names, noting the sign-in.
    private func signIn(
        _ subject: IdentityToken.Subject, linkedTo identity: FederatedIdentity, container: String
    ) async throws -> IssuedSession {
        guard let user = try await storage.user(container: container, recordName: identity.userRecordName) else {
            throw StratusError(.authenticationFailed, "the account of this identity was deleted; sign in again")
        }
        guard user.disabledAt == nil else {
            throw StratusError(.accessDenied, "this account is disabled; ask the app's administrator")
        }
        try await storage.recordIdentitySignIn(
            container: container, issuer: subject.issuer, subject: subject.subject, emailAddress: subject.emailAddress,
            emailVerified: subject.emailVerified, at: now)
        return try await issueSession(for: user)
    }

    /// Links `subject`'s identity at `provider` to a signed-in user, who may then sign in with it.
    func link(_ subject: IdentityToken.Subject, provider: IdentityProvider, container: String, userRecordName: String)
        async throws -> FederatedIdentity
    {
        try await claimNonce(of: subject, container: container)
        if let linked = try await storage.identity(container: container, issuer: subject.issuer, subject: subject.subject) {
            throw StratusError(
                .exists,
                linked.userRecordName == userRecordName
                    ? "this \(provider.name) account is linked to this user already"
                    : "this \(provider.name) account signs in to another user; sign in with it and delete that account, or unlink it there first")
        }
        let identity = identity(of: subject, provider: provider, container: container, user: userRecordName)
        try await storage.linkIdentity(identity)
        if provider.trustsEmail, subject.emailVerified, let address = subject.emailAddress,
            try await storage.user(container: container, recordName: userRecordName)?.emailAddress == nil
        {
            // The address may be another account's; then this one goes without.
            try? await storage.setEmailAddress(address, container: container, recordName: userRecordName)
        }
        return identity
    }

    /// Unlinks an identity from its user, unless it is the user's last way to sign in (a password
    /// counts only while `passwordsEnabled`).
    func unlink(
        issuer: String, subject: String, container: String, userRecordName: String, passwordsEnabled: Bool
    ) async throws {
        let identities = try await storage.identities(container: container, userRecordName: userRecordName)
        guard identities.contains(where: { $0.issuer == issuer && $0.subject == subject }) else {
            throw StratusError(.notFound, "this user has no identity of '\(issuer)' with subject '\(subject)'")
        }
        let hasPassword = try await storage.user(container: container, recordName: userRecordName).map(Self.hasPassword) ?? false
        guard (passwordsEnabled && hasPassword) || identities.count > 1 else {
            throw StratusError.badRequest(
                "this is the user's only way to sign in; link another provider or set a password first")
        }
        _ = try await storage.unlinkIdentity(container: container, issuer: issuer, subject: subject)
    }

    /// Unlinks an identity of a user as the operator does, even the user's last one.
    package func revokeIdentity(issuer: String, subject: String, container: String, userRecordName: String) async throws {
        guard try await storage.identity(container: container, issuer: issuer, subject: subject)?.userRecordName == userRecordName,
            try await storage.unlinkIdentity(container: container, issuer: issuer, subject: subject)
        else {
            throw StratusError(.notFound, "user '\(userRecordName)' has no identity of '\(issuer)' with subject '\(subject)'")
        }
    }

    /// How recent a sign-in must be to add a way in (a provider, a password): a stolen session
    /// cannot make itself permanent.
    static let recentSignInMilliseconds: Int64 = 300_000

    /// Refuses a session that did not sign in within ``recentSignInMilliseconds``.
    func requireRecentSignIn(webAuthToken: String?, container: String) async throws {
        guard let webAuthToken, let session = try await storage.session(hash: Secrets.hash(webAuthToken)),
            session.container == container,
            now - (session.expiresAt - configuration.sessionLifetimeSeconds * 1000) <= Self.recentSignInMilliseconds
        else {
            throw StratusError(
                .authenticationFailed,
                "adding a way to sign in needs a session at most \(Self.recentSignInMilliseconds / 60_000) minutes old; sign in again first")
        }
    }

    /// Gives an account made by an identity provider a username and password to sign in with too.
    func setPassword(username: String, password: String, container: String, userRecordName: String) async throws {
        guard let user = try await storage.user(container: container, recordName: userRecordName) else {
            throw StratusError(.notFound, "container '\(container)' has no user '\(userRecordName)'")
        }
        guard !Self.hasPassword(user) else {
            throw StratusError.badRequest("this account has a password already; an administrator can reset it")
        }
        if let violation = Self.usernameViolation(username) { throw StratusError.badRequest(violation) }
        if let violation = PasswordPolicy.violation(of: password, username: username) { throw StratusError.badRequest(violation) }
        // Checked before the slow hash; the storage checks again as it writes.
        guard try await storage.user(container: container, username: username) == nil else {
            throw StratusError(.exists, "username '\(username)' is taken")
        }
        let cost = configuration.passwordHashCost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
        try await storage.setUsernameAndPassword(
            username: username, passwordHash: hash, container: container, recordName: userRecordName)
    }

    /// A user's identities at providers, oldest first.
    package func identities(container: String, userRecordName: String) async throws -> [FederatedIdentity] {
        try await storage.identities(container: container, userRecordName: userRecordName)
    }

    /// Deletes an account as CloudKit deletes an Apple ID's data: its private database (so that
    /// what it shared is shared no more), its shares with others, sessions, push registrations and
    /// identities. Its records in the public database stay.
    package func deleteAccount(container: String, recordName: String) async throws {
        let ended = try await storage.deleteUser(container: container, recordName: recordName)
        await revoke(CredentialRevocation(container: container, userRecordName: recordName, sessionHashes: ended))
    }

    /// Whether a user can sign in with a password: accounts made by a provider have a username
    /// (`id:…`) no one can type until they set one.
    static func hasPassword(_ user: UserInfo) -> Bool {
        !user.username.hasPrefix("id:") && !user.username.hasPrefix("server-key:")
    }

    private func refuseAddressOfAnotherAccount(
        _ subject: IdentityToken.Subject, provider: IdentityProvider, container: String
    ) async throws {
        guard let address = subject.emailAddress, try await storage.user(container: container, emailAddress: address) != nil
        else { return }
        throw StratusError(
            .exists,
            subject.emailVerified
                ? "an account with the e-mail address \(address) exists; sign in to it and link \(provider.name) there"
                : "the token's e-mail address \(address) is not verified by \(provider.name) and belongs to another account; "
                    + "no account was created")
    }

    private func identity(
        of subject: IdentityToken.Subject, provider: IdentityProvider, container: String, user: String
    ) -> FederatedIdentity {
        FederatedIdentity(
            container: container, issuer: subject.issuer, subject: subject.subject, provider: provider.name, userRecordName: user,
            emailAddress: subject.emailAddress, emailVerified: subject.emailVerified, createdAt: now, lastSignInAt: now)
    }

    /// A bcrypt hash of a random secret no one knows: the password of an account that signs in
    /// otherwise.
    func unusablePasswordHash() async throws -> String {
        let cost = configuration.passwordHashCost
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(Secrets.makeToken(), cost: cost) }
    }

    /// A display name of 1 to 100 characters without control characters, or `nil`.
    private static func name(_ text: String?) -> String? {
        guard let text = text?.trimmingCharacters(in: .whitespacesAndNewlines), (1...100).contains(text.count),
            !text.contains(where: { $0.unicodeScalars.contains { $0.properties.generalCategory == .control } })
        else { return nil }
        return text
    }
}
