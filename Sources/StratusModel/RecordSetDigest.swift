import Crypto
import Foundation

/// A digest of a set of live records that does not depend on their order: what `records/digest`
/// answers for a zone, and what a client computes over its own copy to prove the two equal.
///
/// Each record is encoded canonically (record name, record type, then its fields in the byte order
/// of their names, each as name, type and value, every variable part prefixed with its length) and
/// hashed with SHA-256; the digest is the sum of those hashes modulo 2²⁵⁶, so adding records in any
/// order gives the same result, and two sets differ in their digest unless they hold the same
/// records with the same values. System fields (change tags, stamps) are left out: a copy holds the
/// same data whoever wrote it last. An asset counts by its `fileChecksum` (the SHA-256 of its bytes),
/// a reference by its record name and action.
///
/// It detects divergence, not forgery: an additive multiset hash is not collision-resistant against
/// someone choosing records to collide.
public struct RecordSetDigest: Hashable, Sendable {
    /// How many records were added.
    public private(set) var recordCount = 0
    /// The sum of the records' hashes, as four 64-bit words, least significant first.
    private var words: [UInt64] = [0, 0, 0, 0]

    /// An empty set's digest.
    public init() {}

    /// Adds one live record; a share (`cloudkit.share`) is left out: it says who sees the data, not
    /// what the data is, and its keys differ by reader.
    public mutating func add(recordName: String, recordType: String, fields: [String: FieldValue]) {
        guard !ShareKeys.isShareType(recordType) else { return }
        var encoding = CanonicalEncoding()
        encoding.append(recordName)
        encoding.append(recordType)
        encoding.append(UInt64(fields.count))
        for name in fields.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            encoding.append(name)
            encoding.append(fields[name]!)
        }
        let hash = Array(SHA256.hash(data: encoding.bytes))
        var carry = false
        for index in 0..<4 {
            // The hash's last eight bytes are the least significant word (big-endian reading).
            let start = 32 - (index + 1) * 8
            let word = hash[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let (partial, overflowA) = words[index].addingReportingOverflow(word)
            let (sum, overflowB) = partial.addingReportingOverflow(carry ? 1 : 0)
            words[index] = sum
            carry = overflowA || overflowB
        }
        recordCount += 1
    }

    /// The digest as 64 lowercase hexadecimal digits (the sum, most significant byte first).
    public var hexDigest: String {
        words.reversed().flatMap { word in (0..<8).reversed().map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) } }
            .hexDigits
    }
}

/// The byte form of records that ``RecordSetDigest`` hashes.
private struct CanonicalEncoding {
    var bytes: [UInt8] = []

    mutating func append(_ number: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: number >> UInt64(shift))) }
    }

    mutating func append(_ bytes: some Collection<UInt8>) {
        append(UInt64(bytes.count))
        self.bytes.append(contentsOf: bytes)
    }

    mutating func append(_ text: String) {
        append(text.utf8)
    }

    mutating func append(_ number: Double?) {
        guard let number else { return bytes.append(0) }
        bytes.append(1)
        append(number.bitPattern)
    }

    mutating func append(_ value: FieldValue) {
        append(value.type.rawValue)
        switch value {
        case .string(let text): append(text)
        case .int64(let number), .timestamp(let number): append(UInt64(bitPattern: number))
        case .double(let number): append(number.bitPattern)
        case .bytes(let data): append(data)
        case .reference(let reference):
            append(reference.recordName)
            append(reference.action.rawValue)
        case .asset(let asset): append(asset.fileChecksum ?? "")
        case .location(let location):
            append(location.latitude.bitPattern)
            append(location.longitude.bitPattern)
            for optional in [
                location.horizontalAccuracy, location.verticalAccuracy, location.altitude, location.speed, location.course,
            ] { append(optional) }
            if let timestamp = location.timestamp {
                bytes.append(1)
                append(UInt64(bitPattern: timestamp))
            } else {
                bytes.append(0)
            }
        case .list(_, let elements):
            append(UInt64(elements.count))
            for element in elements { append(element) }
        }
    }
}
