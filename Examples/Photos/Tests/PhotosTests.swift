import ExampleSupport
import Foundation
import PhotosCore
import Stratus
import StratusServer
import StratusTestSupport
import Testing

@Suite("photos example: seed 003's sharing between users")
struct PhotosTests {
    func account(_ server: TestServer, _ name: String) -> DeviceDirectory.Account {
        DeviceDirectory.Account(
            stateDirectory: server.directory.appendingPathComponent("device-\(name)"),
            serverURL: URL(string: server.baseURL)!, containerIdentifier: server.container, apiToken: server.apiToken,
            username: name, password: "correct horse")
    }

    func device(_ server: TestServer, _ name: String) async throws -> PhotosStore {
        try await PhotosStore.signUp(account(server, name))
        return try await PhotosStore(stateDirectory: account(server, name).stateDirectory)
    }

    @Test("an album shared read-write and one shared by a read-only link: accept, see the photos, tag, converge on the smallest-UUID tag, leave and stop sharing")
    func sharingAlbums() async throws {
        try await withServer { server in
            let ada = try await device(server, "ada")
            let bob = try await device(server, "bob")
            let cy = try await device(server, "cy")
            let image = server.directory.appendingPathComponent("beach.jpg")
            try Data((0..<4096).map { UInt8($0 % 251) }).write(to: image)

            // Another app of the container keeps a zone in the same database: it is no album.
            _ = try await ada.container.privateCloudDatabase.save(RecordZone(zoneName: "Contacts"))
            let beach = try await ada.addPhoto(album: "Holiday", file: image, caption: "beach")
            #expect(try await ada.sync())
            #expect(await ada.albums.map(\.zoneName) == ["Holiday"], "another app's zone is not an album")
            let bobID = try await bob.container.userRecordID().recordName
            let url = try await ada.share(album: "Holiday", invitees: [(bobID, .readWrite)])

            let holiday = try await bob.accept(url)
            #expect(holiday.zoneName == "Holiday" && holiday.ownerName != RecordZone.ID.currentUserOwnerName)
            let bobsBeach = try #require(await bob.photos(in: holiday).first)
            #expect(bobsBeach.id == beach.id && bobsBeach.caption == "beach" && bobsBeach.size == 4096)

            // Both tag the photo "sunset" before either syncs: a duplicate, which the owner's device
            // removes, keeping the smallest UUID, and every device converges on it.
            let adasTag = try await ada.tag(beach, "sunset")
            let bobsTag = try await bob.tag(bobsBeach, "sunset")
            #expect(try await bob.sync())
            #expect(try await ada.sync())
            #expect(try await bob.sync())
            let winner = min(adasTag.id, bobsTag.id)
            #expect(await ada.tags(of: beach).map(\.id) == [winner])
            #expect(await bob.tags(of: bobsBeach).map(\.id) == [winner])
            try await bob.tag(bobsBeach, "sea")
            #expect(try await bob.sync())
            #expect(try await ada.sync())
            #expect(await ada.tags(of: beach).map(\.name) == ["sea", "sunset"])

            // A public link, read-only: cy joins and sees the photo, but cannot tag it.
            let street = try await ada.addPhoto(album: "Street", file: image, caption: "market")
            let link = try await ada.share(album: "Street", publicPermission: .readOnly)
            let streetAlbum = try await cy.accept(link)
            let cysMarket = try #require(await cy.photos(in: streetAlbum).first)
            #expect(cysMarket.id == street.id)
            let refusedTag = await #expect(throws: CloudError.self, "refused before it is written") { try await cy.tag(cysMarket, "mine") }
            #expect(refusedTag?.code == .permissionFailure)
            #expect(try await cy.sync())
            #expect(await cy.tags(of: cysMarket).isEmpty)
            #expect(try await ada.sync())
            #expect(await ada.tags(of: street).isEmpty)

            // bob leaves; ada stops sharing the other album: each album leaves the participant's device.
            try await bob.stopSharing(holiday)
            #expect(await bob.albums.isEmpty)
            try await ada.stopSharing(RecordZone.ID(zoneName: "Street"))
            #expect(try await cy.sync())
            #expect(await cy.albums.isEmpty)
            #expect(await ada.albums.map(\.zoneName) == ["Holiday", "Street"], "the owner keeps the albums")
        }
    }
}
