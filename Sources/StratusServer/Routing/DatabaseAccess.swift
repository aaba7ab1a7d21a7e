import StratusModel
import StratusStorage

/// Who may do what in a database: the one place that decides it.
///
/// Every endpoint under `/database/1/{container}/{environment}/{database}/` asks
/// ``authorize(_:for:endpoint:)`` before it touches storage, names its zones through ``zone(_:field:)``,
/// and asks ``readAccess(recordType:schema:)`` before it hands out a record. The rules (docs/protocol.md,
/// "Who must be signed in"):
/// - server-to-server keys reach the public database only, as their own user;
/// - the public database is read with the API token alone and written by signed-in users, record by
///   record under the schema's grants; it has only the default zone and no change feeds;
/// - a private database is its owner's, who alone reaches it, with every operation;
/// - the shared database is its user's view of zones other users share with them (none yet, until
///   sharing exists); its zones cannot be created or deleted there.
struct DatabaseAccess: Sendable {
    /// What a request does to the database.
    enum Operation: Sendable {
        /// Reads zones or records (`zones/list|lookup`, `records/lookup|query`, asset downloads).
        case read
        /// Writes records or assets (`records/modify`, `assets/upload|rereference`).
        case write
        /// Creates or deletes zones (`zones/modify`).
        case manageZones
        /// Reads a change feed (`records/changes`, `changes/zone|database`, `zones/changes`).
        case readChanges
        /// Reads or changes the caller's subscriptions or discoverability, or asks who the caller is.
        case ownData
        /// Finds other users (`users/discover`, `users/lookup/*`): signed-in users only, on the public
        /// database, as CloudKit pins these paths.
        case findUsers
    }

    /// The request, as authenticated.
    let target: DatabaseRequest
    /// The database reached: the public one, or the signed-in user's private or shared one.
    let locator: DatabaseLocator

    /// The access `target`'s caller has for `operation`, or the error that refuses it: `421` with the
    /// sign-in link when a user is needed and none signed in, `400` for what the database does not
    /// offer. `endpoint` names the request in those errors.
    static func authorize(_ operation: Operation, for target: DatabaseRequest, endpoint: String) throws -> DatabaseAccess {
        if target.signedByServerKey, target.scope != .public {
            throw StratusError(
                .accessDenied, "server-to-server keys reach the public database only, as in CloudKit")
        }
        switch (operation, target.scope) {
        case (.readChanges, .public):
            throw StratusError.badRequest(
                "\(endpoint) is available in the private and shared databases; the public database has no change feeds")
        case (.findUsers, .private), (.findUsers, .shared):
            throw StratusError.badRequest("\(endpoint) is served on the public database, as in CloudKit")
        case (.write, _), (.ownData, _), (.findUsers, _):
            _ = try target.requireUser()
        default:
            break
        }
        let access = DatabaseAccess(target: target, locator: try target.locator())
        if operation == .manageZones {
            switch target.scope {
            case .public:
                throw StratusError.badRequest(
                    "the public database has only the default zone; create zones in the private database")
            case .shared:
                throw StratusError.badRequest(
                    "zones cannot be created or deleted in the shared database; they appear when a share is accepted")
            case .private:
                break
            }
        }
        return access
    }

    /// The signed-in user (always there for ``Operation/write`` and ``Operation/ownData``).
    func requireUser() throws -> String {
        try target.requireUser()
    }

    /// Whether the zones of ``locator`` are the caller's to list: not in the shared database, whose
    /// zones are other users' shares.
    var listsOwnZones: Bool { target.scope != .shared }

    /// The zone a request names (the default zone when `zoneID` is absent), if the caller may reach
    /// it: `ZONE_NOT_FOUND` for a zone of the shared database that nobody shared with them.
    func zone(_ zoneID: ZoneID?, field: String, limits: Limits) throws -> String {
        let name = try target.zoneName(zoneID, field: field, limits: limits)
        guard listsOwnZones else { throw Self.notShared(name) }
        return name
    }

    /// `ZONE_NOT_FOUND` for a zone of the shared database the caller has no share of.
    static func notShared(_ zoneName: String) -> StratusError {
        StratusError(.zoneNotFound, "zone '\(zoneName)' is not shared with you")
    }

    /// Whether writes are checked record by record against the schema's grants (the public database).
    var enforcesGrants: Bool { target.scope == .public }

    /// Which records of `recordType` the caller may read.
    func readAccess(recordType: String, schema: Schema) -> ReadAccess {
        ReadAccess(
            recordType: recordType, schema: schema, scope: target.scope, environment: target.environment,
            user: target.userRecordName)
    }
}
