import Foundation
import Stratus
import StratusTestSupport
import Testing

@Suite("SDK: queries and change feeds")
struct QueryAndChangeTests {
    @Test("queries with predicates, sorts and cursors")
    func queries() async throws {
        try await withServer { server in
            let database = try await server.signedInContainer("mei").privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let base = Date(timeIntervalSince1970: 1_767_225_600)
            let records = (0..<25).map { index in
                var record = Record(recordType: "Note", recordID: .init(recordName: String(format: "n%02d", index), zoneID: zone))
                record["title"] = index.isMultiple(of: 2) ? "Groceries \(index)" : "Work \(index)"
                record["count"] = index
                record["modified"] = base.addingTimeInterval(Double(index))
                record["tags"] = index.isMultiple(of: 5) ? ["five", "all"] : ["all"]
                record["place"] = Location(latitude: 48.85 + Double(index) * 0.01, longitude: 2.35)
                return record
            }
            _ = try await database.modifyRecords(saving: records, deleting: [])

            func names(_ query: Query, limit: Int? = nil) async throws -> [String] {
                var names: [String] = []
                var page = try await database.records(matching: query, inZoneWith: zone, resultsLimit: limit)
                while true {
                    names += try page.matchResults.map { try $0.1.get().recordID.recordName }
                    guard let cursor = page.queryCursor else { return names }
                    page = try await database.records(continuingMatchFrom: cursor, resultsLimit: limit)
                }
            }
            #expect(try await names(Query(recordType: "Note")).count == 25)
            let groceries = Query(
                recordType: "Note", predicate: .beginsWith("title", "Groceries") && .greaterThanOrEquals("count", 10),
                sortDescriptors: [.init(key: "count", ascending: false)])
            #expect(try await names(groceries, limit: 2) == ["n24", "n22", "n20", "n18", "n16", "n14", "n12", "n10"])
            #expect(try await names(Query(recordType: "Note", predicate: .in("count", [1, 3, 99]))) == ["n01", "n03"])
            #expect(try await names(Query(recordType: "Note", predicate: .listContains("tags", "five"))).count == 5)
            #expect(try await names(Query(recordType: "Note", predicate: .containsAllTokens("work 7"))) == ["n07"])
            #expect(
                try await names(Query(recordType: "Note", predicate: .lessThan("modified", base.addingTimeInterval(3)))).count
                    == 3)
            let nearby = Query(
                recordType: "Note", predicate: .near("place", Location(latitude: 48.85, longitude: 2.35), radius: 2_500),
                sortDescriptors: [.distance("place", from: Location(latitude: 48.85, longitude: 2.35))])
            #expect(try await names(nearby) == ["n00", "n01", "n02"])

            let (matches, _) = try await database.records(matching: groceries, inZoneWith: zone, desiredKeys: ["count"])
            #expect(try matches.first?.1.get().allKeys() == ["count"])
            let wrong = await cloudError {
                _ = try await database.records(matching: Query(recordType: "Note", predicate: .beginsWith("count", "1")), inZoneWith: zone)
            }
            #expect(wrong?.code == .invalidArguments)
            #expect(wrong?.message.contains("BEGINS_WITH") == true)
        }
    }

    @Test("zone and database change feeds page with tokens, report deletions, and expire tokens of other zones")
    func changeFeeds() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei", device: "phone")
            let laptop = server.makeContainer(device: "laptop", session: phone.session)
            let database = phone.privateCloudDatabase
            let dbStart = try await laptop.privateCloudDatabase.databaseChanges(since: nil)
            #expect(dbStart.modifications.isEmpty)

            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let records = (0..<7).map { Record(recordType: "Note", recordID: .init(recordName: "n\($0)", zoneID: zone)) }
            _ = try await database.modifyRecords(saving: records, deleting: [])

            let dbChanges = try await laptop.privateCloudDatabase.databaseChanges(since: dbStart.changeToken)
            #expect(dbChanges.modifications == [zone])

            var token: ServerChangeToken?
            var seen: [Record.ID] = []
            var pages = 0
            while true {
                let page = try await laptop.privateCloudDatabase.recordZoneChanges(inZoneWith: zone, since: token, resultsLimit: 3)
                seen += page.modificationResultsByID.keys
                token = page.changeToken
                pages += 1
                if !page.moreComing { break }
            }
            #expect(Set(seen) == Set(records.map(\.recordID)))
            #expect(pages == 3)

            _ = try await database.deleteRecord(withID: records[0].recordID)
            var changed = try await database.record(for: records[1].recordID)
            changed["title"] = "now with a title"
            _ = try await database.save(changed)
            let delta = try await laptop.privateCloudDatabase.recordZoneChanges(inZoneWith: zone, since: token)
            #expect(delta.deletions.map(\.recordID) == [records[0].recordID])
            #expect(delta.deletions.map(\.recordType) == ["Note"])
            #expect(try delta.modificationResultsByID[records[1].recordID]?.get()["title"] as? String == "now with a title")
            #expect(!delta.moreComing)

            // A token from another zone (or an earlier incarnation of this one) has expired here.
            let other = try await database.save(RecordZone(zoneName: "Other")).zoneID
            let otherToken = try await database.recordZoneChanges(inZoneWith: other, since: nil).changeToken
            let expired = await cloudError { _ = try await database.recordZoneChanges(inZoneWith: zone, since: otherToken) }
            #expect(expired?.code == .changeTokenExpired)
            let encoded = try JSONEncoder().encode(delta.changeToken)
            #expect(try JSONDecoder().decode(ServerChangeToken.self, from: encoded) == delta.changeToken, "tokens are Codable")

            try await database.deleteRecordZone(withID: other)
            let afterDelete = try await laptop.privateCloudDatabase.databaseChanges(since: dbChanges.changeToken)
            #expect(afterDelete.deletions.map(\.zoneID) == [other])
            let gone = await cloudError { _ = try await database.recordZoneChanges(inZoneWith: other, since: nil) }
            #expect(gone?.code == .zoneNotFound)
        }
    }

    @Test("a zone's pages read ahead are the pages read one call at a time; an early stop and an expired token end the sequence")
    func pagesReadAhead() async throws {
        try await withServer { server in
            let phone = try await server.signedInContainer("mei")
            let database = phone.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let records = (0..<25).map { Record(recordType: "Note", recordID: .init(recordName: "n\($0)", zoneID: zone)) }
            _ = try await database.modifyRecords(saving: records, deleting: [])
            _ = try await database.deleteRecord(withID: records[3].recordID)

            var oneByOne: [(ids: Set<Record.ID>, deleted: [Record.ID], token: ServerChangeToken)] = []
            var token: ServerChangeToken?
            repeat {
                let page = try await database.recordZoneChanges(inZoneWith: zone, since: token, resultsLimit: 4)
                oneByOne.append((Set(page.modificationResultsByID.keys), page.deletions.map(\.recordID), page.changeToken))
                token = page.moreComing ? page.changeToken : nil
            } while token != nil
            var ahead: [(ids: Set<Record.ID>, deleted: [Record.ID], token: ServerChangeToken)] = []
            for try await page in database.recordZoneChangePages(inZoneWith: zone, since: nil, resultsLimit: 4) {
                ahead.append((Set(page.modificationResultsByID.keys), page.deletions.map(\.recordID), page.changeToken))
            }
            #expect(ahead.count == oneByOne.count && ahead.count == 7)
            #expect(ahead.map(\.ids) == oneByOne.map(\.ids))
            #expect(ahead.map(\.deleted) == oneByOne.map(\.deleted))
            #expect(ahead.map(\.token) == oneByOne.map(\.token))
            #expect(ahead.reduce(into: Set()) { $0.formUnion($1.ids) } == Set(records.map(\.recordID)).subtracting([records[3].recordID]))

            // From the middle, and stopping after one page: the request sent ahead is dropped.
            var iterator = database.recordZoneChangePages(inZoneWith: zone, since: oneByOne[2].token, resultsLimit: 4)
                .makeAsyncIterator()
            #expect(try await iterator.next()?.changeToken == oneByOne[3].token)

            // A failure is thrown once, then the sequence is over.
            let other = try await database.save(RecordZone(zoneName: "Other")).zoneID
            let otherToken = try await database.recordZoneChanges(inZoneWith: other, since: nil).changeToken
            var failing = database.recordZoneChangePages(inZoneWith: zone, since: otherToken).makeAsyncIterator()
            let expired = await cloudError { _ = try await failing.next() }
            #expect(expired?.code == .changeTokenExpired)
            #expect(try await failing.next() == nil)
        }
    }

    @Test("a feed read many pages ahead while another device writes misses nothing: a read on from its last token holds what the server holds")
    func readAheadDuringWrites() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let reader = container.privateCloudDatabase
            let zone = try await reader.save(RecordZone(zoneName: "Notes")).zoneID
            func note(_ name: String, _ value: Int) -> Record {
                var record = Record(recordType: "Note", recordID: .init(recordName: name, zoneID: zone))
                record["value"] = value
                return record
            }
            _ = try await reader.modifyRecords(saving: (0..<300).map { note("n\($0)", 0) }, deleting: [], atomically: false)
            let writer = try await server.device(of: "mei").privateCloudDatabase

            // The reader's copy: each page applied in order, as an app applies them.
            var copy: [String: Int] = [:]
            var token: ServerChangeToken?
            func apply(_ pages: RecordZoneChangePages) async throws {
                for try await page in pages {
                    for (id, result) in page.modificationResultsByID { copy[id.recordName] = try result.get()["value", as: Int.self] }
                    for deletion in page.deletions { copy[deletion.recordID.recordName] = nil }
                    token = page.changeToken
                }
            }
            try await withThrowingTaskGroup { group in
                group.addTask {
                    for round in 1...15 {
                        let changed = (0..<10).map { note("n\(($0 * 29 + round * 7) % 200)", round) } + [note("new\(round)", round)]
                        let deleted = [Record.ID(recordName: "n\(200 + round)", zoneID: zone)]
                        _ = try await writer.modifyRecords(saving: changed, deleting: deleted, savePolicy: .allKeys)
                    }
                }
                try await apply(reader.recordZoneChangePages(inZoneWith: zone, since: nil, resultsLimit: 5))
                try await group.waitForAll()
            }
            try await apply(reader.recordZoneChangePages(inZoneWith: zone, since: token, resultsLimit: 5))

            var held: [String: Int] = [:]
            var oneByOne: ServerChangeToken?
            repeat {
                let page = try await reader.recordZoneChanges(inZoneWith: zone, since: oneByOne)
                for (id, result) in page.modificationResultsByID { held[id.recordName] = try result.get()["value", as: Int.self] }
                for deletion in page.deletions { held[deletion.recordID.recordName] = nil }
                oneByOne = page.moreComing ? page.changeToken : nil
            } while oneByOne != nil
            #expect(held.count == 300 - 15 + 15)
            #expect(copy == held)
        }
    }
}
