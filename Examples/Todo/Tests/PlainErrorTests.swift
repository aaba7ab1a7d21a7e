import ExampleSupport
import Foundation
import Stratus
import StratusTestSupport
import Testing

@Suite("the examples' errors: plain sentences, never error domains or numeric codes")
struct PlainErrorTests {
    /// What none of the examples' messages may show.
    static let internals = ["NSCocoaErrorDomain", "Code=", "Error Domain", "notAuthenticated", "(9)", "CloudError"]

    @Test("the server's refusals and a missing file read as sentences that say what to do")
    func sentences() throws {
        let signedOut = plainSentence(for: CloudError(.notAuthenticated, "the session ended"))
        #expect(signedOut.contains("sign in again with 'signin'") && signedOut.contains("the session ended"), "\(signedOut)")
        let busy = plainSentence(for: CloudError(.requestRateLimited, "slow down", retryAfterSeconds: 2.5))
        #expect(busy == "The server is busy. Try again in 3 s.")
        let missing = Result { try Data(contentsOf: URL(fileURLWithPath: "/nonexistent/photo.jpg")) }
        guard case .failure(let error) = missing else { Issue.record("the file exists"); return }
        #expect(plainSentence(for: error) == "There is no file /nonexistent/photo.jpg.")
        for sentence in [signedOut, busy, plainSentence(for: error)] {
            #expect(!Self.internals.contains { sentence.contains($0) }, "\(sentence)")
        }
    }

    @Test("todo prints a missing credentials file and an unreachable server as plain sentences, exiting 1")
    func commandLine() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("todo-errors-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let todo = productsDirectory.appendingPathComponent("todo")
        let missing = try await runChildProcess(
            todo, ["signin", "mei", "--credentials", "/nonexistent/credentials.json", "--password", "pw", "--state", state.path])
        #expect(missing.status == 1)
        #expect(missing.errors == "error: There is no file /nonexistent/credentials.json.\n", "\(missing.errors)")
        // Port 9 (discard) on loopback: nothing listens there.
        let unreachable = try await runChildProcess(
            todo, [
                "signin", "mei", "--server", "http://127.0.0.1:9", "--container", "iCloud.com.example.todo", "--api-token",
                "token", "--password", "pw", "--state", state.path,
            ])
        #expect(unreachable.status == 1)
        #expect(unreachable.errors.hasPrefix("error: The server could not be reached"), "\(unreachable.errors)")
        for errors in [missing.errors, unreachable.errors] {
            #expect(!Self.internals.contains { errors.contains($0) }, "\(errors)")
        }
    }
}
