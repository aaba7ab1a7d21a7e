import Foundation
import Stratus
import StratusModel
import StratusTestSupport
import Testing

@Suite("reading change-feed pages from bytes")
struct ChangePageDecoderTests {
    static var cases: Int { ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_FUZZ_CASES"].flatMap(Int.init) ?? 500 }

    @Test("the byte-level page reader gives the records the general decoder gives, for every field type (seeded random pages)")
    func sameRecords() throws {
        let database = Container(identifier: "iCloud.test", serverURL: URL(string: "http://127.0.0.1:9")!, apiToken: "t")
            .privateCloudDatabase
        let zone = RecordZone.ID(zoneName: "Z")
        var fastRecords = 0
        for seed in 0..<UInt64(Self.cases) {
            var random = SplitMix64(seed: seed)
            let wires = (0..<Int.random(in: 0...6, using: &random)).map { _ in Self.record(&random) }
            let moreComing = Bool.random(using: &random)
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("zoneID")
            writer.raw(ZoneID(zoneName: "Z", ownerRecordName: "_owner").jsonBytes)
            writer.key("records")
            writer.beginArray()
            for wire in wires { wire.write(to: &writer) }
            writer.endArray()
            writer.field("syncToken", "token-\(seed)")
            writer.field("moreComing", moreComing)
            writer.endObject()

            let page = try writer.bytes.withUnsafeBufferPointer { try database.decodeChangePage($0, zoneID: zone) }
            #expect(page.syncToken == "token-\(seed)" && page.moreComing == moreComing, "seed \(seed)")
            #expect(page.deletions.map(\.recordID.recordName) == wires.filter { $0.deleted == true }.map { $0.recordName! })
            let live = wires.filter { $0.deleted != true }
            let expected = try live.map { wire in
                var one = JSONWriter()
                wire.write(to: &one)
                return try database.record(decoding: one.bytes, zoneID: zone)
            }
            #expect(page.changed.map(\.id.recordName) == live.map { $0.recordName! }, "seed \(seed)")
            #expect(page.changed.map { try? $0.result.get() } == expected.map { try? $0.get() }, "seed \(seed)")
            let general = live.filter { $0.fields.values.contains(where: Self.holdsObjects) }.count
            #expect(page.generallyDecoded == general, "only records with objects in their fields are read twice (seed \(seed))")
            fastRecords += live.count - general
        }
        #expect(fastRecords > Self.cases / 2, "many records take the byte-level path")
    }

    @Test("a page that is not a records/changes answer is refused")
    func refusals() throws {
        let database = Container(identifier: "iCloud.test", serverURL: URL(string: "http://127.0.0.1:9")!, apiToken: "t")
            .privateCloudDatabase
        for text in [
            #"{"records": []}"#, #"{"records": [{"recordName": 3}], "syncToken": "t"}"#,
            #"{"records": [], "syncToken": "t"} x"#, #"{"records": [{"fields": {"a": {"value": "x", "type": "INT64"}}}], "syncToken": "t"}"#,
        ] {
            #expect(throws: (any Error).self, "\(text)") {
                try Array(text.utf8).withUnsafeBufferPointer { try database.decodeChangePage($0, zoneID: RecordZone.ID(zoneName: "Z")) }
            }
        }
    }

    /// Whether the value is, or lists, objects (references, assets, locations).
    static func holdsObjects(_ value: FieldValue) -> Bool {
        value.elements.contains { [.reference, .asset, .location].contains($0.type) }
    }

    static func text(_ random: inout SplitMix64) -> String {
        let pieces = ["a", "Zürich", "\"", "\\", "\n", "\u{1}", "😀", "/", " ", "日本", "x y"]
        return (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    static func scalar(_ type: FieldType, _ random: inout SplitMix64) -> FieldValue {
        switch type {
        case .string: return .string(text(&random))
        case .int64: return .int64(Bool.random(using: &random) ? Int64.random(in: .min ... .max, using: &random) : Int64.random(in: -9...9, using: &random))
        case .double:
            return .double(Bool.random(using: &random) ? Double.random(in: -1e300...1e300, using: &random) : Double(Int.random(in: -5...5, using: &random)))
        case .timestamp: return .timestamp(Int64.random(in: -1_000_000_000_000...4_000_000_000_000, using: &random))
        case .bytes: return .bytes(Data((0..<Int.random(in: 0...9, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case .reference:
            return .reference(Reference(
                recordName: "r\(Int.random(in: 0...99, using: &random))",
                zoneID: Bool.random(using: &random) ? ZoneID(zoneName: "Other", ownerRecordName: "_owner") : nil,
                action: ReferenceAction.allCases.randomElement(using: &random)!))
        case .asset:
            return .asset(AssetValue(fileChecksum: "c\(Int.random(in: 0...99, using: &random))", size: Int64.random(in: 0...999, using: &random)))
        case .location:
            return .location(Location(
                latitude: Double.random(in: -90...90, using: &random), longitude: Double.random(in: -180...180, using: &random),
                altitude: Bool.random(using: &random) ? 12.5 : nil))
        default: fatalError("not a scalar type: \(type)")
        }
    }

    static func record(_ random: inout SplitMix64) -> RecordDictionary {
        let scalars: [FieldType] = [.string, .int64, .double, .timestamp, .bytes, .reference, .asset, .location]
        var fields: [String: FieldValue] = [:]
        for _ in 0..<Int.random(in: 0...6, using: &random) {
            let type = scalars.randomElement(using: &random)!
            let value: FieldValue = Int.random(in: 0..<4, using: &random) == 0
                ? .list(elementType: type, (0..<Int.random(in: 0...3, using: &random)).map { _ in scalar(type, &random) })
                : scalar(type, &random)
            fields[Int.random(in: 0..<3, using: &random) == 0 ? text(&random) : "f\(Int.random(in: 0...9, using: &random))"] = value
        }
        let deleted = Int.random(in: 0..<8, using: &random) == 0
        func stamp(_ random: inout SplitMix64) -> RecordStamp {
            RecordStamp(
                timestamp: Int64.random(in: 0...4_000_000_000_000, using: &random), userRecordName: "_u\(Int.random(in: 0...9, using: &random))",
                deviceID: Bool.random(using: &random) ? "device-\(Int.random(in: 0...9, using: &random))" : nil)
        }
        let created = stamp(&random)
        let modified = stamp(&random)
        return RecordDictionary(
            recordName: "n-\(text(&random))-\(Int.random(in: 0...999_999, using: &random))", recordType: Bool.random(using: &random) ? "Note" : "Item",
            recordChangeTag: "\(Int.random(in: 1...99, using: &random))-\(Int.random(in: 1...99, using: &random))",
            fields: deleted ? [:] : fields, created: created, modified: modified, deleted: deleted,
            zoneID: ZoneID(zoneName: "Z", ownerRecordName: "_owner"),
            parent: deleted || Bool.random(using: &random) ? nil : Reference(recordName: "p\(Int.random(in: 0...9, using: &random))"),
            shareReference: deleted || Int.random(in: 0..<5, using: &random) != 0 ? nil : Reference(recordName: "share-\(Int.random(in: 0...9, using: &random))"))
    }
}
