import ContactsCore
import ExampleSupport
import Foundation
import Stratus
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

            try await laptop.rename(ada.id, to: "Ada Lovelace")
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
                let lines = try await runKilled(
                    ["import", "100000", "--sync-every", "7", "--state", device.stateDirectory.path], afterLines: killAfter)
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

    /// Runs the `contacts` command with `arguments`, kills it with SIGKILL once it printed
    /// `afterLines` lines, and returns the lines it printed.
    func runKilled(_ arguments: [String], afterLines: Int) async throws -> [String] {
        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("contacts")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The reads block until the child prints, and the child waits on this process's server: read
        // on a thread of its own, never on Swift's cooperative pool, whose threads the server needs.
        let lines = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: Self.readUntilKilled(process, output: output, afterLines: afterLines))
            }
        }
        #expect(process.terminationReason == .uncaughtSignal, "the import was killed, not finished")
        return lines
    }

    /// Reads `process`'s lines until `afterLines` came, kills it with SIGKILL, and returns every line
    /// it printed.
    static func readUntilKilled(_ process: Process, output: Pipe, afterLines: Int) -> [String] {
        var lines: [String] = []
        var pending = Data()
        let handle = output.fileHandleForReading
        while lines.count < afterLines, process.isRunning || !pending.isEmpty {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // Lines written before the kill but not read yet count too.
        pending.append(handle.readDataToEndOfFile())
        lines += String(decoding: pending, as: UTF8.self).split(separator: "\n").map(String.init)
        return lines
    }
}
