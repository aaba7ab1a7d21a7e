import AsyncHTTPClient
import Foundation
import NIOCore
import StratusModel
import StratusProcess

/// A user signed up on a `stratus serve` process, as the benchmark's HTTP clients address it.
struct BenchAccount {
    let container: String
    let apiToken: String
    let webAuthToken: String
    let userRecordName: String

    /// `?ckAPIToken=…&ckWebAuthToken=…`.
    var tokens: String { "?ckAPIToken=\(apiToken)&ckWebAuthToken=\(webAuthToken)" }

    /// Reads the credentials the server wrote into its data directory on first start and signs up
    /// `username` on its default container.
    static func signUp(on server: ServerProcess, dataDirectory: URL, username: String) async throws -> BenchAccount {
        let credentials = try JSONValue.parse(
            Array(try Data(contentsOf: dataDirectory.appendingPathComponent("credentials.json")))).object()
        let container: String = try credentials.decode("container")
        let apiToken: String = try credentials.decode("apiToken")
        let session = try JSONValue.parse(Array(try await StratusBench.post(
            StratusBench.uncompressedHTTP, "\(server.url)/auth/1/\(container)/signup?ckAPIToken=\(apiToken)",
            Array(#"{"username":"\#(username)","password":"load test passphrase"}"#.utf8)).readableBytesView)).object()
        return BenchAccount(
            container: container, apiToken: apiToken, webAuthToken: try session.decode("ckWebAuthToken"),
            userRecordName: try session.decode("userRecordName"))
    }
}
