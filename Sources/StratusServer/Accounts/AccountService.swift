import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix
package import StratusModel
package import StratusStorage
import Synchronization

/// A signed-in session as handed to a client.
package struct IssuedSession: Sendable, Hashable {
    /// The web auth token (`ckWebAuthToken`); the server keeps only its hash.
    package var webAuthToken: String
    /// The signed-in user.
    package var userRecordName: String
    /// When the token stops working, in milliseconds since 1970.
    package var expiresAt: Int64
}

/// Containers, API tokens, users and sessions: the rules for creating and checking them, shared by
/// the HTTP endpoints and the `stratus admin` commands.
package struct AccountService: Sendable {
    let storage: any AccountStorage
    let configuration: ServerConfiguration
    private let credentials: CredentialCaches
    /// Tells the server of what a revocation ended (``PushHub/revoke(_:)``).
    private let announce: @Sendable (CredentialRevocation) async -> Void
    private var apiTokens: CredentialCache<String> { credentials.apiTokens }
    private var sessions: CredentialCache<SessionInfo> { credentials.sessions }

    /// Creates the service.
    package init(storage: any AccountStorage, configuration: ServerConfiguration) {
        self.init(storage: storage, configuration: configuration, credentials: CredentialCaches(clock: configuration.clock)) { _ in }
    }

    /// Creates the service of a server: its caches are the ones `credentials` shares with the push
    /// hub, and `announce` hears of each revocation after the caches forgot it.
    init(
        storage: any AccountStorage, configuration: ServerConfiguration, credentials: CredentialCaches,
        announce: @escaping @Sendable (CredentialRevocation) async -> Void
    ) {
        self.storage = storage
        self.configuration = configuration
        self.credentials = credentials
        self.announce = announce
    }

    /// Forgets what `revocation` ended, here and, through `announce`, on the other instances.
    func revoke(_ revocation: CredentialRevocation) async {
        credentials.forget(revocation)
        await announce(revocation)
    }

    /// Real hashes to check passwords of unknown usernames against, one per bcrypt cost (made on
    /// first use), so that an unknown username costs as much time as a known one.
    private static let unknownUserHashes = Mutex<[UInt8: String]>([:])

    func unknownUserHash() async throws -> String {
        let cost = configuration.passwordHashCost
        if let hash = Self.unknownUserHashes.withLock({ $0[cost] }) { return hash }
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(Secrets.makeToken(), cost: cost) }
        Self.unknownUserHashes.withLock { $0[cost] = hash }
        return hash
    }


    // MARK: Administration

    /// Creates a container. Identifiers are printable ASCII without `/`, up to 255 characters.
    @discardableResult
    package func createContainer(_ identifier: String, allowsSignUp: Bool = true) async throws -> ContainerInfo {
        if let violation = configuration.limits.violation(ofName: identifier) {
            throw StratusError.badRequest("container identifier \(violation)")
        }
        guard !identifier.contains("/"), !identifier.contains(" ") else {
            throw StratusError.badRequest("container identifier must not contain '/' or spaces")
        }
        let container = ContainerInfo(identifier: identifier, allowsSignUp: allowsSignUp, createdAt: configuration.clock.milliseconds)
        try await storage.createContainer(container)
        return container
    }

    /// Creates an API token for a container and returns it; only its hash is stored.
    package func createAPIToken(container: String, name: String = "default") async throws -> String {
        let token = Secrets.makeHexToken()
        try await storage.createAPIToken(
            hash: Secrets.hash(token), container: container, name: name, createdAt: configuration.clock.milliseconds)
        return token
    }

    /// Revokes an API token of a container, named by its ID (the SHA-256 of the token in hex, as the
    /// token list shows it); `NOT_FOUND` when the container has no such token. Every instance refuses
    /// it at once (``CredentialRevocation``).
    package func revokeAPIToken(container: String, id: String) async throws {
        try await storage.requireContainer(container)
        guard try await storage.deleteAPIToken(hash: id, container: container) else {
            throw StratusError(.notFound, "container '\(container)' has no API token '\(id)'")
        }
        await revoke(CredentialRevocation(container: container, apiTokenHashes: [id]))
    }

    /// Registers a server-to-server key for a container and environment: `publicKeyPEM` must be an
    /// ECDSA P-256 public key in PEM. The key gets a new ID (64 hexadecimal digits, as Apple's) and
    /// its own user, who cannot sign in and is the creator of what the key writes.
    package func registerServerKey(
        container: String, environment: ContainerEnvironment, publicKeyPEM: String
    ) async throws -> ServerKeyInfo {
        guard (try? P256.Signing.PublicKey(pemRepresentation: publicKeyPEM)) != nil else {
            throw StratusError.badRequest(
                "publicKey must be an ECDSA P-256 public key in PEM ('-----BEGIN PUBLIC KEY-----'), as "
                    + "'openssl ec -in key.pem -pubout' writes it")
        }
        let keyID = Secrets.makeHexToken()
        let unusable = try await unusablePasswordHash()
        let now = configuration.clock.milliseconds
        // A username sign-up refuses (':'), so nobody can sign in as the key or claim its name.
        let user = UserInfo(
            container: container, recordName: Secrets.makeUserRecordName(), username: "server-key:\(keyID)",
            passwordHash: unusable, createdAt: now)
        try await storage.createUser(user)
        let key = ServerKeyInfo(
            keyID: keyID, container: container, environment: environment, publicKeyPEM: publicKeyPEM,
            userRecordName: user.recordName, createdAt: now)
        try await storage.createServerKey(key)
        return key
    }

    /// The time now, in milliseconds since 1970, by the server's clock.
    var now: Int64 { configuration.clock.milliseconds }

    /// A server-to-server key by ID.
    func serverKey(id: String) async throws -> ServerKeyInfo? {
        try await storage.serverKey(id: id)
    }

    /// Creates a user account with a bcrypt-hashed password.
    @discardableResult
    package func createUser(container: String, username: String, password: String) async throws -> UserInfo {
        try Self.validate(username: username, password: password)
        let cost = configuration.passwordHashCost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
        let user = UserInfo(
            container: container, recordName: Secrets.makeUserRecordName(), username: username, passwordHash: hash,
            createdAt: configuration.clock.milliseconds)
        try await storage.createUser(user)
        return user
    }

    /// `container` when it exists; `NOT_FOUND` otherwise.
    func existingContainer(_ container: String) async throws -> String {
        try await storage.requireContainer(container).identifier
    }

    /// A user of the container who is not disabled, whom the console may act as; `NOT_FOUND` otherwise.
    func activeUser(container: String, recordName: String) async throws -> String {
        guard let user = try await storage.user(container: container, recordName: recordName), user.disabledAt == nil else {
            throw StratusError(.notFound, "container '\(container)' has no active user '\(recordName)'")
        }
        return user.recordName
    }

    /// Disables a user (or enables them again): a disabled user cannot sign in, and their sessions,
    /// push tokens and push connections end at once.
    package func setDisabled(_ disabled: Bool, container: String, recordName: String) async throws {
        let ended = try await storage.setUserDisabled(
            disabled, container: container, recordName: recordName, at: configuration.clock.milliseconds)
        if disabled {
            await revoke(CredentialRevocation(container: container, userRecordName: recordName, sessionHashes: ended))
        }
    }

    /// Replaces a user's password (the same policy as at sign-up, the user's username included) and
    /// ends their sessions, push tokens and push connections.
    package func resetPassword(_ password: String, container: String, recordName: String) async throws {
        let username = try await storage.user(container: container, recordName: recordName)?.username
        if let violation = PasswordPolicy.violation(of: password, username: username) {
            throw StratusError.badRequest(violation)
        }
        let cost = configuration.passwordHashCost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
        let ended = try await storage.setPasswordHash(hash, container: container, recordName: recordName)
        await revoke(CredentialRevocation(container: container, userRecordName: recordName, sessionHashes: ended))
    }

    /// Why `username` cannot name an account, or `nil` when it can: 1 to 64 characters of ASCII
    /// letters, digits and `. _ @ + -`. Sign-in checks it too, before the name keys a lock.
    static func usernameViolation(_ username: String) -> String? {
        guard (1...64).contains(username.utf8.count), username.utf8.allSatisfy(allowedUsernameBytes.contains) else {
            return "username must be 1 to 64 characters of letters, digits and . _ @ + -"
        }
        return nil
    }

    private static let allowedUsernameBytes = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+-".utf8)

    private static func validate(username: String, password: String) throws {
        if let violation = usernameViolation(username) { throw StratusError.badRequest(violation) }
        if let violation = PasswordPolicy.violation(of: password, username: username) {
            throw StratusError.badRequest(violation)
        }
    }

    // MARK: Sign-up and sign-in

    /// Creates an account and signs it in, if the container allows self sign-up.
    package func signUp(container: String, username: String, password: String) async throws -> IssuedSession {
        let info = try await storage.requireContainer(container)
        guard info.allowsSignUp else {
            throw StratusError(.accessDenied, "container '\(container)' does not allow sign-up; ask an admin for an account")
        }
        return try await issueSession(for: try await createUser(container: container, username: username, password: password))
    }

    /// Checks a username and password and starts a session.
    package func signIn(container: String, username: String, password: String) async throws -> IssuedSession {
        let user = try await storage.user(container: container, username: username)
        // Verify against a dummy hash when the user is unknown, so timing does not reveal usernames.
        let hash = if let user { user.passwordHash } else { try await unknownUserHash() }
        let valid = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
        guard let user, valid else {
            throw StratusError(.authenticationFailed, "wrong username or password")
        }
        // Said only to the one who knows the password.
        guard user.disabledAt == nil else {
            throw StratusError(.accessDenied, "this account is disabled; ask the app's administrator")
        }
        return try await issueSession(for: user)
    }

    /// Starts a session of `user` as read before its password was checked; refused when the user was
    /// disabled or given another password since.
    func issueSession(for user: UserInfo) async throws -> IssuedSession {
        let token = Secrets.makeToken()
        let expiresAt = configuration.clock.milliseconds + configuration.sessionLifetimeSeconds * 1000
        guard try await storage.createSession(
            hash: Secrets.hash(token),
            session: SessionInfo(container: user.container, userRecordName: user.recordName, expiresAt: expiresAt),
            passwordHash: user.passwordHash)
        else {
            throw StratusError(
                .authenticationFailed, "the account was disabled or given another password while signing in; sign in again")
        }
        return IssuedSession(webAuthToken: token, userRecordName: user.recordName, expiresAt: expiresAt)
    }

    /// Ends the session of a web auth token of `container`, and the push connections it opened.
    package func signOut(webAuthToken: String, container: String) async throws {
        let hash = Secrets.hash(webAuthToken)
        try await storage.deleteSession(hash: hash)
        await revoke(CredentialRevocation(container: container, sessionHashes: [hash]))
    }

    // MARK: Authentication of requests

    /// The container an API token belongs to; `AUTHENTICATION_FAILED` for an unknown token.
    package func container(forAPIToken token: String) async throws -> String {
        let hash = Secrets.hash(token)
        guard let container = try await apiTokens.value(for: hash, load: { try await storage.containerForAPIToken(hash: hash) })
        else {
            throw StratusError(.authenticationFailed, "ckAPIToken is not a valid API token")
        }
        return container
    }

    /// The user a web auth token signs in; `AUTHENTICATION_FAILED` when it is unknown, expired or
    /// issued for another container.
    package func user(forWebAuthToken token: String, container: String) async throws -> String {
        let hash = Secrets.hash(token)
        guard let session = try await sessions.value(for: hash, load: { try await storage.session(hash: hash) }),
            session.container == container
        else {
            throw StratusError(.authenticationFailed, "ckWebAuthToken is not a valid session; sign in again")
        }
        guard session.expiresAt > configuration.clock.milliseconds else {
            throw StratusError(.authenticationFailed, "ckWebAuthToken has expired; sign in again")
        }
        return session.userRecordName
    }
}
