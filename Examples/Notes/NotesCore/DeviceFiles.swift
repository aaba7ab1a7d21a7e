import Foundation
import Stratus

/// What one device of the notes app keeps in its state directory.
///
/// - `device.json`: the server, container, API token and this device's ID, written at sign-in;
/// - `session.json`: the signed-in session;
/// - `note.json`: the local copy of the note, whether it still has to be pushed, the record's
///   system fields and the zone's change token;
/// - `note.txt`: the note's text, the file uploaded as the record's asset.
///
/// The secrets (`device.json`, `session.json`) are written readable by the owner only.
struct DeviceFiles {
    /// How this device reaches its server.
    struct Setup: Codable {
        var serverURL: URL
        var containerIdentifier: String
        var apiToken: String
        var deviceID: String
    }

    /// The note as this device knows it.
    struct State: Codable {
        /// The note; `nil` until one is written or fetched.
        var note: LocalNote?
        /// Where this device's reading of the zone's changes stopped.
        var changeToken: ServerChangeToken?
    }

    let directory: URL

    var setupFile: URL { directory.appendingPathComponent("device.json") }
    var sessionFile: URL { directory.appendingPathComponent("session.json") }
    var stateFile: URL { directory.appendingPathComponent("note.json") }
    var textFile: URL { directory.appendingPathComponent("note.txt") }

    func read<Value: Decodable>(_ type: Value.Type, from file: URL) throws -> Value? {
        guard let data = try? Data(contentsOf: file) else { return nil }
        return try JSONDecoder().decode(Value.self, from: data)
    }

    /// Writes `value` atomically (a crash leaves the old file or the new one, never half of one).
    func write(_ value: some Encodable, to file: URL, secret: Bool = false) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(value).write(to: file, options: .atomic)
        if secret { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path) }
    }
}

/// A device's copy of the note.
public struct LocalNote: Codable, Equatable, Sendable {
    /// The text.
    public var text: String
    /// When the text was last edited, on whichever device: the conflict rule compares this.
    public var modified: Date
    /// The data version of the app that wrote the note.
    public var version: Int
    /// The device that made the last edit.
    public var editedOn: String?
    /// Whether this edit still has to reach the server.
    public var needsPush: Bool
    /// The record's system fields as last saved or fetched, so the next save is based on them.
    var systemFields: Data?
}
