import Foundation
public import Logging
import StratusModel

/// Writes the server's log lines to standard error, as text or as one JSON object per line.
///
/// The handler keeps its metadata as it is set and formats it only when it writes a line. Every
/// request sets metadata on its logger (Hummingbird its `hb.request.id`, the server its `request`),
/// and swift-log's `StreamLogHandler` formats all of its metadata again at each set, logged or not:
/// about a twentieth of a small save's CPU.
public struct ServerLogHandler: LogHandler {
    /// How a line is written.
    public enum Format: String, Sendable, CaseIterable {
        /// `2026-11-27T23:50:48+0000 info stratus: request=… [StratusServer] answered`, as
        /// swift-log's `StreamLogHandler` writes it.
        case text
        /// `{"timestamp", "level", "label", "message", "source", …metadata}`.
        case json
    }

    /// The logger's label.
    public let label: String
    /// How lines are written.
    public let format: Format
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    /// Where each line goes, newline included, in one call.
    private let output: @Sendable ([UInt8]) -> Void

    /// A handler for loggers labelled `label`, with the metadata provider the logging system was
    /// bootstrapped with, writing each line to `output` (`nil`: standard error, in one write, so that
    /// lines of concurrent requests do not interleave).
    public init(
        label: String, format: Format, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider,
        output: (@Sendable ([UInt8]) -> Void)? = nil
    ) {
        self.label = label
        self.format = format
        self.metadataProvider = metadataProvider
        self.output = output ?? { FileHandle.standardError.write(Data($0)) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        let fields = merged.sorted { $0.key < $1.key }
        var line: [UInt8]
        switch format {
        case .text:
            var text = "\(Self.localTimestamp()) \(event.level) \(label):"
            for (key, value) in fields { text += " \(key)=\(value)" }
            text += " [\(event.source)] \(event.message)"
            line = Array(text.utf8)
        case .json:
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("timestamp", ISO8601DateFormatter().string(from: Date()))
            writer.field("level", event.level.rawValue)
            writer.field("label", label)
            writer.field("message", event.message.description)
            writer.field("source", event.source)
            for (key, value) in fields { writer.field(key, value.description) }
            writer.endObject()
            line = writer.bytes
        }
        line.append(UInt8(ascii: "\n"))
        output(line)
    }

    /// The local time to the second, with its offset from UTC.
    private static func localTimestamp() -> String {
        var now = time(nil)
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
