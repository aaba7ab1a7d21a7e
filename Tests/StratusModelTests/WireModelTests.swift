import Foundation
@testable import StratusModel
import Testing

@Suite("wire model")
struct WireModelTests {
    func decode<T: JSONDecodable>(_ type: T.Type, _ json: String) throws -> T {
        try T(jsonBytes: Array(json.utf8))
    }

    func text(_ value: some JSONWritable) -> String { String(decoding: value.jsonBytes, as: UTF8.self) }

    /// A record as CloudKit Web Services returns it (shape from a real response, values shortened).
    static let cloudKitRecord = """
        {"recordName":"----Root-Folder----","recordType":"CPLAlbum","fields":{"albumType":{"value":3,"type":"INT64"},\
        "recordModificationDate":{"value":1604479018870,"type":"TIMESTAMP"}},"recordChangeTag":"4trx",\
        "created":{"timestamp":1604487709098,"userRecordName":"_fe283de2507f799cd3a1de7c00348a05","deviceID":"F39F"},\
        "modified":{"timestamp":1604487709098,"userRecordName":"_fe283de2507f799cd3a1de7c00348a05","deviceID":"F39F"},\
        "deleted":false,"zoneID":{"zoneName":"PrimarySync","ownerRecordName":"_fe283de2507f799cd3a1de7c00348a05",\
        "zoneType":"REGULAR_CUSTOM_ZONE"}}
        """

    @Test("a CloudKit record decodes and re-encodes to the same bytes")
    func cloudKitRecordRoundTrip() throws {
        let record = try decode(RecordDictionary.self, Self.cloudKitRecord)
        #expect(record.fields["albumType"] == .int64(3))
        #expect(record.fields["recordModificationDate"] == .timestamp(1_604_479_018_870))
        #expect(record.zoneID == ZoneID(zoneName: "PrimarySync", ownerRecordName: "_fe283de2507f799cd3a1de7c00348a05"))
        #expect(text(record) == Self.cloudKitRecord)
    }

    @Test("Apple's documented modify request decodes, inferring types")
    func appleModifyExample() throws {
        let request = try decode(ModifyRecordsRequest.self, """
            {"operations": [{"operationType": "create", "record": {"recordType": "Artist",
              "fields": {"firstName": {"value": "Mei"}, "lastName": {"value": "Chen"}}, "recordName": "Mei Chen"}}]}
            """)
        #expect(request.operations.count == 1)
        #expect(request.operations[0].operationType == .create)
        #expect(request.operations[0].record.fields == ["firstName": .string("Mei"), "lastName": .string("Chen")])
        let update = try decode(RecordOperation.self, """
            {"operationType": "update", "record": {"fields": {"width": {"value": 18}, "height": {"value": 24}},
              "recordName": "101", "recordChangeTag": "e"}}
            """)
        #expect(update.record.fields == ["width": .int64(18), "height": .int64(24)])
        #expect(update.record.recordChangeTag == "e")
    }

    @Test("every field type and its list form round-trips", arguments: [
        FieldValue.string("a \"quoted\"\n line ✓"), .int64(-9_223_372_036_854_775_808), .int64(Int64.max),
        .double(1.0), .double(-0.000_123), .double(1e300), .timestamp(1_454_976_000_000), .bytes(Data([0, 1, 255])),
        .reference(Reference(recordName: "r", zoneID: ZoneID(zoneName: "Z", ownerRecordName: "_o"), action: .deleteSelf)),
        .reference(Reference(recordName: "v", action: .validate)),
        .asset(AssetValue(fileChecksum: "c", size: 10, receipt: "x")),
        .location(Location(latitude: -33.9, longitude: 151.2, horizontalAccuracy: 5, altitude: 10, timestamp: 7)),
        .list(elementType: .string, [.string("a"), .string("b")]), .list(elementType: .int64, [.int64(1)]),
        .list(elementType: .double, [.double(2.5)]), .list(elementType: .timestamp, [.timestamp(1)]),
        .list(elementType: .bytes, [.bytes(Data([7]))]), .list(elementType: .reference, [.reference(Reference(recordName: "x"))]),
        .list(elementType: .asset, [.asset(AssetValue(fileChecksum: "c"))]),
        .list(elementType: .location, [.location(Location(latitude: 0, longitude: 0))]), .list(elementType: nil, []),
    ])
    func fieldRoundTrip(_ value: FieldValue) throws {
        let decoded = try decode(FieldValue.self, text(value))
        #expect(decoded == value)
        #expect(text(value).hasSuffix("\"type\":\"\(value.type.rawValue)\"}"))
    }

    @Test("numbersAsStrings writes INT64 and DOUBLE values as strings and reads them back")
    func numbersAsStrings() throws {
        var writer = JSONWriter()
        FieldValue.list(elementType: .int64, [.int64(9_007_199_254_740_993)]).write(to: &writer, numbersAsStrings: true)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"{"value":["9007199254740993"],"type":"INT64_LIST"}"#)
        #expect(try decode(FieldValue.self, #"{"value":"9007199254740993","type":"INT64"}"#) == .int64(9_007_199_254_740_993))
        #expect(try decode(FieldValue.self, #"{"value":"2.5","type":"DOUBLE"}"#) == .double(2.5))
    }

    @Test("type inference and request-only forms")
    func inference() throws {
        #expect(try decode(FieldValue.self, #"{"value": true}"#) == .int64(1))
        #expect(try decode(FieldValue.self, #"{"value": 2.5}"#) == .double(2.5))
        #expect(try decode(FieldValue.self, #"{"value": {"recordName": "x"}}"#) == .reference(Reference(recordName: "x")))
        #expect(try decode(FieldValue.self, #"{"value": {"receipt": "r"}}"#) == .asset(AssetValue(receipt: "r")))
        #expect(try decode(FieldValue.self, #"{"value": [], "type": "STRING_LIST"}"#) == .list(elementType: .string, []))
        #expect(try decode(FieldValue.self, #"{"value": [1, 2.5, 3]}"#)
            == .list(elementType: .double, [.double(1), .double(2.5), .double(3)]), "mixed numbers are doubles")
        #expect(try decode(FieldValue.self, #"{"value": {"fileChecksum": "c"}, "type": "ASSET"}"#).type == .asset)
        let removal = try decode(RecordDictionary.self, #"{"recordName": "r", "fields": {"gone": {"value": null}, "kept": {"value": 1}}}"#)
        #expect(removal.removedFieldNames == ["gone"] && removal.fields == ["kept": .int64(1)])
    }

    @Test("bad field values fail with a message naming the rule", arguments: [
        (#"{"value": "x", "type": "INT64"}"#, "must be a whole number"),
        (#"{"value": 1.5, "type": "STRING"}"#, "must be a string"),
        (#"{"value": "%%%", "type": "BYTES"}"#, "base64"),
        (#"{"value": 1, "type": "ENCRYPTED_BYTES"}"#, "not supported"),
        (#"{"value": {"latitude": 0, "longitude": 181}, "type": "LOCATION"}"#, "longitude must be between"),
        (#"{"value": ["a"], "type": "UNKNOWN_LIST"}"#, "must be empty"),
        (#"{"value": {"size": 1}}"#, "cannot infer"),
        (#"{"value": [1, "a"]}"#, "one type"),
        (#"{"value": {"recordName": "x", "action": "CASCADE"}, "type": "REFERENCE"}"#, "'CASCADE' is not one of NONE"),
    ])
    func badValues(_ json: String, _ message: String) {
        do {
            _ = try decode(FieldValue.self, json)
            Issue.record("\(json) decoded")
        } catch let error as JSONDecodingError {
            #expect(error.description.contains(message), "\(error)")
        } catch {
            Issue.record("\(json): \(error)")
        }
    }

    @Test("error codes carry CloudKit's HTTP statuses")
    func errorStatuses() {
        let expected: [ServerErrorCode: Int] = [
            .accessDenied: 403, .atomicError: 400, .authenticationFailed: 401, .authenticationRequired: 421,
            .badRequest: 400, .conflict: 409, .exists: 409, .internalError: 500, .notFound: 404, .quotaExceeded: 413,
            .throttled: 429, .tryAgainLater: 503, .validatingReferenceError: 412, .zoneNotFound: 404,
            .changeTokenExpired: 410, .limitExceeded: 413, .alreadyShared: 409,
        ]
        for code in ServerErrorCode.allCases { #expect(code.httpStatus == expected[code], "\(code)") }
    }

    @Test("error dictionaries use CloudKit's keys")
    func errorDictionary() throws {
        let error = ErrorDictionary(
            serverErrorCode: .throttled, reason: "slow down", recordName: "r", retryAfter: 3, uuid: "u")
        #expect(text(error) == #"{"recordName":"r","reason":"slow down","serverErrorCode":"THROTTLED","retryAfter":3,"uuid":"u"}"#)
        #expect(try decode(ErrorDictionary.self, text(error)) == error)
    }

    @Test("JSON writer escapes strings and keeps doubles distinct from integers")
    func writer() throws {
        var writer = JSONWriter()
        writer.beginArray()
        writer.string("\u{1}\t\"\\é")
        writer.double(3)
        writer.double(0.1)
        writer.int(-42)
        writer.endArray()
        let output = String(decoding: writer.bytes, as: UTF8.self)
        #expect(output == #"["\u0001\t\"\\é",3.0,0.1,-42]"#)
        let parsed = try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [Any]
        #expect(parsed?.first as? String == "\u{1}\t\"\\é")
    }

    @Test("JSON writer finds a byte to escape at every position, word by word and in the tail")
    func escapingScan() throws {
        let mustEscape = Array(0..<0x20) + [UInt8(ascii: "\""), UInt8(ascii: "\\")]
        // Bytes next to the escaped ones, and UTF-8's high bytes, which a word-wide test could mistake.
        let safe: [UInt8] = [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x5C ^ 0x80, 0x7F, 0x80, 0xA2, 0xDC, 0xE9, 0xFF]
        for length in 0...24 {
            let plain = (0..<length).map { safe[$0 % safe.count] }
            #expect(!plain.withUnsafeBytes(JSONWriter.needsEscaping), "length \(length)")
            for position in 0..<length {
                for byte in mustEscape {
                    var bytes = plain
                    bytes[position] = byte
                    #expect(bytes.withUnsafeBytes(JSONWriter.needsEscaping), "byte \(byte) at \(position) of \(length)")
                }
            }
        }
        var writer = JSONWriter()
        writer.beginArray()
        for value: Int64 in [0, 7, -1, 10, 1_000_000, .max, .min] { writer.int(value) }
        writer.bool(true)
        writer.bool(false)
        writer.null()
        writer.endArray()
        #expect(String(decoding: writer.bytes, as: UTF8.self)
            == "[0,7,-1,10,1000000,9223372036854775807,-9223372036854775808,true,false,null]")
    }

    @Test("names must be ASCII and at most 255 characters")
    func names() {
        let limits = Limits()
        #expect(limits.violation(ofName: "ok-Name_1.2") == nil)
        #expect(limits.violation(ofName: "") != nil)
        #expect(limits.violation(ofName: String(repeating: "a", count: 255)) == nil)
        #expect(limits.violation(ofName: String(repeating: "a", count: 256))?.contains("255") == true)
        #expect(limits.violation(ofName: "naïve") != nil)
        #expect(limits.violation(ofName: "tab\there") != nil)
    }
}
