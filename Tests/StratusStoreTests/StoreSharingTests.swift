import Foundation
import GRDB
import Stratus
import StratusStore
import StratusTestSupport
import Testing

/// Sharing rows: the owner's store shares a list with its items, participants' stores mirror their
/// shared databases, and the owner's other device follows the rows into the share.
@Suite("StratusStore: sharing rows")
struct StoreSharingTests {
    typealias Device = StoreMirrorTests.Device

    static func insertList(_ device: Device, _ list: UUID, _ title: String, items: [(UUID, String)]) async throws {
        try await device.pool.write { db in
            try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, ?)", arguments: [list.uuidString, title])
            for (item, itemTitle) in items {
                try db.execute(
                    sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, ?)", arguments: [item, list.uuidString, itemTitle])
            }
        }
    }

    static func title(of item: UUID, on device: Device) async throws -> String? {
        try await device.item(item)?["title"]
    }

    @Test("a row written just before another row is shared, with no sync between, reaches the server at the next sync")
    func rowWrittenBeforeSharingIsSent() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("ada"))
                let (groceries, milk, errands) = (UUID(), UUID(), UUID())
                try await Self.insertList(phone, groceries, "Groceries", items: [(milk, "Milk")])
                try await phone.store.sync()
                // A store that syncs only when asked hands the engine its changes at the next sync;
                // sharing hands over the shared rows alone, and must not hide the list written before.
                try await Self.insertList(phone, errands, "Errands", items: [])
                _ = try await phone.store.share(groceries) { share in share.title = "Groceries" }
                try await phone.store.sync()
                #expect(try await phone.store.syncStatus().pendingChanges == 0)
                let verification = try await phone.store.verify()
                #expect(verification.matches, "\(verification)")
                #expect(verification.server[RecordZone.ID(zoneName: RecordMapping.zoneName)]?.recordCount == 1)
            }
        }
    }

    @Test("a move into a share keeps the owner's other device's edits: one made before the move moves with the row, one made after (before it heard of the move) reaches the row in its share, and nothing is left behind")
    func moveKeepsEdits() async throws {
        try await StoreMirrorTests.withDevices(["phone", "laptop"]) { server, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let (groceries, milk, bread) = (UUID(), UUID(), UUID())
            try await Self.insertList(phone, groceries, "Groceries", items: [(milk, "Milk"), (bread, "Bread")])
            try await phone.store.sync()
            try await laptop.store.sync()
            // The laptop renames Milk; the phone has not fetched it when it shares the list.
            try await laptop.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'Oat milk' WHERE id = ?", arguments: [milk]) }
            try await laptop.store.sync()
            _ = try await phone.store.share(groceries) { $0.title = "Groceries" }
            #expect(try await Self.title(of: milk, on: phone) == "Oat milk", "the row moved with the other device's edit")

            // The laptop, not having heard of the move, renames Bread: its save finds the record gone,
            // the fetch finds the row in its share, and the edit goes there at the next sync.
            try await laptop.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'Rye bread' WHERE id = ?", arguments: [bread]) }
            try await laptop.store.sync()
            try await laptop.store.sync()
            try await phone.store.sync()
            #expect(try await Self.title(of: bread, on: phone) == "Rye bread", "the edit made after the move reached the share")
            #expect(try await phone.contents() == laptop.contents())
            let phoneVerification = try await phone.store.verify()
            #expect(phoneVerification.matches, "no record is left in the zone the rows left: \(phoneVerification)")
            #expect(try await laptop.store.verify().matches)
        }
    }

    @Test("a list shared while its first send may be in flight ends up in the share's zone alone, nothing pending")
    func shareWhileSending() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("ada"))
                let (groceries, milk) = (UUID(), UUID())
                try await Self.insertList(phone, groceries, "Groceries", items: [(milk, "Milk")])
                async let sending: Void = phone.store.sync()
                let share = try await phone.store.share(groceries) { $0.title = "Groceries" }
                try await sending
                try await phone.store.sync()
                #expect(try await phone.store.syncStatus().pendingChanges == 0)
                let verification = try await phone.store.verify()
                #expect(verification.matches, "\(verification)")
                #expect(verification.server[share.recordID.zoneID]?.recordCount == 2, "\(verification)")
                #expect((verification.server[RecordZone.ID(zoneName: RecordMapping.zoneName)]?.recordCount ?? 0) == 0)
            }
        }
    }

    @Test("in a store of the shared database, a row deleted before it joined a share is settled, not left pending")
    func deletedBeforePlacement() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let bob = try await Device.open(
                    directory.appendingPathComponent("bob"), container: try await server.signedInContainer("bob"), scope: .shared)
                let list = UUID()
                try await bob.pool.write { db in
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Scratch')", arguments: [list.uuidString])
                }
                try await bob.pool.write { db in try db.execute(sql: "DELETE FROM lists WHERE id = ?", arguments: [list.uuidString]) }
                try await bob.store.sync()
                let status = try await bob.store.syncStatus()
                #expect(status.pendingChanges == 0, "\(status)")
            }
        }
    }

    @Test("an owner shares a list and its items; a read-write participant's store gets them and writes back, a new item joins the share, a read-only participant's write is rolled back; the owner's other device follows; leaving and stopping purge participants' copies; digests match in every zone")
    func shareAList() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("ada"))
                let laptop = try await Device.open(directory.appendingPathComponent("laptop"), container: try await server.device(of: "ada"))
                let bobContainer = try await server.signedInContainer("bob")
                let cyContainer = try await server.signedInContainer("cy")
                let bob = try await Device.open(directory.appendingPathComponent("bob"), container: bobContainer, scope: .shared)
                let cy = try await Device.open(directory.appendingPathComponent("cy"), container: cyContainer, scope: .shared)

                let (groceries, milk, eggs) = (UUID(), UUID(), UUID())
                let (work, report) = (UUID(), UUID())
                try await Self.insertList(phone, groceries, "Groceries", items: [(milk, "Milk"), (eggs, "Eggs")])
                try await Self.insertList(phone, work, "Work", items: [(report, "Report")])
                try await phone.store.sync()
                try await laptop.store.sync()
                #expect(try await laptop.contents() == phone.contents())

                // Sharing moves the list and its items into a zone of their own; the other list stays.
                let bobID = try await bobContainer.userRecordID()
                let cyID = try await cyContainer.userRecordID()
                let share = try await phone.store.share(groceries) { share in
                    share.title = "Groceries"
                    share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: bobID), permission: .readWrite))
                    share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: cyID), permission: .readOnly))
                }
                let url = try #require(share.url)
                let shareZone = share.recordID.zoneID
                #expect(shareZone.zoneName.hasPrefix("com.stratus.store.share."))
                #expect(try await phone.store.share(of: milk)?.recordID == share.recordID)
                #expect(try await phone.store.share(of: work) == nil)
                #expect(try await phone.store.syncStatus().pendingChanges == 0)
                let moved = try await phone.store.verify()
                #expect(moved.matches, "\(moved)")
                #expect(moved.server[shareZone]?.recordCount == 3)
                #expect(moved.server[RecordZone.ID(zoneName: RecordMapping.zoneName)]?.recordCount == 2)

                // The owner's other device follows the rows into the share, losing none.
                let before = try await laptop.contents()
                try await laptop.store.sync()
                #expect(try await laptop.contents() == before)
                #expect(try await laptop.store.verify() == moved)
                #expect(try await laptop.store.share(of: eggs)?.recordID == share.recordID)

                // A read-write participant accepts into a store of the shared database.
                try await bob.store.accept(try await bobContainer.shareMetadata(for: url))
                let bobsCopy = try await bob.contents()
                #expect(bobsCopy.count == 3 && bobsCopy["list " + groceries.uuidString] == "Groceries", "\(bobsCopy)")
                #expect(bobsCopy["list " + work.uuidString] == nil)
                #expect(try await bob.store.canUpdate(milk))
                #expect(try await bob.store.canDelete(groceries))

                // Bob edits an item and adds one to the shared list: it joins the share.
                let bread = UUID()
                try await bob.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'Oat milk' WHERE id = ?", arguments: [milk])
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Bread')", arguments: [bread, groceries.uuidString])
                }
                try await bob.store.sync()
                #expect(try await bob.store.syncStatus().pendingChanges == 0)
                try await phone.store.sync()
                #expect(try await Self.title(of: milk, on: phone) == "Oat milk")
                #expect(try await Self.title(of: bread, on: phone) == "Bread")

                // The owner adds an item to the shared list on the laptop: it goes into the share too.
                let butter = UUID()
                try await laptop.store.sync()
                try await laptop.pool.write { db in
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Butter')", arguments: [butter, groceries.uuidString])
                }
                try await laptop.store.sync()
                try await bob.store.sync()
                #expect(try await Self.title(of: butter, on: bob) == "Butter")
                let bobVerification = try await bob.store.verify()
                #expect(bobVerification.matches && bobVerification.server.keys.map(\.zoneName) == [shareZone.zoneName], "\(bobVerification)")
                try await phone.store.sync()
                #expect(try await phone.store.verify().matches)

                // A read-only participant may not write; a write made anyway is refused, before it is
                // sent (the store fetched the share), and kept as the user made it until the app chooses.
                try await cy.store.accept(try await cyContainer.shareMetadata(for: url))
                #expect(try await cy.contents() == bob.contents())
                #expect(try await !cy.store.canUpdate(milk))
                let announced = cy.store.refusals()
                try await cy.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'Cy was here' WHERE id = ?", arguments: [eggs])
                }
                let error = await #expect(throws: CloudError.self) { try await cy.store.sync() }
                #expect(error?.code == .permissionFailure && error?.message.contains("read-only") == true, "\(String(describing: error))")
                var announcements = announced.makeAsyncIterator()
                #expect(await announcements.next()?.rowID == eggs, "the refusal is announced")
                let cyStatus = try await cy.store.syncStatus()
                #expect(cyStatus.pendingChanges == 1 && cyStatus.lastError?.code == .permissionFailure, "\(cyStatus)")
                #expect(try await Self.title(of: eggs, on: cy) == "Cy was here", "never undone behind the user's back")
                let refused = try await cy.store.refusedChanges()
                #expect(refused.map(\.rowID) == [eggs] && refused.first?.table == "items" && refused.first?.error.code == .permissionFailure)
                try await cy.store.sync()
                #expect(try await cy.store.refusedChanges().map(\.rowID) == [eggs], "kept, not sent again, until the app resolves it")
                try await bob.store.sync()
                #expect(try await Self.title(of: eggs, on: bob) == "Eggs", "and never reaches the others")
                try await cy.store.resolveRefusedChange(eggs, .revert)
                #expect(try await cy.store.refusedChanges().isEmpty)
                #expect(try await Self.title(of: eggs, on: cy) == "Eggs", "the app chose the server's version")
                #expect(try await cy.store.syncStatus().pendingChanges == 0)

                // Bob leaves: the share's rows leave his device; the others keep theirs.
                try await bob.store.stopSharing(groceries)
                #expect(try await bob.contents().isEmpty)
                try await phone.store.sync()
                #expect(try await phone.contents().count == 7)

                // The owner stops sharing: the remaining participant's copy goes, the owner's stays.
                try await phone.store.stopSharing(groceries)
                #expect(try await phone.store.share(of: groceries) == nil)
                try await cy.store.sync()
                #expect(try await cy.contents().isEmpty)
                #expect(try await phone.contents().count == 7)
                #expect(try await phone.store.verify().matches)
            }
        }
    }

    @Test("a store of the shared database cannot share, and one of the private database cannot accept")
    func scopesRefuseTheOtherSide() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let container = try await server.signedInContainer("ada")
                let owner = try await Device.open(directory.appendingPathComponent("owner"), container: container)
                let participant = try await Device.open(directory.appendingPathComponent("participant"), container: container, scope: .shared)
                let list = UUID()
                try await Self.insertList(participant, list, "Mine", items: [])
                let refused = await #expect(throws: CloudError.self) { try await participant.store.share(list) }
                #expect(refused?.code == .invalidArguments)
                let missing = await #expect(throws: CloudError.self) { try await owner.store.share(UUID()) }
                #expect(missing?.code == .unknownItem)
                // A row written to the shared database's store that references no shared row stays
                // in the outbox, with the reason.
                try await participant.store.sync()
                let status = try await participant.store.syncStatus()
                #expect(status.pendingChanges == 1 && status.lastError?.message.contains("in no share") == true, "\(status)")
            }
        }
    }
}
