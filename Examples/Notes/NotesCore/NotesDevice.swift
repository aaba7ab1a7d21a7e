import Foundation
import Stratus

/// One device of the notes app from seed 000: a single note in the custom zone `Notes` of the
/// user's private database, its text stored as an asset, with `modified` and `version` fields.
///
/// - Edits are saved locally first and pushed when the server is reachable (offline mode).
/// - Conflicts are resolved by the latest `modified`: the newer edit wins, on either side.
/// - A note written by a newer version of the app (a larger `version`) is refused, not
///   overwritten or misread.
public actor NotesDevice {
    /// The data version this build of the app reads and writes.
    public static let currentVersion = 1
    /// The zone holding the note.
    public static let zoneID = RecordZone.ID(zoneName: "Notes")
    /// The note's record.
    public static let recordID = Record.ID(recordName: "note", zoneID: zoneID)

    /// What a sync did.
    public enum SyncOutcome: Equatable, Sendable {
        /// The note is the same here and on the server.
        case synced
        /// The server could not be reached; local edits wait in the state directory.
        case offline(String)
    }

    /// Why the app refuses to go on.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The state directory has no signed-in device.
        case notSetUp(String)
        /// The server's note was written by a newer version of the app.
        case newerVersion(Int)

        public var description: String {
            switch self {
            case .notSetUp(let directory):
                "\(directory) has no signed-in device: run 'notes signup' or 'notes signin' with it first"
            case .newerVersion(let version):
                "the note was written by a newer version of Notes (data version \(version); this one reads "
                    + "\(NotesDevice.currentVersion)): update the app on this device to read or change it"
            }
        }
    }

    let files: DeviceFiles
    let container: Container
    let deviceID: String
    let appVersion: Int
    private var state: DeviceFiles.State

    /// The device whose state is in `stateDirectory`, as set up by ``signUp(_:)`` or ``signIn(_:)``.
    /// `appVersion` is the data version this device's app writes (tests use it to play an older
    /// or newer app).
    public init(stateDirectory: URL, appVersion: Int = NotesDevice.currentVersion) throws {
        let files = DeviceFiles(directory: stateDirectory)
        guard let setup = try files.read(DeviceFiles.Setup.self, from: files.setupFile) else {
            throw Failure.notSetUp(stateDirectory.path)
        }
        let session = try files.read(Container.Session.self, from: files.sessionFile)
        self.files = files
        self.deviceID = setup.deviceID
        self.appVersion = appVersion
        self.state = try files.read(DeviceFiles.State.self, from: files.stateFile) ?? DeviceFiles.State()
        self.container = Container(
            identifier: setup.containerIdentifier, serverURL: setup.serverURL, apiToken: setup.apiToken,
            session: session,
            configuration: Container.Configuration(
                connectTimeout: .seconds(5),
                // Give up quickly when the server is away: the edit is safe on disk meanwhile.
                retryPolicy: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(100)),
                deviceID: setup.deviceID,
                assetCacheDirectory: stateDirectory.appendingPathComponent("assets")))
    }

    /// How to reach the server and as whom.
    public struct Account: Sendable {
        public var stateDirectory: URL
        public var serverURL: URL
        public var containerIdentifier: String
        public var apiToken: String
        public var username: String
        public var password: String

        public init(
            stateDirectory: URL, serverURL: URL, containerIdentifier: String, apiToken: String, username: String,
            password: String
        ) {
            self.stateDirectory = stateDirectory
            self.serverURL = serverURL
            self.containerIdentifier = containerIdentifier
            self.apiToken = apiToken
            self.username = username
            self.password = password
        }
    }

    /// Creates the account and sets this state directory up as a device of it.
    @discardableResult
    public static func signUp(_ account: Account) async throws -> NotesDevice {
        try await setUp(account) { try await $0.signUp(username: account.username, password: account.password) }
    }

    /// Signs in and sets this state directory up as a device of the account.
    @discardableResult
    public static func signIn(_ account: Account) async throws -> NotesDevice {
        try await setUp(account) { try await $0.signIn(username: account.username, password: account.password) }
    }

    private static func setUp(_ account: Account, _ signIn: (Container) async throws -> Void) async throws -> NotesDevice {
        let files = DeviceFiles(directory: account.stateDirectory)
        let deviceID = try files.read(DeviceFiles.Setup.self, from: files.setupFile)?.deviceID
            ?? "notes-\(UUID().uuidString.prefix(8).lowercased())"
        let container = Container(
            identifier: account.containerIdentifier, serverURL: account.serverURL, apiToken: account.apiToken)
        try await signIn(container)
        try files.write(
            DeviceFiles.Setup(
                serverURL: account.serverURL, containerIdentifier: account.containerIdentifier,
                apiToken: account.apiToken, deviceID: deviceID),
            to: files.setupFile, secret: true)
        try files.write(container.session, to: files.sessionFile, secret: true)
        return try NotesDevice(stateDirectory: account.stateDirectory)
    }

    /// The note as this device has it.
    public var note: LocalNote? { state.note }

    /// This device's ID, stored in the notes it edits.
    public var id: String { deviceID }

    /// Replaces the note's text, saves it locally, and pushes it if the server is reachable.
    /// `date` is when the edit happened (now by default).
    @discardableResult
    public func edit(_ text: String, at date: Date = Date()) async throws -> SyncOutcome {
        state.note = LocalNote(
            text: text, modified: date, version: appVersion, editedOn: deviceID, needsPush: true,
            systemFields: state.note?.systemFields)
        try saveState()
        return try await sync()
    }

    /// Pushes a local edit that waits, then applies the changes other devices made.
    public func sync() async throws -> SyncOutcome {
        do {
            try await push()
            try await fetch()
            return .synced
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
    }

    /// Follows the other devices' edits as they happen: subscribes to notes (once per account),
    /// then syncs whenever a notification says something changed, or the push channel says some may
    /// have been missed, and calls `onChange` with the note each time it changed. Runs until the
    /// task is cancelled, or throws when the session ends.
    public func watch(_ onChange: @Sendable (LocalNote?) async -> Void) async throws {
        try await database.save(
            Subscription.query(
                recordType: "Note", subscriptionID: "notes",
                notificationInfo: Subscription.NotificationInfo(shouldSendContentAvailable: true)))
        for try await _ in container.notifications() {
            let before = state.note
            if case .offline = try await sync() { continue }
            if state.note != before { await onChange(state.note) }
        }
    }

    // MARK: Pushing

    private var database: Database { container.privateCloudDatabase }

    /// Saves the local edit, resolving conflicts by the latest `modified`.
    private func push() async throws {
        guard var note = state.note, note.needsPush else { return }
        try note.text.write(to: files.textFile, atomically: true, encoding: .utf8)
        var record = try note.systemFields.map(Record.init(systemFieldsData:))
            ?? Record(recordType: "Note", recordID: Self.recordID)
        while true {
            record["text"] = Asset(fileURL: files.textFile)
            record["modified"] = note.modified
            record["version"] = note.version
            record["editedOn"] = note.editedOn
            do {
                let saved = try await database.save(record)
                note.needsPush = false
                note.systemFields = saved.encodeSystemFields()
                state.note = note
                return try saveState()
            } catch let error as CloudError where error.code == .zoneNotFound {
                // The zone is created on the first save, as in the seed.
                try await database.save(RecordZone(zoneID: Self.zoneID))
            } catch let error as CloudError where error.code == .serverRecordChanged {
                guard let server = error.serverRecord else { throw error }
                let theirs = try read(server)
                guard note.modified > theirs.modified else {
                    // The server's edit is newer: it wins, and this device takes it.
                    state.note = theirs
                    return try saveState()
                }
                // This edit is newer: write it over the server's version, based on that version.
                record = server
            }
        }
    }

    // MARK: Fetching

    /// Applies the zone's changes since the stored token.
    private func fetch() async throws {
        while true {
            let changes: RecordZoneChanges
            do {
                changes = try await database.recordZoneChanges(inZoneWith: Self.zoneID, since: state.changeToken)
            } catch let error as CloudError where error.code == .zoneNotFound {
                return  // Nobody has written a note yet.
            } catch let error as CloudError where error.code == .changeTokenExpired {
                state.changeToken = nil
                continue
            }
            if let result = changes.modificationResultsByID[Self.recordID] {
                let fetched = try read(try result.get())
                if state.note?.needsPush != true { state.note = fetched }
            }
            if changes.deletions.contains(where: { $0.recordID == Self.recordID }), state.note?.needsPush != true {
                state.note = nil
            }
            state.changeToken = changes.changeToken
            try saveState()
            if !changes.moreComing { return }
        }
    }

    /// The note a record holds; refuses one written by a newer app.
    private func read(_ record: Record) throws -> LocalNote {
        let version = record["version", as: Int.self] ?? 1
        guard version <= appVersion else { throw Failure.newerVersion(version) }
        guard let asset = record["text"] as? Asset, let file = asset.fileURL else {
            throw CloudError(.assetNotAvailable, "the note's text could not be downloaded")
        }
        return LocalNote(
            text: try String(contentsOf: file, encoding: .utf8),
            modified: record["modified"] as? Date ?? record.modificationDate ?? Date(timeIntervalSince1970: 0),
            version: version, editedOn: record["editedOn"] as? String, needsPush: false,
            systemFields: record.encodeSystemFields())
    }

    private func saveState() throws {
        try files.write(state, to: files.stateFile)
    }
}
