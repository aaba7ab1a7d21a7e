public import StratusModel

/// Identifies one database: a container's environment, a scope and, for the private and shared
/// databases, the user who owns it.
public struct DatabaseLocator: Hashable, Sendable, CustomStringConvertible {
    /// The owner name of the public database and its zones (CloudKit's `__defaultOwner__`).
    public static let publicOwner = ZoneID.currentUserOwnerName

    /// The container identifier, e.g. `iCloud.com.example.notes`.
    public var container: String
    /// Development or production.
    public var environment: ContainerEnvironment
    /// Public, private or shared.
    public var scope: DatabaseScope
    /// The owning user's record name; ``publicOwner`` for the public database.
    public var owner: String

    /// Creates a locator.
    public init(container: String, environment: ContainerEnvironment, scope: DatabaseScope, owner: String) {
        self.container = container
        self.environment = environment
        self.scope = scope
        self.owner = scope == .public ? Self.publicOwner : owner
    }

    public var description: String { "\(container)/\(environment.rawValue)/\(scope.rawValue)/\(owner)" }
}
