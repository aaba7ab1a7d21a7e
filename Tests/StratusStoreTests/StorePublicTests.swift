import Foundation
import GRDB
import Stratus
import StratusServer
import StratusStore
import StratusTestSupport
import Testing

/// A store of the public database: every user's rows, deletions as records marked deleted, changes
/// found by polling.
@Suite("StratusStore: the public database")
struct StorePublicTests {
    typealias Device = StoreMirrorTests.Device

    @Test("stores of two users share the public database: inserts, updates and deletes travel by polling, a deletion is a record marked deleted, another user's row cannot be changed and comes back, a deleted UUID inserted again lives")
    func publicDatabase() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let ada = try await Device.open(
                    directory.appendingPathComponent("ada"), container: try await server.signedInContainer("ada"), scope: .public)
                let bob = try await Device.open(
                    directory.appendingPathComponent("bob"), container: try await server.signedInContainer("bob"), scope: .public)
                let (market, apples, pears) = (UUID(), UUID(), UUID())
                try await StoreSharingTests.insertList(ada, market, "Market", items: [(apples, "Apples"), (pears, "Pears")])
                try await ada.store.sync()
                try await bob.store.sync()
                #expect(try await bob.contents() == ada.contents())
                #expect(try await bob.contents().count == 3)
                let adaStatus = try await ada.store.syncStatus()
                #expect(adaStatus.isUpToDate && adaStatus.pendingChanges == 0, "\(adaStatus)")

                // Bob's own list reaches Ada.
                let (garage, tools) = (UUID(), UUID())
                try await StoreSharingTests.insertList(bob, garage, "Garage", items: [(tools, "Tools")])
                try await bob.store.sync()
                try await ada.store.sync()
                #expect(try await ada.contents() == bob.contents())

                // A poll with nothing new applies nothing.
                let quiet = try await ada.store.history(excludingAuthors: []).token
                try await ada.store.sync()
                #expect(try await ada.store.history(after: quiet).transactions.isEmpty)

                // A deletion travels as the record marked deleted, with no other field.
                try await ada.pool.write { db in try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [pears]) }
                try await ada.store.sync()
                try await bob.store.sync()
                let adaAfterDelete = try await ada.store.syncStatus()
                #expect(try await bob.item(pears) == nil, "\(adaAfterDelete)")
                let marked = try await bob.container.publicCloudDatabase.record(for: RecordMapping.recordID(pears, zoneID: RecordZone.ID()))
                #expect(marked[RecordMapping.deletedKey] as? Int64 == 1 && marked["title"] == nil, "\(marked)")

                // Bob may not change Ada's rows: asked first, the store says so; done anyway, the edit
                // is refused and kept as he made it until the app chooses; reverted, the row comes back.
                #expect(try await !bob.store.canUpdate(market))
                #expect(try await bob.store.canUpdate(garage))
                let picture = Data((0..<5_000).map { UInt8($0 % 251) })
                try await ada.pool.write { db in try db.execute(sql: "UPDATE items SET attachment = ? WHERE id = ?", arguments: [picture, apples]) }
                try await ada.store.sync()
                try await bob.store.sync()
                try await bob.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'Mine now', attachment = ? WHERE id = ?", arguments: [Data([1, 2, 3]), apples])
                }
                await #expect(throws: CloudError.self) { try await bob.store.sync() }
                #expect(try await bob.store.refusedChanges().map(\.rowID) == [apples])
                let bobStatus = try await bob.store.syncStatus()
                #expect(bobStatus.pendingChanges == 1 && bobStatus.lastError?.code == .permissionFailure, "\(bobStatus)")
                #expect(try await StoreSharingTests.title(of: apples, on: bob) == "Mine now")
                try await bob.store.resolveRefusedChange(apples, .revert)
                #expect(try await StoreSharingTests.title(of: apples, on: bob) == "Apples")
                #expect(
                    try await bob.item(apples)?["attachment"] as Data? == picture,
                    "the picture, known here by its digest alone, comes back from the server")
                #expect(try await bob.store.syncStatus().pendingChanges == 0)

                // The deleted UUID inserted again lives again, everywhere.
                try await ada.pool.write { db in
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Pears again')", arguments: [pears, market.uuidString])
                }
                try await ada.store.sync()
                try await bob.store.sync()
                #expect(try await StoreSharingTests.title(of: pears, on: bob) == "Pears again")
                #expect(try await ada.contents() == bob.contents())

                // What the public database cannot do, the store refuses by name.
                let verify = await #expect(throws: CloudError.self) { try await ada.store.verify() }
                #expect(verify?.code == .invalidArguments)
                let share = await #expect(throws: CloudError.self) { try await ada.store.share(market) }
                #expect(share?.code == .invalidArguments)
            }
        }
    }

    @Test("when the account changes, a public store purges its rows and polls every public row again")
    func accountSwitch() async throws {
        // The server's time moves only when the test moves it: the first rows are older than the
        // poll's overlap by the time the account changes.
        let serverTime = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: serverTime.serverClock), clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let ada = try await Device.open(
                    directory.appendingPathComponent("ada"), container: try await server.signedInContainer("ada"), scope: .public)
                let (market, apples, garage) = (UUID(), UUID(), UUID())
                try await StoreSharingTests.insertList(ada, market, "Market", items: [(apples, "Apples")])
                try await ada.store.sync()
                serverTime.advance(bySeconds: 3_600)
                try await StoreSharingTests.insertList(ada, garage, "Garage", items: [])
                try await ada.store.sync()
                let rows = try await ada.contents()
                #expect(rows.count == 3)

                _ = try await server.signedInContainer("bob")
                _ = try await ada.container.signIn(username: "bob", password: "correct horse")
                try await ada.store.sync()
                #expect(try await ada.contents() == rows, "bob's store reads the public rows from the start")
            }
        }
    }
}
