import Hummingbird
import StratusModel
import StratusStorage

/// Finding people to share with: `users/discover`, `users/lookup/email`, `users/lookup/id`,
/// `users/lookup/contacts`, and the signed-in user's own `users/discoverability` (a Stratus extension).
///
/// Only users who made themselves discoverable are ever answered; everyone else, whether the account
/// exists or not, is left out of the answer in the same way, so a lookup never tells whether an
/// undiscoverable account exists. E-mail addresses are recorded by an administrator (the admin API),
/// never by the user, so nobody can claim another person's address to intercept their invitations.
struct UserDiscoveryEndpoints: Sendable {
    let storage: any AccountStorage
    let authenticator: Authenticator
    let limits: Limits

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.usersDiscoverAll, authorizedBy: authenticator) { request, _, access in
            // Stratus keeps no address books: there is nobody to discover without lookup information.
            Response.json(DiscoverUsersResponse(users: []))
        }
        router.on(Endpoints.usersDiscover, authorizedBy: authenticator) { request, _, access in
            let container = access.target.container
            let body = try await request.decodeJSON(DiscoverUsersRequest.self, limit: limits.maxSmallRequestBodyBytes)
            let found = try await discoverable(body.lookupInfos, field: "lookupInfos", container: container)
            return Response.json(
                DiscoverUsersResponse(users: found.map { info, user in
                    UserIdentityDictionary(
                        userRecordName: user.recordName, lookupInfo: info,
                        nameComponents: NameComponents(givenName: user.givenName, familyName: user.familyName))
                }))
        }
        router.on(Endpoints.usersLookupEmail, authorizedBy: authenticator) { request, _, access in
            try await lookup(request, access, endpoint: "users/lookup/email", by: \.emailAddress)
        }
        router.on(Endpoints.usersLookupID, authorizedBy: authenticator) { request, _, access in
            try await lookup(request, access, endpoint: "users/lookup/id", by: \.userRecordName)
        }
        for endpoint in [Endpoints.usersLookupContacts, Endpoints.usersLookupContactsByGET] {
            router.on(endpoint, authorizedBy: authenticator) { request, _, access in
                // The older form of the same question: nobody, in the older shape.
                Response.json(LookupUsersResponse(users: []))
            }
        }
        router.on(Endpoints.usersDiscoverability, authorizedBy: authenticator) { request, _, access in
            let user = try await storage.user(container: access.target.container, recordName: try access.requireUser())
            return Response.json(
                Discoverability(
                    discoverable: user?.discoverable ?? false,
                    nameComponents: NameComponents(givenName: user?.givenName, familyName: user?.familyName)))
        }
        router.on(Endpoints.usersSetDiscoverability, authorizedBy: authenticator) { request, _, access in
            let body = try await request.decodeJSON(Discoverability.self, limit: 64 << 10)
            for (field, value) in [("givenName", body.nameComponents?.givenName), ("familyName", body.nameComponents?.familyName)] {
                if let value, value.count > 100 || value.contains(where: \.isNewline)
                    || value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
                {
                    throw StratusError.badRequest(
                        "nameComponents.\(field) must be one line of at most 100 characters, without control characters")
                }
            }
            try await storage.setDiscoverability(
                body.discoverable, givenName: body.nameComponents?.givenName, familyName: body.nameComponents?.familyName,
                container: access.target.container, recordName: try access.requireUser())
            return Response.json(body)
        }
    }

    /// `users/lookup/email` and `users/lookup/id`: the older user shape, keyed by one kind of lookup
    /// information.
    private func lookup(
        _ request: Request, _ access: DatabaseAccess, endpoint: String, by key: KeyPath<UserLookupInfo, String?>
    ) async throws -> Response {
        let container = access.target.container
        let body = try await request.decodeJSON(LookupUsersRequest.self, limit: limits.maxSmallRequestBodyBytes)
        let keyName = key == \UserLookupInfo.emailAddress ? "emailAddress" : "userRecordName"
        for (index, info) in body.users.enumerated() where info[keyPath: key] == nil {
            throw StratusError.badRequest("users[\(index)].\(keyName) is required by \(endpoint)")
        }
        let found = try await discoverable(body.users, field: "users", container: container)
        return Response.json(
            LookupUsersResponse(users: found.map { info, user in
                UserDictionary(
                    userRecordName: user.recordName, firstName: user.givenName, lastName: user.familyName,
                    emailAddress: key == \UserLookupInfo.emailAddress ? info.emailAddress : nil)
            }))
    }

    /// The discoverable users `infos` name, each with the lookup information that found it, in the
    /// order asked. A phone number matches nobody (Stratus keeps none).
    private func discoverable(
        _ infos: [UserLookupInfo], field: String, container: String
    ) async throws -> [(UserLookupInfo, UserInfo)] {
        guard infos.count <= limits.maxOperationsPerRequest else {
            throw StratusError.badRequest("\(field) has \(infos.count) items; the limit is \(limits.maxOperationsPerRequest) per request")
        }
        var found: [(UserLookupInfo, UserInfo)] = []
        for (index, info) in infos.enumerated() {
            let user: UserInfo?
            if let recordName = info.userRecordName {
                user = try await storage.user(container: container, recordName: recordName)
            } else if let address = info.emailAddress {
                user = try await storage.user(container: container, emailAddress: address)
            } else if info.phoneNumber != nil {
                user = nil
            } else {
                throw StratusError.badRequest("\(field)[\(index)] needs emailAddress, userRecordName or phoneNumber")
            }
            if let user, user.discoverable { found.append((info, user)) }
        }
        return found
    }
}
