import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// What clients written against Apple's servers send, as observed with Apple's web library (1.x and
/// 2.x) and third-party Swift and Python clients run unmodified: answers in the shapes they read,
/// and the allowances Apple makes for what they carry.
@Suite("CloudKit wire: what real clients send")
struct ClientAllowanceTests {
    @Test("a subscription delete answers deleted: true, as record and zone deletes do; subscriptions/lookup takes bare ID strings")
    func subscriptionShapes() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Notes", user: user)
            let created = try await server.database(
                "private", "subscriptions/modify",
                ["operations": [["operationType": "create", "subscription": [
                    "subscriptionID": "notes", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]]]]],
                user: user)
            #expect(created.status == 200, "\(created.text)")
            let looked = try await server.database("private", "subscriptions/lookup", ["subscriptions": ["notes"]], user: user)
            let found = looked.body["subscriptions"] as? [[String: Any]]
            #expect(found?.first?["subscriptionID"] as? String == "notes" && found?.first?["serverErrorCode"] == nil, "\(looked.text)")
            let deleted = try await server.database(
                "private", "subscriptions/modify",
                ["operations": [["operationType": "delete", "subscription": ["subscriptionID": "notes"]]]], user: user)
            let item = (deleted.body["subscriptions"] as? [[String: Any]])?.first
            #expect(item?["subscriptionID"] as? String == "notes" && item?["deleted"] as? Bool == true, "\(deleted.text)")
        }
    }

    @Test("users/lookup/contacts answers GET as Apple's web library 1.x sends it, and the user lookups answer on the private database too")
    func userLookups() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            for method in [HTTPMethod.GET, .POST] {
                let contacts = try await server.database("public", "users/lookup/contacts", method == .POST ? [:] : nil, user: user, method: method)
                #expect(contacts.status == 200 && (contacts.body["users"] as? [Any])?.isEmpty == true, "\(method): \(contacts.text)")
            }
            for database in ["private", "shared", "public"] {
                let byID = try await server.database(
                    database, "users/lookup/id", ["users": [["userRecordName": "_nobody"]]], user: user)
                #expect(byID.status == 200, "\(database): \(byID.text)")
            }
        }
    }

    @Test("a download ticket needs no escaping in a URL: a client that escapes the downloadURL again still downloads; a ticket in the earlier standard base64 still opens")
    func ticketsSurviveEscaping() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            let uploaded = try await AssetUploadTests.post(
                try await AssetUploadTests.uploadURL(server, user: user), Array("bytes of a photo".utf8), contentType: nil)
            let asset = try #require(uploaded.json["singleFile"] as? [String: Any])
            let saved = try await server.database(
                "private", "records/modify",
                ["zoneID": ["zoneName": "Z"], "operations": [["operationType": "create", "record": [
                    "recordType": "Photo", "recordName": "p", "fields": ["image": ["value": asset, "type": "ASSETID"]]]]]],
                user: user)
            let field = (saved.records.first?["fields"] as? [String: Any])?["image"] as? [String: Any]
            let url = try #require((field?["value"] as? [String: Any])?["downloadURL"] as? String, "\(saved.text)")
                .replacingOccurrences(of: "${f}", with: "photo.jpg")
            let ticket = try #require(URLComponents(string: url)?.queryItems?.first { $0.name == "ticket" }?.value)
            #expect(ticket.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "base64url without padding: \(ticket)")
            // What a client that percent-escapes the URL once more sends.
            let escaped = url.replacingOccurrences(of: "ticket=" + ticket, with: "ticket=" + (ticket.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ticket))
            #expect(try await AssetDownloadTests.get(escaped).status == 200)
            var standard = ticket.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while standard.count % 4 != 0 { standard += "=" }
            let earlier = url.replacingOccurrences(
                of: "ticket=" + ticket, with: "ticket=" + (standard.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? standard))
            #expect(try await AssetDownloadTests.get(earlier).status == 200)
        }
    }

    @Test("a body-less request signed with a server-to-server key over an empty body hash (date::subpath) is accepted, as over the hash of no bytes")
    func emptyBodyHash() async throws {
        try await ServerToServerKeyTests.withKeyServer { server, clock in
            let key = P256.Signing.PrivateKey()
            let (keyID, userRecordName) = try await ServerToServerKeyTests.register(key.publicKey.pemRepresentation, on: server)
            let subpath = ServerToServerKeyTests.path(server, "users/caller")
            let date = ServerToServerKeyTests.isoDate(clock.milliseconds)
            let emptyHash = Data(SHA256.hash(data: Data())).base64EncodedString()
            for message in ["\(date)::\(subpath)", "\(date):\(emptyHash):\(subpath)"] {
                var request = HTTPClientRequest(url: server.baseURL + subpath)
                request.headers.add(name: "X-Apple-CloudKit-Request-KeyID", value: keyID)
                request.headers.add(name: "X-Apple-CloudKit-Request-ISO8601Date", value: date)
                request.headers.add(
                    name: "X-Apple-CloudKit-Request-SignatureV1",
                    value: try key.signature(for: Data(message.utf8)).derRepresentation.base64EncodedString())
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
                #expect(response.status == .ok && text.contains(userRecordName), "\(message): \(text)")
            }
            // A body's signature still covers the body: the empty-hash form is not a way around it.
            let forged = try await ServerToServerKeyTests.send(
                server, ServerToServerKeyTests.path(server, "records/modify"), body: ServerToServerKeyTests.createNote, keyID: keyID,
                date: date, signature: try key.signature(for: Data("\(date)::\(ServerToServerKeyTests.path(server, "records/modify"))".utf8))
                    .derRepresentation.base64EncodedString())
            #expect(forged.status == 401, "\(forged.text)")
        }
    }
}
