import Foundation
import GRDB
import Stratus
import StratusModel
import StratusStorage
import StratusStore
import StratusTestSupport
import Synchronization
import Testing

/// The mirror: stores on several devices of one user, each on its own SQLite file, converging
/// through one real server.
@Suite("StratusStore: mirroring through a server")
struct StoreMirrorTests {
    /// One device: the app's database file, and the store over it.
    struct Device {
        let pool: DatabasePool
        let store: StratusStore
        let container: Container
        /// Where the device keeps its file.
        let directory: URL

        static func open(
            _ directory: URL, container: Container, mergePolicy: StoreMergePolicy = .mergeByPropertyObjectTrump,
            customMerges: [String: StoreCustomMerge] = [:], automaticallySync: Bool = false, scope: Stratus.Database.Scope = .private,
            model: StoreModel = StoreFoundationTests.model, historyRetention: Duration? = StratusStore.defaultHistoryRetention
        ) async throws -> Device {
            let database = switch scope {
            case .private: container.privateCloudDatabase
            case .shared: container.sharedCloudDatabase
            case .public: container.publicCloudDatabase
            }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let pool = try StoreFoundationTests.makePool(directory)
            let store = try await StratusStore.open(
                pool, model: model,
                mirroring: StratusStore.Mirroring(
                    database: database, assetDirectory: directory.appendingPathComponent("outgoing"),
                    mergePolicy: mergePolicy, customMerges: customMerges, automaticallySync: automaticallySync,
                    assetThreshold: 1_000),
                historyRetention: historyRetention)
            return Device(pool: pool, store: store, container: container, directory: directory)
        }

        /// The same device after its app upgraded: the store closed, `migrate` run on the file,
        /// the store opened again (private database, the model of ``open(_:container:mergePolicy:customMerges:automaticallySync:scope:model:historyRetention:)``).
        func reopen(migrating migrate: @escaping @Sendable (GRDB.Database) throws -> Void) async throws -> Device {
            await store.close()
            try await pool.write(migrate)
            let store = try await StratusStore.open(
                pool, model: StoreFoundationTests.model,
                mirroring: StratusStore.Mirroring(
                    database: container.privateCloudDatabase, assetDirectory: directory.appendingPathComponent("outgoing"),
                    assetThreshold: 1_000))
            return Device(pool: pool, store: store, container: container, directory: directory)
        }

        /// The synced columns of every list and item, keyed by UUID, in a form to compare.
        func contents() async throws -> [String: String] {
            try await pool.read { db in
                var contents: [String: String] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT id, title FROM lists") {
                    contents["list " + (UUID.fromDatabaseValue(row["id"])?.uuidString ?? "?")] = "\(row["title"] as String)"
                }
                for row in try Row.fetchAll(db, sql: "SELECT id, listID, title, done, attachment FROM items") {
                    let attachment = (row["attachment"] as Data?).map { "\($0.count) bytes \($0.hashValue)" } ?? "none"
                    contents["item " + (UUID.fromDatabaseValue(row["id"])?.uuidString ?? "?")] =
                        "\(row["title"] as String? ?? "nil") list=\(row["listID"] as String? ?? "nil") done=\(row["done"] as Int? ?? -1) \(attachment)"
                }
                return contents
            }
        }

        func item(_ id: UUID) async throws -> Row? {
            try await pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM items WHERE id = ?", arguments: [id]) }
        }
    }

    static func withDevices(
        _ names: [String], user: String = "mei", automaticallySync: Bool = false,
        _ body: (TestServer, [Device]) async throws -> Void
    ) async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                var devices: [Device] = []
                for (index, name) in names.enumerated() {
                    let container =
                        index == 0 ? try await server.signedInContainer(user) : try await server.device(of: user)
                    devices.append(try await Device.open(
                        directory.appendingPathComponent(name), container: container, automaticallySync: automaticallySync))
                }
                try await body(server, devices)
            }
        }
    }

    @Test("two devices converge through one server: inserts, updates, cleared fields, deletes, relationships and BLOBs; local-only data stays on the device; the status is true")
    func convergence() async throws {
        try await Self.withDevices(["phone", "laptop"]) { _, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let list = UUID()
            let (milk, photo) = (UUID(), UUID())
            let large = Data((0..<5_000).map { UInt8($0 % 251) })
            try await phone.pool.write { db in
                try db.execute(sql: "INSERT INTO lists (id, title, collapsed) VALUES (?, 'Groceries', 1)", arguments: [list.uuidString])
                try db.execute(
                    sql: "INSERT INTO items (id, listID, title, done, attachment) VALUES (?, ?, 'Milk', 0, ?)",
                    arguments: [milk, list.uuidString, Data("2 litres".utf8)])
                try db.execute(
                    sql: "INSERT INTO items (id, listID, title, attachment) VALUES (?, ?, 'Photo', ?)",
                    arguments: [photo, list.uuidString, large])
                try db.execute(sql: "INSERT INTO thumbnails (id, itemID, bytes) VALUES (?, ?, x'00')", arguments: [UUID().uuidString, photo])
            }
            #expect(try await phone.store.syncStatus().isUpToDate == false)
            #expect(try await phone.store.syncStatus().pendingChanges == 3)
            try await phone.store.sync()
            try await laptop.store.sync()
            let phoneStatus = try await phone.store.syncStatus()
            #expect(try await laptop.contents() == phone.contents(), "\(phoneStatus)")
            #expect(try await laptop.contents().count == 3)
            #expect(try await laptop.pool.read { db in try Int.fetchOne(db, sql: "SELECT collapsed FROM lists") } == 0,
                "a local column does not travel")
            #expect(try await laptop.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM thumbnails") } == 0)

            // What the server holds: two record types, no local table, no local column; the large
            // BLOB as an asset.
            let changes = try await phone.container.privateCloudDatabase.recordZoneChanges(
                inZoneWith: RecordZone.ID(zoneName: RecordMapping.zoneName), since: nil)
            let records = try changes.modificationResultsByID.values.map { try $0.get() }
            #expect(Set(records.map(\.recordType)) == ["List", "Item"])
            #expect(records.allSatisfy { $0.fieldValue(forKey: "collapsed") == nil && $0.fieldValue(forKey: "bytes") == nil })
            let photoRecord = try #require(records.first { $0.recordID.recordName == photo.uuidString })
            guard case .asset? = photoRecord.fieldValue(forKey: "attachment_ckAsset") else {
                Issue.record("a BLOB over the threshold is an asset on the server")
                return
            }

            // The laptop edits one item, clears its attachment, and deletes the other.
            try await laptop.pool.write { db in
                try db.execute(sql: "UPDATE items SET title = 'Oat milk', attachment = NULL, done = 1 WHERE id = ?", arguments: [milk])
                try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [photo])
            }
            try await laptop.store.sync()
            try await phone.store.sync()
            #expect(try await phone.contents() == laptop.contents())
            #expect(try await phone.item(milk)?["attachment"] as Data? == nil, "a cleared field is cleared on the other device")
            #expect(try await phone.item(photo) == nil)

            // Deleted and inserted again under its UUID: the new row is what the other device gets.
            try await phone.pool.write { db in try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [milk]) }
            try await phone.pool.write { db in
                try db.execute(sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Milk again')", arguments: [milk, list.uuidString])
            }
            try await phone.store.sync()
            try await laptop.store.sync()
            #expect(try await laptop.item(milk)?["title"] as String? == "Milk again")
            #expect(try await phone.contents() == laptop.contents())

            try await phone.store.sync()
            for device in [phone, laptop] {
                let status = try await device.store.syncStatus()
                #expect(status.pendingChanges == 0 && status.isUpToDate && status.lastError == nil, "\(status)")
            }

            // Verifiable sync: both copies prove equal to the server's; a copy changed behind the
            // mirror's back (written as if imported, so never sent) proves different.
            let phoneVerification = try await phone.store.verify()
            #expect(phoneVerification.matches, "\(phoneVerification)")
            #expect(phoneVerification.recordCount == 2)
            #expect(try await laptop.store.verify() == phoneVerification)
            try await laptop.store.write(author: StratusStore.importAuthor) { db in
                try db.execute(sql: "UPDATE items SET title = 'Not on the server' WHERE id = ?", arguments: [milk])
            }
            let corrupted = try await laptop.store.verify()
            #expect(!corrupted.matches && corrupted.server == phoneVerification.server, "\(corrupted)")
        }
    }

    @Test("rows mei wrote and had not sent are kept for her while bob uses her device, and reach her account when she signs in again")
    func accountSwitchKeepsUnsentRows() async throws {
        try await Self.withDevices(["phone", "laptop"]) { server, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let (groceries, milk) = (UUID(), UUID())
            // Written before the phone's store ever synced: mei's, not whoever signs in next.
            try await StoreSharingTests.insertList(phone, groceries, "Groceries", items: [(milk, "Milk")])
            _ = try await server.signedInContainer("bob")
            _ = try await phone.container.signIn(username: "bob", password: "correct horse")
            try await phone.store.sync()
            #expect(try await phone.contents().isEmpty, "bob sees none of mei's rows")
            let bobsList = UUID()
            try await StoreSharingTests.insertList(phone, bobsList, "Bob's", items: [])
            try await phone.store.sync()

            _ = try await phone.container.signIn(username: "mei", password: "correct horse")
            try await phone.store.sync()
            let meis = try await phone.contents()
            #expect(meis.keys.sorted() == ["item \(milk.uuidString)", "list \(groceries.uuidString)"], "mei's rows are back, bob's gone")
            #expect(try await phone.store.syncStatus().pendingChanges == 0)
            try await laptop.store.sync()
            #expect(try await laptop.contents() == meis, "mei's rows reached her account")
            let bobsLaptop = try await Device.open(
                phone.directory.deletingLastPathComponent().appendingPathComponent("bobs-laptop"),
                container: try await server.device(of: "bob"))
            try await bobsLaptop.store.sync()
            #expect(try await bobsLaptop.contents().keys.sorted() == ["list \(bobsList.uuidString)"], "and never bob's")
        }
    }

    @Test("an app upgrade that adds a column: before the device upgrades, verify names the row and field that differ; after, the rows it held are filled from the server's records")
    func upgradeAddsColumn() async throws {
        try await Self.withDevices(["phone", "laptop"]) { server, devices in
            var (phone, laptop) = (devices[0], devices[1])
            let (groceries, milk, bread) = (UUID(), UUID(), UUID())
            try await StoreSharingTests.insertList(phone, groceries, "Groceries", items: [(milk, "Milk"), (bread, "Bread")])
            try await phone.store.sync()
            try await laptop.store.sync()
            let addPriority: @Sendable (GRDB.Database) throws -> Void = { db in
                try db.execute(sql: "ALTER TABLE items ADD COLUMN priority INTEGER")
            }
            // The laptop's app upgrades first and sets the new column on a row both devices hold.
            laptop = try await laptop.reopen(migrating: addPriority)
            try await laptop.pool.write { db in try db.execute(sql: "UPDATE items SET priority = 7 WHERE id = ?", arguments: [milk]) }
            try await laptop.store.sync()

            // The phone's app, not upgraded, has nowhere to keep it: verify says where the copies differ.
            try await phone.store.sync()
            let before = try await phone.store.verify()
            #expect(!before.matches)
            #expect(before.differences.values.flatMap { $0 }.map(\.description) == ["Item \(milk.uuidString): priority differ"])
            #expect(before.description.contains("priority differ"), "\(before)")

            // Once it upgrades, the rows it already held are filled from the server's records.
            phone = try await phone.reopen(migrating: addPriority)
            try await phone.store.sync()
            let priority = try await phone.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT priority FROM items WHERE id = ?", arguments: [milk])
            }
            #expect(priority == 7)
            let after = try await phone.store.verify()
            #expect(after.matches, "\(after)")
            #expect(try await phone.contents() == laptop.contents())
        }
    }

    @Test("the store stays small: history past its retention goes after a sync while later writes are still captured and sent; outgoing asset files go once sent")
    func storeStaysSmall() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("mei"), historyRetention: .zero)
                let laptop = try await Device.open(
                    directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"), historyRetention: nil)
                func historySize(_ device: Device) async throws -> (transactions: Int, changes: Int) {
                    try await device.pool.read { db in
                        (try Int.fetchOne(db, sql: "SELECT count(*) FROM stratusstore_transactions") ?? 0,
                         try Int.fetchOne(db, sql: "SELECT count(*) FROM stratusstore_changes") ?? 0)
                    }
                }
                let outgoing = directory.appendingPathComponent("phone/outgoing")
                let list = UUID()
                let picture = Data((0..<5_000).map { UInt8($0 % 251) })
                for round in 0..<3 {
                    let items = (0..<50).map { index in (UUID(), "Item \(round)-\(index)") }
                    if round == 0 {
                        try await StoreSharingTests.insertList(phone, list, "Groceries", items: items)
                    } else {
                        try await phone.pool.write { db in
                            for (id, title) in items {
                                try db.execute(sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, ?)", arguments: [id, list.uuidString, title])
                            }
                        }
                    }
                    try await phone.pool.write { db in
                        try db.execute(sql: "UPDATE items SET attachment = ? WHERE title = ?", arguments: [picture, "Item \(round)-0"])
                    }
                    try await phone.store.sync()
                    // Only the newest transaction stays, the position the next ones count from.
                    #expect(try await historySize(phone).transactions <= 1)
                    #expect(try await historySize(phone).changes <= 51)
                    #expect(try await phone.store.pendingChanges().isEmpty, "each round's writes were captured and sent after the last was pruned")
                    #expect(
                        (try? FileManager.default.contentsOfDirectory(atPath: outgoing.path))?.isEmpty ?? true,
                        "the attachment's asset file went once it was sent")
                }
                let beforeSync = try await laptop.store.history().token
                try await laptop.store.sync()
                #expect(try await laptop.contents() == phone.contents(), "every round arrived whole, attachments through assets")
                for device in [phone, laptop] {
                    let largestAncestor = try await device.pool.read { db in
                        try Int.fetchOne(db, sql: "SELECT max(length(ancestor)) FROM stratusstore_records") ?? 0
                    }
                    #expect(largestAncestor < 200, "the 5,000-byte attachments are not kept twice: \(largestAncestor)")
                }
                let kept = try await historySize(laptop)
                #expect(kept.transactions >= 1 && kept.changes >= 151, "a store that keeps its history keeps it")
                try await StoreSharingTests.insertList(laptop, UUID(), "Later", items: [])
                let token = try await laptop.store.history().token
                try await laptop.store.deleteHistory(before: token)
                #expect(try await historySize(laptop).transactions == 1)
                #expect(try await laptop.store.history(after: token).transactions.isEmpty)
                let expired = await #expect(throws: CloudError.self, "a token before what was deleted says so") {
                    try await laptop.store.history(after: beforeSync)
                }
                #expect(expired?.code == .changeTokenExpired)
            }
        }
    }

    @Test("an import grows the WAL past the app's threshold; the end of the sync checkpoints it and the next write cuts the file back; every row arrives")
    func checkpointsAroundSync() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                var stores: [(pool: DatabasePool, store: StratusStore, path: String)] = []
                for (index, name) in ["phone", "laptop"].enumerated() {
                    let container = index == 0 ? try await server.signedInContainer("mei") : try await server.device(of: "mei")
                    let path = directory.appendingPathComponent("\(name).sqlite").path
                    let pool = try await StoreFoundationTests.listsPool(path, autocheckpoint: 100)
                    let store = try await StratusStore.open(
                        pool, model: StoreModel([.synced("lists", recordType: "List")]),
                        mirroring: StratusStore.Mirroring(
                            database: container.privateCloudDatabase,
                            assetDirectory: directory.appendingPathComponent("\(name)-outgoing"), automaticallySync: false))
                    stores.append((pool, store, path))
                }
                let (phone, laptop) = (stores[0], stores[1])
                // About 450 pages of rows: past the threshold of 100 several times over.
                try await StoreFoundationTests.writeLargeLists(phone.store, transactions: 6, rows: 100)
                try await phone.store.sync()
                try await laptop.store.sync()
                #expect(try await laptop.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM lists") } == 600)
                // The import grew the WAL past 1.8 MB; the end of the sync checkpointed it whole, so
                // the app's next write starts it over and cuts the file back to the threshold's
                // 100 pages (without a limit it would keep its largest size).
                #expect(try StoreFoundationTests.fileSize(laptop.path + "-wal") > 600 * 3_000)
                // Only a checkpoint moves pages into the database file, and no write came since.
                try await StoreFoundationTests.waitUntil { try StoreFoundationTests.fileSize(laptop.path) > 600 * 3_000 }
                try await StoreFoundationTests.waitUntil {
                    try laptop.pool.write { db in
                        try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'later')", arguments: [UUID().uuidString])
                    }
                    return try StoreFoundationTests.fileSize(laptop.path + "-wal") <= 100 * 4096
                }
            }
        }
    }

    @Test("initializeSchema() writes the synced tables' record types into development and prints them; local parts stay out; production refuses")
    func initializeSchema() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let container = try await server.signedInContainer("mei")
                let device = try await Device.open(directory.appendingPathComponent("phone"), container: container)
                let printed = try Schema(parsing: try await device.store.initializeSchema())
                #expect(Set(printed.recordTypes.keys) == ["List", "Item"])
                // Parsing adds the system fields every record type has (`___createTime`…).
                func fields(_ recordType: String) -> [String: FieldType]? {
                    printed.recordTypes[recordType]?.fields.filter { !$0.key.hasPrefix("___") }.mapValues(\.type)
                }
                #expect(fields("Item") == [
                    "listID": .string, "title": .string, "done": .int64, "attachment": .bytes, "attachment_ckAsset": .asset,
                ])
                #expect(fields("List") == ["title": .string], "a local column is no field")

                let exported = try await server.schemaText()
                let held = try Schema(parsing: exported)
                for recordType in ["List", "Item"] {
                    #expect(held.recordTypes[recordType]?.fields == printed.recordTypes[recordType]?.fields, "\(exported)")
                }
                let zones = try await container.privateCloudDatabase.allRecordZones()
                #expect(zones.allSatisfy { !$0.zoneID.zoneName.hasSuffix(".schema") }, "the representative records' zone is gone")

                let production = Container(
                    identifier: server.container, serverURL: URL(string: server.baseURL)!, apiToken: server.apiToken,
                    environment: .production, session: container.session)
                let productionDevice = try await Device.open(directory.appendingPathComponent("production"), container: production)
                await #expect(throws: CloudError.self) { _ = try await productionDevice.store.initializeSchema() }
            }
        }
    }

    @Test("a row that cannot be prepared for sending (its asset file cannot be written) waits, with the reason, while the rest of its batch goes")
    func unsendableRow() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phoneDirectory = directory.appendingPathComponent("phone")
                let phone = try await Device.open(phoneDirectory, container: try await server.signedInContainer("mei"))
                let laptop = try await Device.open(directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"))
                // The asset directory is a file: no asset can be written there.
                let assets = phoneDirectory.appendingPathComponent("outgoing")
                try Data().write(to: assets)
                let (list, large) = (UUID(), UUID())
                try await phone.pool.write { db in
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Groceries')", arguments: [list.uuidString])
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title, attachment) VALUES (?, ?, 'Photo', ?)",
                        arguments: [large, list.uuidString, Data(repeating: 7, count: 5_000)])
                }
                try await phone.store.sync()
                let waiting = try await phone.store.syncStatus()
                #expect(waiting.pendingChanges == 1 && waiting.lastError?.message.contains(large.uuidString) == true, "\(waiting)")
                try await laptop.store.sync()
                #expect(try await laptop.contents().count == 1, "the list went without the item")

                try FileManager.default.removeItem(at: assets)
                try await phone.store.sync()
                #expect(try await phone.store.syncStatus().pendingChanges == 0)
                try await laptop.store.sync()
                #expect(try await laptop.contents() == phone.contents())

                // The failure is still the last one, but it no longer holds anything: a verify
                // during which the app writes syncs again rather than report it.
                #expect(try await phone.store.syncStatus().lastError != nil)
                let events = phone.store.events()
                let written = Task {
                    for await event in events where event.kind == .import && event.endDate != nil {
                        try await phone.pool.write { db in
                            try db.execute(sql: "UPDATE lists SET title = 'Groceries, again' WHERE id = ?", arguments: [list.uuidString])
                        }
                        return
                    }
                }
                let verification = try await phone.store.verify()
                written.cancel()
                try await written.value
                #expect(verification.matches, "\(verification)")
            }
        }
    }

    @Test("a fetched record no row can hold is skipped, its reason kept; the rest of its page is applied and nothing of it is written")
    func unreadableRecord() async throws {
        try await Self.withDevices(["phone"]) { _, devices in
            let phone = devices[0]
            try await phone.store.sync()
            let (badID, goodID) = (UUID(), UUID())
            var bad = Record(recordType: "Item", recordID: RecordMapping.recordID(badID))
            bad["title"] = "bad"
            bad["listID"] = "not a UUID"
            var good = Record(recordType: "Item", recordID: RecordMapping.recordID(goodID))
            good["title"] = "good"
            // Another client of the same user writes them straight through the SDK.
            let results = try await phone.container.privateCloudDatabase.modifyRecords(saving: [bad, good], deleting: [])
            #expect(results.partialFailure == nil)
            try await phone.store.sync()
            #expect(try await phone.item(goodID)?["title"] as String? == "good")
            #expect(try await phone.item(badID) == nil)
            let status = try await phone.store.syncStatus()
            #expect(status.lastError?.message.contains("listID") == true, "\(status)")
        }
    }

    @Test("rows written before the store first mirrored their table go to the server once, at the first open")
    func adoptedRows() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phoneDirectory = directory.appendingPathComponent("phone")
                try FileManager.default.createDirectory(at: phoneDirectory, withIntermediateDirectories: true)
                let (list, item) = (UUID(), UUID())
                // The app's database as it was before it adopted the store: no trigger saw these.
                let before = try StoreFoundationTests.makePool(phoneDirectory)
                try await before.write { db in
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Seeded')", arguments: [list.uuidString])
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'First')", arguments: [item, list.uuidString])
                }
                try before.close()
                let container = try await server.signedInContainer("mei")
                var phone = try await Device.open(phoneDirectory, container: container)
                #expect(try await phone.store.syncStatus().pendingChanges == 2)
                try await phone.store.sync()
                let laptop = try await Device.open(directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"))
                try await laptop.store.sync()
                let laptopRows = try await laptop.contents()
                #expect(try await laptopRows == phone.contents() && laptopRows.count == 2)

                phone = try await Device.open(phoneDirectory, container: container)
                #expect(try await phone.store.syncStatus().pendingChanges == 0, "adopted once")
                #expect(try await phone.store.verify().matches)
            }
        }
    }

    @Test("a table made local only and synced again sends what changed meanwhile: an edit, an insertion, a deletion")
    func resyncedTable() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phoneDirectory = directory.appendingPathComponent("phone")
                let container = try await server.signedInContainer("mei")
                var phone = try await Device.open(phoneDirectory, container: container)
                let (list, kept, edited, deleted, added) = (UUID(), UUID(), UUID(), UUID(), UUID())
                try await StoreSharingTests.insertList(phone, list, "Groceries", items: [(kept, "Kept"), (edited, "Edited"), (deleted, "Deleted")])
                try await phone.store.sync()

                // For a while the app keeps its items to itself.
                let localItems = StoreModel(StoreFoundationTests.model.tables.map { table in
                    table.name == "items" ? .localOnly("items", relationships: table.relationships) : table
                })
                phone = try await Device.open(phoneDirectory, container: container, model: localItems)
                try await phone.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'Edited while local' WHERE id = ?", arguments: [edited])
                    try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [deleted])
                    try db.execute(
                        sql: "INSERT INTO items (id, listID, title) VALUES (?, ?, 'Added while local')",
                        arguments: [added, list.uuidString])
                }
                try await phone.store.sync()

                phone = try await Device.open(phoneDirectory, container: container)
                #expect(try await phone.store.syncStatus().pendingChanges == 3)
                try await phone.store.sync()
                let laptop = try await Device.open(directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"))
                try await laptop.store.sync()
                let laptopRows = try await laptop.contents()
                #expect(try await laptopRows == phone.contents(), "\(laptopRows)")
                #expect(try await phone.store.verify().matches)
            }
        }
    }

    @Test("a fetched page the local database refuses (an app's trigger) leaves the store not up to date, with the reason, and is fetched again when the store is next opened")
    func refusedPage() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(directory.appendingPathComponent("phone"), container: try await server.signedInContainer("mei"))
                let laptopDirectory = directory.appendingPathComponent("laptop")
                let laptopContainer = try await server.device(of: "mei")
                var laptop = try await Device.open(laptopDirectory, container: laptopContainer)
                try await laptop.store.sync()
                try await laptop.pool.write { db in
                    try db.execute(
                        sql: """
                            CREATE TRIGGER refuse_lists BEFORE INSERT ON lists WHEN NEW.title = 'Refused'
                            BEGIN SELECT RAISE(ABORT, 'this device refuses the list'); END
                            """)
                }
                let list = UUID()
                try await phone.pool.write { db in
                    try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Refused')", arguments: [list.uuidString])
                }
                try await phone.store.sync()
                _ = try? await laptop.store.sync()
                let status = try await laptop.store.syncStatus()
                #expect(!status.isUpToDate && status.lastError?.message.contains("refuses the list") == true, "\(status)")
                #expect(try await laptop.contents().isEmpty)

                try await laptop.pool.write { db in try db.execute(sql: "DROP TRIGGER refuse_lists") }
                laptop = try await Device.open(laptopDirectory, container: laptopContainer)
                try await laptop.store.sync()
                #expect(try await laptop.contents() == phone.contents(), "the page is fetched again")
                #expect(try await laptop.store.syncStatus().isUpToDate)
            }
        }
    }

    /// What each policy makes of one edit per side: the phone changed the title and the attachment
    /// and sent first; the laptop changed the title and `done`, and sends second.
    @Test(
        "each merge policy decides a concurrent edit as documented, on both devices",
        arguments: [
            (StoreMergePolicy.mergeByPropertyStoreTrump, "phone", true, 1),
            (.mergeByPropertyObjectTrump, "laptop", true, 1),
            (.overwrite, "laptop", false, 1),
            (.rollback, "phone", true, 0),
        ])
    func mergePolicies(policy: StoreMergePolicy, title: String, phoneAttachment: Bool, done: Int) async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("mei"))
                let laptop = try await Device.open(
                    directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"), mergePolicy: policy)
                let item = UUID()
                try await phone.pool.write { db in
                    try db.execute(sql: "INSERT INTO items (id, title, done) VALUES (?, 'first', 0)", arguments: [item])
                }
                try await phone.store.sync()
                try await laptop.store.sync()

                try await phone.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'phone', attachment = x'01' WHERE id = ?", arguments: [item])
                }
                try await phone.store.sync()
                try await laptop.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'laptop', done = 1 WHERE id = ?", arguments: [item])
                }
                let laptopChanges = laptop.store.remoteChanges()
                let beforeSend = try await laptop.store.history().token
                try await laptop.store.sync()
                try await phone.store.sync()
                // Where the merge of the conflict rewrote the laptop's row, the app hears of it.
                let merged = try await laptop.store.history(after: beforeSend).transactions
                    .filter { $0.author == StratusStore.importAuthor && $0.changes.map(\.rowID) == [item] }
                #expect(merged.isEmpty == (policy == .overwrite), "\(merged)")
                if let last = merged.last {
                    let heard = await withTaskGroup(of: StoreRemoteChange?.self) { group in
                        group.addTask {
                            for await change in laptopChanges where change.historyToken == last.token { return change }
                            return nil
                        }
                        group.addTask {
                            try? await Task.sleep(for: .seconds(10))
                            return nil
                        }
                        defer { group.cancelAll() }
                        return await group.next() ?? nil
                    }
                    #expect(heard != nil, "the merge's rewrite of the row is announced as a remote change")
                }

                for device in [laptop, phone] {
                    let row = try #require(try await device.item(item))
                    #expect(row["title"] as String == title)
                    #expect((row["attachment"] as Data? != nil) == phoneAttachment)
                    #expect(row["done"] as Int == done)
                }
                #expect(try await laptop.store.pendingChanges().isEmpty)
            }
        }
    }

    @Test("a row deleted on one device and edited on the other: the store's side wins under store-trump, the edit under object-trump")
    func deletionAgainstEdit() async throws {
        for (policy, survives) in [(StoreMergePolicy.mergeByPropertyStoreTrump, false), (.mergeByPropertyObjectTrump, true)] {
            try await withServer(clientsInProcess: true) { server in
                try await StoreFoundationTests.withDirectory { directory in
                    let phone = try await Device.open(
                        directory.appendingPathComponent("phone"), container: try await server.signedInContainer("mei"))
                    let laptop = try await Device.open(
                        directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"),
                        mergePolicy: policy)
                    let item = UUID()
                    try await phone.pool.write { db in try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'first')", arguments: [item]) }
                    try await phone.store.sync()
                    try await laptop.store.sync()
                    try await phone.pool.write { db in try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [item]) }
                    try await phone.store.sync()
                    try await laptop.pool.write { db in
                        try db.execute(sql: "UPDATE items SET title = 'edited' WHERE id = ?", arguments: [item])
                    }
                    try await laptop.store.sync()
                    try await phone.store.sync()
                    for device in [laptop, phone] {
                        #expect(try await device.item(item)?["title"] as String? == (survives ? "edited" : nil), "\(policy)")
                    }
                }
            }
        }
    }

    @Test("a save refused for its old tag, when the server's newer record holds the values this device knew, is sent again based on it")
    func conflictWithUnchangedValues() async throws {
        try await Self.withDevices(["phone", "laptop"]) { _, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let item = UUID()
            try await phone.pool.write { db in try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'first')", arguments: [item]) }
            try await phone.store.sync()
            try await laptop.store.sync()
            // The phone saves the record again with the values it had (a flag set and cleared):
            // a new change tag, the same values.
            try await phone.pool.write { db in
                try db.execute(sql: "UPDATE items SET done = 1 WHERE id = ?", arguments: [item])
                try db.execute(sql: "UPDATE items SET done = 0 WHERE id = ?", arguments: [item])
            }
            try await phone.store.sync()
            // The laptop's edit goes out on the old tag, is refused, and merges with a record
            // whose values it already knew.
            try await laptop.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'laptop' WHERE id = ?", arguments: [item]) }
            try await laptop.store.sync()
            try await laptop.store.sync()
            try await phone.store.sync()
            for device in [laptop, phone] {
                #expect(try await device.item(item)?["title"] as String? == "laptop")
            }
            #expect(try await laptop.store.syncStatus().pendingChanges == 0)
        }
    }

    @Test("a device whose token expired drops the rows whose records were deleted meanwhile")
    func expiredTokenDeletions() async throws {
        try await Self.withDevices(["phone", "laptop"]) { server, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let (kept, gone) = (UUID(), UUID())
            try await phone.pool.write { db in
                for id in [kept, gone] { try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'x')", arguments: [id]) }
            }
            try await phone.store.sync()
            try await laptop.store.sync()
            #expect(try await laptop.item(gone) != nil)
            // Away, the laptop misses a deletion whose tombstone is then purged.
            try await phone.pool.write { db in try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [gone]) }
            try await phone.store.sync()
            _ = try await server.storage.purgeTombstones(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
            try await laptop.store.sync()
            #expect(try await laptop.item(gone) == nil)
            #expect(try await laptop.item(kept) != nil)
            #expect(try await laptop.contents() == phone.contents())

            // A record another client named with a lowercase UUID is the same row when read again.
            let web = UUID()
            var record = Stratus.Record(
                recordType: "Item",
                recordID: .init(recordName: web.uuidString.lowercased(), zoneID: RecordZone.ID(zoneName: RecordMapping.zoneName)))
            record["title"] = "from the web"
            _ = try await phone.container.privateCloudDatabase.save(record)
            try await laptop.store.sync()
            #expect(try await laptop.item(web)?["title"] as String? == "from the web")
            try await phone.pool.write { db in try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [kept]) }
            try await phone.store.sync()
            _ = try await server.storage.purgeTombstones(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
            try await laptop.store.sync()
            #expect(try await laptop.item(kept) == nil)
            #expect(try await laptop.item(web)?["title"] as String? == "from the web", "read again, it is not taken for gone")
        }
    }

    @Test("a row deleted and inserted again with its key in another form is sent as it is now, and nothing stays pending")
    func keyChangesForm() async throws {
        for (first, second) in [("text", "blob"), ("blob", "text")] {
            try await Self.withDevices(["phone", "laptop"]) { _, devices in
                let (phone, laptop) = (devices[0], devices[1])
                let item = UUID()
                let firstKey = first == "text" ? item.uuidString.databaseValue : item.databaseValue
                let secondKey = second == "text" ? item.uuidString.databaseValue : item.databaseValue
                try await phone.pool.write { db in
                    try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'first')", arguments: [firstKey])
                }
                try await phone.store.sync()
                try await laptop.store.sync()
                try await phone.pool.write { db in
                    try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [firstKey])
                    try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'second')", arguments: [secondKey])
                }
                try await phone.store.sync()
                try await laptop.store.sync()
                #expect(try await laptop.item(item)?["title"] as String? == "second", "\(first) → \(second)")
                try await phone.pool.write { db in
                    try db.execute(sql: "UPDATE items SET title = 'third' WHERE id = ?", arguments: [secondKey])
                }
                try await phone.store.sync()
                try await laptop.store.sync()
                #expect(try await laptop.item(item)?["title"] as String? == "third", "\(first) → \(second)")
                #expect(try await phone.store.syncStatus().pendingChanges == 0, "\(first) → \(second)")
            }
        }
    }

    @Test("a table's own merge sees the ancestor, the local and the server values, and its result reaches both devices")
    func customMerge() async throws {
        try await withServer(clientsInProcess: true) { server in
            try await StoreFoundationTests.withDirectory { directory in
                let seen = Mutex<[StoreConflict]>([])
                let merge: StoreCustomMerge = { conflict in
                    seen.withLock { $0.append(conflict) }
                    var merged = conflict.server ?? [:]
                    let titles = [conflict.local?["title"], conflict.server?["title"]].compactMap { $0.flatMap(String.fromDatabaseValue) }
                    merged["title"] = titles.joined(separator: "+").databaseValue
                    return merged
                }
                let phone = try await Device.open(
                    directory.appendingPathComponent("phone"), container: try await server.signedInContainer("mei"))
                let laptop = try await Device.open(
                    directory.appendingPathComponent("laptop"), container: try await server.device(of: "mei"),
                    customMerges: ["items": merge])
                let item = UUID()
                try await phone.pool.write { db in try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'first')", arguments: [item]) }
                try await phone.store.sync()
                try await laptop.store.sync()
                try await phone.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'phone' WHERE id = ?", arguments: [item]) }
                try await phone.store.sync()
                try await laptop.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'laptop' WHERE id = ?", arguments: [item]) }
                try await laptop.store.sync()
                try await phone.store.sync()

                let conflict = try #require(seen.withLock { $0.first })
                #expect(conflict.table == "items" && conflict.rowID == item)
                #expect(conflict.ancestor?["title"] == "first".databaseValue)
                #expect(conflict.local?["title"] == "laptop".databaseValue)
                #expect(conflict.server?["title"] == "phone".databaseValue)
                for device in [laptop, phone] {
                    #expect(try await device.item(item)?["title"] as String? == "laptop+phone")
                }
            }
        }
    }

    @Test("with automatic sync a plain write reaches the other device; it hears of it as a remote change whose token reads the import in the history; events report setup, export and import")
    func automaticSyncAndNotifications() async throws {
        try await Self.withDevices(["phone", "laptop"], automaticallySync: true) { _, devices in
            let (phone, laptop) = (devices[0], devices[1])
            let phoneEvents = phone.store.events()
            let remoteChanges = laptop.store.remoteChanges()
            let before = try await laptop.store.history().token
            let item = UUID()
            try await phone.pool.write { db in try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'typed')", arguments: [item]) }
            #expect(await eventually { (try? await laptop.item(item)?["title"] as String?) == "typed" })

            var iterator = remoteChanges.makeAsyncIterator()
            let change = try #require(await iterator.next())
            let page = try await laptop.store.history(after: before)
            #expect(page.transactions.last?.token == change.historyToken)
            #expect(page.transactions.contains { $0.author == StratusStore.importAuthor && $0.changes.map(\.rowID) == [item] })

            // The export that sent the item ended after the stream was made (it may have begun
            // before, as an automatic export already running when the app wrote): its end event
            // reports it whole. Waiting for one begun later could wait for ever.
            let completed = await Self.firstEvent(phoneEvents, within: .seconds(30)) {
                $0.kind == .export && $0.endDate != nil && $0.succeeded
            }
            #expect(completed.map { $0.endDate! >= $0.startDate } == true)
            #expect(await eventually { (try? await phone.store.syncStatus().pendingChanges) == 0 })
        }
    }

    /// The first of `events` that `matches`, or `nil` when none comes within `timeout`.
    static func firstEvent(
        _ events: AsyncStream<StoreEvent>, within timeout: Duration, matching matches: @escaping @Sendable (StoreEvent) -> Bool
    ) async -> StoreEvent? {
        await withTaskGroup(of: StoreEvent?.self) { group in
            group.addTask {
                for await event in events where matches(event) { return event }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test("the server going away keeps every change in the outbox; they all land once it is back, sent by the same store or by one opened again on the file")
    func serverAway() async throws {
        try await Self.withDevices(["phone", "laptop"]) { started, devices in
            let (phone, laptop) = (devices[0], devices[1])
            try await phone.store.sync()
            try await started.stop()
            let items = (0..<5).map { _ in UUID() }
            for item in items {
                try await phone.pool.write { db in try db.execute(sql: "INSERT INTO items (id, title) VALUES (?, 'offline')", arguments: [item]) }
            }
            await #expect(throws: CloudError.self) { try await phone.store.sync() }
            #expect(try await phone.store.pendingChanges().count == 5)
            #expect(try await phone.store.syncStatus().isUpToDate == false)
            let back = try await started.restart()
            try await phone.store.sync()
            try await laptop.store.sync()
            #expect(try await laptop.contents() == phone.contents())
            #expect(try await laptop.contents().count == 5)

            // The engine's saved state leaves out what the outbox keeps: a store opened again
            // after failed sends queues its outbox again and sends all of it.
            try await back.stop()
            for item in items {
                try await phone.pool.write { db in try db.execute(sql: "UPDATE items SET title = 'edited' WHERE id = ?", arguments: [item]) }
            }
            await #expect(throws: CloudError.self) { try await phone.store.sync() }
            _ = try await back.restart()
            let reopened = try await Device.open(phone.directory, container: phone.container)
            #expect(try await reopened.store.pendingChanges().count == 5)
            try await reopened.store.sync()
            try await laptop.store.sync()
            #expect(try await laptop.contents() == reopened.contents())
            #expect(try await laptop.contents().values.filter { $0.hasPrefix("edited") }.count == 5)
        }
    }
}
