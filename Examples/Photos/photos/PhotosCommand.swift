import ArgumentParser
import ExampleCommands
import ExampleSupport
import Foundation
import PhotosCore
import Stratus

@main
struct PhotosCommand: AsyncParsableCommand {
    /// Errors print as plain sentences (`runPrintingPlainErrors()`).
    static func main() async { await runPrintingPlainErrors() }

    static let configuration = CommandConfiguration(
        commandName: "photos",
        abstract: "Seed 003's photo-sharing app on Stratus: albums of photos with tags, shared with other users.",
        discussion: """
            Each state directory (--state) is one device. Set it up once with 'signup' or 'signin'. 'add' puts a \
            photo in an album of yours; 'share' shares an album by invitation (--invite USER:read-only|read-write, \
            USER as 'whoami' prints it) or by link (--public read-only|read-write) and prints its URL; the other \
            user runs 'accept URL'. Both may 'tag' photos; duplicate tags are removed on the owner's device, the \
            smallest UUID winning everywhere. 'leave' (a participant) and 'stop-sharing' (the owner) end a share.
            """,
        subcommands: [
            SignUp.self, SignIn.self, WhoAmI.self, List.self, Add.self, TagPhoto.self, ShareAlbum.self, Accept.self,
            Leave.self, StopSharing.self,
        ])
}

/// The device's state directory, common to every command.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The state directory of this device.")
    var state: String = "./photos-state"

    var directory: URL { URL(fileURLWithPath: state, isDirectory: true) }

    func store() async throws -> PhotosStore {
        try await openDevice { try await PhotosStore(stateDirectory: directory) }
    }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account and make this state directory a device of it.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await PhotosStore.signUp(try account.account(stateDirectory: device.directory))
        say("Signed up as \(account.name).")
    }
}

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin", abstract: "Sign in, make this state directory a device of the account, and sync.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var account: AccountOptions

    func run() async throws {
        try await PhotosStore.signIn(try account.account(stateDirectory: device.directory))
        say("Signed in as \(account.name).")
        try await report(try await device.store())
    }
}

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami", abstract: "Print the signed-in user's record name, by which others invite them.")

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        say(try await device.store().container.userRecordID().recordName)
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sync, then list the albums, their photos and tags.")

    @OptionGroup var device: DeviceOptions

    func run() async throws { try await report(try await device.store()) }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a photo from an image file to an album of yours.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The album (created when new).")
    var album: String

    @Argument(help: "The image file.")
    var file: String

    @Option(help: "The photo's caption (the file's name by default).")
    var caption: String?

    func run() async throws {
        let url = URL(fileURLWithPath: file)
        guard FileManager.default.fileExists(atPath: url.path) else { throw ValidationError("there is no file \(file)") }
        let store = try await device.store()
        let photo = try await store.addPhoto(album: album, file: url, caption: caption ?? url.lastPathComponent)
        say("added \(photo.id) \(photo.caption)")
        try await report(store)
    }
}

struct TagPhoto: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag", abstract: "Tag a photo.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The photo's ID, as 'list' shows it.")
    var photo: String

    @Argument(help: "The tag.")
    var name: String

    func run() async throws {
        let store = try await device.store()
        guard let photo = await store.photo(photo) else { throw ValidationError("there is no photo \(photo) on this device") }
        try await store.tag(photo, name)
        try await report(store)
    }
}

struct ShareAlbum: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share", abstract: "Share an album of yours and print its URL for the people it is for.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The album.")
    var album: String

    @Option(help: "Let anyone with the URL join: read-only or read-write.")
    var `public`: String?

    @Option(help: "Invite a user: RECORDNAME:read-only or RECORDNAME:read-write (repeat for more).")
    var invite: [String] = []

    static func permission(_ text: String) throws -> Share.ParticipantPermission {
        switch text {
        case "read-only": .readOnly
        case "read-write": .readWrite
        default: throw ValidationError("'\(text)' is not a permission: read-only or read-write")
        }
    }

    func run() async throws {
        let invitees = try invite.map { item -> (userRecordName: String, permission: Share.ParticipantPermission) in
            let parts = item.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--invite takes RECORDNAME:PERMISSION, not '\(item)'") }
            return (parts[0], try Self.permission(parts[1]))
        }
        let store = try await device.store()
        let url = try await store.share(
            album: album, publicPermission: try self.public.map(Self.permission) ?? .none, invitees: invitees)
        say(url.absoluteString)
    }
}

struct Accept: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Accept a share from its URL; its album arrives here.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The share's URL.")
    var url: String

    func run() async throws {
        guard let url = URL(string: url) else { throw ValidationError("'\(url)' is not a URL") }
        let store = try await device.store()
        let album = try await store.accept(url)
        say("accepted \(album.zoneName) from \(album.ownerName)")
        try await report(store)
    }
}

struct Leave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Leave an album shared with you; it leaves this device.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The album.")
    var album: String

    func run() async throws {
        let store = try await device.store()
        guard let zone = await store.album(named: album), zone.ownerName != RecordZone.ID.currentUserOwnerName else {
            throw ValidationError("no album '\(album)' is shared with you on this device")
        }
        try await store.stopSharing(zone)
        try await report(store)
    }
}

struct StopSharing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop-sharing", abstract: "Stop sharing an album of yours; it leaves the participants' devices.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The album.")
    var album: String

    func run() async throws {
        let store = try await device.store()
        try await store.stopSharing(RecordZone.ID(zoneName: album))
        try await report(store)
    }
}

/// Syncs, then prints the albums, photos and tags.
func report(_ store: PhotosStore) async throws {
    let synced = try await store.sync()
    let albums = await store.albums
    if albums.isEmpty { say("(no albums yet: add a photo with 'photos add ALBUM FILE')") }
    for album in albums {
        let owner = album.ownerName == RecordZone.ID.currentUserOwnerName ? "yours" : "shared by \(album.ownerName)"
        say("\(album.zoneName) (\(owner))")
        for photo in await store.photos(in: album) {
            let tags = await store.tags(of: photo).map(\.name)
            say("  \(photo.id)  \(photo.caption)" + (tags.isEmpty ? "" : "  [" + tags.joined(separator: ", ") + "]"))
        }
    }
    say(synced ? "— synced" : "— the server is unreachable; edits wait on this device for the next sync")
}
