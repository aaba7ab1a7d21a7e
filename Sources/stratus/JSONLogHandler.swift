import Foundation
import Logging
import StratusModel

/// Writes one JSON object per log line to standard error:
/// `{"timestamp", "level", "label", "message", "source", …metadata}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let explicit = event.metadata
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("timestamp", ISO8601DateFormatter().string(from: Date()))
        writer.field("level", event.level.rawValue)
        writer.field("label", label)
        writer.field("message", event.message.description)
        writer.field("source", event.source)
        for (key, value) in metadata.merging(explicit ?? [:], uniquingKeysWith: { $1 }).sorted(by: { $0.key < $1.key }) {
            writer.field(key, value.description)
        }
        writer.endObject()
        FileHandle.standardError.write(Data(writer.bytes + [UInt8(ascii: "\n")]))
    }
}
