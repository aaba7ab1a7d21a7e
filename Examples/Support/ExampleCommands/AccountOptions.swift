public import ArgumentParser
public import ExampleSupport
public import Foundation

/// Where the server is and who signs in: the options of an example's `signup` and `signin`.
public struct AccountOptions: ParsableArguments {
    @Argument(help: "The username (not with --identity-token).")
    var username: String?

    @Option(help: "The password (read from standard input when absent).")
    var password: String?

    @Option(help: "An ID token from Sign in with Apple or an OpenID Connect provider, instead of a username and password.")
    var identityToken: String?

    @Option(help: "The provider that issued --identity-token: apple, or an OpenID Connect provider's name.")
    var provider = "apple"

    @Option(help: "The nonce the app made for --identity-token (Apple's token carries its SHA-256).")
    var nonce: String?

    @Option(help: "A Stratus server's credentials.json, for its URL, container and API token.")
    var credentials: String?

    @Option(help: "The server's URL (instead of --credentials).")
    var server: String?

    @Option(help: "The container identifier (instead of --credentials).")
    var container: String?

    @Option(help: "An API token of the container (instead of --credentials).")
    var apiToken: String?

    public init() {}

    /// The account to set `stateDirectory` up with.
    public func account(stateDirectory: URL) throws -> DeviceDirectory.Account {
        var server = server
        var container = container
        var apiToken = apiToken
        if let credentials {
            let data = try Data(contentsOf: URL(fileURLWithPath: credentials))
            guard let values = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
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
        if let identityToken {
            guard username == nil, password == nil else {
                throw ValidationError("--identity-token signs in without a username or password; leave them out")
            }
            guard let nonce else { throw ValidationError("--identity-token needs the --nonce the token was issued for") }
            return DeviceDirectory.Account(
                stateDirectory: stateDirectory, serverURL: serverURL, containerIdentifier: container, apiToken: apiToken,
                username: "", password: "",
                identityToken: DeviceDirectory.Account.IdentityToken(provider: provider, token: identityToken, nonce: nonce))
        }
        guard let username else { throw ValidationError("give a username, or --identity-token") }
        guard let password = password ?? readLine(strippingNewline: true), !password.isEmpty else {
            throw ValidationError("give --password, or the password on standard input")
        }
        return DeviceDirectory.Account(
            stateDirectory: stateDirectory, serverURL: serverURL, containerIdentifier: container, apiToken: apiToken,
            username: username, password: password)
    }

    /// Who signs in: the username given, or the identity provider.
    public var name: String { username ?? "your \(provider) identity" }
}

/// Writes a line straight to standard output, so it shows at once in a pipe or a file too (where
/// `print` would hold it in a buffer while a long command runs). A reader that went away (`| head`)
/// is not an error: the line is dropped.
public func say(_ line: String) {
    try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
}

/// Opens a device's local store; a state directory that is not set up yet becomes a usage error
/// that says which command to run first.
public func openDevice<Store>(_ open: () async throws -> Store) async throws -> Store {
    do {
        return try await open()
    } catch let failure as DeviceDirectory.NotSetUp {
        throw ValidationError(failure.description)
    }
}
