import Foundation
import Logging
import NIOCore
import StratusModel
import StratusStorage
import StratusTestSupport
import Synchronization
import Testing

@testable import StratusServer

/// A continuation marker carries the last record's keys, zone, creation time and name.
@Suite struct QueryMarkerTests {
    let codec = SyncTokenCodec(secret: SyncTokenCodec.makeSecret())

    @Test func markersRoundTripTheirPosition() throws {
        let cursor = QueryCursor(keys: [.integer(7), .real(0.5), .text("x")], zone: "Z", created: 1_700_000_000_123, name: "r")
        #expect(try QueryMarker.decode(QueryMarker.encode(cursor, recordType: "T", tokens: codec), recordType: "T", tokens: codec) == cursor)
    }

    @Test func aMarkerFromBeforeCreationTimesResumesAtItsKeysFirstRecord() throws {
        // As the previous release sealed them: no "c".
        let earlier = codec.seal([1] + Array(#"{"t":"T","k":[7],"z":"Z","n":"r"}"#.utf8))
        let cursor = try QueryMarker.decode(earlier, recordType: "T", tokens: codec)
        #expect(cursor == QueryCursor(keys: [.integer(7)], zone: "Z", created: nil, name: "r"))
    }
}

/// Sync tokens carry a feed position, and only a token this server minted for that feed opens.
@Suite struct SyncTokenCodecTests {
    let codec = SyncTokenCodec(secret: SyncTokenCodec.makeSecret())

    @Test func tokensRoundTripPositionsOfBothKinds() throws {
        let position = ChangePosition(scopeID: 42, sequence: Int64.max)
        for kind in [SyncTokenCodec.Kind.zone, .database] {
            #expect(try codec.position(from: codec.token(for: position, kind: kind), kind: kind) == position)
        }
        #expect(try codec.position(from: nil, kind: .zone) == nil)
        #expect(try codec.position(from: "", kind: .database) == nil)
        let secret = SyncTokenCodec.makeSecret()
        let token = SyncTokenCodec(secret: secret).token(for: position, kind: .zone)
        #expect(try SyncTokenCodec(secret: secret).position(from: token, kind: .zone) == position, "survives a restart")
    }

    @Test func aTokenOfOneFeedIsRefusedByTheOther() {
        let zoneToken = codec.token(for: ChangePosition(scopeID: 1, sequence: 5), kind: .zone)
        let error = #expect(throws: StratusError.self) { try codec.position(from: zoneToken, kind: .database) }
        #expect(error?.code == .badRequest)
        #expect(error?.reason.hasPrefix("syncToken belongs to another feed") == true)
        let databaseToken = codec.token(for: ChangePosition(scopeID: 1, sequence: 5), kind: .database)
        #expect(throws: StratusError.self) { try codec.position(from: databaseToken, kind: .zone) }
    }

    @Test("a token this server's secret did not sign (altered, or from before a move) expires; a malformed one is refused")
    func aTamperedTokenFailsTheIntegrityCheck() {
        var characters = Array(codec.token(for: ChangePosition(scopeID: 7, sequence: 99), kind: .zone))
        characters[12] = characters[12] == "A" ? "B" : "A"
        let tampered = String(characters)
        let error = #expect(throws: StratusError.self) {
            try codec.position(from: tampered, kind: .zone, field: "zoneSyncToken")
        }
        #expect(error?.code == .changeTokenExpired)
        #expect(error?.reason.hasPrefix("zoneSyncToken was not issued by this server") == true)
        let garbage = #expect(throws: StratusError.self) { try codec.position(from: "not a token!", kind: .zone) }
        #expect(garbage?.code == .badRequest && garbage?.reason == "syncToken is not a sync token issued by this server")
    }

    @Test func aTokenMintedWithAnotherSecretExpires() {
        let foreign = SyncTokenCodec(secret: SyncTokenCodec.makeSecret())
        let token = foreign.token(for: ChangePosition(scopeID: 3, sequence: 4), kind: .zone)
        let error = #expect(throws: StratusError.self) { try codec.position(from: token, kind: .zone) }
        #expect(error?.code == .changeTokenExpired)
        let receipt = foreign.seal([1, 2, 3])
        let sealed = #expect(throws: StratusError.self) { try codec.open(receipt, field: "receipt", what: "a receipt") }
        #expect(sealed?.code == .badRequest && sealed?.reason.hasSuffix("(integrity check failed)") == true,
                "other sealed values are still refused")
    }
}

/// A token bucket per key: a burst, then refusals with a wait, refilled as time passes.
@Suite struct RateLimiterTests {
    static func make() -> (ManualClock, RateLimiter) {
        let clock = ManualClock(milliseconds: 1_000_000)
        return (clock, RateLimiter(limit: RateLimit(requestsPerSecond: 2, burst: 3), clock: clock.serverClock))
    }

    @Test func aBurstIsAllowedThenTheNextWaits() {
        let (_, limiter) = Self.make()
        for _ in 0..<3 { #expect(limiter.acquire("alice") == nil) }
        #expect(limiter.acquire("alice") == 0.5)
        #expect(limiter.acquire("alice") == 0.5, "a refused request takes nothing from the bucket")
    }

    @Test func timeRefillsTheBucketUpToTheBurst() {
        let (clock, limiter) = Self.make()
        for _ in 0..<3 { _ = limiter.acquire("alice") }
        clock.advance(bySeconds: 0.5)
        #expect(limiter.acquire("alice") == nil)
        clock.advance(bySeconds: 0.25)
        #expect(limiter.acquire("alice") == 0.25)
        clock.advance(bySeconds: 3600)
        for _ in 0..<3 { #expect(limiter.acquire("alice") == nil) }
        #expect(limiter.acquire("alice") != nil, "a long quiet period refills no more than the burst")
    }

    @Test func keysAreIndependent() {
        let (_, limiter) = Self.make()
        for _ in 0..<3 { _ = limiter.acquire("alice") }
        #expect(limiter.acquire("alice") != nil)
        for _ in 0..<3 { #expect(limiter.acquire("bob") == nil) }
    }

    @Test func limitDefaultsAndThrottledAnswer() {
        #expect(RateLimit(requestsPerSecond: 2.5).burst == 3)
        #expect(RateLimit(requestsPerSecond: 0.2).burst == 1)
        let error = RateLimit(requestsPerSecond: 2, burst: 3).throttled(wait: 0.2, what: "requests")
        #expect(error.code == .throttled)
        #expect(error.retryAfter == 1)
        #expect(error.reason.contains("the limit is 2 per second with bursts of 3"))
        #expect(RateLimit(requestsPerSecond: 2).throttled(wait: 2.1, what: "requests").retryAfter == 3)
    }
}

/// Failed attempts cost nothing at first, then lock a key for 1 s, 2 s, 4 s…; an hour forgets them.
@Suite struct FailureBackoffTests {
    let alice = FailureBackoff.Key(name: "account:alice", freeFailures: 2)

    static func make(maximumLockSeconds: Int64 = 3600) -> (ManualClock, FailureBackoff) {
        let clock = ManualClock(milliseconds: 1_000_000)
        return (clock, FailureBackoff(maximumLockSeconds: maximumLockSeconds, clock: clock.serverClock))
    }

    @Test func locksDoubleAfterTheFreeFailuresAndRefusalsAreNotCounted() {
        let (clock, backoff) = Self.make()
        for _ in 0..<3 { #expect(backoff.begin([alice]) == nil) }
        #expect(backoff.begin([alice]) == 1)
        #expect(backoff.begin([alice]) == 1)
        clock.advance(bySeconds: 1)
        #expect(backoff.begin([alice]) == nil)
        #expect(backoff.begin([alice]) == 2, "the refusals while locked did not count as failures")
        clock.advance(bySeconds: 2)
        #expect(backoff.begin([alice]) == nil)
        #expect(backoff.begin([alice]) == 4)
        clock.advance(bySeconds: 1.5)
        #expect(backoff.begin([alice]) == 3, "the wait is rounded up to whole seconds")
    }

    @Test func locksStopAtTheMaximum() {
        let (clock, backoff) = Self.make(maximumLockSeconds: 3)
        let key = FailureBackoff.Key(name: "k", freeFailures: 0)
        #expect(backoff.begin([key]) == nil)
        clock.advance(bySeconds: 1)
        #expect(backoff.begin([key]) == nil)
        clock.advance(bySeconds: 2)
        #expect(backoff.begin([key]) == nil)
        #expect(backoff.begin([key]) == 3)
    }

    @Test func successTakesBackItsAttemptAndForgivingClearsTheAccount() {
        let (_, backoff) = Self.make()
        for _ in 0..<10 {
            #expect(backoff.begin([alice]) == nil)
            backoff.succeeded([alice])
        }
        for _ in 0..<3 { _ = backoff.begin([alice]) }
        #expect(backoff.begin([alice]) == 1)
        backoff.succeeded([alice])
        #expect(backoff.begin([alice]) == nil, "back within the free failures, the lock is lifted")
        #expect(backoff.begin([alice]) == 1)
        backoff.succeeded([alice], forgiving: [alice.name])
        for _ in 0..<3 { #expect(backoff.begin([alice]) == nil) }
        #expect(backoff.begin([alice]) == 1)
    }

    @Test func attemptsThatSucceedLeaveNothingBehind() {
        let (clock, backoff) = Self.make()
        for index in 0..<120_000 {
            let key = FailureBackoff.Key(name: "push:\(index)", freeFailures: 20)
            #expect(backoff.begin([key]) == nil)
            backoff.succeeded([key])
        }
        #expect(backoff.rememberedKeys == 0, "a key whose attempts all succeeded is forgotten")
        for index in 0..<120_000 { _ = backoff.begin([FailureBackoff.Key(name: "guess:\(index)", freeFailures: 20)]) }
        #expect(backoff.rememberedKeys == 120_000, "failures within the hour are all kept")
        // Pruning waits until the keys have doubled since the last one, so its cost spreads over the attempts.
        clock.advance(bySeconds: 3601)
        for index in 0..<90_000 { _ = backoff.begin([FailureBackoff.Key(name: "later:\(index)", freeFailures: 20)]) }
        #expect(backoff.rememberedKeys == 90_000, "the 120,000 failures of an hour ago are forgotten")
    }

    @Test func failuresAreForgottenAfterAnHour() {
        let (clock, backoff) = Self.make()
        for _ in 0..<3 { _ = backoff.begin([alice]) }
        clock.advance(bySeconds: 3599)
        #expect(backoff.begin([alice]) == nil)
        #expect(backoff.begin([alice]) == 2, "59 minutes later the failures still count")
        clock.advance(bySeconds: 3600)
        for _ in 0..<3 { #expect(backoff.begin([alice]) == nil) }
        #expect(backoff.begin([alice]) == 1)
    }

    @Test func keysWithDifferentAllowancesLockSeparately() {
        let (_, backoff) = Self.make()
        let account = FailureBackoff.Key(name: "account:alice", freeFailures: 3)
        let address = FailureBackoff.Key(name: "address:10.0.0.1", freeFailures: 1)
        #expect(backoff.begin([account, address]) == nil)
        #expect(backoff.begin([account, address]) == nil)
        #expect(backoff.begin([account, address]) == 1, "the address is locked")
        #expect(backoff.begin([address]) == 1)
        #expect(backoff.begin([account]) == nil)
        #expect(backoff.begin([account]) == nil)
        let otherAddress = FailureBackoff.Key(name: "address:10.0.0.2", freeFailures: 1)
        #expect(backoff.begin([account, otherAddress]) == 1, "the locked account refuses every address")
    }
}

/// Sign-in callbacks: only unambiguous http(s) URLs on loopback or this server, with a browser's origin.
@Suite struct SignInCallbackTests {
    @Test(arguments: [
        ("http://127.0.0.1:8123/callback?state=x#y", "http://127.0.0.1:8123"), ("http://localhost:80/cb", "http://localhost"),
        ("https://localhost:443/cb", "https://localhost"), ("https://localhost:8443", "https://localhost:8443"),
        ("http://[::1]:9000/cb", "http://[::1]:9000"), ("http://[::1]/cb%20x", "http://[::1]"),
    ])
    func acceptsLoopbackCallbacks(raw: String, origin: String) throws {
        let callback = try SignInCallback(raw, serverOrigin: nil, serverAuthority: nil)
        #expect(callback.url == raw)
        #expect(callback.origin == origin)
    }

    @Test(arguments: [
        ("HTTP://127.0.0.1/cb", "must start with http:// or https://"), ("javascript:alert(1)", "must start with http://"),
        ("http://evil.example@127.0.0.1/cb", "contains '@'"), ("http://127.0.0.1 .evil/cb", "a space, control"),
        ("http://LOCALHOST/cb", "is not lowercase letters"), ("http://localhost./cb", "is not lowercase letters"),
        ("http://localhost:0080/cb", "has a port"), ("http://localhost:65536/cb", "has a port"),
        ("http://[::ffff:127.0.0.1]/cb", "IPv6 host other than [::1]"), ("http://127.0.0.1/cb?%zz", "'%' that does not"),
        ("https://evil.example/steal", "neither a loopback address nor this server"),
    ])
    func refusesWithAReason(raw: String, reason: String) {
        let error = #expect(throws: StratusError.self) {
            _ = try SignInCallback(raw, serverOrigin: nil, serverAuthority: nil)
        }
        #expect(error?.code == .badRequest)
        #expect(error?.reason.contains(reason) == true, "\(raw): \(error?.reason ?? "")")
    }

    @Test func originOfAConfiguredURL() {
        #expect(SignInCallback.origin(of: "https://stratus.example.com:443/") == "https://stratus.example.com")
        #expect(SignInCallback.origin(of: "http://stratus.example:8080/base") == "http://stratus.example:8080")
        #expect(SignInCallback.origin(of: "https://Stratus.example") == nil)
        #expect(SignInCallback.origin(of: "ftp://stratus.example") == nil)
    }

    @Test func theServersOwnOriginIsAccepted() throws {
        let origin = "https://stratus.example"
        let callback = try SignInCallback("https://stratus.example/app/done", serverOrigin: origin, serverAuthority: nil)
        #expect(callback.origin == origin)
        _ = try SignInCallback("https://stratus.example:443/x", serverOrigin: origin, serverAuthority: nil)
        #expect(throws: StratusError.self) {
            _ = try SignInCallback("http://stratus.example/app", serverOrigin: origin, serverAuthority: nil)
        }
        #expect(throws: StratusError.self, "a configured origin wins over the Host header") {
            _ = try SignInCallback("https://evil.example/", serverOrigin: origin, serverAuthority: "evil.example")
        }
    }

    @Test func withoutAnOriginTheHostHeaderIsCompared() throws {
        let raw = "http://stratus.example:8080/cb"
        let callback = try SignInCallback(raw, serverOrigin: nil, serverAuthority: "Stratus.Example:8080")
        #expect(callback.origin == "http://stratus.example:8080")
        #expect(throws: StratusError.self) { _ = try SignInCallback(raw, serverOrigin: nil, serverAuthority: "stratus.example") }
        #expect(throws: StratusError.self) { _ = try SignInCallback(raw, serverOrigin: nil, serverAuthority: nil) }
    }
}

/// Which subscriptions a committed record change fires, and what their notifications say.
@Suite struct SubscriptionMatcherTests {
    let database = DatabaseLocator(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice")
    let inWork = Query(recordType: "Note", filterBy: [QueryFilter(comparator: .equals, fieldName: "folder", fieldValue: .string("work"))])
    var matcher: SubscriptionMatcher { SubscriptionMatcher(database: database, schema: Schema()) }

    func record(_ name: String, type: String = "Note", folder: String = "work", creator: String = "_alice") -> StoredRecord {
        var writer = JSONWriter()
        RecordDictionary.writeFields(["title": .string(name), "folder": .string(folder)], to: &writer)
        let stamp = RecordStamp(timestamp: 1_000, userRecordName: creator)
        return StoredRecord(
            name: name, recordType: type, changeTag: "t1", fieldsJSON: writer.bytes, created: stamp, modified: stamp,
            deleted: false, sequence: 1)
    }

    func deletion(of record: StoredRecord) -> RecordChange {
        var tombstone = record
        tombstone.fieldsJSON = []
        tombstone.deleted = true
        return RecordChange(previous: record, record: tombstone)
    }

    func subscription(_ definition: SubscriptionDictionary, subscriber: String = "_alice") -> StoredSubscription {
        StoredSubscription(database: database, subscriber: subscriber, definition: definition, createdAt: 0)
    }

    @Test func aQuerySubscriptionFiresOnlyOnTheKindsItNames() throws {
        let note = record("n1")
        let changes = [RecordChange(previous: nil, record: note), RecordChange(previous: note, record: note), deletion(of: note)]
        let some = subscription(SubscriptionDictionary(subscriptionID: "q", subscriptionType: .query, query: inWork, firesOn: [.create, .delete]))
        let firings = matcher.firings(of: changes, zone: ZoneID.defaultZoneName, subscriptions: [some])
        #expect(firings.compactMap(\.notification.queryNotificationReason) == [QueryNotificationReason.recordCreated, .recordDeleted])
        let first = try #require(firings.first).notification
        #expect(first.notificationType == .query && first.subscriptionID == "q" && first.recordName == "n1")
        #expect(first.containerIdentifier == "iCloud.test" && first.databaseScope == .private)
        #expect(first.zoneID == ZoneID(zoneName: ZoneID.defaultZoneName, ownerRecordName: "_alice"))
        let all = subscription(SubscriptionDictionary(subscriptionID: "all", subscriptionType: .query, query: inWork))
        #expect(matcher.firings(of: changes, zone: ZoneID.defaultZoneName, subscriptions: [all]).count == 3)
    }

    @Test func aSearchOfEverythingReadsTheSearchableFieldsAsAQueryDoes() {
        let search = Query(
            recordType: "Note",
            filterBy: [QueryFilter(comparator: .containsAllTokens, fieldName: QueryFilter.allSearchableFields, fieldValue: .string("work"))])
        let searching = subscription(SubscriptionDictionary(subscriptionID: "s", subscriptionType: .query, query: search))
        let created = [RecordChange(previous: nil, record: record("n1", folder: "work"))]
        func schema(_ indexes: FieldIndexes) -> Schema {
            Schema(recordTypes: ["Note": RecordTypeSchema(fields: ["folder": FieldSchema(type: .string, indexes: indexes)])])
        }
        let queryable = SubscriptionMatcher(database: database, schema: schema([.queryable]))
        #expect(queryable.firings(of: created, zone: ZoneID.defaultZoneName, subscriptions: [searching]).isEmpty,
                "a field that is not SEARCHABLE is not searched")
        let searchable = SubscriptionMatcher(database: database, schema: schema([.queryable, .searchable]))
        #expect(searchable.firings(of: created, zone: ZoneID.defaultZoneName, subscriptions: [searching]).count == 1)
    }

    @Test func filtersSeeTheRecordBeforeOrAfterTheChange() {
        func moved(_ name: String, _ from: String, _ to: String) -> RecordChange {
            RecordChange(previous: record(name, folder: from), record: record(name, folder: to))
        }
        let changes = [
            RecordChange(previous: nil, record: record("a", folder: "home")), RecordChange(previous: nil, record: record("b")),
            moved("c", "work", "home"), moved("d", "home", "home"), moved("e", "home", "work"),
            deletion(of: record("f")), deletion(of: record("g", folder: "home")),
            RecordChange(previous: nil, record: record("h", type: "Task")),
        ]
        let query = subscription(SubscriptionDictionary(subscriptionID: "q", subscriptionType: .query, query: inWork))
        let firings = matcher.firings(of: changes, zone: ZoneID.defaultZoneName, subscriptions: [query])
        #expect(firings.compactMap(\.notification.recordName) == ["b", "c", "e", "f"])
    }

    @Test func querySubscriptionsCoverTheirZonesAndMayFireOnce() {
        let changes = [RecordChange(previous: nil, record: record("n1")), RecordChange(previous: nil, record: record("n2"))]
        let plain = subscription(SubscriptionDictionary(subscriptionID: "default", subscriptionType: .query, query: inWork, firesOnce: true))
        let wide = subscription(SubscriptionDictionary(subscriptionID: "wide", subscriptionType: .query, query: inWork, zoneWide: true))
        let work = subscription(
            SubscriptionDictionary(subscriptionID: "work", subscriptionType: .query, query: inWork, zoneID: ZoneID(zoneName: "Work")))
        func ids(_ zone: String) -> [String] {
            matcher.firings(of: changes, zone: zone, subscriptions: [plain, wide, work]).map(\.subscription.subscriptionID)
        }
        #expect(ids(ZoneID.defaultZoneName) == ["default", "wide", "wide"])
        #expect(ids("Work") == ["wide", "wide", "work", "work"])
        #expect(ids("Other") == ["wide", "wide"])
    }

    @Test func aZoneSubscriptionFiresOncePerBatchOfItsZone() {
        let notes = [RecordChange(previous: nil, record: record("a")), RecordChange(previous: nil, record: record("b"))]
        let zone = subscription(SubscriptionDictionary(subscriptionID: "z", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Work")))
        let tasks = subscription(
            SubscriptionDictionary(subscriptionID: "zt", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Work"), recordType: "Task"))
        let firings = matcher.firings(of: notes, zone: "Work", subscriptions: [zone, tasks])
        #expect(firings.map(\.subscription.subscriptionID) == ["z"])
        #expect(firings.first?.notification.notificationType == .recordZone)
        #expect(firings.first?.notification.zoneID?.zoneName == "Work")
        #expect(firings.first?.notification.recordName == nil)
        #expect(matcher.firings(of: notes, zone: "Other", subscriptions: [zone]).isEmpty)
        let withTask = notes + [RecordChange(previous: nil, record: record("t", type: "Task"))]
        #expect(matcher.firings(of: withTask, zone: "Work", subscriptions: [zone, tasks]).count == 2)
    }

    @Test func aDatabaseSubscriptionFiresForCustomZonesOnly() {
        let changes = [RecordChange(previous: nil, record: record("a"))]
        let db = subscription(SubscriptionDictionary(subscriptionID: "db", subscriptionType: .database))
        let zone = subscription(SubscriptionDictionary(subscriptionID: "z", subscriptionType: .zone, zoneID: ZoneID(zoneName: "Work")))
        #expect(matcher.firings(of: changes, zone: ZoneID.defaultZoneName, subscriptions: [db]).isEmpty)
        let firings = matcher.firings(of: changes, zone: "Work", subscriptions: [db])
        #expect(firings.count == 1 && firings.first?.notification.notificationType == .database)
        #expect(firings.first?.notification.zoneID == nil)
        func ids(_ name: String, deleted: Bool) -> [String] {
            matcher.firings(ofZone: name, deleted: deleted, subscriptions: [db, zone]).map(\.subscription.subscriptionID)
        }
        #expect(ids("Work", deleted: false) == ["db"])
        #expect(ids("Work", deleted: true) == ["db", "z"])
        #expect(ids("Other", deleted: true) == ["db"])
    }

    @Test func notificationsCarryDesiredKeysButNotTheKeyList() {
        let info = NotificationInfo(alertBody: "Changed", desiredKeys: ["title", "missing"])
        let query = subscription(
            SubscriptionDictionary(subscriptionID: "q", subscriptionType: .query, query: Query(recordType: "Note"), notificationInfo: info))
        let note = record("n1")
        let firings = matcher.firings(
            of: [RecordChange(previous: nil, record: note), deletion(of: note)], zone: ZoneID.defaultZoneName, subscriptions: [query])
        let expected: [String: FieldValue]? = ["title": .string("n1")]
        #expect(firings.first?.notification.recordFields == expected)
        #expect(firings.count == 2 && firings.last?.notification.recordFields == nil)
        #expect(firings.first?.notification.notificationInfo?.alertBody == "Changed")
        #expect(firings.first?.notification.notificationInfo?.desiredKeys == nil)
    }

    @Test func publicSubscribersOnlyHearOfRecordsTheyMayRead() {
        let publicDB = DatabaseLocator(container: "iCloud.test", environment: .production, scope: .public, owner: "")
        let schema = Schema(recordTypes: ["Note": RecordTypeSchema(grants: [SchemaGrant(.read, to: "_creator")])])
        let definition = SubscriptionDictionary(subscriptionID: "q", subscriptionType: .query, query: Query(recordType: "Note"))
        let subscribers = ["_bob", "_alice"].map {
            StoredSubscription(database: publicDB, subscriber: $0, definition: definition, createdAt: 0)
        }
        let firings = SubscriptionMatcher(database: publicDB, schema: schema).firings(
            of: [RecordChange(previous: nil, record: record("n1", creator: "_alice"))], zone: ZoneID.defaultZoneName,
            subscriptions: subscribers)
        #expect(firings.map(\.subscription.subscriber) == ["_alice"])
    }
}

/// A WebSocket stand-in that counts what the queue tells it.
private final class RecordingSink: PushSink {
    private let counts = Mutex((waiting: 0, closed: 0))
    func notificationsWaiting() { counts.withLock { $0.waiting += 1 } }
    func close() { counts.withLock { $0.closed += 1 } }
    var waiting: Int { counts.withLock { $0.waiting } }
    var closed: Int { counts.withLock { $0.closed } }
}

/// A device's queue keeps the newest notification per subscription and zone, bounded, and says when it dropped some.
@Suite struct PushDeviceTests {
    static func device(limit: Int = 10, clock: ManualClock = ManualClock()) -> PushDevice {
        let owner = PushDevice.Owner(container: "iCloud.test", environment: .development, userRecordName: "_alice")
        return PushDevice(tokenHash: "hash", owner: owner, deviceID: "phone", limit: limit, clock: clock.serverClock, metrics: ServerMetrics())
    }

    static func entry(_ subscription: String, zone: String = "Work", id: String) -> PushDevice.Entry {
        let notification = PushNotificationDictionary(
            notificationID: id, notificationType: .recordZone, subscriptionID: subscription, containerIdentifier: "iCloud.test",
            databaseScope: .private, zoneID: ZoneID(zoneName: zone))
        return PushDevice.Entry(key: subscription + "\u{0}" + zone, frame: ByteBuffer(string: id), payload: notification, queuedAt: 0)
    }

    /// The notification IDs and missed flag of a batch; `nil` when the connection is closed.
    static func batch(_ delivery: PushDevice.Delivery) -> (ids: [String], missed: Bool)? {
        guard case .batch(let entries, let missed) = delivery else { return nil }
        return (entries.map(\.payload.notificationID), missed)
    }

    static func isClosed(_ delivery: PushDevice.Delivery) -> Bool {
        if case .closed = delivery { return true }
        return false
    }

    @Test func aNewDeviceIsToldItMayHaveMissedNotificationsOnce() throws {
        let device = Self.device()
        let first = device.attach(sessionHash: nil)
        #expect(first.missedNotifications)
        let taken = try #require(Self.batch(device.take(first.connection)))
        #expect(taken.ids.isEmpty && !taken.missed)
        #expect(!device.attach(sessionHash: nil).missedNotifications)
    }

    @Test func aNewerNotificationReplacesTheWaitingOneOfItsSubscriptionAndZone() throws {
        let device = Self.device()
        let connection = device.attach(sessionHash: nil).connection
        device.enqueue([Self.entry("s1", id: "1"), Self.entry("s2", id: "2")])
        device.enqueue([Self.entry("s1", id: "3"), Self.entry("s1", zone: "Home", id: "4")])
        let taken = try #require(Self.batch(device.take(connection)))
        #expect(taken.ids == ["2", "3", "4"])
        #expect(!taken.missed)
        #expect(Self.batch(device.take(connection))?.ids.isEmpty == true, "taking empties the queue")
    }

    @Test func overTheLimitTheOldestIsDroppedAndTheDeviceToldItMissedSome() throws {
        let device = Self.device(limit: 3)
        let connection = device.attach(sessionHash: nil).connection
        device.enqueue((1...5).map { Self.entry("s\($0)", id: "\($0)") })
        let taken = try #require(Self.batch(device.take(connection)))
        #expect(taken.ids == ["3", "4", "5"])
        #expect(taken.missed)
        #expect(Self.batch(device.take(connection))?.missed == false)

        let coalesced = Self.device(limit: 2)
        let other = coalesced.attach(sessionHash: nil).connection
        coalesced.enqueue([Self.entry("s1", id: "1"), Self.entry("s1", id: "2"), Self.entry("s1", id: "3"), Self.entry("s2", id: "4")])
        let kept = try #require(Self.batch(coalesced.take(other)))
        #expect(kept.ids == ["3", "4"] && !kept.missed, "replacements do not count against the limit")
        coalesced.enqueue([], missed: true)
        #expect(Self.batch(coalesced.take(other))?.missed == true)
    }

    @Test func aNewConnectionClosesTheOldOneAndKeepsTheQueue() throws {
        let device = Self.device()
        let firstSink = RecordingSink()
        let old = device.attach(sessionHash: nil, sink: firstSink).connection
        device.enqueue([Self.entry("s1", id: "1")])
        #expect(firstSink.waiting == 1)
        let secondSink = RecordingSink()
        let new = device.attach(sessionHash: nil, sink: secondSink)
        #expect(firstSink.closed == 1 && secondSink.closed == 0)
        #expect(!new.missedNotifications)
        #expect(Self.isClosed(device.take(old)), "the old connection is closed")
        #expect(Self.batch(device.take(new.connection))?.ids == ["1"])
    }

    @Test func aDetachedDeviceKeepsItsQueueUntilItComesBack() throws {
        let clock = ManualClock()
        let device = Self.device(clock: clock)
        let first = device.attach(sessionHash: nil).connection
        #expect(!device.isAway(since: clock.milliseconds + 3_600_000), "a connected device is never away")
        clock.advance(bySeconds: 10)
        device.detach(first)
        #expect(!device.isAway(since: clock.milliseconds - 1), "it left after that")
        clock.advance(bySeconds: 1)
        #expect(device.isAway(since: clock.milliseconds - 500), "it left before that")
        device.enqueue([Self.entry("s1", id: "1")])
        let back = device.attach(sessionHash: nil)
        #expect(!back.missedNotifications)
        #expect(Self.batch(device.take(back.connection))?.ids == ["1"])
    }

    @Test func disconnectingBySessionEndsOnlyThatSessionsConnection() async {
        let device = Self.device()
        let connection = device.attach(sessionHash: "session-1").connection
        device.disconnect(sessionHash: "session-2")
        #expect(!Self.isClosed(device.take(connection)))
        let waiting = Task { await device.next(connection) }
        device.disconnect(sessionHash: "session-1")
        let delivery = await waiting.value
        #expect(Self.isClosed(delivery))
    }

    @Test func aWaitingPollReceivesTheNextNotification() async {
        let device = Self.device()
        let connection = device.attach(sessionHash: nil).connection
        let waiting = Task { await device.next(connection) }
        device.enqueue([Self.entry("s1", id: "1")])
        let delivery = await waiting.value
        #expect(Self.batch(delivery)?.ids == ["1"])
    }
}

/// The request log never holds a secret that a path carries (a push token, a share link's GUID).
@Suite struct LoggedPathTests {
    @Test func secretParametersAreReplacedByTheirNames() {
        #expect(ObservabilityMiddleware.loggedPath("/push/1/s3cr3t", endpoint: "/push/1/{token}") == "/push/1/{token}")
        #expect(
            ObservabilityMiddleware.loggedPath("/share/abc123", endpoint: "/share/{shortGUID}") == "/share/{shortGUID}")
    }

    @Test func pathsWithoutSecretsAreLoggedAsTheyAre() {
        let path = "/database/1/iCloud.app/development/private/records/modify"
        #expect(
            ObservabilityMiddleware.loggedPath(path, endpoint: "/database/1/{container}/{environment}/{database}/records/modify")
                == path)
    }

    @Test func anUnmatchedPathUnderASecretPrefixIsCut() {
        #expect(ObservabilityMiddleware.loggedPath("/push/1/s3cr3t/extra", endpoint: "NotFound") == "/push/1/…")
    }
}

/// Change-feed pages read ahead (``FeedPagePrefetch``) stay within their bounds: how far ahead, how
/// many, how large and how old.
@Suite struct FeedPagePrefetchTests {
    let clock = ManualClock(milliseconds: 1_000_000)
    let locator = DatabaseLocator(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice")

    func key(_ token: String?) -> FeedPagePrefetch.Key {
        FeedPagePrefetch.Key(
            request: RecordChangesRequest(zoneID: ZoneID(zoneName: "Z"), syncToken: token, resultsLimit: 4),
            locator: locator, baseURL: "http://127.0.0.1")
    }

    /// A page of a feed whose pages end at tokens "1", "2", … and whose last page is `last`.
    static func page(after token: String?, last: Int, bytes: Int = 10) -> ZoneChangesPage {
        let number = (token.flatMap(Int.init) ?? 0) + 1
        return ZoneChangesPage(
            body: Array(repeating: UInt8(ascii: " "), count: bytes), zoneName: "Z",
            locator: DatabaseLocator(container: "iCloud.test", environment: .development, scope: .private, owner: "_alice"),
            limit: 4, position: ChangePosition(scopeID: 1, sequence: Int64(number)), syncToken: "\(number)",
            moreComing: number < last, recordsRead: 4)
    }

    /// The records of ``page(after:last:bytes:)``, read; `fieldBytes` their fields' size.
    static func read(after token: String?, last: Int, bytes: Int = 10, fieldBytes: Int = 10) -> ZoneChangesRead {
        let page = page(after: token, last: last, bytes: bytes)
        return ZoneChangesRead(syncToken: page.syncToken, moreComing: page.moreComing, fieldBytes: fieldBytes) { page }
    }

    func prefetch() -> FeedPagePrefetch {
        FeedPagePrefetch(clock: clock.serverClock)
    }

    @Test func readsTheGivenDepthAheadAndStopsAtTheLastPage() async {
        let prefetch = prefetch()
        let reads = Mutex<[String?]>([])
        let read: FeedPagePrefetch.Read = { request in
            reads.withLock { $0.append(request.syncToken) }
            return Self.read(after: request.syncToken, last: 3)
        }
        prefetch.readAhead(key("1"), depth: 2, read: read)
        #expect(await eventually { reads.withLock { $0.count } == 2 })
        #expect(reads.withLock { $0 } == ["1", "2"], "pages 2 and 3, not past the last")
        #expect(await prefetch.take(key("1"))?.syncToken == "2")
        // Taking page 2 and asking for two more reads none: page 3 is read, and it is the last.
        prefetch.readAhead(key("2"), depth: 2, read: read)
        #expect(await prefetch.take(key("2"))?.syncToken == "3")
        #expect(reads.withLock { $0.count } == 2)
        #expect(await prefetch.take(key("1")) == nil, "a page is handed over once")
    }

    @Test func readsThePageAfterOneWhileItIsWritten() async {
        let prefetch = prefetch()
        let pagesWhenWritten = Mutex<[String?: Int]>([:])
        let read: FeedPagePrefetch.Read = { request in
            let page = Self.page(after: request.syncToken, last: 3)
            return ZoneChangesRead(syncToken: page.syncToken, moreComing: page.moreComing, fieldBytes: 10) {
                let count = prefetch.count
                pagesWhenWritten.withLock { $0[request.syncToken] = count }
                return page
            }
        }
        prefetch.readAhead(key(nil), depth: 2, read: read)
        #expect(await eventually { pagesWhenWritten.withLock { $0.count } == 2 })
        #expect(pagesWhenWritten.withLock { $0[nil] } == 2, "page 2 was being read while page 1 was written")
        #expect(await prefetch.take(key(nil))?.syncToken == "1")
        #expect(await prefetch.take(key("1"))?.syncToken == "2")
    }

    @Test func keepsAtMostMaxPagesAndNoneTooLargeOrTooOld() async {
        let prefetch = prefetch()
        let read: FeedPagePrefetch.Read = { request in Self.read(after: request.syncToken, last: 1_000) }
        for start in 0..<(FeedPagePrefetch.maxPages + 10) { prefetch.readAhead(key("x\(start)"), depth: 1, read: read) }
        #expect(prefetch.count == FeedPagePrefetch.maxPages)
        clock.advance(bySeconds: Double(FeedPagePrefetch.maxAgeMilliseconds) / 1000)
        prefetch.readAhead(key("y"), depth: 1, read: read)
        #expect(prefetch.count == 1, "pages too old to hand over make room")

        let large = self.prefetch()
        large.readAhead(key(nil), depth: 2) { request in
            Self.read(after: request.syncToken, last: 5, bytes: FeedPagePrefetch.maxPageBytes + 1)
        }
        #expect(await large.take(key(nil)) == nil, "a page over the size bound is not kept")
        let largeFields = self.prefetch()
        largeFields.readAhead(key(nil), depth: 2) { request in
            Self.read(after: request.syncToken, last: 5, fieldBytes: FeedPagePrefetch.maxPageBytes + 1)
        }
        #expect(await largeFields.take(key(nil)) == nil, "nor one whose records' fields are over it")
        #expect(largeFields.count == 0, "and the pages after it are not read ahead")

        let old = self.prefetch()
        old.readAhead(key(nil), depth: 1, read: read)
        clock.advance(bySeconds: Double(FeedPagePrefetch.maxAgeMilliseconds) / 1000)
        #expect(await old.take(key(nil)) == nil, "a page not asked for in time is dropped")
    }
}

/// The server's log lines carry the logger's metadata, set before the line, merged with the line's
/// own, in both formats.
@Suite struct ServerLogHandlerTests {
    @Test func textLinesCarryMetadataInKeyOrder() throws {
        let lines = LockedLines()
        var logger = Logger(label: "stratus-test") { ServerLogHandler(label: $0, format: .text, metadataProvider: nil, output: lines.append) }
        logger.logLevel = .debug
        logger[metadataKey: "request"] = "4B1D"
        logger.debug("answered", metadata: ["status": "200", "method": "POST"])
        logger.trace("below the level")
        let written = lines.all
        #expect(written.count == 1)
        let line = try #require(written.first)
        #expect(line.hasSuffix(" debug stratus-test: method=POST request=4B1D status=200 [StratusServerTests] answered\n"), "\(line)")
    }

    @Test func jsonLinesAreOneObjectEach() throws {
        let lines = LockedLines()
        var logger = Logger(label: "stratus-test") { ServerLogHandler(label: $0, format: .json, metadataProvider: nil, output: lines.append) }
        logger[metadataKey: "request"] = "4B1D"
        logger.info("answered", metadata: ["status": "403"])
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("}\n") && !line.dropLast().contains("\n"))
        let object = try JSONValue.parse(Array(line.utf8)).object()
        #expect(try object.decode("message") as String == "answered")
        #expect(try object.decode("level") as String == "info")
        #expect(try object.decode("request") as String == "4B1D")
        #expect(try object.decode("status") as String == "403")
    }
}

/// Lines a handler wrote, kept across threads.
private final class LockedLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    @Sendable func append(_ line: [UInt8]) { lines.withLock { $0.append(String(decoding: line, as: UTF8.self)) } }
}

/// The cache of API tokens and sessions: a revocation is never undone by a read that raced it.
@Suite struct CredentialCacheTests {
    @Test func aValueLoadedWhileItWasRemovedIsNotKept() async {
        let cache = CredentialCache<String>(clock: ManualClock().serverClock)
        // The session is read, then signed out (removed here) before the read's answer is kept.
        let raced = await cache.value(for: "session") {
            cache.remove("session")
            return "alice"
        }
        #expect(raced == "alice", "the request that read it is answered")
        #expect(await cache.value(for: "session") { nil } == nil, "but the value is not kept past its revocation")
        _ = await cache.value(for: "session") { "bob" }
        #expect(await cache.value(for: "session") { nil } == "bob", "later reads are kept again")
    }
}

/// An owner's save of a share merged with the participants' acceptances it raced.
@Suite struct ShareStateMergeTests {
    let owner = ShareState.Participant(participantID: "o", userRecordName: "_ada", type: .owner, permission: .readWrite, status: .accepted)

    @Test func aParticipantWhoJoinedMeanwhileTakesTheNewPublicPermission() {
        let eve = ShareState.Participant(participantID: "e", userRecordName: "_eve", type: .publicUser, permission: .readWrite, status: .accepted)
        let stored = ShareState(shortGUID: "g", publicPermission: .readWrite, participants: [owner, eve])
        // The owner read the share before eve joined, and lowers its public permission.
        let written = ShareState(shortGUID: "g", publicPermission: .readOnly, participants: [owner])
        #expect(written.keepingStatuses(of: stored, writer: "_ada").participant("_eve")?.permission == .readOnly)
        let closed = ShareState(shortGUID: "g", publicPermission: .none, participants: [owner])
        #expect(closed.keepingStatuses(of: stored, writer: "_ada").participant("_eve")?.status == .removed)
    }
}
