/// Which of a container's databases a request addresses.
public enum DatabaseScope: String, Sendable, Hashable, CaseIterable {
    /// One per container and environment, shared by all users of the app.
    case `public`
    /// One per user.
    case `private`
    /// One per user: the zones other users shared with them.
    case shared
}

/// A container's environment; each has its own data.
public enum ContainerEnvironment: String, Sendable, Hashable, CaseIterable {
    case development
    case production
}
