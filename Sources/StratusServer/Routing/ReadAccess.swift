import StratusModel
import StratusStorage

/// Who may read records of a type in the public database, under the schema's `READ` grants.
enum ReadAccess: Equatable {
    /// Every record.
    case all
    /// Only the records this user created.
    case createdBy(String)
    /// None.
    case none

    /// The access `user` (nil when not signed in) has to records of `recordType`. Outside the
    /// public database, a database's owner reads everything in it.
    init(recordType: String, schema: Schema, scope: DatabaseScope, environment: ContainerEnvironment, user: String?) {
        guard scope == .public else {
            self = .all
            return
        }
        let grants = schema.recordTypes[recordType]?.grants
            ?? (environment == .development ? RecordTypeSchema.defaultGrants : [])
        let roles = Set(grants.filter { $0.permission == .read }.map(\.role))
        if roles.contains("_world") || (user != nil && roles.contains("_icloud")) {
            self = .all
        } else if let user, roles.contains("_creator") {
            self = .createdBy(user)
        } else {
            self = .none
        }
    }

    /// Whether a record created by `creator` may be read.
    func allows(creator: String) -> Bool {
        switch self {
        case .all: true
        case .createdBy(let user): user == creator
        case .none: false
        }
    }
}
