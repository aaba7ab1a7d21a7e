import StratusModel
import Testing

/// The digest of `records/digest`, against values computed independently from the encoding that
/// docs/protocol.md specifies (a Python script hashing the bytes written out by hand).
@Suite("record set digest")
struct RecordSetDigestTests {
    static let first: (name: String, type: String, fields: [String: FieldValue]) = ("r", "T", ["b": .int64(1), "a": .string("x")])
    static let second: (name: String, type: String, fields: [String: FieldValue]) = (
        "q", "T", ["d": .double(-2.5), "l": .list(elementType: .string, [.string("y"), .string("z")])]
    )

    @Test("one record's digest is the SHA-256 of its documented encoding")
    func encoding() {
        var digest = RecordSetDigest()
        digest.add(recordName: Self.first.name, recordType: Self.first.type, fields: Self.first.fields)
        #expect(digest.hexDigest == "eb138c2ce60ccd7115e4d8d893a85941324095c1750de13f9c8162fb1211e079")
        #expect(digest.recordCount == 1)
        #expect(RecordSetDigest().hexDigest == String(repeating: "0", count: 64))
    }

    @Test("the digest of a set is the sum of its records' hashes modulo 2²⁵⁶, whatever the order")
    func orderIndependentSum() {
        var forward = RecordSetDigest()
        var backward = RecordSetDigest()
        for record in [Self.first, Self.second] { forward.add(recordName: record.name, recordType: record.type, fields: record.fields) }
        for record in [Self.second, Self.first] { backward.add(recordName: record.name, recordType: record.type, fields: record.fields) }
        // The sum wraps past 2²⁵⁶: the carry crosses every word.
        #expect(forward.hexDigest == "7a922ada2efc06fa4443612b12e6e76cb2d8046860696894d5c542b1763257c2")
        #expect(forward == backward)
    }

    @Test("a different value, type, name or field name gives a different digest")
    func sensitivity() {
        func digest(_ fields: [String: FieldValue], name: String = "r", type: String = "T") -> String {
            var digest = RecordSetDigest()
            digest.add(recordName: name, recordType: type, fields: fields)
            return digest.hexDigest
        }
        let base = digest(["a": .int64(1)])
        let variants = [
            digest(["a": .int64(2)]), digest(["a": .double(1)]), digest(["a": .timestamp(1)]), digest(["b": .int64(1)]),
            digest(["a": .int64(1)], name: "s"), digest(["a": .int64(1)], type: "U"), digest([:]),
            digest(["a": .int64(1), "b": .string("")]),
            // Length prefixes keep a name from running into a value.
            digest(["a": .string("bc")]), digest(["ab": .string("c")]),
        ]
        #expect(Set(variants + [base]).count == variants.count + 1)
    }
}
