import StratusModel
public import StratusStorage
import Testing

/// What accounts hold (``StorageUsage``), the quotas writes are held to, and uploads not yet held:
/// the checks every backend runs through ``StorageConformance``.
public enum UsageCheck {
    typealias Conformance = StorageConformance

    static let publicDatabase = DatabaseLocator(container: "c", environment: .development, scope: .public, owner: "")

    /// What `account` holds, as the storage reports it.
    static func held(_ storage: any StratusStorage, _ account: String) async throws -> StorageUsage {
        try await storage.usageByAccount(container: "c")[account] ?? .zero
    }

    /// The usage `records` count for, computed from the records themselves.
    static func usage(of records: [StoredRecord?]) -> StorageUsage {
        records.compactMap { $0 }.reduce(.zero) { total, record in
            total + StorageUsage(
                records: 1, recordBytes: Int64(record.fieldsJSON.count),
                assetBytes: RecordWritePlanner.assetBytes(of: record))
        }
    }

    static func accounting(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: Conformance.alice, timestamp: 1)
        _ = try await storage.createZone(named: "Y", in: Conformance.alice, timestamp: 1)
        let checksum = String(repeating: "b", count: 64)
        try await storage.registerAsset(checksum: checksum, size: 1_000, timestamp: 1)
        var withAsset = Conformance.create("a", ["file": .asset(AssetValue(fileChecksum: checksum, size: 1_000))])
        withAsset.uploadedAssets = [checksum]
        try await Conformance.write(storage, [withAsset, Conformance.create("b", ["title": .string("short")])])
        try await Conformance.write(storage, [Conformance.create("c", ["title": .string("in another zone")])], zone: "Y")
        func recount() async throws -> StorageUsage {
            let z = try await storage.lookupRecords(names: ["a", "b"], zone: "Z", in: Conformance.alice)
            let y = try await storage.lookupRecords(names: ["c"], zone: "Y", in: Conformance.alice)
            return usage(of: z + y)
        }
        var expected = try await recount()
        #expect(expected.records == 3 && expected.assetBytes == 1_000)
        #expect(try await held(storage, "_alice") == expected, "creates are counted")
        // An update that grows a record, and one that drops its asset.
        try await Conformance.write(storage, [
            RecordWrite(operationType: .forceUpdate, recordName: "b", fields: ["title": .string(String(repeating: "x", count: 500))]),
            RecordWrite(operationType: .forceReplace, recordName: "a", recordType: "Note", fields: ["title": .string("no file")]),
        ])
        expected = try await recount()
        #expect(expected.assetBytes == 0)
        #expect(try await held(storage, "_alice") == expected, "updates are counted by what they change")
        // Deletions, and a zone deleted with its records.
        try await Conformance.write(storage, [RecordWrite(operationType: .forceDelete, recordName: "b")])
        #expect(try await held(storage, "_alice") == (try await recount()), "deletions are counted")
        #expect(try await storage.deleteZone(named: "Y", in: Conformance.alice, timestamp: 2))
        let afterZone = usage(of: try await storage.lookupRecords(names: ["a"], zone: "Z", in: Conformance.alice))
        #expect(try await held(storage, "_alice") == afterZone, "a deleted zone's records no longer count")
        // The public database charges each record's creator; an import counts as a write.
        try await Conformance.write(
            storage, [Conformance.create("p", ["title": .string("public")])], zone: ZoneID.defaultZoneName,
            in: publicDatabase, atomic: false, context: Conformance.context("_bob"))
        let publicRecord = try await storage.lookupRecords(names: ["p"], zone: ZoneID.defaultZoneName, in: publicDatabase)
        #expect(try await held(storage, "_bob") == usage(of: publicRecord))
        try await storage.importRecords(
            [try #require(publicRecord[0])].map { record in
                var copy = record
                copy.name = "imported"
                return copy
            }, zone: ZoneID.defaultZoneName, in: publicDatabase)
        #expect(try await held(storage, "_bob").records == 2, "imported records are counted")
        // Deleting an environment's data forgets what it held.
        try await storage.deleteData(container: "c", environment: .development)
        #expect(try await storage.usageByAccount(container: "c").values.allSatisfy(\.isZero))
    }

    static func quotas(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: Conformance.alice, timestamp: 1)
        var context = Conformance.context()
        context.quota = WriteQuota(perAccount: StorageQuota(records: 2))
        func write(_ writes: [RecordWrite], zone: String = "Z", atomic: Bool = true) async throws -> [ServerErrorCode?] {
            try await Conformance.write(storage, writes, zone: zone, atomic: atomic, context: context).map(Conformance.code)
        }
        // The third record passes the quota: alone it fails, and an atomic batch holding it writes nothing.
        #expect(try await write([Conformance.create("a")]) == [nil])
        #expect(try await write([Conformance.create("b"), Conformance.create("c")]) == [.atomicError, .quotaExceeded])
        let first = try await storage.lookupRecords(names: ["b", "c"], zone: "Z", in: Conformance.alice)
        #expect(first.allSatisfy { $0 == nil }, "an atomic batch with a refused write writes nothing")
        #expect(try await write([Conformance.create("b"), Conformance.create("c")], zone: ZoneID.defaultZoneName, atomic: false)
            == [nil, .quotaExceeded])
        #expect(try await held(storage, "_alice").records == 2)
        // Quotas are per account: bob's writes are his own.
        var bobContext = Conformance.context("_bob")
        bobContext.quota = context.quota
        _ = try await storage.createZone(named: "Z", in: Conformance.bob, timestamp: 1)
        #expect(try await Conformance.write(
            storage, [Conformance.create("a"), Conformance.create("b")], in: Conformance.bob, context: bobContext
        ).map(Conformance.code) == [nil, nil])
        // Over a quota lowered since, an account still deletes and shrinks, and may not grow.
        context.quota = WriteQuota(perAccount: StorageQuota(records: 1, recordBytes: 10))
        #expect(try await write([RecordWrite(operationType: .forceUpdate, recordName: "a", fields: ["t": .string("grows")])])
            == [.quotaExceeded])
        #expect(try await write([RecordWrite(operationType: .forceDelete, recordName: "a")]) == [nil])
        // The container's room left is held against what the batch adds.
        context.quota = WriteQuota(perAccount: .unlimited, containerRemaining: StorageQuota(records: 1))
        #expect(try await write([Conformance.create("x"), Conformance.create("y")], atomic: false) == [nil, .quotaExceeded])
    }

    static func uploads(_ storage: any StratusStorage) async throws {
        func upload(_ checksum: String, _ size: Int64, ticket: String = "t1", at time: Int64 = 100) -> PendingUpload {
            PendingUpload(container: "c", user: "_alice", ticket: ticket, checksum: checksum, size: size, timestamp: time)
        }
        let (one, two, three) = (String(repeating: "1", count: 64), String(repeating: "2", count: 64), String(repeating: "3", count: 64))
        // A ticket allows so many bytes, a user so many not held by a record.
        #expect(try await storage.recordUpload(upload(one, 600), since: 0, maxPendingBytes: 1_000, ticketAllowance: 1_000))
        #expect(try await storage.recordUpload(upload(two, 600), since: 0, maxPendingBytes: 10_000, ticketAllowance: 1_000)
            == false, "past the ticket's bytes")
        #expect(try await storage.recordUpload(upload(two, 600, ticket: "t2"), since: 0, maxPendingBytes: 1_000, ticketAllowance: 1_000)
            == false, "past the user's bytes not yet held")
        #expect(try await storage.uploadedBytes(container: "c", user: "_alice", ticket: "t1", since: 0) == (600, 600))
        // Once a record holds the first upload, it no longer counts as pending.
        try await storage.registerAsset(checksum: one, size: 600, timestamp: 100)
        _ = try await storage.createZone(named: "Z", in: Conformance.alice, timestamp: 1)
        var holding = Conformance.create("f", ["file": .asset(AssetValue(fileChecksum: one, size: 600))])
        holding.uploadedAssets = [one]
        try await Conformance.write(storage, [holding])
        #expect(try await storage.uploadedBytes(container: "c", user: "_alice", ticket: "t2", since: 0) == (0, 0))
        #expect(try await storage.recordUpload(upload(two, 600, ticket: "t2"), since: 0, maxPendingBytes: 1_000, ticketAllowance: 1_000))
        // Uploads older than the grace period are not counted, and are forgotten with collection.
        #expect(try await storage.uploadedBytes(container: "c", user: "_alice", ticket: "t2", since: 101).pending == 0)
        _ = try await storage.collectAssets(registeredBefore: 200)
        #expect(try await storage.uploadedBytes(container: "c", user: "_alice", ticket: "t2", since: 0) == (0, 0))
        #expect(try await storage.recordUpload(upload(three, 1_000, ticket: "t3", at: 300), since: 200, maxPendingBytes: 1_000, ticketAllowance: 1_000))
    }

    /// Writes records of two accounts, with an asset, a deleted one and a public one, for a check of
    /// a migration that counts what stored records hold (``checkHoldings(_:)``).
    public static func writeHoldings(_ storage: any StratusStorage) async throws {
        try await storage.whileRunning {
            _ = try await storage.createZone(named: "Z", in: Conformance.alice, timestamp: 1)
            let checksum = String(repeating: "c", count: 64)
            try await storage.registerAsset(checksum: checksum, size: 700, timestamp: 1)
            var withAsset = Conformance.create("a", ["file": .asset(AssetValue(fileChecksum: checksum, size: 700))])
            withAsset.uploadedAssets = [checksum]
            try await Conformance.write(storage, [withAsset, Conformance.create("b"), Conformance.create("gone")])
            try await Conformance.write(storage, [RecordWrite(operationType: .forceDelete, recordName: "gone")])
            try await Conformance.write(
                storage, [Conformance.create("p", ["title": .string("public")])], zone: ZoneID.defaultZoneName,
                in: publicDatabase, atomic: false, context: Conformance.context("_bob"))
        }
    }

    /// Checks that what each account holds is what the records of ``writeHoldings(_:)`` count for.
    public static func checkHoldings(_ storage: any StratusStorage) async throws {
        try await storage.whileRunning {
            let alice = usage(of: try await storage.lookupRecords(names: ["a", "b", "gone"], zone: "Z", in: Conformance.alice))
            let bob = usage(of: try await storage.lookupRecords(names: ["p"], zone: ZoneID.defaultZoneName, in: publicDatabase))
            #expect(alice.records == 2 && alice.assetBytes == 700 && bob.records == 1)
            #expect(try await storage.usageByAccount(container: "c") == ["_alice": alice, "_bob": bob])
        }
    }
}
