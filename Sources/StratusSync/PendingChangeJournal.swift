import Foundation
import Stratus

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An append-only file of the app's changes to the pending lists since the last state the app
/// persisted, so that a change survives the process dying before the next `stateUpdate` is saved.
///
/// Each line is one JSON entry with a sequence number. Appending writes the line and syncs the file
/// to disk before returning. The state's serialization records the last sequence it includes; at
/// launch the entries after it are applied again, and once the app has handled a `stateUpdate`, the
/// entries it includes are dropped from the file. A line cut short by a crash is ignored.
///
/// Not thread-safe: the state calls it under its lock.
final class PendingChangeJournal {
    /// One change to the pending lists.
    struct Entry: Codable, Sendable {
        enum Operation: Codable, Sendable {
            case addRecordZoneChanges([SyncEngine.PendingRecordZoneChange])
            case removeRecordZoneChanges([SyncEngine.PendingRecordZoneChange])
            case addDatabaseChanges([SyncEngine.PendingDatabaseChange])
            case removeDatabaseChanges([SyncEngine.PendingDatabaseChange])
            case setHasPendingUntrackedChanges(Bool)
            /// The state, new, belongs to this user (signed in when the engine first started).
            case adoptUser(String)
        }

        var sequence: UInt64
        var operation: Operation
    }

    let url: URL
    private var file: FileHandle
    /// The journal's lock file (`<journal>.lock`), locked (`flock`) while the journal is open: a
    /// second engine on the same journal, in this process or another, would write over the first's
    /// pending changes when it compacts. A file of its own, since compacting replaces the journal.
    private let lock: FileHandle

    /// Opens the journal at `url`, creating it (and its folder) when missing.
    ///
    /// - Throws: `CloudError` `invalidArguments` when another engine has the journal open.
    init(url: URL) throws {
        self.url = url
        let manager = FileManager.default
        try manager.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let lockURL = url.appendingPathExtension("lock")
        if !manager.fileExists(atPath: lockURL.path) { _ = manager.createFile(atPath: lockURL.path, contents: nil) }
        lock = try FileHandle(forUpdating: lockURL)
        guard flock(lock.fileDescriptor, LOCK_EX | LOCK_NB) == 0 else {
            try? lock.close()
            throw CloudError(
                .invalidArguments,
                "the journal \(url.path) is in use by another sync engine (in another process, or one of this process "
                    + "not released yet): one engine at a time per journal, as two would write over each other's pending changes")
        }
        if !manager.fileExists(atPath: url.path) {
            guard manager.createFile(atPath: url.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
            }
        }
        file = try FileHandle(forUpdating: url)
        // A last line cut short by a crash goes, so that the next entry starts a line of its own
        // instead of joining it in one line neither decodes.
        let data = try Data(contentsOf: url)
        if let last = data.last, last != UInt8(ascii: "\n") {
            try file.truncate(atOffset: UInt64(data.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0))
            try file.synchronize()
        }
        try file.seekToEnd()
    }

    deinit {
        try? file.close()
        try? lock.close()
    }

    /// The entries in the file, in order; a last line cut short is skipped.
    func entries() throws -> [Entry] {
        let data = try Data(contentsOf: url)
        let decoder = JSONDecoder()
        return data.split(separator: UInt8(ascii: "\n")).compactMap { line in
            try? decoder.decode(Entry.self, from: line)
        }
    }

    /// Appends `entry` and syncs the file to disk.
    func append(_ entry: Entry) throws {
        var line = try JSONEncoder().encode(entry)
        line.append(UInt8(ascii: "\n"))
        try file.write(contentsOf: line)
        try file.synchronize()
    }

    /// Keeps only `entries` (those after the state the app persisted). Entries to keep are written
    /// to a new file that then replaces the journal, so a crash leaves either file whole.
    func rewrite(keeping entries: [Entry]) throws {
        guard !entries.isEmpty else {
            try file.truncate(atOffset: 0)
            try file.synchronize()
            return
        }
        let encoder = JSONEncoder()
        var data = Data()
        for entry in entries {
            data.append(try encoder.encode(entry))
            data.append(UInt8(ascii: "\n"))
        }
        let replacement = url.appendingPathExtension("new")
        try data.write(to: replacement)
        let handle = try FileHandle(forUpdating: replacement)
        try handle.synchronize()
        try handle.seekToEnd()
        _ = try FileManager.default.replaceItemAt(url, withItemAt: replacement)
        try file.close()
        file = handle
    }
}
