import HTTPTypes
import Hummingbird
import StratusModel

/// The access each endpoint under `/database/1/{container}/{environment}/{database}/` needs,
/// declared once beside the endpoint table: a database route is registered through
/// ``RouterMethods/on(_:authorizedBy:use:)``, which authenticates and authorizes the request
/// (``DatabaseAccess/authorize(_:for:endpoint:)``) before the handler runs and hands it the
/// ``DatabaseAccess``. A handler never sees a request it must still authorize.
enum DatabaseRoutes {
    /// What each database endpoint does to its database.
    static let access: [AnyEndpoint: DatabaseAccess.Operation] = [
        Endpoints.zonesList.erased: .read,
        Endpoints.zonesLookup.erased: .read,
        Endpoints.zonesModify.erased: .manageZones,
        Endpoints.zonesChanges.erased: .readChanges,
        Endpoints.changesDatabase.erased: .readChanges,
        Endpoints.recordsModify.erased: .write,
        Endpoints.recordsLookup.erased: .read,
        Endpoints.recordsQuery.erased: .read,
        Endpoints.recordsChanges.erased: .readChanges,
        Endpoints.recordsDigest.erased: .readChanges,
        Endpoints.changesZone.erased: .readChanges,
        Endpoints.recordsResolve.erased: .joinShares,
        Endpoints.recordsAccept.erased: .joinShares,
        Endpoints.usersCaller.erased: .ownData,
        Endpoints.usersCurrent.erased: .ownData,
        Endpoints.usersDiscoverability.erased: .ownData,
        Endpoints.usersSetDiscoverability.erased: .ownData,
        Endpoints.usersDiscoverAll.erased: .findUsers,
        Endpoints.usersDiscover.erased: .findUsers,
        Endpoints.usersLookupEmail.erased: .findUsers,
        Endpoints.usersLookupID.erased: .findUsers,
        Endpoints.usersLookupContacts.erased: .findUsers,
        Endpoints.usersLookupContactsByGET.erased: .findUsers,
        Endpoints.subscriptionsList.erased: .ownData,
        Endpoints.subscriptionsLookup.erased: .ownData,
        Endpoints.subscriptionsModify.erased: .ownData,
        Endpoints.assetsUpload.erased: .write,
        Endpoints.assetsRereference.erased: .write,
        Endpoints.assetsDownload.erased: .read,
    ]

    /// Endpoints of an environment that act on each of the caller's databases, and what they do
    /// there (``RouterMethods/on(_:authorizedInEachDatabaseBy:use:)``).
    static let eachDatabaseAccess: [AnyEndpoint: DatabaseAccess.Operation] = [
        Endpoints.environmentSubscriptionsLookup.erased: .ownData
    ]

    /// Endpoints whose path carries a database segment but that act on the environment: push tokens
    /// (`tokens/create|register`, as some clients written from Apple's pages send them), which
    /// ``PushEndpoints`` serves like their environment paths.
    static let environmentOperations: Set<AnyEndpoint> = [
        Endpoints.databaseTokensCreate.erased, Endpoints.databaseTokensRegister.erased,
    ]
}

extension RouterMethods where Context == StratusRequestContext {
    /// Routes a database endpoint to `handler` behind its declared access (``DatabaseRoutes/access``):
    /// the request is authenticated and authorized first, and `handler` gets the access granted.
    @discardableResult
    func on<Body, Answer>(
        _ endpoint: Endpoint<Body, Answer>, authorizedBy authenticator: Authenticator,
        use handler: @escaping @Sendable (Request, StratusRequestContext, DatabaseAccess) async throws -> Response
    ) -> Self {
        route(endpoint, declaredIn: DatabaseRoutes.access, scopes: [nil], authenticator: authenticator) { request, context, accesses in
            try await handler(request, context, accesses[0])
        }
    }

    /// Routes an endpoint of the environment that reaches each of the caller's databases (private,
    /// shared and public, in that order) behind its declared access (``DatabaseRoutes/eachDatabaseAccess``):
    /// `handler` gets the access granted in each.
    @discardableResult
    func on<Body, Answer>(
        _ endpoint: Endpoint<Body, Answer>, authorizedInEachDatabaseBy authenticator: Authenticator,
        use handler: @escaping @Sendable (Request, StratusRequestContext, [DatabaseAccess]) async throws -> Response
    ) -> Self {
        route(
            endpoint, declaredIn: DatabaseRoutes.eachDatabaseAccess, scopes: [.private, .shared, .public],
            authenticator: authenticator, use: handler)
    }

    /// Routes `endpoint` behind the access `table` declares for it, authorized in each of `scopes`
    /// (`nil`: the database the path names).
    private func route<Body, Answer>(
        _ endpoint: Endpoint<Body, Answer>, declaredIn table: [AnyEndpoint: DatabaseAccess.Operation],
        scopes: [DatabaseScope?], authenticator: Authenticator,
        use handler: @escaping @Sendable (Request, StratusRequestContext, [DatabaseAccess]) async throws -> Response
    ) -> Self {
        guard let operation = table[endpoint.erased] else {
            preconditionFailure("\(endpoint.path) is routed without the access it needs: declare it in DatabaseRoutes")
        }
        return route(endpoint.erased) { request, context in
            let accesses = try scopes.map { scope in
                try DatabaseAccess.authorize(
                    operation, for: try authenticator.authenticate(request, context: context, scope: scope),
                    endpoint: endpoint.path)
            }
            return try await handler(request, context, accesses)
        }
    }
}
