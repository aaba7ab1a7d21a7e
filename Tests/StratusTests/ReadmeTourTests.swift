import Foundation
import StratusProcess
import StratusTestSupport
import Testing

/// The README's tour, run from the file itself: its shell blocks, as pasted into a shell (`swift
/// run stratus` becomes the built executable), against a fresh `stratus serve`. Each answer shown in
/// the README (a `# {…}` line) must agree with what the commands printed: every `"key":"value"`
/// it shows in full must be there. So the tour cannot drift from the server again.
@Suite("README: the tour runs as written")
struct ReadmeTourTests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    /// The shell blocks of the section `heading`, but the first (which starts the server).
    static func commands(under heading: String) throws -> [String] {
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let start = text.range(of: "\n## \(heading)\n") else { throw TourError("README.md has no section '\(heading)'") }
        let section = text[start.upperBound...].components(separatedBy: "\n## ")[0]
        let blocks = section.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        return Array(blocks.dropFirst())
    }

    /// The `"key":"value"` (or `true`/`false`) pairs an answer line of the README shows in full.
    static func shownPairs(_ line: String) -> [String] {
        let pattern = /"[A-Za-z]+":("[^"…]*"|true|false)/
        return line.matches(of: pattern).map { String($0.output.0) }.filter { !$0.contains("…") }
    }

    @Test("the curl tour's commands succeed against a fresh server and answer what the README shows")
    func curlTour() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-tour-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.copyItem(at: Self.readme, to: directory.appendingPathComponent("README.md"))
        let stratus = productsDirectory.appendingPathComponent("stratus")
        let server = try ServerProcess(
            executable: stratus, arguments: ["serve", "--port", "0", "--data", directory.appendingPathComponent("stratus-data").path])
        defer { server.kill() }

        let blocks = try Self.commands(under: "A five-minute tour with curl")
        #expect(blocks.count >= 10, "the tour's blocks were not found")
        // As a reader's shell runs it: a failing command stops the tour, but a pipeline answers for its
        // last command (`curl … | head -3` closes curl's output early, which curl reports as status 23).
        var script = "set -eu\ncd '\(directory.path)'\n"
        var shown: [String] = []
        for block in blocks {
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("# ") {
                    shown += Self.shownPairs(String(line))
                } else {
                    script += line.replacingOccurrences(of: "swift run stratus", with: "'\(stratus.path)'") + "\n"
                }
            }
        }
        #expect(shown.count >= 5, "the README shows answers to check")
        let file = directory.appendingPathComponent("tour.sh")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let run = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), [file.path])
        #expect(run.status == 0, "the tour stopped: \(run.errors)")
        let printed = run.output + run.errors
        for pair in shown {
            #expect(printed.contains(pair), "the README shows \(pair), the server answered otherwise:\n\(printed)")
        }
        #expect(printed.contains("# Stratus"), "the downloaded asset is the README")
        #expect(!printed.contains("INTERNAL_ERROR") && !printed.contains("BAD_REQUEST"), "\(printed)")
    }

    struct TourError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
