import StratusModel
@testable import StratusStorage
import StratusTestSupport
import Testing

/// The search that tells whether a record's stored field JSON holds a type tag (an asset, a
/// reference, a reserved field), which decides whether the record is decoded on every feed page.
@Suite("Field tag search")
struct FieldTagSearchTests {
    @Test("finds a tag exactly where a position-by-position scan does, on random texts over a small alphabet")
    func matchesNaiveScan() {
        var random = SplitMix64(seed: 20_261_125)
        let alphabet = Array(#""AEDIST:type_"#.utf8)
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 0...60, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            let needle = (0..<Int.random(in: 1...8, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            let expected = text.count >= needle.count
                && (0...(text.count - needle.count)).contains { Array(text[$0..<$0 + needle.count]) == needle }
            #expect(text.contains(tag: String(decoding: needle, as: UTF8.self)) == expected, "\(text) / \(needle)")
        }
    }

    @Test("finds the tags Stratus looks for in canonical field JSON")
    func canonicalFields() {
        var writer = JSONWriter()
        RecordDictionary.writeFields(
            ["photo": .asset(AssetValue(fileChecksum: "abc", size: 1)), "title": .string("type ASSETID")], to: &writer)
        #expect(writer.bytes.contains(tag: #""type":"ASSETID"#))
        #expect(!writer.bytes.contains(tag: #""type":"REFERENCE"#))
        #expect(!Array("".utf8).contains(tag: #""___"#))
    }
}
