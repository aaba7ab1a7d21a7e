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
            var fields: [String: FieldValue] = [:]
            for (key, value) in record.values {
                fields[key] = try value.checksummingAssets().wireValue { StratusModel.Reference(recordName: $0.recordID.recordName, action: $0.action.wire) }
            }
            digest.add(recordName: record.recordID.recordName, recordType: record.recordType, fields: fields)
        }
        self.init(recordCount: digest.recordCount, digest: digest.hexDigest)
    }

    init(recordCount: Int, digest: String) {
        self.recordCount = recordCount
        self.digest = digest
    }

    public var description: String { "\(recordCount) records, digest \(digest)" }
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
