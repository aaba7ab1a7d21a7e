public import ArgumentParser
import ExampleSupport
import Foundation

extension AsyncParsableCommand {
    /// Runs the command as the examples' `main` does: errors of the app (the server's refusals, a
    /// missing file) print as one plain sentence (``plainSentence(for:)``) and exit with status 1;
    /// the argument parser's own (usage, `--help`) print as it prints them.
    public static func runPrintingPlainErrors() async {
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var command = command
                try command.run()
            }
        } catch let error as ValidationError {
            exit(withError: error)
        } catch let error as CleanExit {
            exit(withError: error)
        } catch let error as ExitCode {
            exit(withError: error)
        } catch {
            FileHandle.standardError.write(Data("error: \(plainSentence(for: error))\n".utf8))
            Foundation.exit(1)
        }
    }
}
