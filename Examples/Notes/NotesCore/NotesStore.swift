public import ExampleSupport
public import Foundation
public import GRDB
public import Stratus
public import StratusStore

/// The notes app of seed 000 on StratusStore instead of a hand-written ``NotesDevice``: the note is
/// a row of the app's own SQLite file (`notes.sqlite`), and the store mirrors it to the user's
/// private database. The rules are the same as ``NotesDevice``'s:
///
/// - edits are committed locally first and sent when the server is reachable (the store's outbox
///   keeps them through a crash);
/// - conflicts are decided by the latest `modified`, through the store's custom merge;
/// - a note written by a newer version of the app is refused: never shown, never overwritten.
///
/// What the engine delegate, the state file and the conflict handling of ``NotesDevice`` did by
/// hand is here a model of one table and a merge of a few lines.
public final class NotesStore: Sendable {
    /// The one note's key, the same on every device.
    public static let noteID = UUID(uuidString: "6E6F7465-0000-4000-8000-000000000001")!
    /// The table the app declares to the store, mirrored as `StoreNote` records.
    public static let model = StoreModel([.synced("notes", recordType: "StoreNote")])

    /// The app's database.
    public let pool: DatabasePool
    /// The store over it.
    public let store: StratusStore
    /// This device's ID, stored in the notes it edits.
    public let id: String
    /// The data version this device's app writes.
    public let appVersion: Int

    /// The device whose state is in `stateDirectory`, as set up by ``signUp(_:)`` or ``signIn(_:)``:
    /// opens `notes.sqlite` and the store mirroring it. `appVersion` plays an older or newer app.
    public init(stateDirectory: URL, appVersion: Int = NotesDevice.currentVersion) async throws {
        let directory = DeviceDirectory(stateDirectory)
        let device = try directory.device(app: "notes-store")
        id = device.setup.deviceID
        self.appVersion = appVersion
        pool = try DatabasePool(path: directory.file("notes.sqlite").path)
        try await pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS notes (
                        id TEXT PRIMARY KEY NOT NULL, text TEXT, modified REAL, version INTEGER, editedOn TEXT)
                    """)
        }
        store = try await StratusStore.open(
            pool, model: Self.model,
            mirroring: StratusStore.Mirroring(
                database: device.container.privateCloudDatabase, assetDirectory: directory.file("outgoing-assets"),
                customMerges: ["notes": Self.latestEditWins(appVersion: appVersion)], automaticallySync: false))
    }

    /// The seed's conflict rule: the later edit wins, whole; a note of a newer app version is never
    /// overwritten.
    static func latestEditWins(appVersion: Int) -> StoreCustomMerge {
        { conflict in
            guard let local = conflict.local, let server = conflict.server else { return conflict.local ?? conflict.server }
            if (Int.fromDatabaseValue(server["version"] ?? .null) ?? 1) > appVersion { return server }
            let modified = { (values: [String: DatabaseValue]) in Double.fromDatabaseValue(values["modified"] ?? .null) ?? 0 }
            return modified(local) > modified(server) ? local : server
        }
    }

    /// Creates the account and sets this state directory up as a device of it.
    @discardableResult
    public static func signUp(_ account: DeviceDirectory.Account) async throws -> NotesStore {
        try await DeviceDirectory.setUp(account, app: "notes-store", .signUp)
        return try await NotesStore(stateDirectory: account.stateDirectory)
    }

    /// Signs in and sets this state directory up as a device of the account.
    @discardableResult
    public static func signIn(_ account: DeviceDirectory.Account) async throws -> NotesStore {
        try await DeviceDirectory.setUp(account, app: "notes-store", .signIn)
        return try await NotesStore(stateDirectory: account.stateDirectory)
    }

    /// The note as this device has it; `nil` before any.
    ///
    /// - Throws: ``NotesDevice/Failure/newerVersion(_:)`` when a newer app wrote it.
    public func note() async throws -> LocalNote? {
        let pending = try await store.pendingChanges().contains { $0.rowID == Self.noteID }
        let row = try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM notes WHERE id = ?", arguments: [Self.noteID.uuidString])
        }
        guard let row else { return nil }
        let version = row["version"] as Int? ?? 1
        guard version <= appVersion else { throw NotesDevice.Failure.newerVersion(version) }
        return LocalNote(
            text: row["text"] ?? "", modified: Date(timeIntervalSince1970: row["modified"] ?? 0), version: version,
            editedOn: row["editedOn"], needsPush: pending)
    }

    /// Replaces the note's text, commits it locally, and sends it if the server is reachable.
    /// `date` is when the edit happened (now by default).
    ///
    /// - Throws: ``NotesDevice/Failure/newerVersion(_:)``, changing nothing, when a newer app wrote the note.
    @discardableResult
    public func edit(_ text: String, at date: Date = Date()) async throws -> NotesDevice.SyncOutcome {
        _ = try await note()
        try await store.write { [id, appVersion] db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO notes (id, text, modified, version, editedOn) VALUES (?, ?, ?, ?, ?)",
                arguments: [Self.noteID.uuidString, text, date.timeIntervalSince1970, appVersion, id])
        }
        return try await sync()
    }

    /// Sends a local edit that waits, then applies the changes other devices made.
    ///
    /// - Throws: ``NotesDevice/Failure/newerVersion(_:)`` when the server's note is a newer app's.
    @discardableResult
    public func sync() async throws -> NotesDevice.SyncOutcome {
        do {
            try await store.sync()
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        _ = try await note()
        return .synced
    }
}
