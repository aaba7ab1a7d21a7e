/// One operation of the protocol: its method and path, paired with the types of its request and
/// answer bodies.
///
/// The server routes these, the SDK calls them and the OpenAPI test checks them, all through
/// ``Endpoints``, so each path string exists once.
public struct Endpoint<Request: Sendable, Response: Sendable>: Sendable, Hashable {
    /// The HTTP method.
    public let method: EndpointMethod
    /// Where the path starts.
    public let base: EndpointBase
    /// The path after the base, such as `records/modify`; a `{name}` segment is a parameter.
    public let path: String

    init(_ method: EndpointMethod, _ base: EndpointBase, _ path: String) {
        self.method = method
        self.base = base
        self.path = path
    }

    /// The endpoint without its body types, for tables and checks.
    public var erased: AnyEndpoint { AnyEndpoint(method: method, base: base, path: path) }
}

/// An ``Endpoint`` without its body types.
public struct AnyEndpoint: Sendable, Hashable {
    /// The HTTP method.
    public let method: EndpointMethod
    /// Where the path starts.
    public let base: EndpointBase
    /// The path after the base.
    public let path: String

    /// The whole path as OpenAPI writes it: `/database/1/{container}/{environment}/{database}/records/modify`.
    public var template: String { base.template + "/" + path }
}

/// The HTTP method of an endpoint.
public enum EndpointMethod: String, Sendable, Hashable {
    /// `GET`.
    case get = "GET"
    /// `POST`.
    case post = "POST"
}

/// Where an endpoint's path starts.
public enum EndpointBase: String, Sendable, Hashable {
    /// `/database/1/{container}/{environment}/{database}`: an operation on one database.
    case database
    /// `/database/1/{container}/{environment}`: an operation of an environment (push tokens,
    /// capabilities).
    case environment
    /// `/auth/1/{container}`: accounts (a Stratus extension: CloudKit signs users in with Apple IDs).
    case auth
    /// `/device/1/{container}/{environment}`: push tokens at the path Apple's live service uses.
    case device

    /// The base as OpenAPI writes it.
    public var template: String {
        switch self {
        case .database: "/database/1/{container}/{environment}/{database}"
        case .environment: "/database/1/{container}/{environment}"
        case .auth: "/auth/1/{container}"
        case .device: "/device/1/{container}/{environment}"
        }
    }
}

/// A body that is not JSON of a known type: none (a `GET`), or an answer read as a plain JSON value
/// or as HTML.
public enum UntypedBody: Sendable {}

/// The table of the operations Stratus serves: CloudKit Web Services' paths, and the extensions
/// beside them (docs/protocol.md lists each).
public enum Endpoints {
    /// `zones/list`.
    public static let zonesList = Endpoint<UntypedBody, ZonesResponse>(.get, .database, "zones/list")
    /// `zones/lookup`.
    public static let zonesLookup = Endpoint<LookupZonesRequest, ZonesResponse>(.post, .database, "zones/lookup")
    /// `zones/modify`.
    public static let zonesModify = Endpoint<ModifyZonesRequest, ZonesResponse>(.post, .database, "zones/modify")
    /// `zones/changes`, the older name of `changes/database`.
    public static let zonesChanges =
        Endpoint<DatabaseChangesRequest, DatabaseChangesResponse>(.post, .database, "zones/changes")
    /// `records/modify`.
    public static let recordsModify = Endpoint<ModifyRecordsRequest, RecordsResponse>(.post, .database, "records/modify")
    /// `records/resolve`: share metadata for short GUIDs.
    public static let recordsResolve =
        Endpoint<ShortGUIDsRequest, ShareMetadataResponse>(.post, .database, "records/resolve")
    /// `records/accept`: accepts shares by short GUID.
    public static let recordsAccept =
        Endpoint<ShortGUIDsRequest, ShareMetadataResponse>(.post, .database, "records/accept")
    /// `records/lookup`.
    public static let recordsLookup = Endpoint<LookupRecordsRequest, RecordsResponse>(.post, .database, "records/lookup")
    /// `records/query`.
    public static let recordsQuery = Endpoint<QueryRecordsRequest, RecordsResponse>(.post, .database, "records/query")
    /// `records/changes`.
    public static let recordsChanges =
        Endpoint<RecordChangesRequest, RecordChangesResponse>(.post, .database, "records/changes")
    /// `records/digest` (a Stratus extension): a digest of a zone's live records at a sync token.
    public static let recordsDigest =
        Endpoint<ZoneDigestRequest, ZoneDigestResponse>(.post, .database, "records/digest")
    /// `changes/zone`.
    public static let changesZone = Endpoint<ZoneChangesRequest, UntypedBody>(.post, .database, "changes/zone")
    /// `changes/database`.
    public static let changesDatabase =
        Endpoint<DatabaseChangesRequest, DatabaseChangesResponse>(.post, .database, "changes/database")
    /// `users/caller`.
    public static let usersCaller = Endpoint<UntypedBody, UntypedBody>(.get, .database, "users/caller")
    /// `users/current`.
    public static let usersCurrent = Endpoint<UntypedBody, CurrentUserResponse>(.get, .database, "users/current")
    /// `GET users/discover`: the identities in the caller's address book (Stratus keeps none: empty).
    public static let usersDiscoverAll = Endpoint<UntypedBody, DiscoverUsersResponse>(.get, .database, "users/discover")
    /// `POST users/discover`: discoverable users by e-mail address or record name.
    public static let usersDiscover =
        Endpoint<DiscoverUsersRequest, DiscoverUsersResponse>(.post, .database, "users/discover")
    /// `users/lookup/email`: discoverable users by e-mail address, in the older user shape.
    public static let usersLookupEmail =
        Endpoint<LookupUsersRequest, LookupUsersResponse>(.post, .database, "users/lookup/email")
    /// `users/lookup/id`: discoverable users by record name, in the older user shape.
    public static let usersLookupID =
        Endpoint<LookupUsersRequest, LookupUsersResponse>(.post, .database, "users/lookup/id")
    /// `users/lookup/contacts`: discoverable users in the caller's address book, in the older user
    /// shape (Stratus keeps no address books: empty).
    public static let usersLookupContacts =
        Endpoint<UntypedBody, LookupUsersResponse>(.post, .database, "users/lookup/contacts")
    /// `GET users/lookup/contacts`: the same, as Apple's web library 1.x sends it.
    public static let usersLookupContactsByGET =
        Endpoint<UntypedBody, LookupUsersResponse>(.get, .database, "users/lookup/contacts")
    /// `users/discoverability` (Stratus extension): read (`GET`) or set (`POST`) whether the signed-in
    /// user may be found, and the name they show.
    public static let usersDiscoverability =
        Endpoint<UntypedBody, Discoverability>(.get, .database, "users/discoverability")
    /// `POST users/discoverability` (Stratus extension): sets it.
    public static let usersSetDiscoverability =
        Endpoint<Discoverability, Discoverability>(.post, .database, "users/discoverability")
    /// `subscriptions/list`.
    public static let subscriptionsList =
        Endpoint<UntypedBody, SubscriptionsResponse>(.get, .database, "subscriptions/list")
    /// `subscriptions/lookup`.
    public static let subscriptionsLookup =
        Endpoint<LookupSubscriptionsRequest, SubscriptionsResponse>(.post, .database, "subscriptions/lookup")
    /// `subscriptions/lookup` without a database segment, where Apple's reference puts it: the
    /// caller's subscriptions of that environment, in any database.
    public static let environmentSubscriptionsLookup =
        Endpoint<LookupSubscriptionsRequest, SubscriptionsResponse>(.post, .environment, "subscriptions/lookup")
    /// `subscriptions/modify`.
    public static let subscriptionsModify =
        Endpoint<ModifySubscriptionsRequest, SubscriptionsResponse>(.post, .database, "subscriptions/modify")
    /// `assets/upload`: upload URLs for asset fields.
    public static let assetsUpload =
        Endpoint<UploadAssetsRequest, UploadAssetsResponse>(.post, .database, "assets/upload")
    /// `assets/rereference`: fresh receipts for assets records already hold.
    public static let assetsRereference = Endpoint<UntypedBody, UntypedBody>(.post, .database, "assets/rereference")
    /// `assets/download/{checksum}`: an asset's bytes (the `downloadURL` of a record's asset).
    public static let assetsDownload = Endpoint<UntypedBody, UntypedBody>(.get, .database, "assets/download/{checksum}")
    /// `tokens/create`: a push token and its URL.
    public static let tokensCreate =
        Endpoint<CreatePushTokenRequest, PushTokenResponse>(.post, .environment, "tokens/create")
    /// `tokens/register`: binds a push token to the signed-in user and device.
    public static let tokensRegister =
        Endpoint<RegisterPushTokenRequest, PushTokenResponse>(.post, .environment, "tokens/register")
    /// `tokens/create` with a database segment, as some clients written from Apple's pages send it.
    public static let databaseTokensCreate =
        Endpoint<CreatePushTokenRequest, PushTokenResponse>(.post, .database, "tokens/create")
    /// `tokens/register` with a database segment.
    public static let databaseTokensRegister =
        Endpoint<RegisterPushTokenRequest, PushTokenResponse>(.post, .database, "tokens/register")
    /// `tokens/create` at `/device/1/{container}/{environment}/`, the path Apple's live service uses.
    public static let deviceTokensCreate =
        Endpoint<CreatePushTokenRequest, PushTokenResponse>(.post, .device, "tokens/create")
    /// `tokens/register` at `/device/1/{container}/{environment}/`.
    public static let deviceTokensRegister =
        Endpoint<RegisterPushTokenRequest, PushTokenResponse>(.post, .device, "tokens/register")
    /// `capabilities`: the server's limits (a Stratus extension).
    public static let capabilities = Endpoint<UntypedBody, Capabilities>(.get, .environment, "capabilities")
    /// `signup`: creates an account and signs it in.
    public static let signUp = Endpoint<PasswordCredentials, WebAuthSession>(.post, .auth, "signup")
    /// `signin`: signs a user in.
    public static let signIn = Endpoint<PasswordCredentials, WebAuthSession>(.post, .auth, "signin")
    /// `signout`: ends the session of the request's web auth token.
    public static let signOut = Endpoint<UntypedBody, UntypedBody>(.post, .auth, "signout")
    /// `GET signin`: the HTML sign-in page that `AUTHENTICATION_REQUIRED` redirects to.
    public static let signInPage = Endpoint<UntypedBody, UntypedBody>(.get, .auth, "signin")
    /// `signin/token`: signs in (creating the account on the first sign-in) with an identity
    /// provider's ID token: Sign in with Apple, or an OpenID Connect provider.
    public static let signInWithIdentityToken =
        Endpoint<IdentityTokenCredentials, WebAuthSession>(.post, .auth, "signin/token")
    /// `GET signin/web/{provider}`: starts the browser sign-in at a provider (authorization code
    /// with PKCE), which ends at ``signInReturn``.
    public static let signInWebStart = Endpoint<UntypedBody, UntypedBody>(.get, .auth, "signin/web/{provider}")
    /// `GET signin/return/{provider}`: where a provider sends the browser back with a code (each
    /// provider to its own path).
    public static let signInReturn = Endpoint<UntypedBody, UntypedBody>(.get, .auth, "signin/return/{provider}")
    /// `POST signin/return/{provider}`: as ``signInReturn``, for Apple, which posts the code as a form.
    public static let signInReturnPost = Endpoint<UntypedBody, UntypedBody>(.post, .auth, "signin/return/{provider}")
    /// `signin/apple/notifications`: Apple's server-to-server notifications about its users
    /// (consent revoked, account deleted, e-mail forwarding changed).
    public static let appleNotifications = Endpoint<UntypedBody, UntypedBody>(.post, .auth, "signin/apple/notifications")
    /// `GET identities`: the signed-in user's identities at providers.
    public static let identities = Endpoint<UntypedBody, LinkedIdentities>(.get, .auth, "identities")
    /// `identities/link`: links another provider's identity to the signed-in user.
    public static let identitiesLink = Endpoint<IdentityTokenCredentials, LinkedIdentity>(.post, .auth, "identities/link")
    /// `identities/unlink`: unlinks one, unless it is the user's last way to sign in.
    public static let identitiesUnlink = Endpoint<UnlinkIdentityRequest, LinkedIdentities>(.post, .auth, "identities/unlink")
    /// `password`: gives an account made by a provider a username and password as well.
    public static let setPassword = Endpoint<PasswordCredentials, LinkedIdentities>(.post, .auth, "password")

    /// Every endpoint of the table.
    public static let all: [AnyEndpoint] = [
        zonesList.erased, zonesLookup.erased, zonesModify.erased, zonesChanges.erased, recordsModify.erased,
        recordsLookup.erased, recordsResolve.erased, recordsAccept.erased, recordsQuery.erased, recordsChanges.erased, recordsDigest.erased, changesZone.erased, changesDatabase.erased,
        usersCaller.erased, usersCurrent.erased, usersDiscoverAll.erased, usersDiscover.erased, usersLookupEmail.erased,
        usersLookupID.erased, usersLookupContacts.erased, usersLookupContactsByGET.erased, usersDiscoverability.erased, usersSetDiscoverability.erased, subscriptionsList.erased, subscriptionsLookup.erased, environmentSubscriptionsLookup.erased,
        subscriptionsModify.erased, assetsUpload.erased, assetsRereference.erased, assetsDownload.erased,
        tokensCreate.erased, tokensRegister.erased, deviceTokensCreate.erased, deviceTokensRegister.erased, databaseTokensCreate.erased, databaseTokensRegister.erased, capabilities.erased, signUp.erased, signIn.erased, signOut.erased,
        signInPage.erased, signInWithIdentityToken.erased, signInWebStart.erased, signInReturn.erased,
        signInReturnPost.erased, appleNotifications.erased, identities.erased, identitiesLink.erased,
        identitiesUnlink.erased, setPassword.erased,
    ]
}
