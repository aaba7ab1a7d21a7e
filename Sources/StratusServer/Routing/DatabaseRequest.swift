import HTTPTypes
import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// An authenticated request to one database: which one, and who is asking.
struct DatabaseRequest: Sendable {
    /// The container.
    var container: String
    /// The environment.
    var environment: ContainerEnvironment
    /// The database scope.
    var scope: DatabaseScope
    /// The signed-in user, if a valid `ckWebAuthToken` came with the request.
    var userRecordName: String?
    /// The device the client says it is (`X-Stratus-Device-ID`), recorded in change stamps.
    var deviceID: String?
    /// Whether a server-to-server key signed the request (``userRecordName`` is then the key's user).
    var signedByServerKey = false
    /// Makes ``signInURL``, which only a request refused for want of a session needs.
    var makeSignInURL: @Sendable () -> String
    /// The URL clients reach this server at.
    var baseURL: String

    /// Where a user without a session signs in.
    var signInURL: String { makeSignInURL() }

    /// The signed-in user, or `AUTHENTICATION_REQUIRED` with the sign-in URL.
    func requireUser() throws -> String {
        guard let userRecordName else {
            throw StratusError(
                .authenticationRequired,
                "this request needs a signed-in user: pass ckWebAuthToken (the \(scope.rawValue) database"
                    + (scope == .public ? " needs one to write)" : " belongs to a user)"),
                redirectURL: signInURL)
        }
        return userRecordName
    }

    /// The database addressed; the private and shared databases need a signed-in user.
    func locator() throws -> DatabaseLocator {
        let owner = scope == .public ? DatabaseLocator.publicOwner : try requireUser()
        return DatabaseLocator(container: container, environment: environment, scope: scope, owner: owner)
    }

    /// The zone named by a request's `zoneID` (the default zone when absent). In the public and
    /// private databases the owner, when given, must be the database's owner: other users' zones are
    /// reached only through the shared database (``DatabaseAccess/zone(_:field:limits:shares:)``).
    func zoneName(_ zoneID: ZoneID?, field: String, limits: Limits) throws -> String {
        guard let zoneID else { return ZoneID.defaultZoneName }
        if let violation = limits.violation(ofName: zoneID.zoneName) {
            throw StratusError.badRequest("\(field).zoneName \(violation)")
        }
        if scope != .shared, let owner = zoneID.ownerRecordName, owner != ZoneID.currentUserOwnerName {
            let databaseOwner = try locator().owner
            guard owner == databaseOwner else {
                throw StratusError(
                    .accessDenied,
                    "\(field).ownerRecordName '\(owner)' is not the owner of this \(scope.rawValue) database")
            }
        }
        return zoneID.zoneName
    }

    /// The path of this database's endpoints: `/database/1/{container}/{environment}/{scope}`.
    var databasePath: String {
        let encoded = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? container
        return "/database/1/\(encoded)/\(environment.rawValue)/\(scope.rawValue)"
    }

    /// The `downloadURL`s of the assets of records in `zone`, from a record's name, a field's name
    /// and the asset's checksum. The URL names the record and field, so a download is authorized like
    /// a lookup of the record; the client adds its tokens as on every request.
    func assetURL(zone: String) -> @Sendable (_ recordName: String, _ field: String, _ checksum: String) -> String {
        let prefix = baseURL + databasePath + "/assets/download/"
        let zoneQuery = "?zoneName=" + zone.queryValueEncoded + "&recordName="
        return { recordName, field, checksum in
            prefix + checksum + zoneQuery + recordName.queryValueEncoded + "&fieldName=" + field
        }
    }

    /// The share keys a share record shows the caller (``ShareState/keys(reader:urlPrefix:)``).
    var shareKeys: @Sendable (ShareState) -> ShareKeys {
        let reader = userRecordName
        let urlPrefix = baseURL + "/share/"
        return { $0.keys(reader: reader, urlPrefix: urlPrefix) }
    }

    /// The wire ID of a zone of this database.
    func wireZoneID(_ name: String) throws -> ZoneID {
        ZoneID(zoneName: name, ownerRecordName: try locator().owner)
    }
}

extension HTTPField.Name {
    /// The header a client uses to say which device it is.
    static let stratusDeviceID = Self("X-Stratus-Device-ID")!
    /// The `syncToken` of a `records/changes` answer, in its head, so a client reading a feed can
    /// ask for the next page before it has read this one.
    static let stratusSyncToken = Self("X-Stratus-Sync-Token")!
    /// The `moreComing` of a `records/changes` answer, in its head: `true` or `false`.
    static let stratusMoreComing = Self("X-Stratus-More-Coming")!
    /// A `records/changes` request's ask for the ends of up to this many pages after the one it reads.
    static let stratusPagesAhead = Self("X-Stratus-Pages-Ahead")!
    /// Says (`true`) that a `records/changes` request is one of several pages its client keeps
    /// requested at once: the server does not read the pages after it ahead (``FeedPagePrefetch``).
    static let stratusReadsAhead = Self("X-Stratus-Reads-Ahead")!
    /// Where the pages that follow a `records/changes` answer end (the first is the end of the page
    /// that starts at its `syncToken`), as sync tokens separated by commas, for a client that asked
    /// with ``stratusPagesAhead``: each is where another page starts, so it may request them at once.
    static let stratusFollowingSyncTokens = Self("X-Stratus-Following-Sync-Tokens")!
}
