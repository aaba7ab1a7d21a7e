public import ServiceLifecycle
public import StratusModel

/// Where the server keeps everything: accounts, zones, records and their change order.
///
/// Every backend (SQLite, PostgreSQL) implements this protocol and passes the conformance suite in
/// `StratusStorageConformance`. It is the sum of narrower roles, one per concern, so that each part
/// of the server depends on the role it uses: ``SettingsStorage``, ``AccountStorage``,
/// ``RecordStorage``, ``ShareStorage``, ``SchemaStorage``, ``SubscriptionStorage``, ``AssetStorage``,
/// ``UsageStorage``, ``TransferStorage`` and ``MaintenanceStorage``. The rules backends must keep:
/// - every change in a zone takes the zone's next sequence number inside the transaction that
///   writes it, so a feed read at position *n* never misses a change committed later with a number
///   at or below *n*;
/// - record writes run through ``RecordWriteExecutor``, whose semantics come from
///   ``RecordWritePlanner``;
/// - an atomic batch commits entirely or not at all;
/// - errors are ``StratusError`` values with wire codes (`ZONE_NOT_FOUND`, `EXISTS`,
///   `CHANGE_TOKEN_EXPIRED`, …).
///
/// A storage is a `Service`: its `run()` keeps what it needs in the background (PostgreSQL's
/// connection pool) until its service group shuts down, and brings its own tables up to date first.
/// Calls made before it is ready wait for it. A server runs its storage in its service group
/// (``StratusServer``'s `StratusServerService` beside it); a tool or a test that uses a storage
/// alone runs it with ``whileRunning(_:)``.
public protocol StratusStorage: SettingsStorage, AccountStorage, AuditStorage, RecordStorage, ShareStorage,
    SchemaStorage, SubscriptionStorage,
    AssetStorage, UsageStorage, TransferStorage, MaintenanceStorage, Service
{
    /// How server instances sharing this storage tell each other about changes, when several can.
    var messageBus: (any InstanceMessageBus)? { get }
    /// How much of its pool of database connections a pooled backend uses now; `nil` for a backend
    /// without one.
    var connectionPoolUsage: ConnectionPoolUsage? { get }
    /// What an operator wants to know of the backend: which, how large, and its own particulars.
    func health() async throws -> StorageHealth
}

/// The state of a storage backend, for the console's health page.
public struct StorageHealth: Sendable, Equatable {
    /// One particular of the backend, named.
    public struct Detail: Sendable, Equatable {
        public var name: String
        public var value: String

        /// Creates a detail.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// `SQLite` or `PostgreSQL`.
    public var backend: String
    /// The bytes the data takes on disk.
    public var sizeBytes: Int64
    /// The backend's own particulars: its file, its server's version, the instances sharing it.
    public var details: [Detail]

    /// Creates a health report.
    public init(backend: String, sizeBytes: Int64, details: [Detail]) {
        self.backend = backend
        self.sizeBytes = sizeBytes
        self.details = details
    }
}

/// Connections a pooled backend has leased now, out of how many it may open.
public struct ConnectionPoolUsage: Sendable, Equatable {
    /// Connections running a statement or a transaction for a caller now.
    public var inUse: Int
    /// The size of the pool.
    public var capacity: Int

    /// Creates a usage figure.
    public init(inUse: Int, capacity: Int) {
        self.inUse = inUse
        self.capacity = capacity
    }
}

extension StratusStorage {
    /// A backend without a pool of connections reports none.
    public var connectionPoolUsage: ConnectionPoolUsage? { nil }
}

/// Server-wide settings: the admin token's hash, the secret that signs sync tokens.
public protocol SettingsStorage: Sendable {
    /// A server-wide setting, such as the admin token's hash.
    func setting(_ key: String) async throws -> String?
    /// Sets a server-wide setting if it has no value yet; returns the value in force afterwards.
    func initializeSetting(_ key: String, to value: String) async throws -> String
    /// Sets a server-wide setting.
    func setSetting(_ key: String, to value: String) async throws
}

/// Containers, their API tokens, user accounts, their sessions and federated identities, and the
/// single-use nonces of federated sign-ins.
public protocol AccountStorage: Sendable {
    /// Creates a container; `EXISTS` if the identifier is taken.
    func createContainer(_ container: ContainerInfo) async throws
    /// A container by identifier.
    func container(_ identifier: String) async throws -> ContainerInfo?
    /// All containers, by identifier.
    func containers() async throws -> [ContainerInfo]
    /// Stores an API token of a container by its hash.
    func createAPIToken(hash: String, container: String, name: String, createdAt: Int64) async throws
    /// The container an API token belongs to.
    func containerForAPIToken(hash: String) async throws -> String?
    /// Deletes an API token of a container by its hash; `false` when the container has no such token.
    func deleteAPIToken(hash: String, container: String) async throws -> Bool
    /// Creates a user; `EXISTS` if the username (or the e-mail address) is taken in the container.
    func createUser(_ user: UserInfo) async throws
    /// A user by username.
    func user(container: String, username: String) async throws -> UserInfo?
    /// A user by record name.
    func user(container: String, recordName: String) async throws -> UserInfo?
    /// A user by e-mail address (compared lowercased).
    func user(container: String, emailAddress: String) async throws -> UserInfo?
    /// Records (or, with `nil`, clears) a user's e-mail address, lowercased: `EXISTS` when another
    /// user of the container has it, `NOT_FOUND` when there is no such user.
    func setEmailAddress(_ emailAddress: String?, container: String, recordName: String) async throws
    /// Sets whether a user may be found by others, and the name they show; `NOT_FOUND` when there is
    /// no such user.
    func setDiscoverability(
        _ discoverable: Bool, givenName: String?, familyName: String?, container: String, recordName: String
    ) async throws
    /// Registers a server-to-server key.
    func createServerKey(_ key: ServerKeyInfo) async throws
    /// A server-to-server key by ID, revoked or not.
    func serverKey(id: String) async throws -> ServerKeyInfo?
    /// The server-to-server keys of a container, oldest first.
    func serverKeys(container: String) async throws -> [ServerKeyInfo]
    /// Revokes a key of a container; `false` when it has no such key. Revoking twice keeps the first
    /// time.
    func revokeServerKey(id: String, container: String, at timestamp: Int64) async throws -> Bool
    /// Stores a session by the hash of its token, when its user is enabled and still has the password
    /// hash `passwordHash` (the one the sign-in checked), so that a sign-in racing a disable or a new
    /// password starts no session. Returns whether it stored one.
    func createSession(hash: String, session: SessionInfo, passwordHash: String) async throws -> Bool
    /// A session by the hash of its token.
    func session(hash: String) async throws -> SessionInfo?
    /// Ends a session.
    func deleteSession(hash: String) async throws
    /// Disables (or enables again) a user: a disabled user cannot sign in, and disabling ends their
    /// sessions and deletes their push tokens. Returns the hashes of the sessions it ended;
    /// `NOT_FOUND` when there is no such user.
    func setUserDisabled(_ disabled: Bool, container: String, recordName: String, at timestamp: Int64) async throws
        -> [String]
    /// Replaces a user's password hash, ends their sessions and deletes their push tokens; returns
    /// the hashes of the sessions it ended. `NOT_FOUND` when there is no such user.
    func setPasswordHash(_ hash: String, container: String, recordName: String) async throws -> [String]
    /// Signs a user out everywhere: ends their sessions and deletes their push tokens; returns the
    /// hashes of the sessions it ended.
    func endSessions(container: String, recordName: String) async throws -> [String]
    /// Gives a user a username and a password hash to sign in with, beside what they sign in with
    /// already (an account made by a federated sign-in has the username `id:…` and a hash no
    /// password matches). Their sessions go on. `EXISTS` when another user of the container has the
    /// username, `NOT_FOUND` when there is no such user.
    func setUsernameAndPassword(username: String, passwordHash: String, container: String, recordName: String)
        async throws
    /// Deletes a user's account as CloudKit does when an Apple ID goes, in one transaction: their
    /// private database (every zone, the default zone's records, their change history, and the
    /// shares they own, which their participants thereby lose), their place in other users' shares,
    /// their subscriptions, push tokens and push endpoints, uploads not yet held by a record,
    /// sessions, federated identities, and the account. What they wrote in the public database
    /// stays. Returns the hashes of the sessions it ended; `NOT_FOUND` when there is no such user.
    func deleteUser(container: String, recordName: String) async throws -> [String]

    // MARK: Federated identities

    /// Creates a user and links an identity to them (`identity` names the user's container and
    /// record name), in one transaction: `EXISTS` when the username (or the e-mail address) is taken
    /// in the container or the identity is linked to a user already, and then nothing is written.
    func createUser(_ user: UserInfo, identity: FederatedIdentity) async throws
    /// The identity an issuer's subject has in a container, and so the user it signs in.
    func identity(container: String, issuer: String, subject: String) async throws -> FederatedIdentity?
    /// The identities linked to a user, oldest first (then by issuer and subject).
    func identities(container: String, userRecordName: String) async throws -> [FederatedIdentity]
    /// Links an identity to the user it names: `EXISTS` when the identity is linked to any user
    /// already, `NOT_FOUND` when there is no such user.
    func linkIdentity(_ identity: FederatedIdentity) async throws
    /// Unlinks an identity; `false` when none was linked.
    func unlinkIdentity(container: String, issuer: String, subject: String) async throws -> Bool
    /// Records a sign-in with an identity at `timestamp`, and the e-mail address (lowercased) and
    /// its verification the provider gave this time; a provider that gave no address (Apple gives
    /// it on the first sign-in only) leaves the known one. `NOT_FOUND` when the identity is not
    /// linked.
    func recordIdentitySignIn(
        container: String, issuer: String, subject: String, emailAddress: String?, emailVerified: Bool,
        at timestamp: Int64
    ) async throws
    /// Claims a single-use value (an ID token's nonce) until `expiresAt`, for every server instance
    /// sharing the storage: `true` the first time, `false` while the claim is in force. Claims that
    /// ended at or before `now` are forgotten first.
    func claimNonce(_ key: String, expiresAt: Int64, now: Int64) async throws -> Bool
}

/// The audit log of administrative actions.
public protocol AuditStorage: Sendable {
    /// Appends an entry.
    func appendAuditEntry(_ entry: AuditEntry) async throws
    /// The latest entries, newest first, at most `limit`.
    func auditEntries(limit: Int) async throws -> [AuditEntry]
}

/// Zones, records, their change feeds and queries.
public protocol RecordStorage: Sendable {
    /// The live zones of a database, the default zone first.
    func zones(in database: DatabaseLocator) async throws -> [ZoneState]
    /// A live zone by name, or `nil`.
    func zone(named name: String, in database: DatabaseLocator) async throws -> ZoneState?
    /// Creates a custom zone, or finds the live zone of that name; `created` says which.
    func createZone(
        named name: String, in database: DatabaseLocator, timestamp: Int64
    ) async throws -> (zone: ZoneState, created: Bool)
    /// Deletes a custom zone and all its records; the deletion shows in the database change feed.
    /// Returns `false` when there is no such zone.
    func deleteZone(named name: String, in database: DatabaseLocator, timestamp: Int64) async throws -> Bool
    /// Applies writes to one zone in order, in one transaction. With `atomic`, any failure leaves
    /// nothing written and turns the other results into `ATOMIC_ERROR`. Throws `ZONE_NOT_FOUND`.
    /// The outcome lists every committed change, those of `DELETE_SELF` cascades included.
    func modifyRecords(
        _ writes: [RecordWrite], zone: String, in database: DatabaseLocator, atomic: Bool, context: WriteContext
    ) async throws -> ModifyRecordsOutcome
    /// Looks records up by name; `nil` for a missing or deleted record. Throws `ZONE_NOT_FOUND`.
    func lookupRecords(names: [String], zone: String, in database: DatabaseLocator) async throws -> [StoredRecord?]
    /// Reads a zone's changes after `position` (from the start when `nil`), at most `limit` records.
    /// Throws `ZONE_NOT_FOUND`, and `CHANGE_TOKEN_EXPIRED` for a position in another incarnation of
    /// the zone or older than its purged tombstones.
    func recordChanges(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?
    ) async throws -> RecordChangesPage
    /// Where the next `count` pages of `limit` records after `position` would end if they were read
    /// now, one after another, with the same `recordTypes`: the end of each such page that more
    /// changes follow (``RecordChangesPage/ends(ofSequences:limit:scopeID:)``). A client that knows
    /// them may ask for those pages at once; each is checked against the page before it when read.
    /// Throws as ``recordChanges(zone:in:after:limit:recordTypes:)``.
    func recordChangePageEnds(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?, count: Int
    ) async throws -> [ChangePosition]
    /// Reads the custom zones changed after `position`, at most `limit` of them.
    func databaseChanges(
        in database: DatabaseLocator, after position: ChangePosition?, limit: Int
    ) async throws -> DatabaseChangesPage
    /// Runs a query in the named zones, or in every zone of the database when `zones` is `nil`.
    /// Throws `ZONE_NOT_FOUND` for a named zone that does not exist.
    func queryRecords(_ query: RecordQuery, zones: [String]?, in database: DatabaseLocator) async throws -> QueryPage
}

/// The schema of each container's environments.
public protocol SchemaStorage: Sendable {
    /// The schema of a container's environment; empty until something defines it.
    func schema(container: String, environment: ContainerEnvironment) async throws -> Schema
    /// Changes the schema of a container's environment atomically: `change` gets the schema in force
    /// and returns the new one (or throws to leave it). Records of fields whose index options grew
    /// get index entries before this returns. Returns the schema in force afterwards.
    func updateSchema(
        container: String, environment: ContainerEnvironment, _ change: @escaping @Sendable (Schema) throws -> Schema
    ) async throws -> Schema
    /// Deletes every database of a container's environment: zones, records and their history, and
    /// the environment's subscriptions.
    func deleteData(container: String, environment: ContainerEnvironment) async throws
}

/// Subscriptions and the push tokens of devices.
public protocol SubscriptionStorage: Sendable {
    /// The subscriptions of a database, ordered by subscriber and ID; only `subscriber`'s when given.
    func subscriptions(in database: DatabaseLocator, subscriber: String?) async throws -> [StoredSubscription]
    /// Creates a subscription, or replaces the subscriber's subscription of the same ID in the database.
    func saveSubscription(_ subscription: StoredSubscription) async throws
    /// Deletes a subscriber's subscription; `false` when there is none.
    func deleteSubscription(id: String, subscriber: String, in database: DatabaseLocator) async throws -> Bool


    /// Stores a new push token by its hash, not yet registered to a user.
    func createPushToken(hash: String, token: PushTokenInfo) async throws
    /// A push token by its hash.
    func pushToken(hash: String) async throws -> PushTokenInfo?
    /// Registers a push token to a user and a device (again, if it was registered before) and marks it used.
    /// Returns `false` when there is no such token.
    func registerPushToken(hash: String, userRecordName: String, deviceID: String?, timestamp: Int64) async throws -> Bool
    /// Marks a push token used (a device connected with it).
    func markPushTokenUsed(hash: String, timestamp: Int64) async throws
    /// Deletes push tokens and push endpoints not used since `timestamp`; returns how many went.
    func purgePushTokens(unusedSince timestamp: Int64) async throws -> Int

    /// Registers a device's push endpoint, or registers it again (to another user, when another
    /// signed in on the device) and marks it used, keeping the keys it was first registered with;
    /// the user's least recently registered endpoints beyond `limit` are deleted in the same
    /// transaction.
    func registerPushEndpoint(_ endpoint: PushEndpointInfo, keepingAtMost limit: Int) async throws
    /// The push endpoints registered to a user, most recently registered first.
    func pushEndpoints(container: String, environment: ContainerEnvironment, userRecordName: String) async throws
        -> [PushEndpointInfo]
    /// Deletes a push endpoint (its service said it is gone); `false` when there is none.
    func deletePushEndpoint(id: String) async throws -> Bool
}

/// Which asset bytes are stored, and which no record holds any more.
public protocol AssetStorage: Sendable {
    /// Records that an asset's bytes are stored, as of `timestamp`; a record write may then refer
    /// to it by checksum (``RecordWrite/uploadedAssets``). Registering again renews the timestamp.
    func registerAsset(checksum: String, size: Int64, timestamp: Int64) async throws
    /// Forgets the assets that no record refers to and that were registered before `timestamp`,
    /// and returns their checksums so that their bytes can be deleted; uploads recorded before
    /// `timestamp` (``UsageStorage/recordUpload(_:since:maxPendingBytes:ticketAllowance:)``) are
    /// forgotten with them.
    func collectAssets(registeredBefore timestamp: Int64) async throws -> [String]
}

/// What accounts hold and what they uploaded, which quotas are checked against. Record writes keep
/// each account's holdings up to date in their own transactions (``RecordWriteExecutor``).
public protocol UsageStorage: Sendable {
    /// What each account holds in `container`, over both environments; accounts that never held
    /// anything are left out.
    func usageByAccount(container: String) async throws -> [String: StorageUsage]
    /// The bytes `user` uploaded to `container` since `since` (milliseconds since 1970) that no
    /// record holds yet, and the bytes uploaded with `ticket`.
    func uploadedBytes(container: String, user: String, ticket: String, since: Int64) async throws
        -> (pending: Int64, ticket: Int64)
    /// Records `upload` unless it takes its user's bytes uploaded since `since` and held by no
    /// record past `maxPendingBytes` (unlimited when `nil`), or its ticket's past `ticketAllowance`;
    /// answers whether it was recorded. Concurrent uploads of one user are checked one after the other.
    func recordUpload(_ upload: PendingUpload, since: Int64, maxPendingBytes: Int64?, ticketAllowance: Int64) async throws
        -> Bool
    /// Forgets an upload ``recordUpload(_:since:maxPendingBytes:ticketAllowance:)`` recorded whose
    /// bytes were then not stored, so that it counts for nobody.
    func forgetUpload(_ upload: PendingUpload) async throws
}

/// An upload as ``UsageStorage`` counts it until a record holds it or its grace period ends.
public struct PendingUpload: Sendable, Hashable {
    /// The container uploaded to.
    public var container: String
    /// Who uploaded (the user the upload ticket names).
    public var user: String
    /// The upload ticket's identifier.
    public var ticket: String
    /// The asset uploaded.
    public var checksum: String
    /// Its size in bytes.
    public var size: Int64
    /// When, in milliseconds since 1970.
    public var timestamp: Int64

    /// Creates an upload.
    public init(container: String, user: String, ticket: String, checksum: String, size: Int64, timestamp: Int64) {
        self.container = container
        self.user = user
        self.ticket = ticket
        self.checksum = checksum
        self.size = size
        self.timestamp = timestamp
    }
}

/// What moving a container between storages reads and writes beyond the other roles.
public protocol TransferStorage: Sendable {
    /// The users of a container, by record name.
    func users(container: String) async throws -> [UserInfo]
    /// The federated identities of a container's users, by user record name, then oldest first.
    func identities(container: String) async throws -> [FederatedIdentity]
    /// The API tokens of a container (their hashes), by creation.
    func apiTokens(container: String) async throws -> [APITokenInfo]
    /// The databases of a container that were ever written, in a stable order.
    func databases(container: String) async throws -> [DatabaseLocator]
    /// Writes records as they are, stamps and tombstones included, into a zone (created when
    /// missing), with their index, reference and asset rows, in one transaction; each gets the zone's
    /// next sequence number and a new change tag. No rule is checked: this restores an export.
    func importRecords(_ records: [StoredRecord], zone: String, in database: DatabaseLocator) async throws
}

/// Upkeep that runs on a timer, and the state of the storage's own tables.
public protocol MaintenanceStorage: Sendable {
    /// The migrations of the storage's own tables that are applied, and the latest this build has.
    func migrationStatus() async throws -> (applied: [String], latest: String)
    /// Removes record tombstones and deleted-zone markers last changed before `timestamp`; feeds
    /// read from positions before them then answer `CHANGE_TOKEN_EXPIRED`. Returns how many went.
    func purgeTombstones(before timestamp: Int64) async throws -> Int
}

extension StratusStorage {
    /// Runs the storage (``Service/run()``) in a child task while `body` uses it, and stops it when
    /// `body` returns or throws: for a command or a test that uses a storage without a server.
    public func whileRunning<T>(_ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}
