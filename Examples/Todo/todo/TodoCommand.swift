import ArgumentParser
import ExampleCommands
import ExampleSupport
import Foundation
import Stratus
import StratusStore
import TodoCore

@main
struct TodoCommand: AsyncParsableCommand {
    /// Errors print as plain sentences (`runPrintingPlainErrors()`).
    static func main() async { await runPrintingPlainErrors() }

    static let configuration = CommandConfiguration(
        commandName: "todo",
        abstract: "A to-do app whose own SQLite database StratusStore mirrors to a Stratus server.",
        discussion: """
            Each state directory (--state) is one device, its data in todo.sqlite. Set it up once with 'signup' \
            or 'signin', then 'add-list', 'add', 'done', 'rename', 'delete' and 'sync' (or 'show'). Every change is \
            committed to the device's database first and sent when the server is reachable; 'status' shows what \
            waits, 'verify' proves the device's copy equal to the server's. 'share' prints a link to a list that \
            another user opens with 'accept'; 'leave' stops sharing it (or, for whom it was shared with, leaves it). \
            A change the server refuses is kept as made, and every command fails saying so, until 'resolve' sends \
            it again or takes the server's version (--revert).
            """,
        subcommands: [
            SignUp.self, SignIn.self, Sync.self, AddList.self, Add.self, Done.self, Rename.self, Delete.self,
            Status.self, Verify.self, Schema.self, Import.self, Watch.self, Share.self, Accept.self, Leave.self,
            Resolve.self,
        ])
}

/// The device's state directory, common to every command.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The state directory of this device.")
    var state: String = "./todo-state"

    var directory: URL { URL(fileURLWithPath: state, isDirectory: true) }

    func store(automaticallySync: Bool = false) async throws -> TodoStore {
        try await openDevice { try await TodoStore(stateDirectory: directory, automaticallySync: automaticallySync) }
    }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account and make this state directory a device of it.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await TodoStore.signUp(try account.account(stateDirectory: device.directory))
        say("Signed up as \(account.name).")
    }
}

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin", abstract: "Sign in, make this state directory a device of the account, and sync.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await TodoStore.signIn(try account.account(stateDirectory: device.directory))
        say("Signed in as \(account.name).")
        let store = try await device.store()
        try await report(store, store.sync())
    }
}

struct AddList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add-list", abstract: "Add a list.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's title.")
    var title: String

    func run() async throws {
        let store = try await device.store()
        say("added list \(try await store.addList(title: title))")
        try await report(store, store.sync())
    }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add an item to a list.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's ID, or its start, as 'show' prints it.")
    var list: String

    @Argument(help: "The item's title.")
    var title: String

    @Option(help: "A file to attach (sent as an asset when larger than 1 KiB).")
    var attach: String?

    func run() async throws {
        let store = try await device.store()
        let attachment = try attach.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        let item = try await store.addItem(to: try await store.resolve(list), title: title, attachment: attachment)
        say("added item \(item)")
        try await report(store, store.sync())
    }
}

struct Done: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mark an item done (or not done, with --undo).")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The item's ID, or its start.")
    var item: String

    @Flag(help: "Mark it not done.")
    var undo = false

    func run() async throws {
        let store = try await device.store()
        try await store.setDone(try await store.resolve(item), !undo)
        try await report(store, store.sync())
    }
}

struct Rename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Rename a list or an item.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's or item's ID, or its start.")
    var id: String

    @Argument(help: "The new title.")
    var title: String

    func run() async throws {
        let store = try await device.store()
        try await store.rename(try await store.resolve(id), to: title)
        try await report(store, store.sync())
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete an item, or a list with its items.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's or item's ID, or its start.")
    var id: String

    func run() async throws {
        let store = try await device.store()
        try await store.delete(try await store.resolve(id))
        try await report(store, store.sync())
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send the waiting changes, apply the other devices', and show the lists (offline: show them as they are here).",
        aliases: ["show"])

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        try await report(store, store.sync())
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the outbox and where mirroring stands, without syncing.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        for (name, mirror) in [("own lists", store.store), ("lists shared with you", store.sharedStore)] {
            for change in try await mirror.pendingChanges() {
                say("waiting: \(change.operation.rawValue) \(change.table) \(change.rowID)")
            }
            let status = try await mirror.syncStatus()
            say("\(name): \(status.pendingChanges) change(s) waiting")
            // The status of this run: a store just opened has not fetched yet, so it cannot say it is up to date.
            say(status.isUpToDate ? "  up to date" : "  not known to be up to date: run 'todo sync' to send and fetch")
            if let error = status.lastError { say("  last error: \(error.message)") }
            for refused in try await mirror.refusedChanges() {
                say("  refused, waiting for 'todo resolve': \(refused.table) \(refused.rowID): \(refused.error.message)")
            }
        }
    }
}

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Settle a change the server refused: go back to the server's version, or send it again.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The refused list's or item's ID, or its start.")
    var id: String

    @Flag(help: "Go back to the server's version (the default is to send the change again at the next sync).")
    var revert = false

    func run() async throws {
        let store = try await device.store()
        try await store.resolveRefusal(try await store.resolve(id), revert: revert)
        try await report(store, store.sync())
    }
}

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sync, then prove this device's copy equal to the server's by comparing their digests.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        var matches = true
        for mirror in [store.store, store.sharedStore] {
            let verification = try await mirror.verify()
            for zoneID in Set(verification.local.keys).union(verification.server.keys).sorted(by: { "\($0)" < "\($1)" }) {
                say("zone \(zoneID)")
                say("  device: \(verification.local[zoneID].map { "\($0)" } ?? "nothing")")
                say("  server: \(verification.server[zoneID].map { "\($0)" } ?? "nothing")")
                for difference in verification.differences[zoneID] ?? [] { say("  differs: \(difference)") }
            }
            matches = matches && verification.matches
        }
        guard matches else { throw ExitCode.failure }
        say("— the device's copy equals the server's")
    }
}

struct Schema: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the app's record types into the development schema and print them (refused in production).")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        say(try await store.store.initializeSchema())
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add many items to a new list, printing each as it is committed, and sync as it goes.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "How many items to add.")
    var count: Int

    @Option(help: "Sync after this many items.")
    var syncEvery: Int = 50

    func validate() throws {
        guard count > 0 else { throw ValidationError("the count must be at least 1") }
        guard syncEvery > 0 else { throw ValidationError("--sync-every must be at least 1") }
    }

    func run() async throws {
        let store = try await device.store()
        let list = try await store.addList(title: "Imported")
        say("added list \(list)")
        for number in 1...count {
            say("added item \(try await store.addItem(to: list, title: "Item \(number)"))")
            if number.isMultiple(of: syncEvery) { _ = try await store.sync() }
        }
        try await report(store, store.sync())
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the lists, then again each time the other devices' changes arrive (until interrupted).")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store(automaticallySync: true)
        // Subscribed before the first show, so nothing that arrives in between is missed.
        let changes = [store.store.remoteChanges(), store.sharedStore.remoteChanges()]
        try await show(store)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for changes in changes {
                group.addTask {
                    for await _ in changes {
                        say("—")
                        try await show(store)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

struct Share: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Share a list and its items, and print the link that lets another user accept it.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's ID, or its start.")
    var list: String

    @Flag(help: "Those who accept may read the list but not change it.")
    var readOnly = false

    func run() async throws {
        let store = try await device.store()
        let url = try await store.share(try await store.resolve(list), readOnly: readOnly)
        try await report(store, store.sync())
        say("share link: \(url.absoluteString)")
    }
}

struct Accept: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Accept a list another user shared, from its link.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The link 'todo share' printed.")
    var link: String

    func run() async throws {
        guard let url = URL(string: link) else { throw ValidationError("'\(link)' is not a link") }
        let store = try await device.store()
        try await store.accept(url)
        try await report(store, store.sync())
    }
}

struct Leave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop sharing a list you shared (you keep it), or leave a list shared with you (it leaves this device).")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The list's ID, or its start.")
    var list: String

    func run() async throws {
        let store = try await device.store()
        try await store.stopSharing(try await store.resolve(list))
        try await report(store, store.sync())
    }
}

/// Prints the lists.
func show(_ store: TodoStore) async throws {
    let lists = try await store.lists()
    if lists.isEmpty { say("(no lists yet: add one with 'todo add-list TITLE')") }
    for list in lists {
        say("\(list.id)  \(list.title)\(list.sharedWithMe ? "  (shared with you)" : "")")
        for item in list.items {
            let attachment = item.attachmentSize.map { "  [\($0) bytes attached]" } ?? ""
            say("  \(item.id)  [\(item.done ? "x" : " ")] \(item.title)\(attachment)")
        }
    }
}

/// Prints the lists and what the sync did.
func report(_ store: TodoStore, _ outcome: TodoStore.SyncOutcome) async throws {
    try await show(store)
    // A refused change is never shown as synced: the command says so and fails.
    let refused = try await store.refusedChanges()
    for change in refused {
        say("refused: \(change.table) \(change.rowID): \(change.error.message) — 'todo resolve \(change.rowID.uuidString.prefix(8))' sends it again, '--revert' takes the server's")
    }
    guard refused.isEmpty else { throw ExitCode.failure }
    switch outcome {
    case .synced:
        say("— synced")
    case .offline(let reason):
        let waiting = try await store.store.syncStatus().pendingChanges + store.sharedStore.syncStatus().pendingChanges
        say("— the server is unreachable (\(reason)); \(waiting) change(s) wait on this device for the next sync")
    }
}
