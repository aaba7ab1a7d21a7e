import NIOHTTP1
import Foundation
import StratusModel
import StratusStorage
import StratusSQLite
import StratusServer
import StratusTestSupport
import Testing

@Suite("change feeds")
struct ChangeFeedTests {
    @Test("records/changes pages with moreComing across more than 1,000 changes")
    func paging() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            for batch in 0..<6 {
                let reply = try await server.modify(
                    (0..<200).map { operation("create", "r\(batch * 200 + $0)", fields: ["n": ["value": batch * 200 + $0]]) },
                    zone: "Z", user: alice)
                #expect(reply.records.allSatisfy { $0["serverErrorCode"] == nil })
            }
            let feed = try await server.readFeed(zone: "Z", user: alice, limit: 150)
            #expect(feed.pages == 8)
            #expect(feed.records.compactMap { $0["recordName"] as? String } == (0..<1200).map { "r\($0)" })

            _ = try await server.modify([operation("forceDelete", "r5", recordType: nil)], zone: "Z", user: alice)
            _ = try await server.modify([operation("forceUpdate", "r9", recordType: nil, fields: ["n": ["value": -1]])], zone: "Z", user: alice)
            let delta = try await server.readFeed(zone: "Z", user: alice, token: feed.token)
            #expect(delta.records.compactMap { $0["recordName"] as? String } == ["r5", "r9"])
            #expect(delta.records[0]["deleted"] as? Bool == true && delta.records[0]["fields"] == nil)
            #expect(delta.records[1]["deleted"] as? Bool == false, "live records say so, as Apple's do")

            let multi = try await server.database(
                "private", "changes/zone",
                ["zones": [["zoneID": ["zoneName": "Z"], "syncToken": feed.token], ["zoneID": ["zoneName": "missing"]]],
                 "resultsLimit": 1], user: alice)
            #expect(multi.zones.count == 2)
            #expect((multi.zones[0]["records"] as? [Any])?.count == 1 && multi.zones[0]["moreComing"] as? Bool == true)
            #expect(multi.zones[1]["serverErrorCode"] as? String == "ZONE_NOT_FOUND")
        }
    }

    @Test("a feed read page by page is read ahead, and every change made since still reaches the reader")
    func readAheadKeepsEveryChange() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            _ = try await server.modify(
                (0..<12).map { operation("create", "r\($0)", fields: ["n": ["value": 0]]) }, zone: "Z", user: alice)
            func page(after token: String?) async throws -> TestServer.Reply {
                let reply = try await Self.page(of: server, user: alice, after: token)
                try #require(reply.status == 200, "\(reply.text)")
                return reply
            }
            func pagesRead() async throws -> Int { try await Self.feedPagesRead(server) }

            var seen: [String: Int] = [:]
            func read(_ reply: TestServer.Reply) {
                for record in reply.records {
                    let value = (record["fields"] as? [String: Any]).flatMap { ($0["n"] as? [String: Any])?["value"] as? Int }
                    seen[record["recordName"] as! String] = value
                }
            }
            let first = try await page(after: nil)
            read(first)
            #expect(first.moreComing == true)
            // The two pages after it are read while the client reads the first.
            #expect(await eventually { (try? await pagesRead()) == 3 })
            // Changes made after they were read: a record of the second page and a new one.
            _ = try await server.modify(
                [operation("forceUpdate", "r5", recordType: nil, fields: ["n": ["value": 1]]),
                 operation("create", "r12", fields: ["n": ["value": 1]])],
                zone: "Z", user: alice)
            let second = try await page(after: first.syncToken)
            read(second)
            #expect(second.moreComing == true)
            #expect(try await pagesRead() == 3, "the second page was handed over as read ahead")
            // The third page was read ahead as the feed's last, which a change since may not be: it is
            // read again, and the reader reads on to the changes.
            var token = second.syncToken
            var more = true
            while more {
                let reply = try await page(after: token)
                read(reply)
                token = reply.syncToken
                more = reply.moreComing == true
            }
            #expect(seen.count == 13, "every record, the new one included")
            #expect(seen["r5"] == 1 && seen["r12"] == 1, "the later version of a record read ahead comes after it")
            #expect(try await server.readFeed(zone: "Z", user: alice, token: token).records.isEmpty)
        }
    }

    /// Signs up alice, who makes zone "Z" with `records` records named r0, r1, …; answers her token.
    static func aliceWithZoneZ(_ server: TestServer, records: Int) async throws -> String {
        let alice = try await server.signUp("alice").token
        try await server.createZone("Z", user: alice)
        _ = try await server.modify((0..<records).map { operation("create", "r\($0)") }, zone: "Z", user: alice)
        return alice
    }

    /// A `records/changes` page of zone "Z", 4 records long, after `token`.
    static func page(
        of server: TestServer, user: String, after token: String?, headers: [String: String] = [:]
    ) async throws -> TestServer.Reply {
        var body: [String: Any] = ["zoneID": ["zoneName": "Z"], "resultsLimit": 4]
        if let token { body["syncToken"] = token }
        return try await server.database("private", "records/changes", body, user: user, headers: headers)
    }

    /// How many pages the server has read from storage for change feeds (its metrics).
    static func feedPagesRead(_ server: TestServer) async throws -> Int {
        let reply = try await server.request(
            .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
        let prefix = #"stratus_storage_read_seconds_count{source="changes"} "#
        let line = reply.text.split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    @Test("changes/zone for one zone is read ahead as records/changes is, from the same pages")
    func readAheadOfOneZoneThroughChangesZone() async throws {
        try await withServer { server async throws in
            let alice = try await Self.aliceWithZoneZ(server, records: 12)
            let first = try await server.database(
                "private", "changes/zone", ["zones": [["zoneID": ["zoneName": "Z"], "resultsLimit": 4]]], user: alice)
            let token = try #require(first.zones.first?["syncToken"] as? String)
            #expect(await eventually { (try? await Self.feedPagesRead(server)) == 3 })
            let second = try await Self.page(of: server, user: alice, after: token)
            #expect(second.records.compactMap { $0["recordName"] as? String } == ["r4", "r5", "r6", "r7"])
            #expect(try await Self.feedPagesRead(server) == 3, "the second page was handed over as read ahead")
        }
    }

    @Test("a client that says it reads ahead itself (X-Stratus-Reads-Ahead), or asks for page ends, is not read ahead for")
    func noReadAheadForClientsThatReadAhead() async throws {
        try await withServer { server async throws in
            let alice = try await Self.aliceWithZoneZ(server, records: 12)
            var token: String?
            for headers in [["X-Stratus-Reads-Ahead": "true"], ["X-Stratus-Pages-Ahead": "2"], ["X-Stratus-Reads-Ahead": "TRUE"]] {
                let reply = try await Self.page(of: server, user: alice, after: token, headers: headers)
                #expect(reply.status == 200)
                token = reply.syncToken
            }
            // A plain request: its page and the two after it.
            _ = try await Self.page(of: server, user: alice, after: nil)
            #expect(await eventually { ((try? await Self.feedPagesRead(server)) ?? 0) >= 6 })
            #expect(try await Self.feedPagesRead(server) == 6, "only the plain request's pages were read ahead")
        }
    }

    @Test("records/changes hands out where the following pages end when asked (X-Stratus-Pages-Ahead)")
    func pageEndsAhead() async throws {
        try await withServer { server async throws in
            let alice = try await Self.aliceWithZoneZ(server, records: 25)
            func page(from token: String?, ahead: String? = nil) async throws -> TestServer.Reply {
                try await Self.page(of: server, user: alice, after: token, headers: ahead.map { ["X-Stratus-Pages-Ahead": $0] } ?? [:])
            }
            // The ends of the seven pages read one after another (the last has 1 record).
            var ends: [String] = []
            var token: String?
            repeat {
                let reply = try await page(from: token)
                #expect(reply.headers.first(name: "X-Stratus-Following-Sync-Tokens") == nil, "only when asked")
                token = try #require(reply.syncToken)
                ends.append(token!)
                if reply.moreComing != true { break }
            } while true
            #expect(ends.count == 7)

            let first = try await page(from: nil, ahead: "3")
            #expect(first.headers.first(name: "X-Stratus-Following-Sync-Tokens") == ends[1...3].joined(separator: ","))
            let all = try await page(from: nil, ahead: "1000")
            #expect(
                all.headers.first(name: "X-Stratus-Following-Sync-Tokens") == ends[1...5].joined(separator: ","),
                "the end of every page that more changes follow, the last page's left out")
            let last = try await page(from: ends[5], ahead: "4")
            #expect(last.moreComing == false && last.headers.first(name: "X-Stratus-Following-Sync-Tokens") == nil)

            for bad in ["0", "-2", "many"] {
                let refused = try await page(from: nil, ahead: bad)
                #expect(refused.status == 400 && refused.code == "BAD_REQUEST" && refused.reason.contains("X-Stratus-Pages-Ahead"))
            }
        }
    }

    @Test("records/digest: the live records the feed shows, at the feed's token; refusals as records/changes")
    func digest() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            _ = try await server.modify(
                [
                    operation("create", "a", fields: ["title": ["value": "x"], "n": ["value": 7]]),
                    operation("create", "b", fields: ["tags": ["value": ["y", "z"], "type": "STRING_LIST"]]),
                    operation("create", "c"),
                ],
                zone: "Z", user: alice)
            _ = try await server.modify([operation("forceDelete", "c", recordType: nil)], zone: "Z", user: alice)
            var expected = RecordSetDigest()
            expected.add(recordName: "b", recordType: "Note", fields: ["tags": .list(elementType: .string, [.string("y"), .string("z")])])
            expected.add(recordName: "a", recordType: "Note", fields: ["title": .string("x"), "n": .int64(7)])

            let body: [String: Any] = ["zoneID": ["zoneName": "Z"]]
            let answer = try await server.database("private", "records/digest", body, user: alice)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.body["recordCount"] as? Int == 2, "the tombstone of 'c' is not a record")
            #expect(answer.body["digest"] as? String == expected.hexDigest)
            let feed = try await server.readFeed(zone: "Z", user: alice)
            #expect(answer.syncToken == feed.token, "the digest is of the state a complete read of the feed reaches")

            _ = try await server.modify(
                [operation("forceUpdate", "a", recordType: nil, fields: ["title": ["value": "x!"], "n": ["value": 7]])],
                zone: "Z", user: alice)
            let changed = try await server.database("private", "records/digest", body, user: alice)
            #expect(changed.body["digest"] as? String != expected.hexDigest && changed.syncToken != answer.syncToken)
            #expect(changed.body["recordCount"] as? Int == 2)

            let bob = try await server.signUp("bob").token
            #expect(try await server.database("private", "records/digest", body, user: bob).code == "ZONE_NOT_FOUND",
                "another user's zone is not found in their own database")
            #expect(try await server.database("private", "records/digest", ["zoneID": ["zoneName": "_defaultZone"]], user: alice).status == 400)
            #expect(try await server.database("private", "records/digest", [String: Any](), user: alice).reason.contains("zoneID"))
            #expect(try await server.database("public", "records/digest", body, user: alice).status == 400)
            #expect(try await server.database("private", "records/digest", body).status == 421, "a signed-in user is required")
        }
    }

    @Test("16 concurrent writers × 200 writes into one zone: nothing lost, each change once in the feed")
    func concurrentWriters() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            let writers = 16
            let writes = 200
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var names: [String] = []
                        for index in 0..<writes {
                            let name = "w\(writer)-\(index)"
                            let reply = try await server.modify([operation("create", name)], zone: "Z", user: alice)
                            if reply.status == 200, reply.records.first?["serverErrorCode"] == nil { names.append(name) }
                        }
                        return names
                    }
                }
                return try await group.reduce(into: [String]()) { $0 += $1 }
            }
            #expect(acknowledged.count == writers * writes)
            let feed = try await server.readFeed(zone: "Z", user: alice)
            let names = feed.records.compactMap { $0["recordName"] as? String }
            #expect(names.count == writers * writes)
            #expect(Set(names) == Set(acknowledged), "every acknowledged write is in the feed, exactly once")
        }
    }

    @Test("sync tokens: integrity-checked (one this server did not sign expires), not interchangeable, expire with the tombstone horizon")
    func tokens() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            _ = try await server.modify([operation("create", "a"), operation("create", "b")], zone: "Z", user: alice)
            let first = try await server.readFeed(zone: "Z", user: alice)
            _ = try await server.modify([operation("forceDelete", "a", recordType: nil)], zone: "Z", user: alice)

            // Tokens are base64url without padding; the standard base64 of the same bytes is read too.
            var standard = first.token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while standard.count % 4 != 0 { standard += "=" }
            var tampered = Array(try #require(Data(base64Encoded: standard)))
            tampered[17] ^= 1
            let bad = try await server.database(
                "private", "records/changes",
                ["zoneID": ["zoneName": "Z"], "syncToken": Data(tampered).base64EncodedString()], user: alice)
            #expect(bad.status == 410 && bad.code == "CHANGE_TOKEN_EXPIRED" && bad.reason.contains("syncToken"), "\(bad.text)")
            let garbage = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Z"], "syncToken": "not a token"], user: alice)
            #expect(garbage.status == 400)
            let wrongKind = try await server.database("private", "changes/database", ["syncToken": first.token], user: alice)
            #expect(wrongKind.status == 400 && wrongKind.reason.contains("another feed"))

            let cutoff = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
            #expect(try await server.storage.purgeTombstones(before: cutoff) == 1)
            let expired = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Z"], "syncToken": first.token], user: alice)
            #expect(expired.status == 410 && expired.code == "CHANGE_TOKEN_EXPIRED", "\(expired.text)")
            let restart = try await server.readFeed(zone: "Z", user: alice)
            #expect(restart.records.compactMap { $0["recordName"] as? String } == ["b"])
        }
    }

    @Test("change feeds cover custom zones of the private and shared databases only")
    func feedScopes() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let defaultZone = try await server.database("private", "records/changes", ["zoneID": ["zoneName": "_defaultZone"]], user: alice)
            #expect(defaultZone.status == 400 && defaultZone.reason.contains("default zone"))
            let noZone = try await server.database("private", "records/changes", [String: Any](), user: alice)
            #expect(noZone.status == 400 && noZone.reason.contains("zoneID is required"))
            let publicFeed = try await server.database("public", "changes/database", [String: Any](), user: alice)
            #expect(publicFeed.status == 400)
            let missing = try await server.database("private", "records/changes", ["zoneID": ["zoneName": "nope"]], user: alice)
            #expect(missing.status == 404 && missing.code == "ZONE_NOT_FOUND")
        }
    }
}
