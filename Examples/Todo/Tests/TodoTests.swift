import ExampleSupport
import Foundation
import GRDB
import Stratus
import StratusStore
import StratusTestSupport
import Testing
import TodoCore

@Suite("to-do example: StratusStore on devices of one server")
struct TodoTests {
    func account(_ server: TestServer, _ name: String, username: String = "mei") -> DeviceDirectory.Account {
        DeviceDirectory.Account(
            stateDirectory: server.directory.appendingPathComponent("todo-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: username, password: "correct horse")
    }

    @Test("lists, items, a relationship and an attachment reach the other device; the local-only table and column stay; the copies prove equal")
    func twoDevices() async throws {
        try await withServer { server in
            try await TodoStore.signUp(account(server, "phone"))
            try await TodoStore.signIn(account(server, "laptop"))
            let phone = try await TodoStore(stateDirectory: account(server, "phone").stateDirectory)
            let laptop = try await TodoStore(stateDirectory: account(server, "laptop").stateDirectory)

            let groceries = try await phone.addList(title: "Groceries")
            let milk = try await phone.addItem(to: groceries, title: "Milk")
            let recipe = Data((0..<4_000).map { UInt8($0 % 199) })
            let cake = try await phone.addItem(to: groceries, title: "Cake", attachment: recipe)
            try await phone.markViewed(groceries)
            try await phone.pool.write { db in try db.execute(sql: "UPDATE lists SET expanded = 0") }
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(try await laptop.lists() == phone.lists())
            #expect(try await laptop.attachment(of: cake) == recipe, "the attachment arrives whole, through an asset")
            let cakeRecord = try await server.device(of: "mei").privateCloudDatabase.record(for: RecordMapping.recordID(cake))
            #expect(
                cakeRecord[RecordMapping.assetKey("attachment")] is Asset,
                "the 4,000-byte attachment went as an asset (over \(TodoStore.attachmentAssetThreshold) bytes)")
            let outgoing = account(server, "phone").stateDirectory.appendingPathComponent("outgoing-assets")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outgoing.path).isEmpty, "and its file went once it was sent")
            #expect(try await laptop.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM views") } == 0)
            #expect(try await laptop.pool.read { db in try Int.fetchOne(db, sql: "SELECT expanded FROM lists") } == 1)

            // On the server: the two record types, nothing of the local parts.
            let records = try await phone.store.verify()
            #expect(records.matches && records.recordCount == 3, "\(records)")
            let changes = try await laptop.store.verify()
            #expect(changes.matches && changes.server == records.server)

            try await laptop.setDone(milk, true)
            try await laptop.rename(groceries, to: "Shopping")
            try await laptop.delete(cake)
            #expect(try await laptop.sync() == .synced)
            #expect(try await phone.sync() == .synced)
            let lists = try await phone.lists()
            #expect(lists.map(\.title) == ["Shopping"])
            #expect(lists.first?.items.map(\.title) == ["Milk"] && lists.first?.items.first?.done == true)

            try await phone.delete(groceries)
            #expect(try await phone.sync() == .synced)
            #expect(try await laptop.sync() == .synced)
            #expect(try await laptop.lists().isEmpty)
            #expect(try await laptop.store.verify().recordCount == 0)
        }
    }

    @Test("the app killed (SIGKILL) between local writes and their export loses nothing: the next start sends every committed item")
    func killedImport() async throws {
        try await withServer { server in
            let device = account(server, "phone")
            try await TodoStore.signUp(device)
            var printed = Set<UUID>()
            var random = SystemRandomNumberGenerator()
            for round in 0..<4 {
                // Kills land after different numbers of items: some while a sync is on its way,
                // some between a write and the next sync.
                let killAfter = Int.random(in: 20...120, using: &random) + round
                let (lines, killed) = try await runKilled(
                    "todo", ["import", "100000", "--sync-every", "7", "--state", device.stateDirectory.path],
                    afterLines: killAfter)
                #expect(killed, "the import was killed, not finished")
                printed.formUnion(lines.compactMap { line in
                    line.hasPrefix("added ") ? line.split(separator: " ").last.flatMap { UUID(uuidString: String($0)) } : nil
                })
            }

            let phone = try await TodoStore(stateDirectory: device.stateDirectory)
            let lists = try await phone.lists()
            let local = Set(lists.map(\.id) + lists.flatMap(\.items).map(\.id))
            #expect(printed.isSubset(of: local), "every list and item the import reported is committed on the device")
            #expect(try await phone.sync() == .synced)
            let status = try await phone.store.syncStatus()
            #expect(status.pendingChanges == 0 && status.isUpToDate, "\(status)")

            try await TodoStore.signIn(account(server, "laptop"))
            let laptop = try await TodoStore(stateDirectory: account(server, "laptop").stateDirectory)
            #expect(try await laptop.sync() == .synced)
            #expect(try await laptop.lists() == lists, "the server holds every row the phone committed")
            let verification = try await laptop.store.verify()
            #expect(verification.matches && verification.recordCount == local.count, "\(verification)")
        }
    }

    @Test("a list shared by link reaches another user, who edits it; a read-only one refuses their edits; leaving takes it off their device")
    func sharedLists() async throws {
        try await withServer { server in
            try await TodoStore.signUp(account(server, "mei"))
            try await TodoStore.signUp(account(server, "bob", username: "bob"))
            let mei = try await TodoStore(stateDirectory: account(server, "mei").stateDirectory)
            let bob = try await TodoStore(stateDirectory: account(server, "bob", username: "bob").stateDirectory)

            let trip = try await mei.addList(title: "Trip")
            let tent = try await mei.addItem(to: trip, title: "Tent", attachment: Data(repeating: 7, count: 3_000))
            let recipes = try await mei.addList(title: "Recipes")
            try await mei.addItem(to: recipes, title: "Soup")
            try await mei.addList(title: "Diary")
            let tripLink = try await mei.share(trip)
            let recipesLink = try await mei.share(recipes, readOnly: true)
            #expect(try await mei.sync() == .synced)

            try await bob.accept(tripLink)
            try await bob.accept(recipesLink)
            #expect(try await bob.sync() == .synced)
            let shared = try await bob.lists()
            #expect(shared.map(\.title) == ["Recipes", "Trip"], "the shared lists arrive with their items, the diary does not")
            #expect(shared.map(\.sharedWithMe) == [true, true])
            #expect(try await bob.attachment(of: tent) == Data(repeating: 7, count: 3_000))
            #expect(try await bob.canChange(trip))
            #expect(try await bob.canChange(recipes) == false)
            #expect(try await mei.canChange(recipes))
            // An edit the read-only share does not allow is refused before it is written.
            await #expect(throws: CloudError.self) { try await bob.addItem(to: recipes, title: "Cake") }
            await #expect(throws: CloudError.self) { try await bob.rename(recipes, to: "Bob's recipes") }
            let (ownPending, sharedPending) = (try await bob.store.pendingChanges(), try await bob.sharedStore.pendingChanges())
            #expect(ownPending.isEmpty && sharedPending.isEmpty)
            // One written anyway, past the app's check, is refused and said so: the sync throws, the
            // refusal stays listed for the app to show, and the app chooses to go back.
            try await bob.sharedStore.write { db in
                try db.execute(sql: "UPDATE lists SET title = 'Bob was here' WHERE id = ?", arguments: [recipes.uuidString])
            }
            await #expect(throws: CloudError.self) { try await bob.sync() }
            #expect(try await bob.lists().first { $0.id == recipes }?.title == "Bob was here", "kept until the app chooses")
            #expect(try await bob.sharedStore.refusedChanges().map(\.rowID) == [recipes])
            try await bob.sharedStore.resolveRefusedChange(recipes, .revert)
            #expect(try await bob.lists().first { $0.id == recipes }?.title == "Recipes")
            #expect(try await bob.lists().first { $0.id == recipes }?.items.map(\.title) == ["Soup"])

            // Bob's item joins Mei's list; Mei's rename reaches Bob.
            try await bob.addItem(to: trip, title: "Stove")
            try await bob.setDone(tent, true)
            #expect(try await bob.sync() == .synced)
            try await mei.rename(trip, to: "Camping")
            #expect(try await mei.sync() == .synced)
            #expect(try await bob.sync() == .synced)
            let camping = try #require(try await mei.lists().first { $0.id == trip })
            #expect(camping.items.map(\.title) == ["Stove", "Tent"] && camping.items.map(\.done) == [false, true])
            #expect(try await bob.lists().first { $0.id == trip }?.title == "Camping")
            #expect(try await mei.lists().map(\.sharedWithMe) == [false, false, false])

            // Bob leaves the trip: it leaves his device and stays Mei's; both copies prove equal to the server's.
            try await bob.stopSharing(trip)
            #expect(try await bob.sync() == .synced)
            #expect(try await bob.lists().map(\.title) == ["Recipes"])
            #expect(try await mei.sync() == .synced)
            #expect(try await mei.lists().map(\.title) == ["Camping", "Diary", "Recipes"])
            for store in [mei.store, mei.sharedStore, bob.store, bob.sharedStore] {
                let verification = try await store.verify()
                #expect(verification.matches, "\(verification)")
            }
        }
    }
}
