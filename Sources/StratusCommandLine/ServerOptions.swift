public import ArgumentParser
public import Foundation

/// How a command line reaches a running Stratus server as a client: the `credentials.json` the
/// server wrote at its first start, or its URL, a container and an API token given one by one.
/// The example apps and `stratus`'s client commands take the same options.
public struct ServerOptions: ParsableArguments {
    @Option(help: "A Stratus server's credentials.json, for its URL, container and API token.")
    var credentials: String?

    @Option(help: "The server's URL (instead of --credentials).")
    var server: String?

    @Option(help: "The container identifier (instead of --credentials).")
    var container: String?

    @Option(help: "An API token of the container (instead of --credentials).")
    var apiToken: String?

    public init() {}

    /// The server's URL, the container and the API token: each option given, else the
    /// credentials file's value.
    ///
    /// - Throws: `ValidationError` naming the option missing, or the file that is not a credentials
    ///   file; the file's own error when it cannot be read.
    public func resolved() throws -> (serverURL: URL, container: String, apiToken: String) {
        var server = server
        var container = container
        var apiToken = apiToken
        if let credentials {
            let data = try Data(contentsOf: URL(fileURLWithPath: credentials))
            guard let values = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw ValidationError("--credentials \(credentials) is not a Stratus credentials.json")
            }
            server = server ?? values["url"] as? String
            container = container ?? values["container"] as? String
            apiToken = apiToken ?? values["apiToken"] as? String
        }
        guard let server, let serverURL = URL(string: server), serverURL.scheme != nil else {
            throw ValidationError("give --server URL (such as http://127.0.0.1:8080) or --credentials FILE")
        }
        guard let container else { throw ValidationError("give --container ID or --credentials FILE") }
        guard let apiToken else { throw ValidationError("give --api-token TOKEN or --credentials FILE") }
        return (serverURL, container, apiToken)
    }
}
