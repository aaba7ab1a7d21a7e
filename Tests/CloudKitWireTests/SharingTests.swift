import Foundation
import NIOHTTP1
import StratusModel
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing

/// Zone-wide shares over CloudKit Web Services, with four users: an owner, a read-write
/// participant, a read-only participant, and someone never invited.
@Suite("CloudKit wire: sharing a zone")
struct SharingTests {
    /// The users of a sharing scenario and the owner's shared zone.
    struct People {
        let owner: (token: String, recordName: String)
        let writer: (token: String, recordName: String)
        let reader: (token: String, recordName: String)
        let stranger: (token: String, recordName: String)
    }

    static func people(on server: TestServer) async throws -> People {
        People(
            owner: try await server.signUp("ada"), writer: try await server.signUp("bob"),
            reader: try await server.signUp("cy"), stranger: try await server.signUp("dan"))
    }

    static func share(publicPermission: String = "NONE", participants: [[String: Any]] = [], title: String = "Holiday")
        -> [String: Any]
    {
        [
            "operationType": "create",
            "record": [
                "recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share",
                "fields": ["cloudkit.title": ["value": title, "type": "STRING"]],
                "publicPermission": publicPermission, "participants": participants,
            ] as [String: Any],
        ]
    }

    static func participant(recordName: String? = nil, email: String? = nil, permission: String) -> [String: Any] {
        var lookup: [String: Any] = [:]
        if let recordName { lookup["userRecordName"] = recordName }
        if let email { lookup["emailAddress"] = email }
        return ["type": "USER", "permission": permission, "acceptanceStatus": "INVITED", "userIdentity": ["lookupInfo": lookup]]
    }

    /// A zone of `owner`'s, as the shared database names it.
    static func sharedZone(_ name: String, of owner: String) -> [String: Any] {
        ["zoneName": name, "ownerRecordName": owner]
    }

    /// Ada's zone `Album`, shared with bob at `permission` (not yet accepted); the share's short GUID.
    static func shareAlbum(of people: People, permission: String, on server: TestServer) async throws -> String {
        try await server.createZone("Album", user: people.owner.token)
        let saved = try await server.modify(
            [share(participants: [participant(recordName: people.writer.recordName, permission: permission)])],
            zone: "Album", user: people.owner.token)
        return try #require(saved.records.first?["shortGUID"] as? String, "\(saved.text)")
    }

    static func lookup(_ names: [String], zone: [String: Any], user: String?, on server: TestServer) async throws
        -> TestServer.Reply
    {
        try await server.database(
            "shared", "records/lookup", ["zoneID": zone, "records": names.map { ["recordName": $0] }], user: user)
    }

    @Test("an owner shares a zone; invited participants resolve, accept, read, and write as their permission allows; strangers see nothing")
    func zoneShareFlow() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let (ada, bob, cy, dan) = (people.owner, people.writer, people.reader, people.stranger)
            try await server.createZone("Album", user: ada.token)
            let photo = try await server.modify(
                [operation("create", "p1", recordType: "Photo", fields: ["caption": ["value": "beach"]])], zone: "Album",
                user: ada.token)
            #expect(photo.status == 200, "\(photo.text)")
            // cy is invited by an e-mail address, which works once cy can be found by it.
            let admin = ["Authorization": "Bearer \(server.credentials.adminToken)"]
            _ = try await server.request(
                .PATCH, "/admin/1/containers/\(server.container)/users/\(cy.recordName)",
                body: ["emailAddress": "cy@example.com"], headers: admin)
            let hidden = try await server.modify(
                [Self.share(participants: [Self.participant(email: "cy@example.com", permission: "READ_ONLY")])],
                zone: "Album", user: ada.token)
            #expect(hidden.status == 400 && hidden.reason.contains("discoverable"), "\(hidden.text)")
            let discoverable = try await server.database(
                "public", "users/discoverability", ["discoverable": true], user: cy.token)
            #expect(discoverable.status == 200, "\(discoverable.text)")

            // The owner saves the share.
            let saved = try await server.modify(
                [
                    Self.share(participants: [
                        Self.participant(recordName: bob.recordName, permission: "READ_WRITE"),
                        Self.participant(email: "CY@example.com", permission: "READ_ONLY"),
                    ])
                ], zone: "Album", user: ada.token)
            let share = try #require(saved.records.first)
            #expect(saved.status == 200 && share["serverErrorCode"] == nil, "\(saved.text)")
            #expect(share["recordType"] as? String == "cloudkit.share")
            #expect((share["fields"] as? [String: Any])?.keys.sorted() == ["cloudkit.title"], "the state is not a field")
            let shortGUID = try #require(share["shortGUID"] as? String)
            #expect(share["url"] as? String == server.baseURL + "/share/" + shortGUID)
            #expect(share["publicPermission"] as? String == "NONE")
            let participants = try #require(share["participants"] as? [[String: Any]])
            #expect(participants.map { $0["type"] as? String } == ["OWNER", "USER", "USER"])
            #expect(participants.map { $0["acceptanceStatus"] as? String } == ["ACCEPTED", "INVITED", "INVITED"])
            #expect(participants.map { $0["permission"] as? String } == ["READ_WRITE", "READ_WRITE", "READ_ONLY"])
            #expect(participants.map { ($0["userIdentity"] as? [String: Any])?["userRecordName"] as? String }
                == [ada.recordName, bob.recordName, cy.recordName])
            #expect(((share["owner"] as? [String: Any])?["userIdentity"] as? [String: Any])?["userRecordName"] as? String
                == ada.recordName)
            #expect((share["currentUserParticipant"] as? [String: Any])?["type"] as? String == "OWNER")

            // Resolving: the invited see their place; a stranger is told nothing.
            let resolved = try await server.database(
                "public", "records/resolve", ["shortGUIDs": [["value": shortGUID, "shouldFetchRootRecord": true]]],
                user: bob.token)
            let metadata = try #require((resolved.body["results"] as? [[String: Any]])?.first)
            #expect(resolved.status == 200, "\(resolved.text)")
            #expect(metadata["databaseScope"] as? String == "SHARED")
            #expect(metadata["containerIdentifier"] as? String == server.container)
            #expect((metadata["zoneID"] as? [String: Any])?["ownerRecordName"] as? String == ada.recordName)
            #expect(metadata["participantType"] as? String == "USER")
            #expect(metadata["participantStatus"] as? String == "INVITED")
            #expect(metadata["participantPermission"] as? String == "READ_WRITE")
            #expect((metadata["ownerIdentity"] as? [String: Any])?["userRecordName"] as? String == ada.recordName)
            #expect((metadata["share"] as? [String: Any])?["shortGUID"] as? String == shortGUID)
            for (user, guid) in [(dan.token, shortGUID), (bob.token, "nosuchguid")] {
                let refused = try await server.database("public", "records/resolve", ["shortGUIDs": [["value": guid]]], user: user)
                let item = (refused.body["results"] as? [[String: Any]])?.first
                #expect(refused.status == 200 && item?["serverErrorCode"] as? String == "NOT_FOUND", "\(refused.text)")
            }
            let anonymous = try await server.database("public", "records/resolve", ["shortGUIDs": [["value": shortGUID]]])
            #expect(anonymous.status == 421, "\(anonymous.text)")

            // Until they accept, the zone is not in their shared database.
            let album = Self.sharedZone("Album", of: ada.recordName)
            #expect(try await server.database("shared", "zones/list", user: bob.token).zones.isEmpty)
            #expect(try await Self.lookup(["p1"], zone: album, user: bob.token, on: server).code == "ZONE_NOT_FOUND")

            // Accepting, by short GUID or by the share's URL.
            for (user, value) in [(bob.token, shortGUID), (cy.token, server.baseURL + "/share/" + shortGUID)] {
                let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": value]]], user: user)
                let item = try #require((accepted.body["results"] as? [[String: Any]])?.first)
                #expect(item["participantStatus"] as? String == "ACCEPTED", "\(accepted.text)")
            }
            let strangerAccepts = try await server.database(
                "public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: dan.token)
            #expect((strangerAccepts.body["results"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "NOT_FOUND")

            let bobZones = try await server.database("shared", "zones/list", user: bob.token)
            #expect(bobZones.zones.map { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String } == ["Album"])
            #expect(bobZones.zones.map { ($0["zoneID"] as? [String: Any])?["ownerRecordName"] as? String } == [ada.recordName])
            #expect(try await server.database("shared", "zones/list", user: dan.token).zones.isEmpty)

            // Reading: both participants; the share's current participant is the reader.
            for user in [bob.token, cy.token] {
                let read = try await Self.lookup(["p1", "cloudkit.zoneshare"], zone: album, user: user, on: server)
                #expect(read.status == 200 && read.records.first?["recordName"] as? String == "p1", "\(read.text)")
                #expect(((read.records.first?["zoneID"]) as? [String: Any])?["ownerRecordName"] as? String == ada.recordName)
                let current = (read.records.last?["currentUserParticipant"] as? [String: Any])?["userIdentity"] as? [String: Any]
                #expect(current?["userRecordName"] as? String == (user == bob.token ? bob.recordName : cy.recordName))
                let query = try await server.database(
                    "shared", "records/query", ["zoneID": album, "query": ["recordType": "Photo"]], user: user)
                #expect(query.records.map { $0["recordName"] as? String } == ["p1"], "\(query.text)")
                let feed = try await server.database("shared", "records/changes", ["zoneID": album], user: user)
                #expect(feed.status == 200 && feed.records.count == 2, "\(feed.text)")
            }

            // Writing: the read-write participant creates; the read-only one cannot; nobody but the
            // owner changes the share.
            let created = try await server.modify(
                [operation("create", "p2", recordType: "Photo", fields: ["caption": ["value": "from bob"]])],
                user: bob.token, database: "shared", extra: ["zoneID": album])
            #expect(created.status == 200 && created.records.first?["serverErrorCode"] == nil, "\(created.text)")
            let readOnly = try await server.modify(
                [operation("create", "p3", recordType: "Photo")], user: cy.token, database: "shared", extra: ["zoneID": album])
            #expect(readOnly.status == 403 && readOnly.code == "ACCESS_DENIED", "\(readOnly.text)")
            let takeOver = try await server.modify(
                [Self.share(publicPermission: "READ_WRITE")], user: bob.token, database: "shared", extra: ["zoneID": album])
            #expect(takeOver.status == 403, "\(takeOver.text)")
            let ownerSees = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Album"], "records": [["recordName": "p2"]]],
                user: ada.token)
            #expect((ownerSees.records.first?["created"] as? [String: Any])?["userRecordName"] as? String == bob.recordName)

            // Strangers and the signed-out reach nothing, and learn nothing.
            #expect(try await Self.lookup(["p1"], zone: album, user: dan.token, on: server).code == "ZONE_NOT_FOUND")
            #expect(try await Self.lookup(["p1"], zone: Self.sharedZone("Nope", of: ada.recordName), user: dan.token, on: server)
                .code == "ZONE_NOT_FOUND")
            #expect(try await Self.lookup(["p1"], zone: album, user: nil, on: server).status == 421)
            let strangerWrites = try await server.modify(
                [operation("create", "x", recordType: "Photo")], user: dan.token, database: "shared", extra: ["zoneID": album])
            #expect(strangerWrites.code == "ZONE_NOT_FOUND", "\(strangerWrites.text)")

            // The read-only participant leaves; the zone leaves their shared database.
            let left = try await server.modify(
                [operation("delete", "cloudkit.zoneshare", recordType: nil)].map {
                    var op = $0
                    op["operationType"] = "forceDelete"
                    return op
                }, user: cy.token, database: "shared", extra: ["zoneID": album])
            #expect(left.status == 200 && left.records.first?["deleted"] as? Bool == true, "\(left.text)")
            #expect(try await server.database("shared", "zones/list", user: cy.token).zones.isEmpty)
            #expect(try await Self.lookup(["p1"], zone: album, user: cy.token, on: server).code == "ZONE_NOT_FOUND")
            let afterLeaving = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Album"], "records": [["recordName": "cloudkit.zoneshare"]]],
                user: ada.token)
            let statuses = (afterLeaving.records.first?["participants"] as? [[String: Any]])?.map { $0["acceptanceStatus"] as? String }
            #expect(statuses == ["ACCEPTED", "ACCEPTED", "REMOVED"], "\(afterLeaving.text)")

            // The owner stops sharing: the zone leaves every participant's shared database at once.
            let stopped = try await server.modify(
                [operation("forceDelete", "cloudkit.zoneshare", recordType: nil)], zone: "Album", user: ada.token)
            #expect(stopped.status == 200 && stopped.records.first?["deleted"] as? Bool == true, "\(stopped.text)")
            #expect(try await server.database("shared", "zones/list", user: bob.token).zones.isEmpty)
            #expect(try await Self.lookup(["p1"], zone: album, user: bob.token, on: server).code == "ZONE_NOT_FOUND")
            let gone = try await server.database("public", "records/resolve", ["shortGUIDs": [["value": shortGUID]]], user: bob.token)
            #expect((gone.body["results"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "NOT_FOUND")
        }
    }

    @Test("a share's short GUID with U+0000 after it resolves nothing: 400, on every backend")
    func nullCharacterInShortGUID() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let shortGUID = try await Self.shareAlbum(of: people, permission: "READ_ONLY", on: server)
            for guid in [shortGUID + "\u{0}", shortGUID + "\u{0}zzz"] {
                let resolved = try await server.database(
                    "public", "records/resolve", ["shortGUIDs": [["value": guid]]], user: people.writer.token)
                #expect(resolved.status == 400 && resolved.text.contains("U+0000"), "\(resolved.text)")
                #expect(!resolved.text.contains("zoneID"), "nothing of the share is answered")
            }
        }
    }

    @Test("a public share admits anyone signed in who has its link, with its permission; public and invited participants are not mixed")
    func publicShare() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let (ada, bob, dan) = (people.owner, people.writer, people.stranger)
            try await server.createZone("Open", user: ada.token)
            let mixed = try await server.modify(
                [Self.share(publicPermission: "READ_ONLY", participants: [Self.participant(recordName: bob.recordName, permission: "READ_ONLY")])],
                zone: "Open", user: ada.token)
            #expect(mixed.status == 400 && mixed.reason.contains("public share"), "\(mixed.text)")
            let saved = try await server.modify([Self.share(publicPermission: "READ_ONLY")], zone: "Open", user: ada.token)
            let shortGUID = try #require(saved.records.first?["shortGUID"] as? String, "\(saved.text)")

            let resolved = try await server.database("public", "records/resolve", ["shortGUIDs": [["value": shortGUID]]], user: dan.token)
            let metadata = try #require((resolved.body["results"] as? [[String: Any]])?.first)
            #expect(metadata["participantType"] as? String == "PUBLIC_USER", "\(resolved.text)")
            #expect(metadata["participantPermission"] as? String == "READ_ONLY")
            let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: dan.token)
            #expect((accepted.body["results"] as? [[String: Any]])?.first?["participantStatus"] as? String == "ACCEPTED", "\(accepted.text)")
            let open = Self.sharedZone("Open", of: ada.recordName)
            #expect(try await Self.lookup(["cloudkit.zoneshare"], zone: open, user: dan.token, on: server).status == 200)
            let write = try await server.modify(
                [operation("create", "n", recordType: "Note")], user: dan.token, database: "shared", extra: ["zoneID": open])
            #expect(write.code == "ACCESS_DENIED", "\(write.text)")

            // Making it private removes its public participants.
            let update = try await server.modify(
                [
                    [
                        "operationType": "forceUpdate",
                        "record": ["recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share", "publicPermission": "NONE"],
                    ]
                ], zone: "Open", user: ada.token)
            #expect(update.status == 200, "\(update.text)")
            #expect(try await Self.lookup(["cloudkit.zoneshare"], zone: open, user: dan.token, on: server).code == "ZONE_NOT_FOUND")

            // The share's page names the share, not its owner or contents.
            let page = try await server.request(.GET, "/share/" + shortGUID)
            #expect(page.status == 200 && page.text.contains("Holiday") && page.text.contains(shortGUID))
            #expect(page.headers.first(name: "Content-Security-Policy") == "frame-ancestors 'none'")
            #expect(!page.text.contains(ada.recordName))
            #expect(try await server.request(.GET, "/share/nosuchguid").status == 404)
        }
    }

    @Test("an invitee the owner removed who comes back through the public link leaves again when the share goes private")
    func removedInviteeThroughLink() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let (ada, bob) = (people.owner, people.writer)
            let shortGUID = try await Self.shareAlbum(of: people, permission: "READ_ONLY", on: server)
            func accept() async throws -> [String: Any]? {
                let reply = try await server.database("shared", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: bob.token)
                return (reply.body["results"] as? [[String: Any]])?.first
            }
            func update(_ fields: [String: Any]) async throws {
                let record = ["recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share"].merging(fields) { $1 }
                let reply = try await server.modify([["operationType": "forceUpdate", "record": record]], zone: "Album", user: ada.token)
                #expect(reply.status == 200 && reply.records.first?["serverErrorCode"] == nil, "\(reply.text)")
            }
            let album = Self.sharedZone("Album", of: ada.recordName)
            #expect(try await accept()?["participantType"] as? String == "USER")
            try await update(["participants": []])
            try await update(["publicPermission": "READ_WRITE"])
            #expect(try await accept()?["participantType"] as? String == "PUBLIC_USER", "back through the link, as anyone would")
            #expect(try await Self.lookup(["cloudkit.zoneshare"], zone: album, user: bob.token, on: server).status == 200)
            try await update(["publicPermission": "NONE"])
            #expect(try await Self.lookup(["cloudkit.zoneshare"], zone: album, user: bob.token, on: server).code == "ZONE_NOT_FOUND")
        }
    }

    @Test("shares live in custom zones of the owner's private database, are named cloudkit.zoneshare, and hold at most 100 participants")
    func shareRules() async throws {
        try await withServer { server in
            let ada = try await server.signUp("ada")
            try await server.createZone("Z", user: ada.token)
            let inDefault = try await server.modify([Self.share()], user: ada.token)
            #expect(inDefault.status == 400 && inDefault.reason.contains("default zone"), "\(inDefault.text)")
            let inPublic = try await server.modify([Self.share()], user: ada.token, database: "public")
            #expect(inPublic.status == 403, "\(inPublic.text)")
            var named = Self.share()
            var record = named["record"] as! [String: Any]
            record["recordName"] = "other"
            named["record"] = record
            let misnamed = try await server.modify([named], zone: "Z", user: ada.token)
            #expect(misnamed.status == 400 && misnamed.reason.contains("cloudkit.zoneshare"), "\(misnamed.text)")
            record["recordName"] = "cloudkit.zoneshare"
            record["forRecord"] = ["recordName": "root"]
            named["record"] = record
            let rooted = try await server.modify([named], zone: "Z", user: ada.token)
            #expect(rooted.status == 400 && rooted.reason.contains("forRecord"), "\(rooted.text)")
            let nobody = try await server.modify(
                [Self.share(participants: [Self.participant(recordName: "_nobody", permission: "READ_ONLY")])], zone: "Z",
                user: ada.token)
            #expect(nobody.status == 400 && nobody.reason.contains("participants[0]"), "\(nobody.text)")
            var users: [[String: Any]] = []
            for index in 0...100 {
                // Through the admin API: sign-up is rate limited.
                let created = try await server.request(
                    .POST, "/admin/1/containers/\(server.container)/users", body: ["username": "u\(index)", "password": "correct horse"],
                    headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
                let recordName = try #require(created.body["userRecordName"] as? String, "\(created.text)")
                users.append(Self.participant(recordName: recordName, permission: "READ_ONLY"))
            }
            let crowded = try await server.modify([Self.share(participants: users)], zone: "Z", user: ada.token)
            #expect(crowded.status == 400 && crowded.reason.contains("at most 100"), "\(crowded.text)")
            let full = try await server.modify([Self.share(participants: Array(users.prefix(100)))], zone: "Z", user: ada.token)
            #expect(full.status == 200 && full.records.first?["serverErrorCode"] == nil, "\(full.text)")
        }
    }

    @Test("a participant's shared database feed and pushes follow the share: the zone appears on accepting, its changes fire their subscriptions, and it leaves when sharing stops")
    func sharedFeedAndPush() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let (ada, bob) = (people.owner, people.writer)
            let shortGUID = try await Self.shareAlbum(of: people, permission: "READ_WRITE", on: server)
            let album = Self.sharedZone("Album", of: ada.recordName)

            // Before accepting, bob's shared database is empty and a zone subscription names no zone.
            let start = try await server.database("shared", "changes/database", [:], user: bob.token)
            #expect(start.status == 200 && start.zones.isEmpty, "\(start.text)")
            var token = try #require(start.syncToken)
            let early = try await server.database(
                "shared", "subscriptions/modify",
                ["operations": [["operationType": "create", "subscription": [
                    "subscriptionID": "album", "subscriptionType": "zone", "zoneID": album]]]], user: bob.token)
            #expect((early.body["subscriptions"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")

            let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: bob.token)
            #expect(accepted.status == 200, "\(accepted.text)")
            let appeared = try await server.database("shared", "changes/database", ["syncToken": token], user: bob.token)
            #expect(appeared.zones.map { $0["zoneID"] as? [String: Any] }.map { $0?["ownerRecordName"] as? String }
                == [ada.recordName], "\(appeared.text)")
            token = try #require(appeared.syncToken)
            let quiet = try await server.database("shared", "changes/database", ["syncToken": token], user: bob.token)
            #expect(quiet.zones.isEmpty, "nothing changed since: \(quiet.text)")

            for subscription: [String: Any] in [
                ["subscriptionID": "everything", "subscriptionType": "database"],
                ["subscriptionID": "album", "subscriptionType": "zone", "zoneID": album],
            ] {
                let reply = try await server.database(
                    "shared", "subscriptions/modify", ["operations": [["operationType": "create", "subscription": subscription]]],
                    user: bob.token)
                let item = (reply.body["subscriptions"] as? [[String: Any]])?.first
                #expect(reply.status == 200 && item?["serverErrorCode"] == nil, "\(reply.text)")
            }
            let listed = try await server.database("shared", "subscriptions/list", user: bob.token)
            let zoneSubscription = (listed.body["subscriptions"] as? [[String: Any]])?.first { $0["subscriptionID"] as? String == "album" }
            #expect((zoneSubscription?["zoneID"] as? [String: Any])?["ownerRecordName"] as? String == ada.recordName)

            let created = try await server.request(
                .POST, "/device/1/\(server.container)/development/tokens/create", body: ["apnsEnvironment": "development"],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": bob.token], headers: ["X-Stratus-Device-ID": "bob-phone"])
            let courierURL = try #require(created.body["webcourierURL"] as? String, "\(created.text)")
            #expect(try await PushCourierTests.poll(courierURL).text.isEmpty)

            // The owner's change reaches the participant's shared-database subscriptions.
            let write = try await server.modify(
                [operation("create", "p1", recordType: "Photo")], zone: "Album", user: ada.token, device: "ada-laptop")
            #expect(write.status == 200, "\(write.text)")
            var payloads: [[String: Any]] = []
            for _ in 0..<2 { payloads.append(PushCourierTests.json(try await PushCourierTests.poll(courierURL).text)) }
            let notified = payloads.map { $0["ck"] as? [String: Any] ?? [:] }
            let database = try #require(notified.compactMap { $0["met"] as? [String: Any] }.first, "\(payloads)")
            #expect(database["sid"] as? String == "everything" && database["dbs"] as? Int == 3, "\(payloads)")
            let zone = try #require(notified.compactMap { $0["fet"] as? [String: Any] }.first, "\(payloads)")
            #expect(zone["sid"] as? String == "album" && zone["zid"] as? String == "Album", "\(payloads)")
            #expect(zone["zoid"] as? String == ada.recordName && zone["dbs"] as? Int == 3)
            let changed = try await server.database("shared", "changes/database", ["syncToken": token], user: bob.token)
            #expect(changed.zones.count == 1, "\(changed.text)")
            token = try #require(changed.syncToken)

            // The owner stops sharing: the participant is told, and the zone leaves their feed.
            let stopped = try await server.modify(
                [operation("forceDelete", "cloudkit.zoneshare", recordType: nil)], zone: "Album", user: ada.token,
                device: "ada-laptop")
            #expect(stopped.status == 200, "\(stopped.text)")
            let told = PushCourierTests.json(try await PushCourierTests.poll(courierURL).text)
            #expect((told["ck"] as? [String: Any]) != nil, "a notification of the stopped share")
            let gone = try await server.database("shared", "changes/database", ["syncToken": token], user: bob.token)
            #expect(gone.zones.count == 1 && gone.zones.first?["deleted"] as? Bool == true, "\(gone.text)")
            #expect((gone.zones.first?["zoneID"] as? [String: Any])?["zoneName"] as? String == "Album")
            let after = try await server.database("shared", "changes/database", ["syncToken": try #require(gone.syncToken)], user: bob.token)
            #expect(after.zones.isEmpty, "\(after.text)")
        }
    }

    @Test("an owner's save that raced an acceptance keeps it: participants' statuses are merged inside the write's transaction")
    func ownerSaveKeepsRacedAcceptance() async throws {
        try await withServer { server in
            let people = try await Self.people(on: server)
            let (ada, bob) = (people.owner, people.writer)
            try await server.createZone("Album", user: ada.token)
            let saved = try await server.modify(
                [Self.share(participants: [Self.participant(recordName: bob.recordName, permission: "READ_ONLY")])],
                zone: "Album", user: ada.token)
            let shortGUID = try #require(saved.records.first?["shortGUID"] as? String, "\(saved.text)")
            let ownerDatabase = DatabaseLocator(
                container: server.container, environment: .development, scope: .private, owner: ada.recordName)
            // The state the owner's save computed before bob's acceptance committed.
            let stale = try #require(
                try await server.storage.lookupRecords(names: ["cloudkit.zoneshare"], zone: "Album", in: ownerDatabase)[0]?
                    .shareState)
            let accepted = try await server.database("public", "records/accept", ["shortGUIDs": [["value": shortGUID]]], user: bob.token)
            #expect(accepted.status == 200, "\(accepted.text)")

            var changed = stale
            changed.participants[1].permission = .readWrite
            let outcome = try await server.storage.modifyRecords(
                [RecordWrite(operationType: .forceUpdate, recordName: "cloudkit.zoneshare", fields: [ShareState.fieldName: changed.fieldValue])],
                zone: "Album", in: ownerDatabase, atomic: true,
                context: WriteContext(userRecordName: ada.recordName, timestamp: Int64(Date().timeIntervalSince1970 * 1000)))
            let written = try #require(try outcome.results[0].get().shareState)
            #expect(written.participant(bob.recordName)?.status == .accepted, "the acceptance survives the owner's save")
            #expect(written.participant(bob.recordName)?.permission == .readWrite, "and the owner's change is applied")
            let write = try await server.modify(
                [operation("create", "p", recordType: "Photo")], user: bob.token, database: "shared",
                extra: ["zoneID": Self.sharedZone("Album", of: ada.recordName)])
            #expect(write.status == 200 && write.records.first?["serverErrorCode"] == nil, "\(write.text)")
        }
    }
}
