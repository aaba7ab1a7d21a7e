import Crypto
import Foundation
import StratusModel
package import StratusStorage

/// Turns feed positions into opaque sync tokens and back.
///
/// A token is base64url without padding (RFC 4648 §5: nothing in it needs escaping in a URL, so a
/// client that escapes a URL again cannot change it) of: version (1 byte, currently 1), kind (1 byte: zone or database feed), the
/// zone or database storage identifier (8 bytes), the sequence number (8 bytes), and the first 16
/// bytes of an HMAC-SHA256 of all that under a secret kept in the server's settings. A token that
/// is not base64 or too short is rejected with `BAD_REQUEST`; one whose MAC does not match (minted
/// by another server, or by this one before its data was moved here with `stratus export` and
/// `import`, which renumbers every feed) with `CHANGE_TOKEN_EXPIRED`, so that the client reads the
/// feed again from the start instead of failing for good.
package struct SyncTokenCodec: Sendable {
    /// Which feed a token belongs to.
    package enum Kind: UInt8, Sendable {
        /// A zone's record change feed.
        case zone = 1
        /// A database's zone change feed.
        case database = 2
        /// A shared database's zone change feed (``SharedFeedPosition``).
        case sharedDatabase = 3
    }

    private static let version: UInt8 = 1
    private static let macLength = 16
    private let key: SymmetricKey

    /// Creates a codec with the server's token secret (base64).
    package init(secret: String) {
        key = SymmetricKey(data: Data(base64Encoded: secret) ?? Data(secret.utf8))
    }

    /// A new random secret for ``init(secret:)``.
    package static func makeSecret() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// The token for `position` in a feed of `kind`.
    package func token(for position: ChangePosition, kind: Kind) -> String {
        var bytes: [UInt8] = [Self.version, kind.rawValue]
        withUnsafeBytes(of: position.scopeID.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: position.sequence.bigEndian) { bytes.append(contentsOf: $0) }
        return seal(bytes)
    }

    /// The position a token stands for; `nil` input gives `nil` (read from the start).
    package func position(from token: String?, kind: Kind, field: String = "syncToken") throws -> ChangePosition? {
        guard let token, !token.isEmpty else { return nil }
        let body = try open(token, field: field, what: "a sync token", foreign: Self.foreignSyncToken(field))
        guard body.count == 18 else {
            throw StratusError.badRequest("\(field) is not a sync token issued by this server")
        }
        guard body[0] == Self.version else {
            throw StratusError.badRequest("\(field) has version \(body[0]); this server reads version \(Self.version)")
        }
        guard body[1] == kind.rawValue else {
            let expected = kind == .zone ? "a zone's record feed" : "a database's zone feed"
            throw StratusError.badRequest("\(field) belongs to another feed; this endpoint takes a token of \(expected)")
        }
        let scopeID = body[2..<10].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let sequence = body[10..<18].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        return ChangePosition(scopeID: scopeID, sequence: sequence)
    }

    /// The token of a shared database's feed at `position`.
    func token(for position: SharedFeedPosition) -> String {
        var bytes: [UInt8] = [Self.version, Kind.sharedDatabase.rawValue]
        for zone in position.zones {
            withUnsafeBytes(of: zone.id.bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: zone.sequence.bigEndian) { bytes.append(contentsOf: $0) }
            for text in [zone.owner, zone.name] {
                let utf8 = Array(text.utf8)
                withUnsafeBytes(of: UInt16(utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
                bytes += utf8
            }
        }
        return seal(bytes)
    }

    /// The shared database feed position a token stands for; `nil` input gives `nil` (from the start).
    func sharedPosition(from token: String?, field: String = "syncToken") throws -> SharedFeedPosition? {
        guard let token, !token.isEmpty else { return nil }
        let body = try open(token, field: field, what: "a sync token", foreign: Self.foreignSyncToken(field))
        guard body.count >= 2, body[0] == Self.version, body[1] == Kind.sharedDatabase.rawValue else {
            throw StratusError.badRequest(
                "\(field) belongs to another feed; this endpoint takes a token of the shared database's zone feed")
        }
        var position = SharedFeedPosition(zones: [])
        var offset = 2
        func integer(_ width: Int) -> Int64 {
            defer { offset += width }
            return body[offset..<offset + width].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }
        func text() -> String? {
            guard offset + 2 <= body.count else { return nil }
            let count = Int(integer(2))
            guard offset + count <= body.count else { return nil }
            defer { offset += count }
            return String(decoding: body[offset..<offset + count], as: UTF8.self)
        }
        while offset < body.count {
            // The MAC vouches for the bytes; a short read means a token of another layout.
            guard offset + 16 <= body.count else { break }
            let id = integer(8)
            let sequence = integer(8)
            guard let owner = text(), let name = text() else { break }
            position.zones.append(.init(id: id, sequence: sequence, owner: owner, name: name))
        }
        return position
    }

    /// `bytes` followed by their MAC, as base64url without padding: opaque to clients,
    /// tamper-evident, and the same escaped in a URL or not.
    func seal(_ bytes: [UInt8]) -> String {
        Base64URL.encode(bytes + mac(bytes))
    }

    /// The bytes a ``seal(_:)`` result carries; `BAD_REQUEST` naming `field` when it is malformed,
    /// and `foreign` (by default the same) when it was not made under this server's secret or was
    /// altered.
    func open(_ token: String, field: String, what: String, foreign: StratusError? = nil) throws -> [UInt8] {
        // Base64url, or the standard base64 of the tokens and tickets issued before (still honoured
        // until they expire).
        guard let data = Base64URL.decode(token), data.count > Self.macLength else {
            throw StratusError.badRequest("\(field) is not \(what) issued by this server")
        }
        let bytes = [UInt8](data)
        let body = Array(bytes.dropLast(Self.macLength))
        guard Secrets.constantTimeEquals(mac(body), Array(bytes.suffix(Self.macLength))) else {
            throw foreign ?? StratusError.badRequest("\(field) is not \(what) issued by this server (integrity check failed)")
        }
        return body
    }

    /// A sync token this server's secret did not sign.
    private static func foreignSyncToken(_ field: String) -> StratusError {
        StratusError(
            .changeTokenExpired,
            "\(field) was not issued by this server, or was issued before its data was moved here; fetch the changes "
                + "again without a sync token")
    }

    private func mac(_ bytes: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: bytes, using: key).prefix(Self.macLength))
    }
}

/// Where a participant's read of their shared database's zone feed stands: each zone shared with
/// them that they have heard of, and the last change of it they were told about.
///
/// The zones of a shared database are other users' zones, each with its own change order, so the
/// position is the set of them rather than one number: a zone is reported when it is new to the set
/// or changed since, and as deleted when it left (the participant left or was removed, or the owner
/// stopped sharing or deleted it).
struct SharedFeedPosition: Hashable, Sendable {
    /// A zone as last reported.
    struct Zone: Hashable, Sendable {
        /// The zone's storage identifier (new for every incarnation of its name).
        var id: Int64
        /// The zone's last change reported.
        var sequence: Int64
        /// The zone's owner.
        var owner: String
        /// The zone's name.
        var name: String
    }

    /// The zones reported so far.
    var zones: [Zone]
}
