public import StratusModel

/// A container: an app's namespace on the server.
public struct ContainerInfo: Hashable, Sendable {
    /// Its identifier, e.g. `iCloud.com.example.notes`.
    public var identifier: String
    /// Whether anyone holding an API token may create an account.
    public var allowsSignUp: Bool
    /// When it was created, in milliseconds since 1970.
    public var createdAt: Int64

    /// Creates container information.
    public init(identifier: String, allowsSignUp: Bool, createdAt: Int64) {
        self.identifier = identifier
        self.allowsSignUp = allowsSignUp
        self.createdAt = createdAt
    }
}

/// A user account of a container.
public struct UserInfo: Hashable, Sendable {
    /// The container the account belongs to.
    public var container: String
    /// The user's record name (`_` followed by 32 hex digits), the user's identity on the wire.
    public var recordName: String
    /// The name the user signs in with.
    public var username: String
    /// The password's slow salted hash (bcrypt).
    public var passwordHash: String
    /// When the account was created, in milliseconds since 1970.
    public var createdAt: Int64
    /// The e-mail address an administrator recorded for the account (lowercased), by which others
    /// may find the user when ``discoverable``.
    public var emailAddress: String?
    /// Whether the user lets others find them (off for new accounts, as in CloudKit).
    public var discoverable: Bool
    /// The given name the user shows when found.
    public var givenName: String?
    /// The family name the user shows when found.
    public var familyName: String?
    /// When an administrator disabled the account (milliseconds since 1970): a disabled user cannot
    /// sign in. `nil` for an account in use.
    public var disabledAt: Int64?

    /// Creates user information.
    public init(
        container: String, recordName: String, username: String, passwordHash: String, createdAt: Int64,
        emailAddress: String? = nil, discoverable: Bool = false, givenName: String? = nil, familyName: String? = nil,
        disabledAt: Int64? = nil
    ) {
        self.disabledAt = disabledAt
        self.container = container
        self.recordName = recordName
        self.username = username
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.emailAddress = emailAddress
        self.discoverable = discoverable
        self.givenName = givenName
        self.familyName = familyName
    }
}

/// A user's identity at an identity provider (Sign in with Apple, an OpenID Connect provider): the
/// provider's issuer and its subject for the user name one user of a container.
public struct FederatedIdentity: Hashable, Sendable {
    /// The container whose user it names.
    public var container: String
    /// The provider's issuer: the ID token's `iss`, e.g. `https://appleid.apple.com`.
    public var issuer: String
    /// The user's identifier at the provider: the ID token's `sub`, unique within ``issuer``.
    public var subject: String
    /// The provider's name in the container's configuration: `apple`, or an OpenID Connect
    /// provider's name.
    public var provider: String
    /// The record name of the user it signs in.
    public var userRecordName: String
    /// The e-mail address the provider last gave for the user, lowercased; `nil` when it never gave one.
    public var emailAddress: String?
    /// Whether the provider said it verified ``emailAddress``.
    public var emailVerified: Bool
    /// When it was linked to the user, in milliseconds since 1970.
    public var createdAt: Int64
    /// When the user last signed in with it, in milliseconds since 1970.
    public var lastSignInAt: Int64

    /// Creates an identity.
    public init(
        container: String, issuer: String, subject: String, provider: String, userRecordName: String,
        emailAddress: String? = nil, emailVerified: Bool = false, createdAt: Int64, lastSignInAt: Int64
    ) {
        self.container = container
        self.issuer = issuer
        self.subject = subject
        self.provider = provider
        self.userRecordName = userRecordName
        self.emailAddress = emailAddress
        self.emailVerified = emailVerified
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
    }
}

/// A signed-in session, found by the hash of its web auth token.
public struct SessionInfo: Hashable, Sendable {
    /// The container it was issued for.
    public var container: String
    /// The signed-in user.
    public var userRecordName: String
    /// When it stops being valid, in milliseconds since 1970.
    public var expiresAt: Int64

    /// Creates session information.
    public init(container: String, userRecordName: String, expiresAt: Int64) {
        self.container = container
        self.userRecordName = userRecordName
        self.expiresAt = expiresAt
    }
}

/// An API token of a container, by the hash of its secret.
public struct APITokenInfo: Hashable, Sendable {
    /// The SHA-256 hash of the token, in hex.
    public var hash: String
    /// The container it opens.
    public var container: String
    /// A name to remember it by.
    public var name: String
    /// When it was made, in milliseconds since 1970.
    public var createdAt: Int64

    /// Creates a token description.
    public init(hash: String, container: String, name: String, createdAt: Int64) {
        self.hash = hash
        self.container = container
        self.name = name
        self.createdAt = createdAt
    }
}

/// A server-to-server key: an ECDSA P-256 public key an administrator registered for a container and
/// environment. Requests signed with its private key act on the public database as the key's own
/// user.
public struct ServerKeyInfo: Hashable, Sendable {
    /// The key's ID (64 hexadecimal digits), sent in `X-Apple-CloudKit-Request-KeyID`.
    public var keyID: String
    /// The container it opens.
    public var container: String
    /// The environment it opens.
    public var environment: ContainerEnvironment
    /// The public key, PEM-encoded.
    public var publicKeyPEM: String
    /// The user the key acts as: the creator of what it writes.
    public var userRecordName: String
    /// When it was registered, in milliseconds since 1970.
    public var createdAt: Int64
    /// When it was revoked, if it was.
    public var revokedAt: Int64?

    /// Creates a key description.
    public init(
        keyID: String, container: String, environment: ContainerEnvironment, publicKeyPEM: String,
        userRecordName: String, createdAt: Int64, revokedAt: Int64? = nil
    ) {
        self.keyID = keyID
        self.container = container
        self.environment = environment
        self.publicKeyPEM = publicKeyPEM
        self.userRecordName = userRecordName
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// One administrative action, as the audit log keeps it: who did what to what, when, and how it ended.
public struct AuditEntry: Hashable, Sendable {
    /// When, in milliseconds since 1970.
    public var time: Int64
    /// Who: the console session or admin token, and the client's address.
    public var actor: String
    /// What: the method and path of the request (never its credentials).
    public var action: String
    /// The HTTP status it was answered with.
    public var status: Int

    /// Creates an entry.
    public init(time: Int64, actor: String, action: String, status: Int) {
        self.time = time
        self.actor = actor
        self.action = action
        self.status = status
    }
}
