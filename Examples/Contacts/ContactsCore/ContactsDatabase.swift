public import ExampleSupport
public import Foundation
public import GRDB
public import Stratus
public import StratusStore

/// The contacts app on StratusStore, beside ``ContactsStore`` (the same app on a ``SyncEngine``
/// with a delegate of its own): the contacts are rows of the app's SQLite file (`contacts.sqlite`),
/// mirrored to the user's private database by the store.
///
/// The promises are ``ContactsStore``'s: edits are committed locally and sent when the server is
/// reachable (the store's outbox keeps them through a crash); a conflict keeps the later edit
/// (a custom merge compares `modified`); signing out or switching accounts clears the contacts.
public final class ContactsDatabase: Sendable {
    /// The table the app declares to the store, mirrored as `StoreContact` records.
    public static let model = StoreModel([.synced("contacts", recordType: "StoreContact")])

    /// The app's database.
    public let pool: DatabasePool
    /// The store over it.
    public let store: StratusStore

    /// The device whose state is in `stateDirectory`, set up by ``signUp(_:)`` or ``signIn(_:)``:
    /// opens `contacts.sqlite` and the store mirroring it.
    public init(stateDirectory: URL, automaticallySync: Bool = false) async throws {
        let directory = DeviceDirectory(stateDirectory)
        let container = try directory.device(app: "contacts-store").container
        pool = try DatabasePool(path: directory.file("contacts.sqlite").path)
        try await pool.write { db in
            try db.execute(
                sql: "CREATE TABLE IF NOT EXISTS contacts (id TEXT PRIMARY KEY NOT NULL, name TEXT, modified REAL)")
        }
        store = try await StratusStore.open(
            pool, model: Self.model,
            mirroring: StratusStore.Mirroring(
                database: container.privateCloudDatabase, assetDirectory: directory.file("outgoing-assets"),
                customMerges: ["contacts": Self.laterEditWins], automaticallySync: automaticallySync))
    }

    /// A conflict keeps the later edit, whole; a deletion against an edit keeps the edit.
    static let laterEditWins: StoreCustomMerge = { conflict in
        guard let local = conflict.local, let server = conflict.server else { return conflict.local ?? conflict.server }
        let modified = { (values: [String: DatabaseValue]) in Double.fromDatabaseValue(values["modified"] ?? .null) ?? 0 }
        return modified(local) > modified(server) ? local : server
    }

    /// Creates the account and sets `account`'s state directory up as a device of it.
    public static func signUp(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "contacts-store", .signUp)
    }

    /// Signs in and sets `account`'s state directory up as a device of it.
    public static func signIn(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "contacts-store", .signIn)
    }

    /// The contacts, by name.
    public func contacts() async throws -> [ContactsStore.Contact] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, name, modified FROM contacts ORDER BY name, id").map { row in
                ContactsStore.Contact(
                    id: row["id"], name: row["name"] ?? "", modified: Date(timeIntervalSince1970: row["modified"] ?? 0))
            }
        }
    }

    /// Adds a contact and commits it on the device.
    @discardableResult
    public func add(name: String, at date: Date = Date()) async throws -> ContactsStore.Contact {
        let contact = ContactsStore.Contact(id: UUID().uuidString, name: name, modified: date)
        try await store.write { db in
            try db.execute(
                sql: "INSERT INTO contacts (id, name, modified) VALUES (?, ?, ?)",
                arguments: [contact.id, name, date.timeIntervalSince1970])
        }
        return contact
    }

    /// Renames the contact `id`.
    public func rename(_ id: String, to name: String, at date: Date = Date()) async throws {
        try await store.write { db in
            try db.execute(
                sql: "UPDATE contacts SET name = ?, modified = ? WHERE id = ?", arguments: [name, date.timeIntervalSince1970, id])
        }
    }

    /// Deletes the contact `id`.
    public func delete(_ id: String) async throws {
        try await store.write { db in try db.execute(sql: "DELETE FROM contacts WHERE id = ?", arguments: [id]) }
    }

    /// Deletes every contact, here and, once sent, on the server and the other devices.
    public func deleteAll() async throws {
        try await store.write { db in try db.execute(sql: "DELETE FROM contacts") }
    }

    /// Sends the waiting edits, then fetches the other devices'.
    ///
    /// - Returns: ``ContactsStore/SyncOutcome/offline(_:)`` when the server could not be reached.
    @discardableResult
    public func sync() async throws -> ContactsStore.SyncOutcome {
        do {
            try await store.sync()
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        return .synced
    }
}
