import Foundation
import GRDB
import Stratus
import StratusSQLite
import StratusStore
import StratusSync
import Synchronization

/// StratusStore, each workload beside its baseline in the same round: local writes with mirroring
/// on (changes captured into the outbox; sent afterwards, by a manual sync) beside plain GRDB
/// writes of the same rows; local rows reaching a second device's store
/// beside two sync engines moving the same records; a reader's latency during that import beside
/// the same reads with nothing running.
struct StoreBench {
    struct Round: Encodable {
        var mirroredWrites = 0.0
        var plainWrites = 0.0
        var storeTransferSeconds = 0.0
        var engineTransferSeconds = 0.0
        /// The transfer's two halves: the first device's sync (its send, and the fetch of its own
        /// records back) and the second device's (the fetch and import).
        var storeSendSeconds = 0.0
        var storeReceiveSeconds = 0.0
        var engineSendSeconds = 0.0
        var engineReceiveSeconds = 0.0
        var readerP99DuringImport = 0.0
        var readerP99Idle = 0.0
        /// After the transfer, in MB: the app's synced rows (tables and their indexes) and the
        /// store's own tables (`stratusstore_*`: change history, outbox, the server's records) on
        /// the sending and the receiving device, with the history kept (a week, the default) and
        /// after an app deleted what it read (`deleteHistory(before:)`).
        var senderDataMB = 0.0
        var senderMetadataMB = 0.0
        var senderMetadataHistoryDeletedMB = 0.0
        var receiverDataMB = 0.0
        var receiverMetadataMB = 0.0
        var receiverMetadataHistoryDeletedMB = 0.0
    }

    let rows: Int
    let durability: SQLiteStorage.Durability
    let progress: (String) -> Void

    static let model = StoreModel([
        .synced("lists", recordType: "List"),
        .synced("items", recordType: "Item", relationships: [.reference("listID", to: "lists", inverse: "items")]),
        .localOnly("views"),
    ])
    static let tables = """
        CREATE TABLE lists (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL DEFAULT '');
        CREATE TABLE items (id TEXT PRIMARY KEY NOT NULL, listID TEXT, title TEXT NOT NULL DEFAULT '', done INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE views (id TEXT PRIMARY KEY NOT NULL, viewedAt REAL);
        INSERT INTO views VALUES ('read-me', 0);
        """
    /// Rows per local write transaction.
    static let rowsPerTransaction = 1_000

    func measureRound(_ round: Int) async throws -> Round {
        let bench = try await BenchServer.start(durability: durability)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-store-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let result = try await measureRound(round, on: bench, in: directory)
            try await bench.stop()
            return result
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    /// Odd rounds move the rows through the stores first, even rounds through the engines first: the
    /// second to run writes into a server file that already holds the first's records.
    private func measureRound(_ round: Int, on bench: BenchServer, in directory: URL) async throws -> Round {
        var result = Round()
        let list = UUID().uuidString
        let items = (0..<rows).map { (id: UUID().uuidString, title: "Item \($0)", done: $0 % 2) }
        if round.isMultiple(of: 2) {
            try await measureEngines(round, items: items, list: list, on: bench, into: &result)
            try await measureStores(round, items: items, list: list, on: bench, in: directory, into: &result)
        } else {
            try await measureStores(round, items: items, list: list, on: bench, in: directory, into: &result)
            try await measureEngines(round, items: items, list: list, on: bench, into: &result)
        }
        return result
    }

    /// Local writes, plain and mirrored, then the rows to a second device's store with a reader timed there.
    private func measureStores(
        _ round: Int, items: [(id: String, title: String, done: Int)], list: String, on bench: BenchServer, in directory: URL,
        into result: inout Round
    ) async throws {
        progress("round \(round): \(rows) local rows, plain GRDB then mirrored by StratusStore")
        let plain = try Self.pool(directory.appendingPathComponent("plain.sqlite"))
        result.plainWrites = Double(rows) / (try await measure { try await Self.insert(items, list: list, into: plain) })
        let phonePool = try Self.pool(directory.appendingPathComponent("phone.sqlite"))
        let phone = try await StratusStore.open(
            phonePool, model: Self.model,
            mirroring: StratusStore.Mirroring(
                database: bench.container(device: "phone").privateCloudDatabase,
                assetDirectory: directory.appendingPathComponent("phone-assets"), automaticallySync: false))
        result.mirroredWrites = Double(rows) / (try await measure { try await Self.insert(items, list: list, into: phonePool) })

        progress("round \(round): the rows to a second device's store: the first device's sync")
        let laptopPool = try Self.pool(directory.appendingPathComponent("laptop.sqlite"))
        let laptop = try await StratusStore.open(
            laptopPool, model: Self.model,
            mirroring: StratusStore.Mirroring(
                database: bench.container(device: "laptop").privateCloudDatabase,
                assetDirectory: directory.appendingPathComponent("laptop-assets"), automaticallySync: false))
        try await laptop.sync()
        result.storeSendSeconds = try await measure { try await phone.sync() }
        // The reader runs during the import alone, as it is reported; the engines' baseline has none.
        progress("round \(round): the second device's sync, a reader timed there meanwhile")
        let reader = Reader(pool: laptopPool)
        let importing = Atomic(true)
        let reading = Task { try await reader.read(while: importing) }
        result.storeReceiveSeconds = try await measure { try await laptop.sync() }
        result.storeTransferSeconds = result.storeSendSeconds + result.storeReceiveSeconds
        importing.store(false, ordering: .releasing)
        let during = try await reading.value
        let arrived = try await laptopPool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items") ?? 0 }
        guard arrived == rows else { throw BenchError("the second store holds \(arrived) items, expected \(rows)") }
        let idle = try await reader.read(count: during.count)
        result.readerP99DuringImport = percentile(during, 0.99) * 1000
        result.readerP99Idle = percentile(idle, 0.99) * 1000

        progress("round \(round): the stores' sizes, with their history, then without")
        (result.senderDataMB, result.senderMetadataMB) = try await Self.sizes(phonePool)
        (result.receiverDataMB, result.receiverMetadataMB) = try await Self.sizes(laptopPool)
        for store in [phone, laptop] { try await store.deleteHistory(before: try await store.history().token) }
        (_, result.senderMetadataHistoryDeletedMB) = try await Self.sizes(phonePool)
        (_, result.receiverMetadataHistoryDeletedMB) = try await Self.sizes(laptopPool)
    }

    /// The megabytes of the pages of the app's synced tables (with their indexes) and of the
    /// store's own tables, as SQLite's `dbstat` counts them after a `VACUUM` (which frees the pages
    /// deleted rows left).
    private static func sizes(_ pool: DatabasePool) async throws -> (data: Double, metadata: Double) {
        try await pool.writeWithoutTransaction { db in try db.execute(sql: "VACUUM") }
        return try await pool.read { db in
            var data = 0, metadata = 0
            for row in try Row.fetchAll(
                db, sql: "SELECT m.tbl_name AS tableName, sum(d.pgsize) AS bytes FROM dbstat d JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name")
            {
                let table: String = row["tableName"]
                if table.hasPrefix("stratusstore_") { metadata += row["bytes"] as Int }
                if ["lists", "items"].contains(table) { data += row["bytes"] as Int }
            }
            return (Double(data) / 1e6, Double(metadata) / 1e6)
        }
    }

    /// The baseline: the same records from one sync engine to another, in a zone of their own.
    private func measureEngines(
        _ round: Int, items: [(id: String, title: String, done: Int)], list: String, on bench: BenchServer, into result: inout Round
    ) async throws {
        progress("round \(round): the same records between two sync engines")
        let zoneID = RecordZone.ID(zoneName: "EngineBaseline")
        let sender = BenchDevice(container: bench.container(device: "engine-phone"))
        let receiver = BenchDevice(container: bench.container(device: "engine-laptop"))
        _ = try await sender.container.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
        for item in items {
            var record = Record(recordType: "Item", recordID: Record.ID(recordName: item.id, zoneID: zoneID))
            record["listID"] = list
            record["title"] = item.title
            record["done"] = Int64(item.done)
            sender.set(record)
        }
        let sendingEngine = try SyncEngine(
            SyncEngine.Configuration(
                database: sender.container.privateCloudDatabase, stateSerialization: nil, delegate: sender, automaticallySync: false))
        let receivingEngine = try SyncEngine(
            SyncEngine.Configuration(
                database: receiver.container.privateCloudDatabase, stateSerialization: nil, delegate: receiver,
                automaticallySync: false))
        sendingEngine.state.add(pendingRecordZoneChanges: items.map { .saveRecord(Record.ID(recordName: $0.id, zoneID: zoneID)) })
        result.engineSendSeconds = try await measure { try await sendingEngine.sendChanges() }
        result.engineReceiveSeconds = try await measure {
            try await receivingEngine.fetchChanges(SyncEngine.FetchChangesOptions(scope: .zoneIDs([zoneID])))
        }
        result.engineTransferSeconds = result.engineSendSeconds + result.engineReceiveSeconds
        guard receiver.fetchedCount >= rows else {
            throw BenchError("the receiving engine fetched \(receiver.fetchedCount) records, expected \(rows)")
        }
    }

    private static func pool(_ url: URL) throws -> DatabasePool {
        let pool = try DatabasePool(path: url.path)
        try pool.write { db in try db.execute(sql: tables) }
        return pool
    }

    private static func insert(_ items: [(id: String, title: String, done: Int)], list: String, into pool: DatabasePool) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, 'Bench')", arguments: [list])
        }
        for start in stride(from: 0, to: items.count, by: rowsPerTransaction) {
            try await pool.write { db in
                let statement = try db.makeStatement(sql: "INSERT INTO items (id, listID, title, done) VALUES (?, ?, ?, ?)")
                for item in items[start..<min(start + rowsPerTransaction, items.count)] {
                    try statement.execute(arguments: [item.id, list, item.title, item.done])
                }
            }
        }
    }

    /// The app's reader: a point read of a local row, timed, one after another.
    struct Reader {
        let pool: DatabasePool

        func readOnce() async throws -> Double {
            try await measure {
                _ = try await pool.read { db in try Double.fetchOne(db, sql: "SELECT viewedAt FROM views WHERE id = 'read-me'") }
            }
        }

        func read(while running: borrowing Atomic<Bool>) async throws -> [Double] {
            var latencies: [Double] = []
            while running.load(ordering: .acquiring) {
                latencies.append(try await readOnce())
                try? await Task.sleep(for: .milliseconds(1))
            }
            return latencies
        }

        func read(count: Int) async throws -> [Double] {
            var latencies: [Double] = []
            for _ in 0..<max(count, 1) {
                latencies.append(try await readOnce())
                try? await Task.sleep(for: .milliseconds(1))
            }
            return latencies
        }
    }
}
