public import ArgumentParser
public import ExampleSupport
public import Foundation
import StratusCommandLine

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

    @OptionGroup var server: ServerOptions

    public init() {}

    /// The account to set `stateDirectory` up with.
    public func account(stateDirectory: URL) throws -> DeviceDirectory.Account {
        let (serverURL, container, apiToken) = try server.resolved()
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
