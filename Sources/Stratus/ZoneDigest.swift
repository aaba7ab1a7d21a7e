import Crypto
import Foundation
import NIOCore
import StratusModel

/// The number and digest of a set of live records, as `records/digest` answers it for a zone and as
/// ``init(records:)`` computes it over records at hand: equal digests prove equal copies (verifiable
/// sync, docs/protocol.md). Fields count, system fields (change tags, stamps, `parent`) do not.
public struct ZoneDigest: Hashable, Sendable, CustomStringConvertible {
    /// How many records.
    public let recordCount: Int
    /// The order-independent digest, 64 hexadecimal digits.
    public let digest: String

    /// The digest of `records`. An asset not yet uploaded counts by the SHA-256 of its file, as the
    /// server will once it holds it.
    ///
    /// - Throws: when an asset's file cannot be read.
    public init(records: some Sequence<Record>) throws {
        var digest = RecordSetDigest()
        for record in records {
            digest.add(recordName: record.recordID.recordName, recordType: record.recordType, fields: try Self.digestedFields(of: record))
        }
        self.init(recordCount: digest.recordCount, digest: digest.hexDigest)
    }

    /// The records of two copies of a set that differ, by record name: where a digest says two
    /// copies differ, this says how. Fields compare as the digest counts them.
    ///
    /// - Throws: when an asset's file cannot be read.
    public static func differences(between here: some Sequence<Record>, and there: some Sequence<Record>) throws -> [RecordDifference] {
        let hereByName = Dictionary(here.map { ($0.recordID.recordName, $0) }) { $1 }
        let thereByName = Dictionary(there.map { ($0.recordID.recordName, $0) }) { $1 }
        var differences: [RecordDifference] = []
        for name in Set(hereByName.keys).union(thereByName.keys).sorted() {
            switch (hereByName[name], thereByName[name]) {
            case (let record?, nil): differences.append(RecordDifference(recordName: name, recordType: record.recordType, kind: .onlyHere))
            case (nil, let record?): differences.append(RecordDifference(recordName: name, recordType: record.recordType, kind: .onlyThere))
            case (let mine?, let theirs?):
                let (a, b) = (try digestedFields(of: mine), try digestedFields(of: theirs))
                let fields = Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }.sorted()
                if !fields.isEmpty || mine.recordType != theirs.recordType {
                    differences.append(RecordDifference(recordName: name, recordType: mine.recordType, kind: .fields(fields)))
                }
            case (nil, nil): break
            }
        }
        return differences
    }

    /// A record's fields as the digest counts them.
    private static func digestedFields(of record: Record) throws -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        for (key, value) in record.values {
            fields[key] = try value.checksummingAssets().wireValue { StratusModel.Reference(recordName: $0.recordID.recordName, action: $0.action.wire) }
        }
        return fields
    }

    init(recordCount: Int, digest: String) {
        self.recordCount = recordCount
        self.digest = digest
    }

    public var description: String { "\(recordCount) records, digest \(digest)" }
}

/// How one record differs between two copies of a set of records (``ZoneDigest/differences(between:and:)``).
public struct RecordDifference: Hashable, Sendable, CustomStringConvertible {
    /// How it differs.
    public enum Kind: Hashable, Sendable {
        /// Only the first copy has the record.
        case onlyHere
        /// Only the second copy has the record.
        case onlyThere
        /// Both have it; these fields differ (none when the record types do).
        case fields([String])
    }

    /// The record's name.
    public let recordName: String
    /// Its record type (in the first copy, when both have it).
    public let recordType: String
    /// How it differs.
    public let kind: Kind

    public var description: String {
        switch kind {
        case .onlyHere: "\(recordType) \(recordName): only here"
        case .onlyThere: "\(recordType) \(recordName): only there"
        case .fields(let fields) where fields.isEmpty: "\(recordName): the record types differ"
        case .fields(let fields): "\(recordType) \(recordName): \(fields.joined(separator: ", ")) differ"
        }
    }
}

extension RecordFieldValue {
    /// The value with every asset that has a file but no checksum given the SHA-256 of its file.
    fileprivate func checksummingAssets() throws -> RecordFieldValue {
        func checksummed(_ asset: Asset) throws -> Asset {
            guard asset.fileChecksum == nil, let file = asset.fileURL else { return asset }
            var copy = asset
            copy.fileChecksum = try Self.sha256(ofFile: file)
            return copy
        }
        switch self {
        case .asset(let asset): return .asset(try checksummed(asset))
        case .assetList(let assets): return .assetList(try assets.map(checksummed))
        default: return self
        }
    }

    private static func sha256(ofFile file: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hasher.finalize().hexDigits
    }
}

extension Database {
    /// The server's digest of the live records of a custom zone, and the change token of the state it
    /// covers (`records/digest`, a Stratus extension). Compare it with ``ZoneDigest/init(records:)``
    /// over your copy once your feed reached that token and nothing is unsent: equal digests prove
    /// the copies equal.
    ///
    /// - Throws: ``CloudError`` `zoneNotFound` when the zone is gone; `serviceUnavailable` when the
    ///   zone kept changing while the server read it.
    public func zoneDigest(inZoneWith zoneID: RecordZone.ID) async throws -> (digest: ZoneDigest, changeToken: ServerChangeToken) {
        let answer = try await call(
            Endpoints.recordsDigest.erased, body: ZoneDigestRequest(zoneID: wireZoneID(zoneID)), idempotent: true,
            as: ZoneDigestResponse.self)
        return (
            ZoneDigest(recordCount: answer.recordCount, digest: answer.digest), ServerChangeToken(rawValue: answer.syncToken)
        )
    }
}
