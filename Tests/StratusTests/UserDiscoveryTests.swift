import Foundation
import NIOHTTP1
import Stratus
import StratusServer
import StratusTestSupport
import Testing

@Suite("SDK and server: finding people to share with")
struct UserDiscoveryTests {
    /// Records `address` for `recordName` through the admin API.
    static func setEmailAddress(_ address: String?, of recordName: String, on server: TestServer) async throws
        -> TestServer.Reply
    {
        try await server.request(
            .PATCH, "/admin/1/containers/\(server.container)/users/\(recordName)",
            body: ["emailAddress": address as Any? ?? NSNull()],
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
    }

    @Test("only users who made themselves discoverable are found, by e-mail address or record ID; anyone else is answered like nobody")
    func discoverableOnly() async throws {
        try await withServer { server in
            let ada = try await server.signedInContainer("ada")
            let bob = try await server.signedInContainer("bob")
            let cy = try await server.signedInContainer("cy")
            let bobID = try await bob.userRecordID()
            let cyID = try await cy.userRecordID()
            #expect(try await Self.setEmailAddress("Bob@Example.com", of: bobID.recordName, on: server).status == 200)
            #expect(try await Self.setEmailAddress("cy@example.com", of: cyID.recordName, on: server).status == 200)

            // Nobody is discoverable until they say so.
            #expect(try await bob.isDiscoverable() == false)
            #expect(try await ada.discoverUserIdentity(emailAddress: "bob@example.com") == nil)
            try await bob.setDiscoverable(true, givenName: "Bob", familyName: "Builder")
            #expect(try await bob.isDiscoverable())

            let byAddress = try #require(try await ada.discoverUserIdentity(emailAddress: "BOB@example.com"))
            #expect(byAddress.userRecordID == bobID)
            #expect(byAddress.givenName == "Bob" && byAddress.familyName == "Builder")
            #expect(byAddress.lookupInfo?.emailAddress == "BOB@example.com", "the identity carries the lookup it answers")
            #expect(try await ada.discoverUserIdentity(userRecordID: bobID)?.userRecordID == bobID)
            let several = try await ada.discoverUserIdentities([
                .init(emailAddress: "cy@example.com"), .init(emailAddress: "nobody@example.com"), .init(userRecordID: bobID),
                .init(userRecordID: cyID),
            ])
            #expect(several.map(\.userRecordID) == [bobID], "cy is not discoverable, nobody does not exist")

            // On the wire, an undiscoverable account and a missing one get the same answer.
            let ann = try await server.signUp("ann").token
            let hidden = try await server.database("public", "users/lookup/email", ["users": [["emailAddress": "cy@example.com"]]], user: ann)
            let missing = try await server.database("public", "users/lookup/email", ["users": [["emailAddress": "no@example.com"]]], user: ann)
            #expect(hidden.status == 200 && missing.status == 200)
            #expect(hidden.text == missing.text && hidden.text == #"{"users":[]}"#)
            let hiddenByID = try await server.database("public", "users/lookup/id", ["users": [["userRecordName": cyID.recordName]]], user: ann)
            #expect(hiddenByID.text == #"{"users":[]}"#)

            // The older shapes: e-mail address only in answers to lookups by e-mail.
            let byEmail = try await server.database(
                "public", "users/lookup/email", ["users": [["emailAddress": "bob@example.com"]]], user: ann)
            let user = try #require((byEmail.body["users"] as? [[String: Any]])?.first)
            #expect(user["userRecordName"] as? String == bobID.recordName)
            #expect(user["firstName"] as? String == "Bob" && user["lastName"] as? String == "Builder")
            #expect(user["emailAddress"] as? String == "bob@example.com")
            let byID = try await server.database(
                "public", "users/lookup/id", ["users": [["userRecordName": bobID.recordName]]], user: ann)
            let userByID = try #require((byID.body["users"] as? [[String: Any]])?.first)
            #expect(userByID["userRecordName"] as? String == bobID.recordName && userByID["emailAddress"] == nil)

            // Without an address book there is nobody to list.
            let all = try await server.database("public", "users/discover", user: ann)
            #expect(all.status == 200 && all.text == #"{"users":[]}"#)
            let contacts = try await server.database("public", "users/lookup/contacts", [String: Any](), user: ann)
            #expect(contacts.status == 200 && contacts.text == #"{"users":[]}"#, "\(contacts.text)")
            let contactsAnonymous = try await server.database("public", "users/lookup/contacts", [String: Any]())
            #expect(contactsAnonymous.status == 421, "\(contactsAnonymous.text)")

            // Turning it off hides the user again.
            try await bob.setDiscoverable(false)
            #expect(try await ada.discoverUserIdentity(emailAddress: "bob@example.com") == nil)
            #expect(try await ada.discoverUserIdentity(userRecordID: bobID) == nil)
        }
    }

    @Test("finding people needs a signed-in user on the public database, bounded input, and addresses only an administrator records, each held by one user")
    func rules() async throws {
        try await withServer { server in
            let (ann, annName) = try await server.signUp("ann")
            let (_, bobName) = try await server.signUp("bob")
            let lookup = ["lookupInfos": [["emailAddress": "bob@example.com"]]]

            let anonymous = try await server.database("public", "users/discover", lookup)
            #expect(anonymous.status == 421 && anonymous.code == "AUTHENTICATION_REQUIRED", "\(anonymous.text)")
            // Documented on the public database; served on the others too, as Apple's servers answer clients that send them there.
            let inPrivate = try await server.database("private", "users/discover", lookup, user: ann)
            let inPublic = try await server.database("public", "users/discover", lookup, user: ann)
            #expect(inPrivate.status == 200 && inPrivate.text == inPublic.text, "\(inPrivate.text)")
            let empty = try await server.database("public", "users/discover", ["lookupInfos": [[String: String]()]], user: ann)
            #expect(empty.status == 400 && empty.reason.contains("lookupInfos[0]"), "\(empty.text)")
            let tooMany = try await server.database(
                "public", "users/discover",
                ["lookupInfos": (0..<201).map { ["emailAddress": "u\($0)@example.com"] }], user: ann)
            #expect(tooMany.status == 400 && tooMany.reason.contains("limit"), "\(tooMany.text)")
            let wrongKey = try await server.database(
                "public", "users/lookup/email", ["users": [["userRecordName": bobName]]], user: ann)
            #expect(wrongKey.status == 400 && wrongKey.reason.contains("users[0].emailAddress"), "\(wrongKey.text)")

            // The user names their own discoverability, never their address.
            let settings = try await server.database("public", "users/discoverability", ["discoverable": true], user: ann)
            #expect(settings.status == 200 && settings.body["discoverable"] as? Bool == true, "\(settings.text)")
            let longName = try await server.database(
                "public", "users/discoverability",
                ["discoverable": true, "nameComponents": ["givenName": String(repeating: "a", count: 101)]], user: ann)
            #expect(longName.status == 400 && longName.reason.contains("nameComponents.givenName"), "\(longName.text)")

            #expect(try await Self.setEmailAddress("bob@example.com", of: bobName, on: server).status == 200)
            let taken = try await Self.setEmailAddress("BOB@example.com", of: annName, on: server)
            #expect(taken.status == 409 && taken.code == "EXISTS", "\(taken.text)")
            let malformed = try await Self.setEmailAddress("not an address", of: annName, on: server)
            #expect(malformed.status == 400 && malformed.reason.contains("emailAddress"), "\(malformed.text)")
            let noUser = try await Self.setEmailAddress("x@example.com", of: "_00000000000000000000000000000000", on: server)
            #expect(noUser.status == 404, "\(noUser.text)")
            let cleared = try await Self.setEmailAddress(nil, of: bobName, on: server)
            #expect(cleared.status == 200)
            #expect(try await Self.setEmailAddress("bob@example.com", of: annName, on: server).status == 200, "a cleared address is free")
            let unauthorized = try await server.request(
                .PATCH, "/admin/1/containers/\(server.container)/users/\(annName)", body: ["emailAddress": "a@example.com"])
            #expect(unauthorized.status == 401)
        }
    }
}
