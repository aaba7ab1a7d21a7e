import Foundation
import StratusTestSupport
import Testing

/// Shares rooted at a record over CloudKit Web Services: the records below the root through
/// `parent` are shared, and only those, with an owner, a read-write participant, a read-only one
/// and someone never invited.
@Suite("CloudKit wire: sharing a hierarchy of records")
struct HierarchicalSharingTests {
    static func child(_ name: String, of parent: String?, type: String = "Photo", caption: String = "") -> [String: Any] {
        var record: [String: Any] = [
            "recordName": name, "recordType": type, "fields": ["caption": ["value": caption.isEmpty ? name : caption]],
        ]
        if let parent { record["parent"] = ["recordName": parent] }
        return ["operationType": "create", "record": record]
    }

    static func share(_ name: String, root: String, participants: [[String: Any]]) -> [String: Any] {
        [
            "operationType": "create",
            "record": [
                "recordName": name, "recordType": "cloudkit.share",
                "fields": ["cloudkit.title": ["value": "Trip", "type": "STRING"]],
                "forRecord": ["recordName": root], "publicPermission": "NONE", "participants": participants,
            ] as [String: Any],
        ]
    }

    /// The names in a list of records (or errors), with a deletion marked `-`.
    static func names(_ records: [[String: Any]]) -> [String] {
        records.compactMap { record in
            guard record["serverErrorCode"] == nil, let name = record["recordName"] as? String else { return nil }
            return (record["deleted"] as? Bool == true ? "-" : "") + name
        }.sorted()
    }

    /// Reads a zone's changes in the shared database from `token`.
    static func sharedFeed(
        _ zone: [String: Any], user: String, token: String? = nil, on server: TestServer
    ) async throws -> (records: [[String: Any]], token: String) {
        var body: [String: Any] = ["zoneID": zone]
        if let token { body["syncToken"] = token }
        let reply = try await server.database("shared", "records/changes", body, user: user)
        try #require(reply.status == 200, "\(reply.text)")
        return (reply.records, try #require(reply.syncToken))
    }

    @Test("a share of a record reaches the records below it through parent, and only those")
    func hierarchyFlow() async throws {
        try await withServer { server in
            let people = try await SharingTests.people(on: server)
            let (ada, bob, cy, dan) = (people.owner, people.writer, people.reader, people.stranger)
            try await server.createZone("Trips", user: ada.token)
            let created = try await server.modify(
                [
                    Self.child("album", of: nil, type: "Album"), Self.child("p1", of: "album"), Self.child("p2", of: "album"),
                    Self.child("p3", of: "p1"), Self.child("loose", of: nil), Self.child("other", of: nil, type: "Album"),
                    Self.child("q1", of: "other"),
                ], zone: "Trips", user: ada.token)
            #expect(created.status == 200 && created.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(created.text)")
            #expect((created.records[1]["parent"] as? [String: Any])?["recordName"] as? String == "album")
            let tags = Dictionary(uniqueKeysWithValues: created.records.map {
                ($0["recordName"] as! String, $0["recordChangeTag"] as! String)
            })

            // The share and its root: saved by the owner, the root answers with its share.
            let saved = try await server.modify(
                [
                    Self.share(
                        "share-album", root: "album",
                        participants: [
                            SharingTests.participant(recordName: bob.recordName, permission: "READ_WRITE"),
                            SharingTests.participant(recordName: cy.recordName, permission: "READ_ONLY"),
                        ])
                ], zone: "Trips", user: ada.token)
            let share = try #require(saved.records.first)
            #expect(saved.status == 200 && share["serverErrorCode"] == nil, "\(saved.text)")
            let shortGUID = try #require(share["shortGUID"] as? String)
            let ownerView = try await server.database(
                "private", "records/lookup",
                ["zoneID": ["zoneName": "Trips"], "records": ["album", "p1", "p3"].map { ["recordName": $0] }],
                user: ada.token)
            #expect((ownerView.records[0]["share"] as? [String: Any])?["recordName"] as? String == "share-album")
            #expect(ownerView.records[1]["share"] == nil)
            // Records only placed in the share keep their change tags: no client holding them meets a conflict.
            #expect(ownerView.records.map { $0["recordChangeTag"] as? String } == ["album", "p1", "p3"].map { tags[$0] })

            let resolved = try await server.database(
                "public", "records/resolve", ["shortGUIDs": [["value": shortGUID]]], user: bob.token)
            let metadata = try #require((resolved.body["results"] as? [[String: Any]])?.first)
            #expect(metadata["rootRecordName"] as? String == "album", "\(resolved.text)")
            for user in [bob.token, cy.token] {
                let accepted = try await server.database(
                    "public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: user)
                #expect((accepted.body["results"] as? [[String: Any]])?.first?["participantStatus"] as? String == "ACCEPTED")
            }
            let trips = SharingTests.sharedZone("Trips", of: ada.recordName)
            #expect(try await server.database("shared", "zones/list", user: bob.token).zones.count == 1)

            // Participants see the hierarchy and its share, and nothing else of the zone.
            let all = ["album", "p1", "p2", "p3", "loose", "other", "q1", "share-album"]
            let looked = try await SharingTests.lookup(all, zone: trips, user: bob.token, on: server)
            #expect(Self.names(looked.records) == ["album", "p1", "p2", "p3", "share-album"], "\(looked.text)")
            #expect(looked.records[4]["serverErrorCode"] as? String == "NOT_FOUND")
            let first = try await Self.sharedFeed(trips, user: bob.token, on: server)
            #expect(Self.names(first.records) == ["album", "p1", "p2", "p3", "share-album"])
            let query = try await server.database(
                "shared", "records/query", ["zoneID": trips, "query": ["recordType": "Photo"]], user: cy.token)
            #expect(Self.names(query.records) == ["p1", "p2", "p3"], "\(query.text)")
            // Page by page, a participant's query meets only their records: no page is empty and no
            // continuation marker stands on a record outside their shares ("loose" sorts first, "q1" last).
            var pages: [[String]] = []
            var marker: String?
            repeat {
                var body: [String: Any] = [
                    "zoneID": trips, "resultsLimit": 1,
                    "query": ["recordType": "Photo", "sortBy": [["fieldName": "caption", "ascending": true]]],
                ]
                if let marker { body["continuationMarker"] = marker }
                let page = try await server.database("shared", "records/query", body, user: cy.token)
                try #require(page.status == 200 && pages.count < 10, "\(page.text)")
                pages.append(Self.names(page.records))
                marker = page.body["continuationMarker"] as? String
            } while marker != nil
            #expect(pages == [["p1"], ["p2"], ["p3"]], "\(pages)")
            let stranger = try await SharingTests.lookup(["p1"], zone: trips, user: dan.token, on: server)
            #expect(stranger.code == "ZONE_NOT_FOUND", "\(stranger.text)")

            // A read-write participant adds and edits records under the root, but not the root or
            // records outside the share; a read-only one writes nothing.
            func write(_ operations: [[String: Any]], as user: String) async throws -> TestServer.Reply {
                try await server.database("shared", "records/modify", ["zoneID": trips, "operations": operations], user: user)
            }
            let added = try await write([Self.child("p4", of: "p1")], as: bob.token)
            #expect(added.records.first?["serverErrorCode"] == nil, "\(added.text)")
            let seenByCy = try await SharingTests.lookup(["p4"], zone: trips, user: cy.token, on: server)
            #expect(Self.names(seenByCy.records) == ["p4"])
            let edit = ["operationType": "update", "record": [
                "recordName": "p2", "recordChangeTag": tags["p2"]!, "fields": ["caption": ["value": "sunset"]],
            ]] as [String: Any]
            #expect(try await write([edit], as: bob.token).records.first?["serverErrorCode"] == nil)
            let refusals: [([String: Any], String)] = [
                (Self.child("p5", of: nil), "ACCESS_DENIED"),
                (Self.child("p6", of: "loose"), "ACCESS_DENIED"),
                (Self.child("loose", of: "album"), "ACCESS_DENIED"),
                (["operationType": "forceUpdate", "record": ["recordName": "album", "recordType": "Album"]], "ACCESS_DENIED"),
                (["operationType": "forceDelete", "record": ["recordName": "album"]], "ACCESS_DENIED"),
                (["operationType": "forceUpdate", "record": ["recordName": "loose", "recordType": "Photo"]], "NOT_FOUND"),
                (["operationType": "forceDelete", "record": ["recordName": "q1"]], "NOT_FOUND"),
                (["operationType": "forceUpdate", "record": ["recordName": "p2", "parent": ["recordName": "loose"]]],
                 "ACCESS_DENIED"),
            ]
            for (operation, code) in refusals {
                let refused = try await write([operation], as: bob.token)
                #expect(refused.records.first?["serverErrorCode"] as? String == code, "\(operation): \(refused.text)")
            }
            let readOnly = try await write([Self.child("p7", of: "album")], as: cy.token)
            #expect(readOnly.code == "ACCESS_DENIED", "\(readOnly.text)")

            // A record belongs to at most one share.
            let again = try await server.modify(
                [Self.share("share-p1", root: "p1", participants: [])], zone: "Trips", user: ada.token)
            #expect(again.records.first?["serverErrorCode"] as? String == "ALREADY_SHARED", "\(again.text)")
            let otherShare = try await server.modify(
                [Self.share("share-other", root: "other", participants: [])], zone: "Trips", user: ada.token)
            #expect(otherShare.records.first?["serverErrorCode"] == nil, "\(otherShare.text)")
            // A root's own parent is not followed; but a record cannot bring another share's root
            // into its share.
            let rootUnderLoose = try await server.modify(
                [["operationType": "forceUpdate", "record": ["recordName": "other", "parent": ["recordName": "loose"]]]],
                zone: "Trips", user: ada.token)
            #expect(rootUnderLoose.records.first?["serverErrorCode"] == nil, "\(rootUnderLoose.text)")
            let bringsRoot = try await server.modify(
                [["operationType": "forceUpdate", "record": ["recordName": "loose", "parent": ["recordName": "album"]]]],
                zone: "Trips", user: ada.token)
            #expect(bringsRoot.records.first?["serverErrorCode"] as? String == "ALREADY_SHARED", "\(bringsRoot.text)")
            let zoneWide = try await server.modify([SharingTests.share()], zone: "Trips", user: ada.token)
            #expect(zoneWide.code == "ALREADY_SHARED", "\(zoneWide.text)")

            // Moving a record out takes the records below it along: participants see them leave
            // once, and nothing of where they went.
            let beforeMove = try await Self.sharedFeed(trips, user: bob.token, token: first.token, on: server)
            let moved = try await server.modify(
                [["operationType": "forceUpdate", "record": ["recordName": "p1", "parent": NSNull()]]],
                zone: "Trips", user: ada.token)
            #expect(moved.records.first?["parent"] == nil, "\(moved.text)")
            let afterMove = try await Self.sharedFeed(trips, user: bob.token, token: beforeMove.token, on: server)
            #expect(Self.names(afterMove.records) == ["-p1", "-p3", "-p4"], "\(afterMove.records)")
            #expect(afterMove.records.allSatisfy { $0["fields"] == nil })
            let gone = try await SharingTests.lookup(["p1", "p3", "p4", "p2"], zone: trips, user: cy.token, on: server)
            #expect(Self.names(gone.records) == ["p2"])
            let fresh = try await Self.sharedFeed(trips, user: cy.token, on: server)
            #expect(Self.names(fresh.records) == ["album", "p2", "share-album"], "a first fetch names no deletions")

            // A participant leaves; the owner stops sharing by deleting the root, which deletes the share.
            let left = try await write([["operationType": "forceDelete", "record": ["recordName": "share-album"]]], as: cy.token)
            #expect(Self.names(left.records) == ["-share-album"], "\(left.text)")
            #expect(try await server.database("shared", "zones/list", user: cy.token).zones.isEmpty)
            let stopped = try await server.modify(
                [["operationType": "forceDelete", "record": ["recordName": "album"]]], zone: "Trips", user: ada.token)
            #expect(stopped.records.first?["deleted"] as? Bool == true, "\(stopped.text)")
            let remaining = try await server.database(
                "private", "records/lookup",
                ["zoneID": ["zoneName": "Trips"], "records": ["share-album", "p2"].map { ["recordName": $0] }],
                user: ada.token)
            #expect(remaining.records.first?["serverErrorCode"] as? String == "NOT_FOUND", "\(remaining.text)")
            #expect(try await server.database("shared", "zones/list", user: bob.token).zones.isEmpty)
            #expect(try await SharingTests.lookup(["p2"], zone: trips, user: bob.token, on: server).code == "ZONE_NOT_FOUND")
        }
    }

    @Test("deleting a hierarchical share detaches its root; a share needs its root to exist")
    func stopSharingKeepsRecords() async throws {
        try await withServer { server in
            let ada = try await server.signUp("ada")
            let bob = try await server.signUp("bob")
            try await server.createZone("Notes", user: ada.token)
            let missingRoot = try await server.modify(
                [Self.share("s", root: "nothing", participants: [])], zone: "Notes", user: ada.token)
            #expect(missingRoot.records.first?["serverErrorCode"] as? String == "BAD_REQUEST", "\(missingRoot.text)")
            // The root and its share in one request, the root first.
            let saved = try await server.modify(
                [
                    Self.child("topic", of: nil, type: "Topic"),
                    Self.share(
                        "s", root: "topic",
                        participants: [SharingTests.participant(recordName: bob.recordName, permission: "READ_ONLY")]),
                    Self.child("note", of: "topic", type: "Note"),
                ], zone: "Notes", user: ada.token)
            #expect(saved.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(saved.text)")
            let guid = try #require(saved.records[1]["shortGUID"] as? String)
            _ = try await server.database("public", "records/accept", ["shortGUIDs": [["value": guid]]], user: bob.token)
            let notes = SharingTests.sharedZone("Notes", of: ada.recordName)
            let first = try await Self.sharedFeed(notes, user: bob.token, on: server)
            #expect(Self.names(first.records) == ["note", "s", "topic"])

            let stopped = try await server.modify(
                [["operationType": "forceDelete", "record": ["recordName": "s"]]], zone: "Notes", user: ada.token)
            #expect(stopped.records.first?["deleted"] as? Bool == true, "\(stopped.text)")
            let kept = try await server.database(
                "private", "records/lookup",
                ["zoneID": ["zoneName": "Notes"], "records": ["topic", "note"].map { ["recordName": $0] }], user: ada.token)
            #expect(Self.names(kept.records) == ["note", "topic"] && kept.records[0]["share"] == nil, "\(kept.text)")
            #expect(try await server.database("shared", "zones/list", user: bob.token).zones.isEmpty)
            // Shared again, the hierarchy comes back to whom it is shared with.
            let again = try await server.modify(
                [Self.share("s2", root: "topic", participants: [SharingTests.participant(recordName: bob.recordName, permission: "READ_ONLY")])],
                zone: "Notes", user: ada.token)
            #expect(again.records.first?["serverErrorCode"] == nil, "\(again.text)")
            let guid2 = try #require(again.records.first?["shortGUID"] as? String)
            _ = try await server.database("public", "records/accept", ["shortGUIDs": [["value": guid2]]], user: bob.token)
            let back = try await SharingTests.lookup(["topic", "note"], zone: notes, user: bob.token, on: server)
            #expect(Self.names(back.records) == ["note", "topic"], "\(back.text)")
        }
    }

    @Test("a participant reaches nothing outside their shares through cascades, references or names records point at")
    func participantsStayInside() async throws {
        try await withServer { server in
            let ada = try await server.signUp("ada")
            let bob = try await server.signUp("bob")
            try await server.createZone("Z", user: ada.token)
            func reference(_ name: String, to target: String, _ action: String, parent: String?) -> [String: Any] {
                var record: [String: Any] = [
                    "recordName": name, "recordType": "Note",
                    "fields": ["to": ["value": ["recordName": target, "action": action], "type": "REFERENCE"]],
                ]
                if let parent { record["parent"] = ["recordName": parent] }
                return ["operationType": "create", "record": record]
            }
            let setup = try await server.modify(
                [
                    Self.child("shelf", of: nil, type: "Shelf"), Self.child("album", of: "shelf", type: "Album"),
                    Self.child("p1", of: "album"), Self.child("p2", of: "album"),
                    Self.child("secret", of: nil), Self.child("orphan", of: "gone"),
                    reference("tag", to: "p1", "DELETE_SELF", parent: nil), reference("pin", to: "p2", "VALIDATE", parent: nil),
                    Self.share(
                        "s", root: "album",
                        participants: [SharingTests.participant(recordName: bob.recordName, permission: "READ_WRITE")]),
                ], zone: "Z", user: ada.token)
            #expect(setup.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(setup.text)")
            let selfRooted = try await server.modify(
                [Self.share("t", root: "t", participants: [])], zone: "Z", user: ada.token)
            #expect(selfRooted.status == 400, "\(selfRooted.text)")
            let guid = try #require(setup.records.last?["shortGUID"] as? String)
            _ = try await server.database("public", "records/accept", ["shortGUIDs": [["value": guid]]], user: bob.token)
            let zone = SharingTests.sharedZone("Z", of: ada.recordName)
            func write(_ operation: [String: Any]) async throws -> [String: Any] {
                let reply = try await server.database(
                    "shared", "records/modify", ["zoneID": zone, "operations": [operation]], user: bob.token)
                return reply.records.first ?? reply.body
            }

            // Creating a record other records already name as their parent would pull them in.
            #expect(try await write(Self.child("gone", of: "album"))["serverErrorCode"] as? String == "ACCESS_DENIED")
            // Deleting a shared record that an outside record follows through DELETE_SELF would delete it.
            let cascade = try await write(["operationType": "forceDelete", "record": ["recordName": "p1"]])
            #expect(cascade["serverErrorCode"] as? String == "ACCESS_DENIED", "\(cascade)")
            // An outside VALIDATE guard refuses the deletion without naming the guard.
            let guarded = try await write(["operationType": "forceDelete", "record": ["recordName": "p2"]])
            #expect(guarded["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
            #expect(!((guarded["reason"] as? String) ?? "pin").contains("pin"), "\(guarded)")
            // A VALIDATE reference finds no record outside the shares, whether or not one exists.
            let probeSecret = try await write(reference("probe1", to: "secret", "VALIDATE", parent: "album"))
            let probeNothing = try await write(reference("probe2", to: "nothing", "VALIDATE", parent: "album"))
            #expect(probeSecret["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
            #expect(probeNothing["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
            // A DELETE_SELF reference to an outside record binds nothing: the owner's deletion leaves it.
            #expect(try await write(reference("follower", to: "secret", "DELETE_SELF", parent: "album"))["serverErrorCode"] == nil)
            _ = try await server.modify(
                [["operationType": "forceDelete", "record": ["recordName": "secret"]]], zone: "Z", user: ada.token)
            let kept = try await SharingTests.lookup(["follower", "orphan", "tag"], zone: zone, user: bob.token, on: server)
            #expect(Self.names(kept.records) == ["follower"], "\(kept.text)")
            let owners = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "tag"]]], user: ada.token)
            #expect(owners.records.first?["serverErrorCode"] == nil, "the owner's record is still there")

            // The root's parent lies outside the share: bob's copies of the root do not name it.
            let root = try await SharingTests.lookup(["album"], zone: zone, user: bob.token, on: server)
            #expect(root.records.first?["parent"] == nil && root.records.first?["share"] != nil, "\(root.text)")
            let feed = try await Self.sharedFeed(zone, user: bob.token, on: server)
            let fedRoot = try #require(feed.records.first { $0["recordName"] as? String == "album" })
            #expect(fedRoot["parent"] == nil, "\(fedRoot)")
            let below = feed.records.first { $0["recordName"] as? String == "p2" }
            #expect((below?["parent"] as? [String: Any])?["recordName"] as? String == "album", "records below the root keep theirs")
            let queried = try await server.database(
                "shared", "records/query", ["zoneID": zone, "query": ["recordType": "Album"]], user: bob.token)
            #expect(queried.records.count == 1 && queried.records.first?["parent"] == nil, "\(queried.text)")
            let ownersRoot = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "album"]]], user: ada.token)
            #expect((ownersRoot.records.first?["parent"] as? [String: Any])?["recordName"] as? String == "shelf")
        }
    }
}
