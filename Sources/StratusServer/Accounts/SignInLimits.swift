import StratusModel

/// Limits on signing up and signing in, per client address and per account, against password
/// guessing and mass account creation.
public struct SignInLimits: Sendable, Hashable {
    /// Failed sign-ins of one account (container and username, whether or not it exists) before
    /// each further failure locks it, for 1 s, then 2 s, 4 s, …; 5 by default.
    public var freeFailuresPerAccount: Int
    /// Failed sign-ins (and sign-ups refused for a taken username) from one client address before
    /// the same backoff applies to the address; 20 by default, as several people may share one.
    public var freeFailuresPerAddress: Int
    /// The longest lock, in seconds; 15 minutes by default.
    public var maximumLockSeconds: Int64
    /// Accounts one client address may create: 20 at once, then one every 3 minutes by default.
    public var signUpsPerAddress: RateLimit

    /// Creates the limits; every argument has the default documented on its property.
    public init(
        freeFailuresPerAccount: Int = 5, freeFailuresPerAddress: Int = 20, maximumLockSeconds: Int64 = 900,
        signUpsPerAddress: RateLimit = RateLimit(requestsPerSecond: 1.0 / 180, burst: 20)
    ) {
        self.freeFailuresPerAccount = freeFailuresPerAccount
        self.freeFailuresPerAddress = freeFailuresPerAddress
        self.maximumLockSeconds = maximumLockSeconds
        self.signUpsPerAddress = signUpsPerAddress
    }
}
