import ContactsCore
import ExampleSupport
import Foundation
import Stratus
import StratusProcess
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

@Suite("contacts example: devices on one server")
struct ContactsTests {
    func account(_ server: TestServer, _ name: String) -> DeviceDirectory.Account {
        DeviceDirectory.Account(
            stateDirectory: server.directory.appendingPathComponent("device-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: "mei", password: "correct horse")
    }

    @Test("contacts added, renamed and deleted on one device show on the other; the later edit wins a conflict")
    func twoDevices() async throws {
        try await withServer { server in
            try await ContactsStore.signUp(account(server, "phone"))
            try await ContactsStore.signIn(account(server, "laptop"))
            let phone = try await ContactsStore(stateDirectory: account(server, "phone").stateDirectory)
            let laptop = try await ContactsStore(stateDirectory: account(server, "laptop").stateDirectory)

            let ada = try await phone.add(name: "Ada Byron")
            let alan = try await phone.add(name: "Alan Turing")
            for index in 0..<30 { try await phone.add(name: "Person \(index)") }
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(await laptop.contacts == phone.contacts)
            #expect(await laptop.contacts.count == 32)

            // As the command line takes them: an ID's start, in any case, when only one ID starts so.
            let adaStart = String(ada.id.prefix(8)).lowercased()
            #expect(try await laptop.resolve(adaStart) == ada.id)
            await #expect(throws: CloudError.self, "no contact's ID starts with it") { try await laptop.resolve("not-an-id") }
            await #expect(throws: CloudError.self, "every ID starts with the empty string") { try await laptop.resolve("") }
            try await laptop.rename(try await laptop.resolve(adaStart), to: "Ada Lovelace")
            try await laptop.delete(alan.id)
            #expect(try await laptop.sync() == .synced)
            #expect(try await phone.sync() == .synced)
            #expect(await phone.contacts.first { $0.id == ada.id }?.name == "Ada Lovelace")
            #expect(await phone.contacts.contains { $0.id == alan.id } == false)

            // Both rename the same contact; the laptop's change is later but reaches the server second.
            let t0 = Date()
            try await phone.rename(ada.id, to: "Augusta", at: t0)
            try await laptop.rename(ada.id, to: "Augusta Ada King", at: t0.addingTimeInterval(5))
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(try await phone.sync() == .synced)
            #expect(await phone.contacts.first { $0.id == ada.id }?.name == "Augusta Ada King")
            #expect(await laptop.contacts == phone.contacts)

            // Deleting everything on one device empties the other.
            try await phone.deleteAll()
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(await laptop.contacts.isEmpty)
        }
    }

    @Test("while 'contacts watch' runs on a device's folder, another command there is refused instead of losing its edit")
    func secondProcessOnOneFolder() async throws {
        try await withServer { server in
            let phone = account(server, "phone")
            try await ContactsStore.signUp(phone)
            try await ContactsStore.signIn(account(server, "laptop"))
            let contacts = productsDirectory.appendingPathComponent("contacts")
            let folder = ["--state", phone.stateDirectory.path]
            #expect(try await runChildProcess(contacts, ["add", "Ada"] + folder).status == 0)

            let watch = try SpawnedProcess(executable: contacts, arguments: ["watch"] + folder, standardOutput: .pipe)
            // Its first line (Ada) comes once it holds the folder.
            #expect(String(decoding: await firstLine(of: watch), as: UTF8.self).hasSuffix("Ada"))
            let refused = try await runChildProcess(contacts, ["add", "Grace"] + folder)
            #expect(refused.status == 1)
            #expect(refused.errors.contains("is in use by process \(watch.processIdentifier)"), "\(refused.errors)")
            watch.send(SIGTERM)
            _ = watch.waitUntilExit()

            #expect(try await runChildProcess(contacts, ["add", "Grace"] + folder).status == 0)
            let laptop = try await ContactsStore(stateDirectory: account(server, "laptop").stateDirectory)
            #expect(try await laptop.sync() == .synced)
            #expect(await laptop.contacts.map(\.name) == ["Ada", "Grace"], "every edit a command printed reached the server")
            let device = try await ContactsStore(stateDirectory: phone.stateDirectory)
            #expect(await device.contacts.map(\.name) == ["Ada", "Grace"])
        }
    }

    @Test("a contact mei added offline is kept for her while bob uses her device, and reaches her account when she signs in again")
    func accountSwitchKeepsUnsentContacts() async throws {
        try await withServer { server in
            let mei = account(server, "phone")
            var bob = mei
            bob.username = "bob"
            try await ContactsStore.signUp(mei)
            try await ContactsStore.signUp(DeviceDirectory.Account(
                stateDirectory: server.directory.appendingPathComponent("device-bob"), serverURL: mei.serverURL,
                containerIdentifier: mei.containerIdentifier, apiToken: mei.apiToken, username: "bob", password: mei.password))
            do {
                let phone = try await ContactsStore(stateDirectory: mei.stateDirectory)
                try await phone.add(name: "Ada")
            }
            // Bob signs in on mei's phone before her contact went out.
            try await ContactsStore.signIn(bob)
            do {
                let phone = try await ContactsStore(stateDirectory: mei.stateDirectory)
                #expect(try await phone.sync() == .synced)
                #expect(await phone.contacts.isEmpty, "bob sees none of mei's contacts")
                try await phone.add(name: "Bob's friend")
                #expect(try await phone.sync() == .synced)
            }
            try await ContactsStore.signIn(mei)
            do {
                let phone = try await ContactsStore(stateDirectory: mei.stateDirectory)
                #expect(try await phone.sync() == .synced)
                #expect(await phone.contacts.map(\.name) == ["Ada"], "mei's unsent contact is back, and bob's are not here")
            }
            try await ContactsStore.signIn(account(server, "laptop"))
            let laptop = try await ContactsStore(stateDirectory: account(server, "laptop").stateDirectory)
            #expect(try await laptop.sync() == .synced)
            #expect(await laptop.contacts.map(\.name) == ["Ada"], "mei's contact reached her account")
            let bobsDevice = try await ContactsStore(stateDirectory: server.directory.appendingPathComponent("device-bob"))
            #expect(try await bobsDevice.sync() == .synced)
            #expect(await bobsDevice.contacts.map(\.name) == ["Bob's friend"], "and never bob's")
        }
    }

    @Test("an import killed at random moments (SIGKILL) loses no committed contact: the next run sends them all")
    func killedImport() async throws {
        try await withServer { server in
            let device = account(server, "phone")
            try await ContactsStore.signUp(device)
            var printed = Set<String>()
            var random = SystemRandomNumberGenerator()
            for round in 0..<4 {
                // Each round kills the import after a different number of contacts, so that some
                // kills land while a sync is on its way and some between syncs.
                let killAfter = Int.random(in: 20...120, using: &random) + round
                let (lines, killed) = try await runKilled(
                    "contacts", ["import", "100000", "--sync-every", "7", "--state", device.stateDirectory.path],
                    afterLines: killAfter)
                #expect(killed, "the import was killed, not finished")
                printed.formUnion(lines.compactMap { $0.hasPrefix("added ") ? String($0.split(separator: " ")[1]) : nil })
            }

            // The next run of the app finds every committed contact and sends what is left.
            let phone = try await ContactsStore(stateDirectory: device.stateDirectory)
            let local = Set(await phone.contacts.map(\.id))
            #expect(printed.isSubset(of: local), "every contact the import reported is committed on the device")
            #expect(try await phone.sync() == .synced)
            #expect(await phone.syncStatus.isEmpty, "nothing is left to send, and nothing was refused")

            try await ContactsStore.signIn(account(server, "laptop"))
            let laptop = try await ContactsStore(stateDirectory: account(server, "laptop").stateDirectory)
            #expect(try await laptop.sync() == .synced)
            #expect(Set(await laptop.contacts.map(\.id)) == local, "the server holds every contact the phone committed")
        }
    }
}
