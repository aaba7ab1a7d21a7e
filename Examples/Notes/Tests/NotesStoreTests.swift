import ExampleSupport
import Foundation
import NotesCore
import Stratus
import StratusServer
import StratusTestSupport
import Testing

/// The StratusStore version of the notes app keeps the SyncEngine version's promises.
@Suite("notes example on StratusStore: two devices on one server")
struct NotesStoreTests {
    func account(_ server: TestServer, _ name: String) -> DeviceDirectory.Account {
        DeviceDirectory.Account(
            stateDirectory: server.directory.appendingPathComponent("store-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: "mei", password: "correct horse")
    }

    @Test("an edit on one device shows on the other; an offline edit waits in the outbox, survives reopening, and is sent when the server is back")
    func twoDevicesAndOffline() async throws {
        let server = try await TestServer.start()
        let phone = try await NotesStore.signUp(account(server, "phone"))
        let laptop = try await NotesStore.signIn(account(server, "laptop"))
        #expect(try await laptop.sync() == .synced)
        #expect(try await laptop.note() == nil)

        #expect(try await phone.edit("Buy milk") == .synced)
        #expect(try await laptop.sync() == .synced)
        #expect(try await laptop.note()?.text == "Buy milk")
        #expect(try await laptop.note()?.editedOn == phone.id)
        #expect(try await laptop.edit("Buy milk and eggs") == .synced)
        #expect(try await phone.sync() == .synced)
        #expect(try await phone.note()?.text == "Buy milk and eggs")

        try await server.stop()
        guard case .offline = try await phone.edit("Buy bread (written offline)") else {
            Issue.record("an edit without a server is kept offline")
            return
        }
        let phoneAgain = try await NotesStore(stateDirectory: server.directory.appendingPathComponent("store-phone"))
        #expect(try await phoneAgain.note()?.text == "Buy bread (written offline)")
        #expect(try await phoneAgain.note()?.needsPush == true)

        let restarted = try await server.restart()
        #expect(try await phoneAgain.sync() == .synced)
        #expect(try await phoneAgain.note()?.needsPush == false)
        #expect(try await laptop.sync() == .synced)
        #expect(try await laptop.note()?.text == "Buy bread (written offline)")
        try await restarted.stopAndRemove()
    }

    @Test("conflicts: the later edit wins, whichever device sends first")
    func latestEditWins() async throws {
        try await withServer { server async throws in
            let phone = try await NotesStore.signUp(account(server, "phone"))
            let laptop = try await NotesStore.signIn(account(server, "laptop"))
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            try await phone.edit("first", at: t0)
            try await laptop.sync()

            // The later edit reaches the server second: its save conflicts, the merge keeps it.
            try await phone.edit("phone, earlier", at: t0.addingTimeInterval(10))
            try await laptop.edit("laptop, later", at: t0.addingTimeInterval(20))
            try await laptop.sync()
            #expect(try await laptop.note()?.text == "laptop, later")
            try await phone.sync()
            #expect(try await phone.note()?.text == "laptop, later")

            // The later edit reaches the server first; the earlier one loses when it arrives.
            try await laptop.edit("laptop, later again", at: t0.addingTimeInterval(40))
            try await phone.edit("phone, earlier again", at: t0.addingTimeInterval(30))
            try await phone.sync()
            #expect(try await phone.note()?.text == "laptop, later again", "the server's newer edit replaced the phone's")
            #expect(try await phone.note()?.needsPush == false)
            try await laptop.sync()
            #expect(try await laptop.note()?.text == "laptop, later again")
        }
    }

    @Test("a note written by a newer app version is refused, and never overwritten")
    func newerVersionRefused() async throws {
        try await withServer { server async throws in
            try await NotesStore.signUp(account(server, "old"))
            try await NotesStore.signIn(account(server, "new"))
            let old = try await NotesStore(stateDirectory: server.directory.appendingPathComponent("store-old"))
            let new = try await NotesStore(
                stateDirectory: server.directory.appendingPathComponent("store-new"), appVersion: NotesDevice.currentVersion + 1)
            try await old.edit("written by version 1")
            try await new.sync()
            #expect(try await new.note()?.text == "written by version 1", "a newer app reads older notes")
            try await new.edit("written by version 2")

            let refusal = NotesDevice.Failure.newerVersion(NotesDevice.currentVersion + 1)
            await #expect(throws: refusal) { try await old.sync() }
            await #expect(throws: refusal) { try await old.note() }
            await #expect(throws: refusal) { try await old.edit("version 1 tries to overwrite") }
            try await new.sync()
            #expect(try await new.note()?.text == "written by version 2", "the older app did not overwrite the newer note")
        }
    }
}
