public import ExampleSupport
public import Foundation
public import Stratus
public import StratusSync

/// The photo-sharing app of seed 003 (Apple's "Sharing Core Data objects between iCloud users"), on
/// Stratus: albums of photos with tags, shared with other users.
///
/// - An album is a custom zone of its owner's private database; its photos (`Photo`, with the image
///   as an asset) and tags (`Tag`: a name and the photo it tags) are records there.
/// - The owner shares an album whole (a zone-wide ``Share``), by invitation or by a public link;
///   a participant accepts it and finds the album in their shared database. Two ``SyncEngine``s
///   keep the device in step: one on the private database, one on the shared one.
/// - Tags are deduplicated as the seed says: two tags with the same name on the same photo are
///   duplicates, and the one with the smallest UUID wins on every device. Only the owner's device
///   removes the losers, since participants may not be allowed to write.
/// - When a participant leaves or the owner stops sharing, the album disappears from the
///   participant's device.
public actor PhotosStore: SyncEngineDelegate {
    /// A photo.
    public struct Photo: Codable, Hashable, Sendable {
        /// The photo's record name.
        public var id: String
        /// Its album.
        public var album: RecordZone.ID
        /// Its caption.
        public var caption: String
        /// The image's size in bytes, once known.
        public var size: Int64?
    }

    /// A tag on a photo.
    public struct Tag: Codable, Hashable, Sendable {
        /// The tag's record name: a lowercased UUID, which decides which duplicate wins.
        public var id: String
        /// Its album.
        public var album: RecordZone.ID
        /// The tagged photo's record name.
        public var photo: String
        /// The tag's text.
        public var name: String
    }

    /// What the device keeps in `photos.json`.
    struct AppData: Codable {
        var albums: Set<RecordZone.ID> = []
        var photos: [Record.ID: Photo] = [:]
        var tags: [Record.ID: Tag] = [:]
        /// Image files to upload, by photo.
        var files: [Record.ID: String] = [:]
        var systemFields: [Record.ID: Data] = [:]
        var privateState: SyncEngine.State.Serialization?
        var sharedState: SyncEngine.State.Serialization?
    }

    static let photoType = "Photo"
    static let tagType = "Tag"

    let directory: DeviceDirectory
    /// This process's claim on the device's directory, held as long as the device is open.
    private let lock: DeviceLock
    /// The container the device syncs with.
    public let container: Container
    private var data: AppData
    /// The edits the server refused during the sync running, which it throws.
    private var refusals: [CloudError] = []
    private var privateEngine: SyncEngine!
    private var sharedEngine: SyncEngine!

    /// The device whose state is in `stateDirectory`, set up by ``signUp(_:)`` or ``signIn(_:)``.
    public init(stateDirectory: URL) async throws {
        directory = DeviceDirectory(stateDirectory)
        // Claimed before anything is read: another process's last write lands before, or not at all.
        lock = try directory.claim(app: "photos")
        container = try directory.device(app: "photos").container
        data = try directory.read(AppData.self, from: "photos.json") ?? AppData()
        privateEngine = try SyncEngine(
            SyncEngine.Configuration(
                database: container.privateCloudDatabase, stateSerialization: data.privateState, delegate: self,
                automaticallySync: false, journalURL: directory.file("private-journal")))
        sharedEngine = try SyncEngine(
            SyncEngine.Configuration(
                database: container.sharedCloudDatabase, stateSerialization: data.sharedState, delegate: self,
                automaticallySync: false, journalURL: directory.file("shared-journal")))
    }

    /// Creates the account and sets `account`'s state directory up as a device of it.
    public static func signUp(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "photos", .signUp)
    }

    /// Signs in and sets `account`'s state directory up as a device of it.
    public static func signIn(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "photos", .signIn)
    }

    // MARK: - Reading

    /// The albums on this device: the user's own, then those shared with them.
    public var albums: [RecordZone.ID] {
        func key(_ album: RecordZone.ID) -> (Int, String, String) {
            (album.ownerName == RecordZone.ID.currentUserOwnerName ? 0 : 1, album.zoneName, album.ownerName)
        }
        return data.albums.sorted { key($0) < key($1) }
    }

    /// The photos of an album, by caption.
    public func photos(in album: RecordZone.ID) -> [Photo] {
        data.photos.values.filter { $0.album == album }.sorted { ($0.caption, $0.id) < ($1.caption, $1.id) }
    }

    /// The tags of a photo, by name.
    public func tags(of photo: Photo) -> [Tag] {
        data.tags.values.filter { $0.album == photo.album && $0.photo == photo.id }.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    /// The album a name means on this device: the user's own album of that name, else the one
    /// shared with them.
    public func album(named name: String) -> RecordZone.ID? {
        albums.first { $0.zoneName == name }
    }

    /// The photo with this ID, in any album.
    public func photo(_ id: String) -> Photo? { data.photos.values.first { $0.id == id } }

    // MARK: - Editing

    /// Adds a photo from an image file to the user's album `album` (created when new).
    @discardableResult
    public func addPhoto(album: String, file: URL, caption: String) throws -> Photo {
        let zoneID = RecordZone.ID(zoneName: album)
        if !data.albums.contains(zoneID) {
            privateEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
            data.albums.insert(zoneID)
        }
        let photo = Photo(id: UUID().uuidString.lowercased(), album: zoneID, caption: caption)
        let recordID = Record.ID(recordName: photo.id, zoneID: zoneID)
        privateEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
        data.photos[recordID] = photo
        data.files[recordID] = file.path
        try saveData()
        return photo
    }

    /// Tags a photo (in the user's album or one shared with them).
    @discardableResult
    ///
    /// - Throws: `permissionFailure`, before anything is written, in an album shared with the user
    ///   read-only (as its share was last fetched): the server would refuse the tag.
    public func tag(_ photo: Photo, _ name: String) throws -> Tag {
        let engine = engine(for: photo.album)
        if let permission = engine.state.sharePermission(in: photo.album), permission != .readWrite {
            throw CloudError(
                .permissionFailure, "album '\(photo.album.zoneName)' is shared with you read-only: its photos cannot be tagged here")
        }
        let tag = Tag(id: UUID().uuidString.lowercased(), album: photo.album, photo: photo.id, name: name)
        let recordID = Record.ID(recordName: tag.id, zoneID: photo.album)
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
        data.tags[recordID] = tag
        try saveData()
        return tag
    }

    // MARK: - Sharing

    /// Shares the user's album: with `invitees` (user record names, each with a permission), or
    /// with anyone who has the link when `publicPermission` is not `.none`. Returns the share's URL.
    public func share(
        album: String, publicPermission: Share.ParticipantPermission = .none,
        invitees: [(userRecordName: String, permission: Share.ParticipantPermission)] = []
    ) async throws -> URL {
        let zoneID = RecordZone.ID(zoneName: album)
        guard data.albums.contains(zoneID) else { throw Self.unknownAlbum(album) }
        _ = try await sync()
        let shareID = Record.ID(recordName: "cloudkit.zoneshare", zoneID: zoneID)
        var share: Share
        do {
            share = Share(try await container.privateCloudDatabase.record(for: shareID)) ?? Share(recordZoneID: zoneID)
        } catch let error as CloudError where error.code == .unknownItem {
            share = Share(recordZoneID: zoneID)
        }
        share.title = album
        share.publicPermission = publicPermission
        for invitee in invitees {
            share.addParticipant(
                Share.Participant(
                    lookupInfo: .init(userRecordID: Record.ID(recordName: invitee.userRecordName)),
                    permission: invitee.permission))
        }
        share = try await container.privateCloudDatabase.save(share)
        guard let url = share.url else { throw CloudError(.serverRejectedRequest, "the server gave the share no URL") }
        return url
    }

    /// Accepts the share behind `url`; its album arrives at the next sync. Returns the album.
    @discardableResult
    public func accept(_ url: URL) async throws -> RecordZone.ID {
        let metadata = try await container.shareMetadata(for: url)
        try await container.accept(metadata)
        _ = try await sync()
        return metadata.share.recordID.zoneID
    }

    /// Leaves an album shared with the user, or stops sharing the user's own album. The album
    /// leaves the participants' devices at their next sync.
    public func stopSharing(_ album: RecordZone.ID) async throws {
        let shareID = Record.ID(recordName: "cloudkit.zoneshare", zoneID: album)
        let database = album.ownerName == RecordZone.ID.currentUserOwnerName
            ? container.privateCloudDatabase : container.sharedCloudDatabase
        _ = try await database.deleteRecord(withID: shareID)
        if database.databaseScope == .shared { forget(album) }
        try saveData()
        _ = try await sync()
    }

    // MARK: - Syncing

    /// Sends the waiting edits and fetches the others', in both databases; on the owner's side,
    /// removes duplicate tags and sends that too.
    public func sync() async throws -> Bool {
        refusals = []
        defer { refusals = [] }
        do {
            for engine in [privateEngine!, sharedEngine!] {
                do {
                    try await engine.sendChanges()
                } catch let error as CloudError where error.code == .partialFailure {
                    // Each failure was reported as an event and handled there.
                }
                try await engine.fetchChanges()
            }
            if deduplicateTags() {
                try? await privateEngine.sendChanges()
            }
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return false
        }
        if let refusal = refusals.first { throw refusal }
        return true
    }

    /// Seed 003's rule, on the owner's side: of the tags with the same name on the same photo, the
    /// one with the smallest UUID stays and the others are deleted. Returns whether any went.
    private func deduplicateTags() -> Bool {
        var groups: [[String]: [Record.ID]] = [:]
        for (id, tag) in data.tags where tag.album.ownerName == RecordZone.ID.currentUserOwnerName {
            groups[[tag.album.zoneName, tag.photo, tag.name], default: []].append(id)
        }
        var removed = false
        for ids in groups.values where ids.count > 1 {
            for loser in ids.sorted(by: { $0.recordName < $1.recordName }).dropFirst() {
                privateEngine.state.add(pendingRecordZoneChanges: [.deleteRecord(loser)])
                data.tags[loser] = nil
                data.systemFields[loser] = nil
                removed = true
            }
        }
        if removed { persist() }
        return removed
    }

    // MARK: - SyncEngineDelegate

    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            if syncEngine.database.databaseScope == .shared {
                data.sharedState = update.stateSerialization
            } else {
                data.privateState = update.stateSerialization
            }
        case .fetchedDatabaseChanges(let changes):
            // A zone is an album once a photo or tag of it arrives (`apply`): other apps of the
            // container keep zones of their own in the same database.
            for deletion in changes.deletions { forget(deletion.zoneID) }
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications { apply(modification.record) }
            for deletion in changes.deletions {
                data.photos[deletion.recordID] = nil
                data.tags[deletion.recordID] = nil
                data.systemFields[deletion.recordID] = nil
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                data.systemFields[record.recordID] = record.encodeSystemFields()
                data.files[record.recordID] = nil
            }
            for failure in sent.failedRecordSaves {
                let recordID = failure.record.recordID
                switch failure.error.code {
                case .serverRecordChanged:
                    if let server = failure.error.serverRecord { apply(server) }
                case .permissionFailure, .zoneNotFound:
                    // Not allowed here (a read-only album), or the album is gone: the tag goes, and
                    // the sync says so.
                    syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
                    let name = data.tags.removeValue(forKey: recordID)?.name ?? recordID.recordName
                    refusals.append(CloudError(failure.error.code, "the tag '\(name)' was refused and removed: \(failure.error.message)"))
                default:
                    break
                }
            }
        default:
            break
        }
        persist()
    }

    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            await self.recordToSave(recordID)
        }
    }

    private func recordToSave(_ recordID: Record.ID) -> Record? {
        let base = data.systemFields[recordID].flatMap { try? Record(systemFieldsData: $0) }
        if let photo = data.photos[recordID] {
            var record = base ?? Record(recordType: Self.photoType, recordID: recordID)
            record["caption"] = photo.caption
            if let file = data.files[recordID] { record["image"] = Asset(fileURL: URL(fileURLWithPath: file)) }
            return record
        }
        if let tag = data.tags[recordID] {
            var record = base ?? Record(recordType: Self.tagType, recordID: recordID)
            record["name"] = tag.name
            record["photo"] = Reference(recordID: Record.ID(recordName: tag.photo, zoneID: recordID.zoneID), action: .deleteSelf)
            return record
        }
        engine(for: recordID.zoneID).state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
        return nil
    }

    /// Takes a record the server sent into the device's data.
    private func apply(_ record: Record) {
        let id = record.recordID
        switch record.recordType {
        case Self.photoType:
            data.photos[id] = Photo(
                id: id.recordName, album: id.zoneID, caption: record["caption", as: String.self] ?? "",
                size: (record["image"] as? Asset)?.size)
        case Self.tagType:
            guard let name = record["name", as: String.self], let photo = record["photo"] as? Reference else { return }
            data.tags[id] = Tag(id: id.recordName, album: id.zoneID, photo: photo.recordID.recordName, name: name)
        default:
            return
        }
        data.albums.insert(id.zoneID)
        data.systemFields[id] = record.encodeSystemFields()
    }

    /// Removes an album and everything in it from the device.
    private func forget(_ album: RecordZone.ID) {
        data.albums.remove(album)
        for id in data.photos.keys where id.zoneID == album { data.photos[id] = nil }
        for id in data.tags.keys where id.zoneID == album { data.tags[id] = nil }
        for id in data.systemFields.keys where id.zoneID == album { data.systemFields[id] = nil }
    }

    private func engine(for album: RecordZone.ID) -> SyncEngine {
        album.ownerName == RecordZone.ID.currentUserOwnerName ? privateEngine : sharedEngine
    }

    static func unknownAlbum(_ name: String) -> CloudError {
        CloudError(.unknownItem, "there is no album '\(name)' of yours on this device; 'photos add' creates one")
    }

    private func saveData() throws {
        try directory.write(data, to: "photos.json")
    }

    private func persist() {
        try? saveData()
    }
}
