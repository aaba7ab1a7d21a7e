import Foundation
import StratusStorage

/// What a newcomer or a script needs to talk to a server: written to `DATA/credentials.json`.
public struct ServerCredentials: Codable, Sendable, Hashable {
    /// The server's base URL.
    public var url: String
    /// The default container.
    public var container: String
    /// An API token of the default container.
    public var apiToken: String
    /// The admin token.
    public var adminToken: String

    /// Creates credentials.
    public init(url: String, container: String, apiToken: String, adminToken: String) {
        self.url = url
        self.container = container
        self.apiToken = apiToken
        self.adminToken = adminToken
    }
}
