import ContactsCore
import ExampleSupport
import Foundation
import Stratus
import StratusServer
import StratusStore
import StratusTestSupport
import Testing

/// The StratusStore version of the contacts app keeps the SyncEngine version's promises.
@Suite("contacts example on StratusStore: devices on one server")
struct ContactsDatabaseTests {
    func account(_ server: TestServer, _ name: String) -> DeviceDirectory.Account {
        DeviceDirectory.Account(
            stateDirectory: server.directory.appendingPathComponent("store-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: "mei", password: "correct horse")
    }

    @Test("contacts added, renamed and deleted on one device show on the other; the later edit wins a conflict; the outbox is empty after each sync")
    func twoDevices() async throws {
        try await withServer { server in
            try await ContactsDatabase.signUp(account(server, "phone"))
            try await ContactsDatabase.signIn(account(server, "laptop"))
            let phone = try await ContactsDatabase(stateDirectory: account(server, "phone").stateDirectory)
            let laptop = try await ContactsDatabase(stateDirectory: account(server, "laptop").stateDirectory)

            let ada = try await phone.add(name: "Ada Byron")
            let alan = try await phone.add(name: "Alan Turing")
            for index in 0..<30 { try await phone.add(name: "Person \(index)") }
            #expect(try await phone.sync() == .synced)
            #expect(try await phone.store.pendingChanges().isEmpty)
            #expect(try await laptop.sync() == .synced)
            #expect(try await laptop.contacts() == phone.contacts())
            #expect(try await laptop.contacts().count == 32)

            try await laptop.rename(ada.id, to: "Ada Lovelace")
            try await laptop.delete(alan.id)
            #expect(try await laptop.sync() == .synced)
            #expect(try await phone.sync() == .synced)
            #expect(try await phone.contacts().first { $0.id == ada.id }?.name == "Ada Lovelace")
            #expect(try await phone.contacts().contains { $0.id == alan.id } == false)

            // Both rename the same contact; the laptop's change is later but reaches the server second.
            let t0 = Date()
            try await phone.rename(ada.id, to: "Augusta", at: t0)
            try await laptop.rename(ada.id, to: "Augusta Ada King", at: t0.addingTimeInterval(5))
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(try await phone.sync() == .synced)
            #expect(try await phone.contacts().first { $0.id == ada.id }?.name == "Augusta Ada King")
            #expect(try await laptop.contacts() == phone.contacts())

            // Deleting everything on one device empties the other, and both prove equal to the server.
            try await phone.deleteAll()
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(try await laptop.contacts().isEmpty)
            let verification = try await laptop.store.verify()
            #expect(verification.matches && verification.recordCount == 0, "\(verification)")
        }
    }
}
