import ArgumentParser
import ExampleCommands
import ExampleSupport
import Foundation
import NotesCore

@main
struct NotesCommand: AsyncParsableCommand {
    /// Errors print as plain sentences (`runPrintingPlainErrors()`).
    static func main() async { await runPrintingPlainErrors() }

    static let configuration = CommandConfiguration(
        commandName: "notes",
        abstract: "The one-note app of seed 000 on Stratus: edit on one device, read on another, offline included.",
        discussion: """
            Each state directory (--state) is one device. Set it up once with 'signup' or 'signin', then use \
            'edit', 'show' and 'sync'. Edits made while the server is away are kept on the device and pushed by \
            the next 'sync', 'edit' or 'show'; when two devices changed the note, the later edit wins.
            """,
        subcommands: [SignUp.self, SignIn.self, Show.self, Edit.self, Sync.self, Watch.self])
}

/// The device's state directory, common to every command.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The state directory of this device.")
    var state: String = "./notes-state"

    var directory: URL { URL(fileURLWithPath: state, isDirectory: true) }

    func device() async throws -> NotesDevice {
        try await openDevice { try await NotesDevice(stateDirectory: directory) }
    }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account and make this state directory a device of it.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        let notes = try await NotesDevice.signUp(try account.account(stateDirectory: device.directory))
        say("Signed up as \(account.name); this is device \(await notes.id).")
    }
}

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin", abstract: "Sign in and make this state directory a device of the account.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        let notes = try await NotesDevice.signIn(try account.account(stateDirectory: device.directory))
        say("Signed in as \(account.name); this is device \(await notes.id).")
        try await report(notes, await notes.sync())
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sync if the server is reachable, then print the note.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let notes = try await device.device()
        try await report(notes, await notes.sync())
    }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replace the note's text; pushed now, or at the next sync when offline.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The note's new text.")
    var text: String

    func run() async throws {
        let notes = try await device.device()
        try await report(notes, await notes.edit(text))
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Push a waiting edit and fetch the other devices' edits.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let notes = try await device.device()
        try await report(notes, await notes.sync())
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the note, then again each time another device changes it (until interrupted).")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let notes = try await device.device()
        try await report(notes, await notes.sync())
        try await notes.watch { note in
            guard let note else { return say("(the note was deleted)") }
            say(note.text)
            say("— edited \(note.modified.formatted(date: .abbreviated, time: .standard)) on \(note.editedOn ?? "an unknown device")")
        }
    }
}

/// Prints the note and what the sync did.
func report(_ notes: NotesDevice, _ outcome: NotesDevice.SyncOutcome) async throws {
    guard let note = await notes.note else {
        say("(no note yet: write one with 'notes edit TEXT')")
        return
    }
    say(note.text)
    let when = note.modified.formatted(date: .abbreviated, time: .standard)
    let status: String
    switch outcome {
    case .synced:
        status = "synced"
    case .offline(let reason):
        status = note.needsPush
            ? "saved on this device only: the server is unreachable (\(reason)); it is pushed at the next sync"
            : "offline (\(reason)): this is the last version this device fetched"
    }
    say("— edited \(when) on \(note.editedOn ?? "an unknown device") · \(status)")
}
