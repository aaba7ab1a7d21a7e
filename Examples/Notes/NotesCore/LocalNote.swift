public import Foundation

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
