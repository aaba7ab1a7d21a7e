/// The body of `signin/token` and `identities/link`: an ID token a provider issued to the app.
public struct IdentityTokenCredentials: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The provider's name in the container's configuration: `apple`, or an OpenID Connect
    /// provider's name.
    public var provider: String
    /// The ID token (a JWT) as the provider gave it.
    public var identityToken: String
    /// The random value the app made for this sign-in. The token's `nonce` claim must be it, or
    /// for Sign in with Apple its SHA-256 in hex (the app passes the hash to Apple and this value
    /// here). Each value signs in once.
    public var nonce: String
    /// The user's given name, which Apple gives the app (not the token) on the first sign-in.
    public var givenName: String?
    /// The user's family name, as ``givenName``.
    public var familyName: String?

    /// Creates credentials.
    public init(provider: String, identityToken: String, nonce: String, givenName: String? = nil, familyName: String? = nil) {
        self.provider = provider
        self.identityToken = identityToken
        self.nonce = nonce
        self.givenName = givenName
        self.familyName = familyName
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        provider = try object.decode("provider")
        identityToken = try object.decode("identityToken")
        nonce = try object.decode("nonce")
        givenName = try object.decodeIfPresent("givenName")
        familyName = try object.decodeIfPresent("familyName")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("provider", provider)
        writer.field("identityToken", identityToken)
        writer.field("nonce", nonce)
        writer.field("givenName", givenName)
        writer.field("familyName", familyName)
        writer.endObject()
    }
}

/// An identity at a provider that signs a user in.
public struct LinkedIdentity: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The provider's name in the container's configuration.
    public var provider: String
    /// The provider's issuer (`iss`).
    public var issuer: String
    /// The user's subject at the provider (`sub`).
    public var subject: String
    /// The e-mail address the provider last gave, if any.
    public var emailAddress: String?
    /// Whether the provider verified ``emailAddress``.
    public var emailVerified: Bool
    /// When the identity was linked, in milliseconds since 1970.
    public var created: Int64
    /// When it last signed in, in milliseconds since 1970.
    public var lastSignIn: Int64

    /// Creates an identity.
    public init(
        provider: String, issuer: String, subject: String, emailAddress: String?, emailVerified: Bool, created: Int64,
        lastSignIn: Int64
    ) {
        self.provider = provider
        self.issuer = issuer
        self.subject = subject
        self.emailAddress = emailAddress
        self.emailVerified = emailVerified
        self.created = created
        self.lastSignIn = lastSignIn
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        provider = try object.decode("provider")
        issuer = try object.decode("issuer")
        subject = try object.decode("subject")
        emailAddress = try object.decodeIfPresent("emailAddress")
        emailVerified = try object.decodeIfPresent("emailVerified") ?? false
        created = try object.decode("created")
        lastSignIn = try object.decode("lastSignIn")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("provider", provider)
        writer.field("issuer", issuer)
        writer.field("subject", subject)
        writer.field("emailAddress", emailAddress)
        writer.field("emailVerified", emailVerified)
        writer.field("created", created)
        writer.field("lastSignIn", lastSignIn)
        writer.endObject()
    }
}

/// The answer of `identities`: the signed-in user's identities, oldest first, and whether the
/// account also has a password.
public struct LinkedIdentities: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The identities.
    public var identities: [LinkedIdentity]
    /// Whether the user can also sign in with a username and password.
    public var hasPassword: Bool

    /// Creates the answer.
    public init(identities: [LinkedIdentity], hasPassword: Bool) {
        self.identities = identities
        self.hasPassword = hasPassword
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        identities = try object.decode("identities")
        hasPassword = try object.decode("hasPassword")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("identities", array: identities)
        writer.field("hasPassword", hasPassword)
        writer.endObject()
    }
}

/// The body of `identities/unlink`: the identity to stop signing in with.
public struct UnlinkIdentityRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The provider's issuer.
    public var issuer: String
    /// The user's subject at the provider.
    public var subject: String

    /// Creates the request.
    public init(issuer: String, subject: String) {
        self.issuer = issuer
        self.subject = subject
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        issuer = try object.decode("issuer")
        subject = try object.decode("subject")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("issuer", issuer)
        writer.field("subject", subject)
        writer.endObject()
    }
}
