import ExampleSupport
import Foundation
import NotesCore
import Stratus
import StratusServer
import StratusTestSupport
import Testing

@Suite("notes example: two devices on one server")
struct NotesTests {
    /// A device of `username`'s account with its own state directory under the server's directory.
    func account(_ server: TestServer, _ name: String, username: String = "mei") -> NotesDevice.Account {
        NotesDevice.Account(
            stateDirectory: server.directory.appendingPathComponent("device-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: username, password: "correct horse")
    }

    @Test("an edit on one device shows on the other; an offline edit waits on disk and is pushed when the server is back")
    func twoDevicesAndOffline() async throws {
        let server = try await TestServer.start()
        var phone: NotesDevice? = try await NotesDevice.signUp(account(server, "phone"))
        let laptop = try await NotesDevice.signIn(account(server, "laptop"))
        #expect(try await laptop.sync() == .synced)
        #expect(await laptop.note == nil)

        #expect(try await phone?.edit("Buy milk") == .synced)
        #expect(try await laptop.sync() == .synced)
        #expect(await laptop.note?.text == "Buy milk")
        #expect(await laptop.note?.editedOn == (await phone?.id))

        #expect(try await laptop.edit("Buy milk and eggs") == .synced)
        #expect(try await phone?.sync() == .synced)
        #expect(await phone?.note?.text == "Buy milk and eggs")

        // The server goes away; the phone edits anyway.
        try await server.stop()
        guard case .offline? = try await phone?.edit("Buy bread (written offline)") else {
            Issue.record("an edit without a server is kept offline")
            return
        }
        #expect(await phone?.note?.needsPush == true)

        // While the phone's process runs, another is refused its folder: it would write its own
        // copy of the note over the phone's.
        let phoneFolder = server.directory.appendingPathComponent("device-phone")
        await #expect(throws: DeviceLock.InUse.self) { try await NotesDevice(stateDirectory: phoneFolder) }

        // A new process on the same state directory, once the first ended, still has the waiting edit.
        phone = nil
        let phoneAgain = try await NotesDevice(stateDirectory: phoneFolder)
        #expect(await phoneAgain.note?.text == "Buy bread (written offline)")
        #expect(await phoneAgain.note?.needsPush == true)

        let restarted = try await server.restart()
        #expect(try await phoneAgain.sync() == .synced)
        #expect(await phoneAgain.note?.needsPush == false)
        #expect(try await laptop.sync() == .synced)
        #expect(await laptop.note?.text == "Buy bread (written offline)")
        try await restarted.stopAndRemove()
    }

    @Test("a running watch picks up the other device's edits through the push channel")
    func watch() async throws {
        try await withServer { server async throws in
            let phone = try await NotesDevice.signUp(account(server, "phone"))
            let laptop = try await NotesDevice.signIn(account(server, "laptop"))
            let (changes, continuation) = AsyncStream<LocalNote?>.makeStream()
            let watching = Task { try await laptop.watch { continuation.yield($0) } }
            var seen = changes.makeAsyncIterator()
            try await Task.sleep(for: .milliseconds(300))
            // The watch syncs only when the push channel says so: no timer, no polling.
            try await phone.edit("Buy milk")
            let first = await seen.next()
            #expect(first??.text == "Buy milk")
            try await phone.edit("Buy milk and bread")
            #expect(await seen.next()??.text == "Buy milk and bread")
            #expect(await laptop.note?.text == "Buy milk and bread", "the watch synced the laptop's copy")
            watching.cancel()
        }
    }

    @Test("conflicts: the later edit wins, whichever device pushes first")
    func latestEditWins() async throws {
        try await withServer { server async throws in
            let phone = try await NotesDevice.signUp(account(server, "phone"))
            let laptop = try await NotesDevice.signIn(account(server, "laptop"))
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            try await phone.edit("first", at: t0)
            try await laptop.sync()

            // Both edit the same version. The laptop's edit is later but reaches the server second:
            // its save conflicts, it compares `modified`, and writes its text over the server's.
            try await phone.edit("phone, earlier", at: t0.addingTimeInterval(10))
            try await laptop.edit("laptop, later", at: t0.addingTimeInterval(20))
            #expect(await laptop.note?.text == "laptop, later")
            try await phone.sync()
            #expect(await phone.note?.text == "laptop, later")

            // Now the later edit reaches the server first; the earlier one loses when it arrives.
            try await laptop.edit("laptop, later again", at: t0.addingTimeInterval(40))
            #expect(await phone.note?.text == "laptop, later")
            try await phone.edit("phone, earlier again", at: t0.addingTimeInterval(30))
            #expect(await phone.note?.text == "laptop, later again", "the server's newer edit replaced the phone's")
            #expect(await phone.note?.needsPush == false)
            try await laptop.sync()
            #expect(await laptop.note?.text == "laptop, later again")
        }
    }

    @Test("a note written by a newer app version is refused, and left as it is")
    func newerVersionRefused() async throws {
        try await withServer { server async throws in
            let newer = NotesDevice.Account(
                stateDirectory: server.directory.appendingPathComponent("device-new"), serverURL: URL(string: server.baseURL)!,
                containerIdentifier: server.container, apiToken: server.apiToken, username: "mei", password: "correct horse")
            try await NotesDevice.signUp(account(server, "old"))
            try await NotesDevice.signIn(newer)
            let old = try await NotesDevice(stateDirectory: server.directory.appendingPathComponent("device-old"))
            let new = try await NotesDevice(stateDirectory: newer.stateDirectory, appVersion: NotesDevice.currentVersion + 1)
            try await old.edit("written by version 1")
            try await new.sync()
            #expect(await new.note?.text == "written by version 1", "a newer app reads older notes")
            try await new.edit("written by version 2")

            await #expect(throws: NotesDevice.Failure.newerVersion(NotesDevice.currentVersion + 1)) { try await old.sync() }
            #expect(await old.note?.text == "written by version 1")
            await #expect(throws: NotesDevice.Failure.newerVersion(NotesDevice.currentVersion + 1)) {
                try await old.edit("version 1 tries to overwrite")
            }
            #expect(await old.note?.needsPush == false, "the refused edit is settled, not kept to be sent later")
            await #expect(throws: NotesDevice.Failure.newerVersion(NotesDevice.currentVersion + 1), "still not the server's note") {
                try await old.sync()
            }
            try await new.sync()
            #expect(await new.note?.text == "written by version 2", "the older app did not overwrite the newer note")
            try await new.edit("version 2 again")
            try await new.sync()
            #expect(await new.note?.text == "version 2 again")
        }
    }
}
