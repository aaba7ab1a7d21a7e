import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// A `continuationMarker`: where a query's page ended, sealed so clients cannot alter it.
struct QueryMarker {
    private static let version: UInt8 = 1

    static func encode(_ cursor: QueryCursor, recordType: String, tokens: SyncTokenCodec) -> String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("t", recordType)
        writer.key("k")
        writer.beginArray()
        for key in cursor.keys {
            switch key {
            case .integer(let value): writer.int(value)
            case .real(let value): writer.double(value)
            case .text(let value): writer.string(value)
            }
        }
        writer.endArray()
        writer.field("z", cursor.zone)
        writer.field("c", cursor.created)
        writer.field("n", cursor.name)
        writer.endObject()
        return tokens.seal([version] + writer.bytes)
    }

    static func decode(_ marker: String?, recordType: String, tokens: SyncTokenCodec) throws -> QueryCursor? {
        guard let marker, !marker.isEmpty else { return nil }
        let bytes = try tokens.open(marker, field: "continuationMarker", what: "a continuation marker")
        guard bytes.first == version, let object = try? JSONValue.parse(Array(bytes.dropFirst())).object(),
            let type: String = try? object.decode("t"), let zone: String = try? object.decode("z"),
            let name: String = try? object.decode("n"), case .array(let keys)? = object["k"]
        else {
            throw StratusError.badRequest("continuationMarker is not a continuation marker issued by this server")
        }
        guard type == recordType else {
            throw StratusError.badRequest(
                "continuationMarker belongs to a query of record type '\(type)', not '\(recordType)'; "
                    + "pass it with the query that returned it")
        }
        let scalars: [QueryScalar] = keys.compactMap { key in
            switch key {
            case .integer(let value): .integer(value)
            case .double(let value): .real(value)
            case .string(let value): .text(value)
            default: nil
            }
        }
        // A marker from before creation times were in markers has none (``QueryCursor/created``).
        let created: Int64? = try? object.decode("c")
        return QueryCursor(keys: scalars, zone: zone, created: created, name: name)
    }
}
