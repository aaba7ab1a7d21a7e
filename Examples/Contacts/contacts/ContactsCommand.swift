import ArgumentParser
import ContactsCore
import ExampleCommands
import ExampleSupport
import Foundation
import Stratus
import StratusSync

@main
struct ContactsCommand: AsyncParsableCommand {
    /// Errors print as plain sentences (`runPrintingPlainErrors()`).
    static func main() async { await runPrintingPlainErrors() }

    static let configuration = CommandConfiguration(
        commandName: "contacts",
        abstract: "Apple's sync-engine sample on Stratus: a contacts list kept in sync between devices by a SyncEngine.",
        discussion: """
            Each state directory (--state) is one device. Set it up once with 'signup' or 'signin', then 'add', \
            'rename', 'delete', 'list' and 'sync'. Edits are committed on the device first and sent when the \
            server is reachable; a crash never loses one. When two devices changed a contact, the later change wins. \
            'watch' follows the other devices' changes as the server pushes them.
            """,
        subcommands: [
            SignUp.self, SignIn.self, List.self, Add.self, Rename.self, Delete.self, DeleteAll.self, Sync.self,
            Import.self, Watch.self,
        ])
}

/// The device's state directory, common to every command.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The state directory of this device.")
    var state: String = "./contacts-state"

    var directory: URL { URL(fileURLWithPath: state, isDirectory: true) }

    func store(automaticallySync: Bool = false) async throws -> ContactsStore {
        try await openDevice { try await ContactsStore(stateDirectory: directory, automaticallySync: automaticallySync) }
    }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account and make this state directory a device of it.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await ContactsStore.signUp(try account.account(stateDirectory: device.directory))
        say("Signed up as \(account.name).")
    }
}

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin", abstract: "Sign in, make this state directory a device of the account, and sync.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await ContactsStore.signIn(try account.account(stateDirectory: device.directory))
        say("Signed in as \(account.name).")
        let store = try await device.store()
        try await report(store, store.sync())
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sync if the server is reachable, then list the contacts.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        try await report(store, store.sync())
    }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a contact; sent now, or at the next sync when offline.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The contact's name.")
    var name: String

    func run() async throws {
        let store = try await device.store()
        let contact = try await store.add(name: name)
        say("added \(contact.id) \(contact.name)")
        try await report(store, store.sync())
    }
}

struct Rename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Rename a contact.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The contact's ID, or its start, as 'list' shows it.")
    var id: String

    @Argument(help: "The new name.")
    var name: String

    func run() async throws {
        let store = try await device.store()
        try await store.rename(try await store.resolve(id), to: name)
        try await report(store, store.sync())
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a contact.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The contact's ID, or its start, as 'list' shows it.")
    var id: String

    func run() async throws {
        let store = try await device.store()
        try await store.delete(try await store.resolve(id))
        try await report(store, store.sync())
    }
}

struct DeleteAll: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-all", abstract: "Delete every contact, here, on the server and on the other devices.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        try await store.deleteAll()
        try await report(store, store.sync())
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send the waiting edits and fetch the other devices'.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store()
        try await report(store, store.sync())
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add many contacts ('Contact 1', 'Contact 2'…), printing each as it is committed, and sync as it goes.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "How many contacts to add.")
    var count: Int

    @Option(help: "Sync after this many contacts.")
    var syncEvery: Int = 50

    func validate() throws {
        guard count > 0 else { throw ValidationError("the count must be at least 1") }
        guard syncEvery > 0 else { throw ValidationError("--sync-every must be at least 1") }
    }

    func run() async throws {
        let store = try await device.store()
        for number in 1...count {
            let contact = try await store.add(name: "Contact \(number)")
            say("added \(contact.id) \(contact.name)")
            if number.isMultiple(of: syncEvery) { _ = try await store.sync() }
        }
        try await report(store, store.sync())
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the contacts, then again each time another device changes them (until interrupted).")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let store = try await device.store(automaticallySync: true)
        for contact in await store.contacts { say("\(contact.id)  \(contact.name)") }
        await store.watch { contacts in
            say("—")
            for contact in contacts { say("\(contact.id)  \(contact.name)") }
        }
    }
}

/// Prints the contacts and what the sync did.
func report(_ store: ContactsStore, _ outcome: ContactsStore.SyncOutcome) async throws {
    let contacts = await store.contacts
    if contacts.isEmpty { say("(no contacts yet: add one with 'contacts add NAME')") }
    for contact in contacts { say("\(contact.id)  \(contact.name)") }
    let status = await store.syncStatus
    for change in status {
        if case .failed(let error) = change.status { say("refused: \(change.change.recordID.recordName): \(error.message)") }
    }
    switch outcome {
    case .synced:
        say("— synced")
    case .offline(let reason):
        say("— the server is unreachable (\(reason)); \(status.count) change(s) wait on this device for the next sync")
    }
}
