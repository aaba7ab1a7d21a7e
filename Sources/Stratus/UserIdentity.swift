import StratusModel

/// A user as others see them (CloudKit's `CKUserIdentity`): found by e-mail address or record ID when
/// they made themselves discoverable.
public struct UserIdentity: Hashable, Sendable {
    /// How a user is looked up (CloudKit's `CKUserIdentity.LookupInfo`).
    public struct LookupInfo: Hashable, Sendable {
        /// An e-mail address recorded for the account.
        public var emailAddress: String?
        /// A user record ID.
        public var userRecordID: Record.ID?

        /// Lookup by e-mail address.
        public init(emailAddress: String) {
            self.emailAddress = emailAddress
        }

        /// Lookup by user record ID.
        public init(userRecordID: Record.ID) {
            self.userRecordID = userRecordID
        }

        init(wire: UserLookupInfo) {
            emailAddress = wire.emailAddress
            userRecordID = wire.userRecordName.map { Record.ID(recordName: $0) }
        }

        var wire: UserLookupInfo {
            UserLookupInfo(emailAddress: emailAddress, userRecordName: userRecordID?.recordName)
        }
    }

    /// The user's record ID.
    public var userRecordID: Record.ID?
    /// The lookup information the user was found by.
    public var lookupInfo: LookupInfo?
    /// The given name the user shows.
    public var givenName: String?
    /// The family name the user shows.
    public var familyName: String?

    init(wire: UserIdentityDictionary) {
        userRecordID = wire.userRecordName.map { Record.ID(recordName: $0) }
        lookupInfo = wire.lookupInfo.map(LookupInfo.init(wire:))
        givenName = wire.nameComponents?.givenName
        familyName = wire.nameComponents?.familyName
    }
}

extension Container {
    /// The identities of the users `lookupInfos` name who made themselves discoverable (CloudKit's
    /// `CKDiscoverUserIdentitiesOperation`), in the order asked; anyone else is left out.
    public func discoverUserIdentities(_ lookupInfos: [UserIdentity.LookupInfo]) async throws -> [UserIdentity] {
        let found = try await connection.call(
            .database(.public, Endpoints.usersDiscover.erased), body: DiscoverUsersRequest(lookupInfos: lookupInfos.map(\.wire)),
            idempotent: true, as: DiscoverUsersResponse.self)
        return found.users.map(UserIdentity.init(wire:))
    }

    /// The identity of the discoverable user with this e-mail address, or `nil` (CloudKit's
    /// `discoverUserIdentity(withEmailAddress:)`).
    public func discoverUserIdentity(emailAddress: String) async throws -> UserIdentity? {
        try await discoverUserIdentities([.init(emailAddress: emailAddress)]).first
    }

    /// The identity of the discoverable user with this record ID, or `nil` (CloudKit's
    /// `discoverUserIdentity(withUserRecordID:)`).
    public func discoverUserIdentity(userRecordID: Record.ID) async throws -> UserIdentity? {
        try await discoverUserIdentities([.init(userRecordID: userRecordID)]).first
    }

    /// Whether the signed-in user lets others find them (CloudKit's user-discoverability permission).
    public func isDiscoverable() async throws -> Bool {
        try await connection.call(
            .database(.public, Endpoints.usersDiscoverability.erased), as: Discoverability.self
        ).discoverable
    }

    /// Lets others find the signed-in user (by the e-mail address an administrator recorded, or by
    /// record ID), showing the given name, or stops it. Off for every new account.
    public func setDiscoverable(_ discoverable: Bool, givenName: String? = nil, familyName: String? = nil) async throws {
        _ = try await connection.call(
            .database(.public, Endpoints.usersSetDiscoverability.erased),
            body: Discoverability(
                discoverable: discoverable, nameComponents: NameComponents(givenName: givenName, familyName: familyName)),
            idempotent: true, as: Discoverability.self)
    }
}
