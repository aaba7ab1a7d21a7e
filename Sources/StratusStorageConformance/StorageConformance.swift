import StratusModel
public import StratusStorage
public import Testing

/// The behaviour every storage backend must show, as checks a backend's test target runs against
/// fresh instances of that backend:
///
/// ```swift
/// @Test(arguments: StorageConformance.checks)
/// func conformance(_ check: StorageConformance.Check) async throws {
///     try await check.run(makeFreshStorage())
/// }
/// ```
public enum StorageConformance {
    /// One named check.
    public struct Check: Sendable, CustomTestStringConvertible {
        /// What the check verifies.
        public let name: String
        /// Runs the check against an empty storage instance.
        public let run: @Sendable (any StratusStorage) async throws -> Void

        public var testDescription: String { name }
    }

    /// Every check, in a stable order.
    public static let checks: [Check] = [
        Check(name: "settings keep their first value unless set", run: settings),
        Check(name: "containers, API tokens, users and sessions", run: accounts),
        Check(name: "disabling a user or replacing a password ends their sessions; the audit log keeps order", run: administration),
        Check(
            name: "federated identities: created with their user or not at all, linked once, listed oldest first; a sign-in without an e-mail keeps the known one",
            run: AccountCheck.federatedIdentities),
        Check(name: "nonces: claimed once, by one of racing claimants, and again once expired", run: AccountCheck.nonces),
        Check(
            name: "a username and password given to an account keep its sessions and identities; a taken username fails",
            run: AccountCheck.usernameAndPassword),
        Check(
            name: "deleting a user removes their private data, shares, place in others' shares, sessions and identities; their public records stay",
            run: AccountCheck.deletion),
        Check(name: "zones: default zone, create, delete, re-create", run: zones),
        Check(name: "the seven operation types", run: operationTypes),
        Check(name: "change tags change on every write", run: changeTags),
        Check(name: "an atomic batch with a failure writes nothing", run: atomicBatches),
        Check(name: "record change feed: order, paging, tombstones, one entry per record", run: recordFeed),
        Check(name: "record change feed filtered by record type", run: recordTypeFilter),
        Check(name: "database change feed: created, changed, deleted zones", run: databaseFeed),
        Check(name: "concurrent writers lose nothing and each change is in the feed once", run: concurrentWriters),
        Check(name: "concurrent writes to one zone each keep their outcome", run: concurrentOutcomes),
        Check(name: "purged tombstones expire older positions", run: tombstonePurge),
        Check(name: "only the creator modifies when the rule is on", run: creatorRule),
        Check(name: "record size and field count limits", run: recordLimits),
        Check(name: "databases of different owners are separate", run: isolation),
        Check(name: "reference actions: VALIDATE guards, DELETE_SELF cascades", run: referenceActions),
        Check(name: "hierarchies: a share reaches every record below its root, and leaves them when it goes", run: hierarchies),
        Check(name: "public database: VALIDATE and DELETE_SELF bind only records of one creator", run: publicReferences),
        Check(name: "a batch reports every change it committed, cascades included, with the previous state", run: committedChanges),
        Check(name: "schema: development grows it, production enforces it, updates are atomic", run: schemas),
        Check(name: "queries read the index in order, page by cursor, and follow index changes", run: queries),
        Check(name: "records of equal values come in creation order, then by name, in both plans", run: IndexOrderCheck.run),
        Check(name: "a record imported over one created at another time leaves no index entry behind", run: IndexOrderCheck.importOver),
        Check(name: "assets: uploaded or held ones only, collected when no record holds them", run: assets),
        Check(name: "deleting an environment's data leaves the other environment alone", run: environmentData),
        Check(name: "usage: what each account holds follows its writes, zones, imports and environments", run: UsageCheck.accounting),
        Check(name: "quotas: a write past an account's or the container's quota fails alone, shrinking never does", run: UsageCheck.quotas),
        Check(name: "uploads: a ticket's bytes and a user's bytes not yet held by a record are bounded", run: UsageCheck.uploads),
        Check(name: "subscriptions: saved, replaced, listed per subscriber, deleted, gone with their environment", run: subscriptions),
        Check(name: "push tokens: created unregistered, registered to a user, marked used, purged when unused", run: pushTokens),
        Check(
            name: "push endpoints: registered per user, most recent first, bounded per user, taken over by another user, deleted, purged",
            run: pushEndpoints),
    ]

    static func administration(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        for (name, username) in [("_u1", "ann"), ("_u2", "bob")] {
            try await storage.createUser(
                UserInfo(container: "c", recordName: name, username: username, passwordHash: "x", createdAt: 1))
        }
        for (hash, user) in [("s1", "_u1"), ("s2", "_u1"), ("s3", "_u2")] {
            #expect(
                try await storage.createSession(
                    hash: hash, session: SessionInfo(container: "c", userRecordName: user, expiresAt: 9), passwordHash: "x"))
        }
        #expect(try await storage.setUserDisabled(true, container: "c", recordName: "_u1", at: 5).sorted() == ["s1", "s2"])
        #expect(try await storage.user(container: "c", recordName: "_u1")?.disabledAt == 5)
        #expect(try await storage.session(hash: "s1") == nil)
        #expect(try await storage.session(hash: "s3") != nil)
        // A sign-in that read the user before it was disabled, or before its new password, starts nothing.
        let late = SessionInfo(container: "c", userRecordName: "_u1", expiresAt: 9)
        #expect(try await storage.createSession(hash: "s4", session: late, passwordHash: "x") == false)
        #expect(try await storage.session(hash: "s4") == nil)
        #expect(
            try await storage.createSession(
                hash: "s5", session: SessionInfo(container: "c", userRecordName: "_u2", expiresAt: 9), passwordHash: "old")
                == false)
        #expect(try await storage.setUserDisabled(false, container: "c", recordName: "_u1", at: 6) == [])
        #expect(try await storage.user(container: "c", recordName: "_u1")?.disabledAt == nil)
        #expect(try await storage.setPasswordHash("y", container: "c", recordName: "_u2") == ["s3"])
        #expect(try await storage.user(container: "c", recordName: "_u2")?.passwordHash == "y")
        await expectError(.notFound) { _ = try await storage.setUserDisabled(true, container: "c", recordName: "_x", at: 1) }
        await expectError(.notFound) { _ = try await storage.setPasswordHash("z", container: "other", recordName: "_u1") }

        for index in 0..<3 {
            try await storage.appendAuditEntry(AuditEntry(time: Int64(index), actor: "admin", action: "POST /\(index)", status: 200))
        }
        #expect(try await storage.auditEntries(limit: 2).map(\.action) == ["POST /2", "POST /1"])
    }

    static let alice = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_alice")
    static let bob = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_bob")

    static func context(_ user: String = "_alice", timestamp: Int64 = 1_000, creatorOnly: Bool = false,
                        limits: Limits = Limits()) -> WriteContext {
        WriteContext(userRecordName: user, deviceID: "device-1", timestamp: timestamp,
                     enforcesGrants: creatorOnly, limits: limits)
    }

    static func create(_ name: String, _ fields: [String: FieldValue] = [:], type: String = "Note") -> RecordWrite {
        RecordWrite(operationType: .create, recordName: name, recordType: type, fields: fields)
    }

    @discardableResult
    static func write(
        _ storage: any StratusStorage, _ writes: [RecordWrite], zone: String = "Z", in database: DatabaseLocator = alice,
        atomic: Bool = true, context: WriteContext = context()
    ) async throws -> [RecordWriteResult] {
        try await storage.modifyRecords(writes, zone: zone, in: database, atomic: atomic, context: context).results
    }

    static func code(_ result: RecordWriteResult) -> ServerErrorCode? {
        if case .failure(let failure) = result { return failure.code }
        return nil
    }

    static func expectError(_ code: ServerErrorCode, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(code.rawValue), but the call succeeded")
        } catch let error as StratusError {
            #expect(error.code == code, "\(error)")
        } catch {
            Issue.record("expected \(code.rawValue), got \(error)")
        }
    }

    /// Reads a zone's whole feed from `position`, page by page.
    static func readFeed(
        _ storage: any StratusStorage, zone: String = "Z", in database: DatabaseLocator = alice,
        after position: ChangePosition? = nil, pageSize: Int = 200
    ) async throws -> (records: [StoredRecord], position: ChangePosition, pages: Int) {
        var records: [StoredRecord] = []
        var position = position
        var pages = 0
        while true {
            let page = try await storage.recordChanges(
                zone: zone, in: database, after: position, limit: pageSize, recordTypes: nil)
            records += page.records
            position = page.position
            pages += 1
            if !page.moreComing { return (records, page.position, pages) }
        }
    }

    // MARK: Checks

    static func settings(_ storage: any StratusStorage) async throws {
        #expect(try await storage.setting("k") == nil)
        #expect(try await storage.initializeSetting("k", to: "first") == "first")
        #expect(try await storage.initializeSetting("k", to: "second") == "first")
        try await storage.setSetting("k", to: "third")
        #expect(try await storage.setting("k") == "third")
    }

    static func accounts(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: false, createdAt: 1))
        await expectError(.exists) {
            try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 2))
        }
        #expect(try await storage.container("c")?.allowsSignUp == false)
        #expect(try await storage.containers().map(\.identifier) == ["c"])
        try await storage.createAPIToken(hash: "h1", container: "c", name: "app", createdAt: 1)
        #expect(try await storage.containerForAPIToken(hash: "h1") == "c")
        #expect(try await storage.containerForAPIToken(hash: "h2") == nil)
        try await storage.createAPIToken(hash: "h3", container: "c", name: "old", createdAt: 2)
        #expect(try await storage.deleteAPIToken(hash: "h3", container: "other") == false)
        #expect(try await storage.deleteAPIToken(hash: "h3", container: "c"))
        #expect(try await storage.deleteAPIToken(hash: "h3", container: "c") == false)
        #expect(try await storage.containerForAPIToken(hash: "h3") == nil)
        #expect(try await storage.apiTokens(container: "c").map(\.name) == ["app"])

        let user = UserInfo(container: "c", recordName: "_u1", username: "ann", passwordHash: "x", createdAt: 1)
        try await storage.createUser(user)
        await expectError(.exists) {
            try await storage.createUser(
                UserInfo(container: "c", recordName: "_u2", username: "ann", passwordHash: "y", createdAt: 1))
        }
        #expect(try await storage.user(container: "c", username: "ann") == user)
        #expect(try await storage.user(container: "c", recordName: "_u1") == user)
        #expect(try await storage.user(container: "other", username: "ann") == nil)

        // E-mail addresses: lowercased, one user each, cleared with nil; discoverability off by default.
        try await storage.createUser(
            UserInfo(container: "c", recordName: "_u3", username: "bob", passwordHash: "z", createdAt: 2))
        try await storage.setEmailAddress("Ann@Example.com", container: "c", recordName: "_u1")
        #expect(try await storage.user(container: "c", emailAddress: "ANN@example.com")?.recordName == "_u1")
        await expectError(.exists) {
            try await storage.setEmailAddress("ann@example.com", container: "c", recordName: "_u3")
        }
        await expectError(.notFound) {
            try await storage.setEmailAddress("x@example.com", container: "c", recordName: "_missing")
        }
        try await storage.setEmailAddress("ann@example.com", container: "c", recordName: "_u1")
        #expect(try await storage.user(container: "c", recordName: "_u1")?.discoverable == false)
        try await storage.setDiscoverability(true, givenName: "Ann", familyName: nil, container: "c", recordName: "_u1")
        let found = try await storage.user(container: "c", emailAddress: "ann@example.com")
        #expect(found?.discoverable == true && found?.givenName == "Ann" && found?.familyName == nil)
        #expect(found?.emailAddress == "ann@example.com")
        try await storage.setEmailAddress(nil, container: "c", recordName: "_u1")
        #expect(try await storage.user(container: "c", emailAddress: "ann@example.com") == nil)
        await expectError(.notFound) {
            try await storage.setDiscoverability(true, givenName: nil, familyName: nil, container: "c", recordName: "_missing")
        }
        #expect(try await storage.users(container: "c").map(\.recordName) == ["_u1", "_u3"])

        // Server-to-server keys: registered, found by ID, revoked once (the first time stays).
        let key = ServerKeyInfo(
            keyID: String(repeating: "ab", count: 32), container: "c", environment: .production,
            publicKeyPEM: "-----BEGIN PUBLIC KEY-----", userRecordName: "_u3", createdAt: 5)
        try await storage.createServerKey(key)
        #expect(try await storage.serverKey(id: key.keyID) == key)
        #expect(try await storage.serverKeys(container: "c") == [key])
        #expect(try await storage.serverKeys(container: "other").isEmpty)
        await expectError(.notFound) {
            var stray = key
            stray.keyID = String(repeating: "cd", count: 32)
            stray.container = "missing"
            try await storage.createServerKey(stray)
        }
        #expect(try await storage.revokeServerKey(id: key.keyID, container: "other", at: 6) == false)
        #expect(try await storage.revokeServerKey(id: key.keyID, container: "c", at: 7))
        #expect(try await storage.revokeServerKey(id: key.keyID, container: "c", at: 8))
        #expect(try await storage.serverKey(id: key.keyID)?.revokedAt == 7)
        #expect(try await storage.revokeServerKey(id: "unknown", container: "c", at: 9) == false)

        let session = SessionInfo(container: "c", userRecordName: "_u1", expiresAt: 99)
        #expect(try await storage.createSession(hash: "s1", session: session, passwordHash: "x"))
        #expect(try await storage.session(hash: "s1") == session)
        try await storage.deleteSession(hash: "s1")
        #expect(try await storage.session(hash: "s1") == nil)
    }

    static func zones(_ storage: any StratusStorage) async throws {
        #expect(try await storage.zones(in: alice).map(\.name) == [ZoneID.defaultZoneName])
        let (created, isNew) = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let again = try await storage.createZone(named: "Z", in: alice, timestamp: 2)
        #expect(isNew && !again.created, "createZone says whether it created the zone")
        #expect(created.id == again.zone.id, "creating an existing zone returns it")
        _ = try await storage.createZone(named: "A", in: alice, timestamp: 3)
        #expect(try await storage.zones(in: alice).map(\.name) == [ZoneID.defaultZoneName, "A", "Z"])

        try await write(storage, [create("r1")])
        #expect(try await storage.deleteZone(named: "Z", in: alice, timestamp: 4))
        #expect(try await storage.deleteZone(named: "Z", in: alice, timestamp: 5) == false)
        #expect(try await storage.zone(named: "Z", in: alice) == nil)
        await expectError(.zoneNotFound) { try await write(storage, [create("r2")]) }
        await expectError(.zoneNotFound) { _ = try await storage.lookupRecords(names: ["r1"], zone: "Z", in: alice) }

        let recreated = try await storage.createZone(named: "Z", in: alice, timestamp: 6).zone
        #expect(recreated.id != created.id, "a re-created zone is a new incarnation")
        #expect(try await storage.lookupRecords(names: ["r1"], zone: "Z", in: alice) == [nil],
                "deleting a zone removes its records")
        await expectError(.changeTokenExpired) {
            _ = try await storage.recordChanges(
                zone: "Z", in: alice, after: ChangePosition(scopeID: created.id, sequence: 0), limit: 10,
                recordTypes: nil)
        }
    }

    static func operationTypes(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let fields: [String: FieldValue] = ["title": .string("a"), "n": .int64(1)]
        let created = try #require(try await write(storage, [create("r", fields)]).first?.get())
        #expect(try created.decodeFields() == fields)
        #expect(created.created.userRecordName == "_alice" && created.created.deviceID == "device-1")

        #expect(code(try await write(storage, [create("r")])[0]) == .exists)
        if case .failure(let failure) = try await write(storage, [create("r")])[0] {
            #expect(failure.serverRecord?.changeTag == created.changeTag, "EXISTS carries the server record")
        }

        var update = RecordWrite(operationType: .update, recordName: "r", recordChangeTag: "stale",
                                 fields: ["title": .string("b")])
        let conflict = try await write(storage, [update])[0]
        #expect(code(conflict) == .conflict)
        if case .failure(let failure) = conflict {
            #expect(failure.serverRecord == created, "CONFLICT carries the current server record")
        }
        update.recordChangeTag = created.changeTag
        update.removedFieldNames = ["n"]
        let updated = try await write(storage, [update])[0].get()
        #expect(try updated.decodeFields() == ["title": .string("b")], "update merges fields and removes nulls")
        #expect(updated.created == created.created)

        let missing = RecordWrite(operationType: .update, recordName: "nope", recordChangeTag: "x")
        #expect(code(try await write(storage, [missing])[0]) == .notFound)

        let forceUpdate = RecordWrite(operationType: .forceUpdate, recordName: "r", fields: ["n": .int64(2)])
        let forced = try await write(storage, [forceUpdate])[0].get()
        #expect(try forced.decodeFields() == ["title": .string("b"), "n": .int64(2)])
        let forceUpdateNew = RecordWrite(operationType: .forceUpdate, recordName: "f", recordType: "Note")
        #expect((try? await write(storage, [forceUpdateNew])[0].get()) != nil, "forceUpdate creates a missing record")
        let forceUpdateNoType = RecordWrite(operationType: .forceUpdate, recordName: "g")
        #expect(code(try await write(storage, [forceUpdateNoType])[0]) == .badRequest)

        let replace = RecordWrite(operationType: .replace, recordName: "r", recordChangeTag: forced.changeTag,
                                  fields: ["other": .double(1.5)])
        let replaced = try await write(storage, [replace])[0].get()
        #expect(try replaced.decodeFields() == ["other": .double(1.5)], "replace drops unspecified fields")
        #expect(code(try await write(storage, [replace])[0]) == .conflict)
        let forceReplace = RecordWrite(operationType: .forceReplace, recordName: "r", fields: [:])
        #expect(try await write(storage, [forceReplace])[0].get().decodeFields() == [:])
        let forceReplaceNew = RecordWrite(operationType: .forceReplace, recordName: "h", recordType: "Note")
        #expect((try? await write(storage, [forceReplaceNew])[0].get()) != nil)

        let current = try #require(try await storage.lookupRecords(names: ["r"], zone: "Z", in: alice)[0])
        #expect(code(try await write(storage, [RecordWrite(operationType: .delete, recordName: "r", recordChangeTag: "x")])[0]) == .conflict)
        let deleted = try await write(storage, [RecordWrite(operationType: .delete, recordName: "r", recordChangeTag: current.changeTag)])[0].get()
        #expect(deleted.deleted)
        #expect(try await storage.lookupRecords(names: ["r"], zone: "Z", in: alice) == [nil])
        #expect(code(try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "r")])[0]) == .notFound)
        #expect(try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "f")])[0].get().deleted)

        let recreated = try await write(storage, [create("r", ["title": .string("again")])])[0].get()
        #expect(recreated.created.timestamp == 1_000 && !recreated.deleted, "a deleted record's name can be reused")

        let retyped = RecordWrite(operationType: .forceUpdate, recordName: "r", recordType: "Other")
        #expect(code(try await write(storage, [retyped])[0]) == .badRequest, "a write cannot change the record type")
    }

    static func changeTags(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        var tags = Set<String>()
        tags.insert(try await write(storage, [create("r")])[0].get().changeTag)
        for value in 0..<20 {
            let write = RecordWrite(operationType: .forceUpdate, recordName: "r", fields: ["v": .int64(Int64(value))])
            tags.insert(try await Self.write(storage, [write])[0].get().changeTag)
        }
        #expect(tags.count == 21)
    }

    static func atomicBatches(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, [create("existing")])
        let before = try await storage.zone(named: "Z", in: alice)!
        let results = try await write(storage, [create("a"), create("existing"), create("b")], atomic: true)
        #expect(results.map(code) == [.atomicError, .exists, .atomicError])
        #expect(try await storage.lookupRecords(names: ["a", "b"], zone: "Z", in: alice) == [nil, nil])
        #expect(try await storage.zone(named: "Z", in: alice) == before, "a failed atomic batch takes no sequence numbers")

        let partial = try await write(storage, [create("a"), create("existing"), create("b")], atomic: false)
        #expect(partial.map(code) == [nil, .exists, nil])
        #expect(try await storage.lookupRecords(names: ["a", "b"], zone: "Z", in: alice).allSatisfy { $0 != nil })
    }

    static func recordFeed(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let empty = try await storage.recordChanges(zone: "Z", in: alice, after: nil, limit: 10, recordTypes: nil)
        #expect(empty.records.isEmpty && !empty.moreComing)
        for batch in 0..<5 {
            try await write(storage, (0..<50).map { create("r\(batch * 50 + $0)") })
        }
        let all = try await readFeed(storage, pageSize: 40)
        #expect(all.records.map(\.name) == (0..<250).map { "r\($0)" })
        #expect(all.pages == 7)
        #expect(all.records.map(\.sequence) == Array(1...250))
        #expect(all.position == (try await storage.zone(named: "Z", in: alice))!.currentPosition)
        let ends = try await storage.recordChangePageEnds(zone: "Z", in: alice, after: nil, limit: 40, recordTypes: nil, count: 10)
        #expect(ends.map(\.sequence) == [40, 80, 120, 160, 200, 240], "the end of each page that more changes follow")
        let later = try await storage.recordChangePageEnds(zone: "Z", in: alice, after: ends[0], limit: 40, recordTypes: nil, count: 2)
        #expect(later == Array(ends[1...2]))

        let r3 = all.records[3]
        try await write(storage, [RecordWrite(operationType: .update, recordName: "r3", recordChangeTag: r3.changeTag,
                                              fields: ["x": .int64(1)])])
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "r7")])
        let since = try await readFeed(storage, after: all.position)
        #expect(since.records.map(\.name) == ["r3", "r7"])
        #expect(since.records[1].deleted, "deletions appear as tombstones")

        let again = try await readFeed(storage, pageSize: 100)
        #expect(again.records.count == 250, "each record appears once, in its latest state")
        #expect(again.records.suffix(2).map(\.name) == ["r3", "r7"])
    }

    static func recordTypeFilter(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, [create("a", type: "Note"), create("b", type: "Folder"), create("c", type: "Note")])
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "b")])
        let page = try await storage.recordChanges(zone: "Z", in: alice, after: nil, limit: 10, recordTypes: ["Note"])
        #expect(page.records.map(\.name) == ["a", "c", "b"], "matching records and every deletion")
        #expect(page.position.sequence == 4 && !page.moreComing)
        let ends = try await storage.recordChangePageEnds(zone: "Z", in: alice, after: nil, limit: 1, recordTypes: ["Note"], count: 5)
        #expect(ends.map(\.sequence) == [1, 3], "pages count the records the filter keeps")
    }

    static func databaseFeed(_ storage: any StratusStorage) async throws {
        let start = try await storage.databaseChanges(in: alice, after: nil, limit: 10)
        #expect(start.zones.isEmpty)
        _ = try await storage.createZone(named: "A", in: alice, timestamp: 1)
        _ = try await storage.createZone(named: "B", in: alice, timestamp: 1)
        try await write(storage, [create("d")], zone: ZoneID.defaultZoneName, atomic: false)
        let first = try await storage.databaseChanges(in: alice, after: start.position, limit: 10)
        #expect(first.zones.map(\.name) == ["A", "B"], "the default zone does not appear")
        try await write(storage, [create("d2")], zone: ZoneID.defaultZoneName, atomic: false)
        let quiet = try await storage.databaseChanges(in: alice, after: first.position, limit: 10)
        #expect(quiet.zones.isEmpty && quiet.position == first.position, "default-zone writes leave the feed alone")

        try await write(storage, [create("x")], zone: "A")
        #expect(try await storage.deleteZone(named: "B", in: alice, timestamp: 2))
        let second = try await storage.databaseChanges(in: alice, after: first.position, limit: 1)
        #expect(second.zones.map(\.name) == ["A"] && second.moreComing)
        let third = try await storage.databaseChanges(in: alice, after: second.position, limit: 1)
        #expect(third.zones.map(\.name) == ["B"] && third.zones[0].deleted && !third.moreComing)
        let none = try await storage.databaseChanges(in: alice, after: third.position, limit: 10)
        #expect(none.zones.isEmpty && none.position == third.position)
        #expect(try await storage.databaseChanges(in: bob, after: nil, limit: 10).zones.isEmpty)
    }

    static func concurrentWriters(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let writers = 8
        let writesPerWriter = 40
        var positions: [ChangePosition] = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    for index in 0..<writesPerWriter {
                        let result = try await write(storage, [create("w\(writer)-\(index)")])
                        _ = try result[0].get()
                    }
                }
            }
            // Read the feed while the writers run: every page must stay consistent.
            group.addTask {
                for _ in 0..<10 {
                    _ = try await storage.recordChanges(zone: "Z", in: alice, after: nil, limit: 50, recordTypes: nil)
                }
            }
            try await group.waitForAll()
        }
        positions.append(try await storage.zone(named: "Z", in: alice)!.currentPosition)
        let feed = try await readFeed(storage, pageSize: 37)
        let names = feed.records.map(\.name)
        #expect(names.count == writers * writesPerWriter)
        #expect(Set(names).count == names.count, "every change appears exactly once")
        #expect(feed.records.map(\.sequence) == Array(1...Int64(writers * writesPerWriter)))
        #expect(feed.position == positions[0])
    }

    /// Writes arriving at one zone together (backends may commit them as one group) each get the
    /// outcome they would get alone: an atomic batch with a failure leaves nothing, also after its
    /// cascade read the database midway; of several updates from one change tag exactly one wins; the
    /// rest commit in one unbroken sequence.
    static func concurrentOutcomes(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let child = create("child", ["parent": .reference(Reference(recordName: "parent", action: .deleteSelf))])
        try await write(storage, [create("taken"), create("shared"), create("parent"), child])
        let sharedTag = try await storage.lookupRecords(names: ["shared"], zone: "Z", in: alice)[0]!.changeTag
        let writers = 64
        let results = try await withThrowingTaskGroup(of: (Int, [RecordWriteResult]).self) { group in
            for writer in 0..<writers {
                group.addTask {
                    let writes: [RecordWrite] =
                        switch writer % 4 {
                        case 0: [create("w\(writer)-a"), create("w\(writer)-b")]
                        case 1: [create("w\(writer)-a"), create("taken")]
                        case 2:
                            // Fails only after the deletion's cascade was read and written.
                            [RecordWrite(operationType: .forceDelete, recordName: "parent"),
                             create("w\(writer)-a", ["parent": .reference(Reference(recordName: "missing", action: .validate))])]
                        default:
                            [RecordWrite(operationType: .update, recordName: "shared", recordChangeTag: sharedTag,
                                         fields: ["writer": .int64(Int64(writer))])]
                        }
                    return (writer, try await write(storage, writes, atomic: writer % 4 != 3))
                }
            }
            return try await group.reduce(into: [Int: [RecordWriteResult]]()) { $0[$1.0] = $1.1 }
        }
        var updates: [Int] = []
        for (writer, results) in results {
            let saved = results.allSatisfy { if case .success = $0 { true } else { false } }
            switch writer % 4 {
            case 0: #expect(saved, "writer \(writer): \(results)")
            case 1, 2: #expect(!saved, "writer \(writer): an atomic batch with a failing write fails")
            default:
                if saved { updates.append(writer) } else { #expect(code(results[0]) == .conflict) }
            }
        }
        #expect(updates.count == 1, "one update from a change tag wins, the others conflict: \(updates)")
        let found = try await storage.lookupRecords(names: ["parent", "child", "shared"], zone: "Z", in: alice)
        #expect(found[0] != nil && found[1] != nil, "the failed batches' deletions and cascades rolled back")
        if let winner = updates.first {
            #expect(try found[2]?.decodeFields()["writer"] == .int64(Int64(winner)))
        }
        let feed = try await readFeed(storage, pageSize: 37)
        let names = feed.records.map(\.name)
        var expected: Set<String> = ["taken", "parent", "child", "shared"]
        for writer in stride(from: 0, to: writers, by: 4) { expected.formUnion(["w\(writer)-a", "w\(writer)-b"]) }
        #expect(Set(names) == expected)
        #expect(Set(feed.records.map(\.sequence)).count == names.count, "every change has a sequence number of its own")
        #expect(
            feed.position == (try await storage.zone(named: "Z", in: alice)!.currentPosition),
            "the zone's last sequence number is its last change")
        #expect(try await storage.zone(named: "Z", in: alice)!.sequence == Int64(4 + writers / 4 * 2 + 1),
                "no gaps: a rolled-back batch gives its sequence numbers back")
    }

    static func tombstonePurge(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, [create("a"), create("b")], context: context(timestamp: 100))
        let early = try await readFeed(storage).position
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "a")], context: context(timestamp: 200))
        let afterDelete = try await readFeed(storage).position
        _ = try await storage.createZone(named: "Gone", in: alice, timestamp: 100)
        let databaseEarly = try await storage.databaseChanges(in: alice, after: nil, limit: 10).position
        #expect(try await storage.deleteZone(named: "Gone", in: alice, timestamp: 200))

        #expect(try await storage.purgeTombstones(before: 150) == 0, "tombstones inside the horizon stay")
        #expect(try await storage.purgeTombstones(before: 300) == 2)
        await expectError(.changeTokenExpired) {
            _ = try await storage.recordChanges(zone: "Z", in: alice, after: early, limit: 10, recordTypes: nil)
        }
        let current = try await storage.recordChanges(zone: "Z", in: alice, after: afterDelete, limit: 10, recordTypes: nil)
        #expect(current.records.isEmpty, "positions after the purged tombstones stay valid")
        let fresh = try await readFeed(storage)
        #expect(fresh.records.map(\.name) == ["b"], "a fresh read no longer lists purged tombstones")
        await expectError(.changeTokenExpired) {
            _ = try await storage.databaseChanges(in: alice, after: databaseEarly, limit: 10)
        }
    }

    static func creatorRule(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let record = try await write(storage, [create("r")], context: context("_alice", creatorOnly: true))[0].get()
        let update = RecordWrite(operationType: .update, recordName: "r", recordChangeTag: record.changeTag,
                                 fields: ["x": .int64(1)])
        #expect(code(try await write(storage, [update], context: context("_bob", creatorOnly: true))[0]) == .accessDenied)
        var stale = update
        stale.recordChangeTag = "stale"
        #expect(code(try await write(storage, [stale], context: context("_bob", creatorOnly: true))[0]) == .accessDenied,
                "a non-creator is denied before any conflict, so retrying cannot help")
        #expect(code(try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "r")],
                                     context: context("_bob", creatorOnly: true))[0]) == .accessDenied)
        #expect(code(try await write(storage, [update], context: context("_alice", creatorOnly: true))[0]) == nil)
    }

    static func recordLimits(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let limits = Limits(maxRecordSizeBytes: 1_000, maxFieldsPerRecord: 3)
        let big = create("big", ["text": .string(String(repeating: "x", count: 2_000))])
        let many = create("many", ["a": .int64(1), "b": .int64(2), "c": .int64(3), "d": .int64(4)])
        let results = try await write(storage, [big, many, create("ok")], atomic: false, context: context(limits: limits))
        #expect(results.map(code) == [.badRequest, .badRequest, nil])
        if case .failure(let failure) = results[0] {
            #expect(failure.reason.contains("big") && failure.reason.contains("1000"), "\(failure.reason)")
        }
        let ok = try results[2].get()
        let grow = RecordWrite(operationType: .update, recordName: "ok", recordChangeTag: ok.changeTag,
                               fields: ["a": .int64(1), "b": .int64(2), "c": .int64(3), "d": .int64(4)])
        #expect(code(try await write(storage, [grow], context: context(limits: limits))[0]) == .badRequest,
                "limits apply to the merged record")
    }

    static func referenceActions(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        func pointing(_ name: String, to target: String, _ action: ReferenceAction) -> RecordWrite {
            create(name, ["parent": .reference(Reference(recordName: target, action: action))])
        }
        #expect(code(try await write(storage, [pointing("orphan", to: "missing", .validate)])[0]) == .validatingReferenceError)
        let start = try await readFeed(storage).position
        let batch = try await write(storage, [
            create("folder"), pointing("note", to: "folder", .deleteSelf), pointing("attachment", to: "note", .deleteSelf),
            pointing("pin", to: "folder", .validate), pointing("loose", to: "folder", .none),
        ])
        #expect(batch.allSatisfy { (try? $0.get()) != nil }, "a VALIDATE target created earlier in the batch counts")

        let blocked = try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "folder")])
        #expect(code(blocked[0]) == .validatingReferenceError, "a VALIDATE reference keeps its target alive")
        let blockedViaCascade = try await write(storage, [pointing("pin2", to: "attachment", .validate)])
        #expect((try? blockedViaCascade[0].get()) != nil)
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "pin")])
        #expect(code(try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "folder")])[0])
            == .validatingReferenceError, "records deleted by a cascade are guarded too")
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "pin2")])

        let deleted = try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "folder")])
        #expect(try deleted[0].get().deleted)
        #expect(try await storage.lookupRecords(names: ["note", "attachment", "loose"], zone: "Z", in: alice)
            .map { $0?.name } == [nil, nil, "loose"], "DELETE_SELF cascades through every level; NONE does not")
        let feed = try await readFeed(storage, after: start)
        let tombstones = Set(feed.records.filter(\.deleted).map(\.name))
        #expect(tombstones == ["folder", "note", "attachment", "pin", "pin2"], "cascaded deletions are in the feed")

        try await write(storage, [create("target")])
        let limits = Limits(maxDeleteSelfReferencesPerTarget: 2)
        let many = try await write(
            storage, (0..<3).map { pointing("child\($0)", to: "target", .deleteSelf) }, atomic: false,
            context: context(limits: limits))
        #expect(many.map(code) == [nil, nil, .badRequest])
    }

    static func hierarchies(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        func child(_ name: String, of parent: String) -> RecordWrite {
            create(name, [RecordHierarchy.parentField: .reference(Reference(recordName: parent))])
        }
        func share(_ name: String, root: String) -> RecordWrite {
            let state = ShareState(
                shortGUID: "guid-\(name)", publicPermission: .none,
                participants: [
                    ShareState.Participant(
                        participantID: "o", userRecordName: "_alice", type: .owner, permission: .readWrite, status: .accepted)
                ], rootRecordName: root)
            return create(name, [ShareState.fieldName: state.fieldValue], type: ShareKeys.recordType)
        }
        func shares(_ names: [String]) async throws -> [String?] {
            try await storage.lookupRecords(names: names, zone: "Z", in: alice).map { $0?.shareName }
        }
        // A chain longer than any page, a cycle below it, and children saved before their parent.
        let chain = (0..<300).map { "r\($0)" }
        try await write(storage, [child("orphan", of: "r0")])
        try await write(storage, [create("r0")] + (1..<300).map { child(chain[$0], of: chain[$0 - 1]) })
        try await write(storage, [child("a", of: "b"), child("b", of: "a"), child("c", of: "a")])
        try await write(storage, [RecordWrite(
            operationType: .forceUpdate, recordName: "a",
            fields: [RecordHierarchy.parentField: .reference(Reference(recordName: "r299"))])])
        let before = try await storage.lookupRecords(names: chain + ["orphan"], zone: "Z", in: alice)
        let start = try await readFeed(storage).position

        let shared = try await write(storage, [share("s", root: "r0")])
        #expect((try? shared[0].get()) != nil)
        let all = chain + ["orphan", "a", "b", "c"]
        #expect(try await shares(all) == Array(repeating: "s", count: all.count), "the share reaches every level, once")
        let after = try await storage.lookupRecords(names: chain + ["orphan"], zone: "Z", in: alice)
        #expect(after.map { $0?.changeTag } == before.map { $0?.changeTag }, "placed records keep their change tags")
        #expect(after[0]?.rootShareName == "s")
        let placed = try await readFeed(storage, after: start).records.map(\.name)
        #expect(Set(placed) == Set(all + ["s"]) && placed.count == all.count + 1, "each placed record is in the feed once")

        #expect(code(try await write(storage, [share("t", root: "r150")])[0]) == .alreadyShared)
        #expect(code(try await write(storage, [share("u", root: "orphan")])[0]) == .alreadyShared)

        // Cutting the chain takes the records below the cut out, and says which share they left, when.
        let cut = try await write(storage, [RecordWrite(
            operationType: .forceUpdate, recordName: "r100", removedFieldNames: [RecordHierarchy.parentField])])
        let cutAt = try cut[0].get().sequence
        #expect(try await shares(["r99", "r100", "r299", "c"]) == ["s", nil, nil, nil])
        let left = try await storage.lookupRecords(names: ["r100", "r200"], zone: "Z", in: alice)
        #expect(left[0]?.formerShare == FormerShare(shareName: "s", sequence: cutAt))
        #expect((left[1]?.formerShare?.sequence ?? 0) > cutAt)

        // Deleting the share leaves the root a plain record again; deleting a shared record keeps
        // its share in the tombstone.
        let beforeDelete = try await readFeed(storage).position
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "r50")])
        let tombstone = try await readFeed(storage, after: beforeDelete).records.first { $0.name == "r50" }
        #expect(tombstone?.deleted == true && tombstone?.shareName == "s")
        let recreated = try await write(storage, [create("r50")])
        #expect(try recreated[0].get().formerShare?.shareName == "s", "created again outside its share, it left it")
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "s")])
        #expect(try await shares(["r0", "r49", "r51"]) == [nil, nil, nil])
        #expect(try await storage.lookupRecords(names: ["r0"], zone: "Z", in: alice)[0]?.rootShareName == nil)

        // One request moves at most so many records in or out of shares.
        var bounded = context()
        bounded.maxReshapedRecordsPerRequest = 2
        let tooMany = try await write(storage, [share("s2", root: "r100")], context: bounded)
        #expect(code(tooMany[0]) == .limitExceeded, "r100 heads 200 records")
        #expect(try await shares(["r100", "r101"]) == [nil, nil], "nothing written")

        // A record moved below its own descendant forms a loop that no root reaches: the loop, and
        // what hangs below it, leave the share.
        try await write(storage, [create("top"), child("m1", of: "top"), child("m2", of: "m1"), child("m3", of: "m2")])
        try await write(storage, [share("s3", root: "top")])
        #expect(try await shares(["top", "m1", "m2", "m3"]) == ["s3", "s3", "s3", "s3"])
        try await write(storage, [RecordWrite(
            operationType: .forceUpdate, recordName: "m1",
            fields: [RecordHierarchy.parentField: .reference(Reference(recordName: "m3"))])])
        #expect(try await shares(["top", "m1", "m2", "m3"]) == ["s3", nil, nil, nil])
    }

    static func publicReferences(_ storage: any StratusStorage) async throws {
        let world = DatabaseLocator(container: "c", environment: .development, scope: .public, owner: "")
        let limits = Limits(maxDeleteSelfReferencesPerTarget: 2)
        func write(_ writes: [RecordWrite], as user: String) async throws -> [RecordWriteResult] {
            try await StorageConformance.write(
                storage, writes, zone: ZoneID.defaultZoneName, in: world, atomic: false,
                context: context(user, creatorOnly: true, limits: limits))
        }
        func pointing(_ name: String, to target: String, _ action: ReferenceAction) -> RecordWrite {
            create(name, ["link": .reference(Reference(recordName: target, action: action))])
        }
        _ = try await write([create("mine")], as: "_alice")
        // A stranger may point at the record, but binds nothing: no guard, no cascade, no use of its limit.
        let strangers = try await write(
            [pointing("pin", to: "mine", .validate)] + (1...3).map { pointing("theirs\($0)", to: "mine", .deleteSelf) },
            as: "_bob")
        #expect(strangers.allSatisfy { (try? $0.get()) != nil })
        #expect(code(try await write([pointing("dangling", to: "missing", .validate)], as: "_bob")[0])
            == .validatingReferenceError, "a VALIDATE target must still exist")
        let own = try await write((1...3).map { pointing("own\($0)", to: "mine", .deleteSelf) }, as: "_alice")
        #expect(own.map(code) == [nil, nil, .badRequest], "the creator's own references count against the limit")
        let deleted = try await write([RecordWrite(operationType: .forceDelete, recordName: "mine")], as: "_alice")
        #expect((try? deleted[0].get())?.deleted == true, "a stranger's VALIDATE does not keep it")
        let left = try await storage.lookupRecords(
            names: ["own1", "own2", "pin", "theirs1", "theirs3"], zone: ZoneID.defaultZoneName, in: world)
        #expect(left.map { $0?.name } == [nil, nil, "pin", "theirs1", "theirs3"], "only the creator's records cascade")
    }

    static func committedChanges(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        func modify(_ writes: [RecordWrite], atomic: Bool = true) async throws -> ModifyRecordsOutcome {
            try await storage.modifyRecords(writes, zone: "Z", in: alice, atomic: atomic, context: context())
        }
        let created = try await modify([create("a", ["n": .int64(1)]), create("b")])
        #expect(created.changes.map(\.record.name) == ["a", "b"])
        #expect(created.changes.map(\.kind) == [.created, .created])
        #expect(created.changes.allSatisfy { $0.previous == nil })

        let updated = try await modify([RecordWrite(operationType: .forceUpdate, recordName: "a", fields: ["n": .int64(2)])])
        #expect(updated.changes.map(\.kind) == [.updated])
        #expect(try updated.changes.first?.previous?.decodeFields()["n"] == .int64(1))
        #expect(try updated.changes.first?.record.decodeFields()["n"] == .int64(2))

        try await write(storage, [create("child", ["parent": .reference(Reference(recordName: "a", action: .deleteSelf))])])
        let deleted = try await modify([RecordWrite(operationType: .forceDelete, recordName: "a")])
        #expect(deleted.changes.map(\.record.name) == ["a", "child"], "the cascade is reported after the delete that caused it")
        #expect(deleted.changes.map(\.kind) == [.deleted, .deleted])
        #expect(try deleted.changes.first?.previous?.decodeFields()["n"] == .int64(2), "a deletion keeps the deleted fields")

        let recreated = try await modify([create("a")])
        #expect(recreated.changes.map(\.kind) == [.created], "writing over a tombstone creates")

        let partial = try await modify([create("b"), create("c")], atomic: false)
        #expect(partial.changes.map(\.record.name) == ["c"], "failed writes change nothing")
        let rolledBack = try await modify([create("d"), create("b")])
        #expect(rolledBack.changes.isEmpty, "a failed atomic batch commits nothing")
    }

    static func isolation(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, [create("secret")])
        #expect(try await storage.zone(named: "Z", in: bob) == nil)
        await expectError(.zoneNotFound) { _ = try await storage.lookupRecords(names: ["secret"], zone: "Z", in: bob) }
        _ = try await storage.createZone(named: "Z", in: bob, timestamp: 1)
        #expect(try await storage.lookupRecords(names: ["secret"], zone: "Z", in: bob) == [nil])
        let production = DatabaseLocator(container: "c", environment: .production, scope: .private, owner: "_alice")
        #expect(try await storage.zone(named: "Z", in: production) == nil, "environments are separate")
    }

    static let production = DatabaseLocator(container: "c", environment: .production, scope: .private, owner: "_alice")

    static func schemas(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, [create("n", ["title": .string("a"), "stars": .int64(3)])])
        let grown = try await storage.schema(container: "c", environment: .development)
        #expect(grown.recordTypes["Note"]?.fields["title"] == FieldSchema(type: .string, indexes: .automatic(for: .string)))
        #expect(grown.recordTypes["Note"]?.fields["stars"]?.type == .int64)
        #expect(code(try await write(storage, [create("m", ["stars": .string("many")])])[0]) == .badRequest,
                "a field keeps its type")
        let failed = try await write(storage, [create("x", ["color": .string("red")]), create("n")])
        #expect(failed.map(code) == [.atomicError, .exists])
        #expect(try await storage.schema(container: "c", environment: .development).recordTypes["Note"]?.fields["color"]
                    == nil, "a rolled-back batch adds no field")

        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            _ = try await storage.updateSchema(container: "c", environment: .production) { _ in throw Refused() }
        }
        #expect(try await storage.schema(container: "c", environment: .production) == Schema())
        let deployed = try await storage.updateSchema(container: "c", environment: .production) { _ in grown }
        #expect(deployed == grown)
        _ = try await storage.createZone(named: "Z", in: production, timestamp: 1)
        let context = WriteContext(userRecordName: "_alice", timestamp: 2)
        let results = try await storage.modifyRecords(
            [create("p", ["title": .string("ok")]), create("q", ["color": .string("red")]),
             create("r", type: "Photo")],
            zone: "Z", in: production, atomic: false, context: context).results
        #expect(results.map(code) == [nil, .badRequest, .badRequest], "production takes only what its schema defines")
    }

    static func queryNames(
        _ storage: any StratusStorage, _ query: RecordQuery, zones: [String]? = ["Z"]
    ) async throws -> [String] {
        var query = query
        var names: [String] = []
        while true {
            let page = try await storage.queryRecords(query, zones: zones, in: alice)
            names += page.items.map(\.record.name)
            guard let cursor = page.cursor else { return names }
            query.after = cursor
        }
    }

    static func queries(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        try await write(storage, (0..<30).map { create("n\($0)", ["rank": .int64(Int64($0 % 10)), "tag": .string("t\($0 % 3)")]) })
        var fields = try await storage.schema(container: "c", environment: .development).recordTypes["Note"]!.fields
        let rank = QuerySort(fieldName: "rank", ascending: false)
        let sorted = try await queryNames(storage, RecordQuery(recordType: "Note", sorts: [rank], fields: fields, limit: 7))
        #expect(sorted.count == 30 && Set(sorted).count == 30)
        #expect(sorted.prefix(3) == ["n9", "n29", "n19"], "descending rank, ties by name bytes descending")
        let filter = QueryFilter(comparator: .equals, fieldName: "tag", fieldValue: .string("t1"))
        let tagged = try await queryNames(storage, RecordQuery(recordType: "Note", filters: [filter], fields: fields, limit: 4))
        #expect(tagged.sorted() == (0..<30).filter { $0 % 3 == 1 }.map { "n\($0)" }.sorted())

        // Updates and deletions move a record's index entries.
        try await write(storage, [RecordWrite(operationType: .forceUpdate, recordName: "n1", fields: ["tag": .string("t0")]),
                                  RecordWrite(operationType: .forceDelete, recordName: "n4")])
        let retagged = try await queryNames(storage, RecordQuery(recordType: "Note", filters: [filter], fields: fields, limit: 50))
        #expect(!retagged.contains("n1") && !retagged.contains("n4") && retagged.count == 8)

        // A record with more index rows than one statement may insert has all of them.
        let words = (0..<80).map { "word\($0)" }
        try await write(storage, [create("long", ["words": .string(words.joined(separator: " "))])])
        fields = try await storage.schema(container: "c", environment: .development).recordTypes["Note"]!.fields
        #expect(fields["words"]?.indexes.contains(.searchable) == true)
        for word in words {
            let search = QueryFilter(comparator: .containsAllTokens, fieldName: "words", fieldValue: .string(word))
            #expect(try await queryNames(storage, RecordQuery(recordType: "Note", filters: [search], fields: fields, limit: 5))
                        == ["long"], "found by \(word)")
        }

        // An index added later covers the records already saved.
        let unindexed = try await storage.updateSchema(container: "c", environment: .development) { schema in
            var schema = schema
            schema.recordTypes["Note"]?.fields["tag"]?.indexes = []
            return schema
        }
        fields = unindexed.recordTypes["Note"]!.fields
        try await write(storage, [create("late", ["tag": .string("t1")])])
        #expect(try await queryNames(storage, RecordQuery(recordType: "Note", filters: [filter], fields: fields, limit: 50))
                    .count == 9, "without an index the type's records are checked one by one")
        let reindexed = try await storage.updateSchema(container: "c", environment: .development) { schema in
            var schema = schema
            schema.recordTypes["Note"]?.fields["tag"]?.indexes = [.queryable]
            return schema
        }
        fields = reindexed.recordTypes["Note"]!.fields
        #expect(try await queryNames(storage, RecordQuery(recordType: "Note", filters: [filter], fields: fields, limit: 2))
                    .count == 9, "the new index holds the records saved before it")
        await expectError(.zoneNotFound) { _ = try await queryNames(storage, RecordQuery(recordType: "Note", limit: 5), zones: ["nope"]) }
    }

    static func assets(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        let checksum = String(repeating: "a", count: 64)
        let asset = FieldValue.asset(AssetValue(fileChecksum: checksum, size: 3))
        var unregistered = create("f", ["file": asset])
        unregistered.uploadedAssets = [checksum]
        #expect(code(try await write(storage, [unregistered])[0]) == .badRequest, "an asset must be stored first")
        try await storage.registerAsset(checksum: checksum, size: 3, timestamp: 10)
        #expect(try await write(storage, [unregistered]).map(code) == [nil])
        #expect(code(try await write(storage, [create("g", ["file": asset])])[0]) == .badRequest,
                "without an upload, a record may hold only assets it already holds")
        #expect(try await write(storage, [RecordWrite(operationType: .forceUpdate, recordName: "f",
                                                      fields: ["file": asset, "title": .string("kept")])]).map(code) == [nil])
        #expect(try await storage.collectAssets(registeredBefore: 1_000) == [], "a held asset stays")
        try await write(storage, [RecordWrite(operationType: .forceDelete, recordName: "f")])
        #expect(try await storage.collectAssets(registeredBefore: 5) == [], "registered after the cutoff")
        #expect(try await storage.collectAssets(registeredBefore: 1_000) == [checksum])
        #expect(try await storage.collectAssets(registeredBefore: 1_000) == [])
    }

    static func environmentData(_ storage: any StratusStorage) async throws {
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        _ = try await storage.createZone(named: "Z", in: production, timestamp: 1)
        try await write(storage, [create("dev")])
        try await storage.deleteData(container: "c", environment: .development)
        #expect(try await storage.zone(named: "Z", in: alice) == nil)
        #expect(try await storage.zone(named: "Z", in: production) != nil)
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 2)
        #expect(try await storage.lookupRecords(names: ["dev"], zone: "Z", in: alice) == [nil])
    }

    static func subscriptions(_ storage: any StratusStorage) async throws {
        let publicDatabase = DatabaseLocator(container: "c", environment: .development, scope: .public, owner: "")
        func subscription(_ id: String, _ subscriber: String, in database: DatabaseLocator, type: String = "Note")
            -> StoredSubscription
        {
            StoredSubscription(
                database: database, subscriber: subscriber,
                definition: SubscriptionDictionary(
                    subscriptionID: id, subscriptionType: .query, query: Query(recordType: type), firesOn: [.create]),
                createdAt: 1)
        }
        try await storage.saveSubscription(subscription("b", "_alice", in: alice))
        try await storage.saveSubscription(subscription("a", "_alice", in: alice))
        try await storage.saveSubscription(subscription("a", "_bob", in: bob))
        try await storage.saveSubscription(subscription("feed", "_alice", in: publicDatabase))
        try await storage.saveSubscription(subscription("feed", "_bob", in: publicDatabase))
        #expect(try await storage.subscriptions(in: alice, subscriber: nil).map(\.subscriptionID) == ["a", "b"])
        #expect(try await storage.subscriptions(in: bob, subscriber: "_bob").map(\.subscriptionID) == ["a"])
        let feeds = try await storage.subscriptions(in: publicDatabase, subscriber: nil)
        #expect(feeds.map(\.subscriber) == ["_alice", "_bob"], "the public database holds every subscriber's")
        #expect(try await storage.subscriptions(in: publicDatabase, subscriber: "_bob").count == 1)

        try await storage.saveSubscription(subscription("a", "_alice", in: alice, type: "Photo"))
        let replaced = try await storage.subscriptions(in: alice, subscriber: "_alice")
        #expect(replaced.first?.definition.query?.recordType == "Photo", "saving an existing ID replaces it")
        #expect(replaced.count == 2)

        #expect(try await storage.deleteSubscription(id: "a", subscriber: "_alice", in: alice))
        #expect(try await !storage.deleteSubscription(id: "a", subscriber: "_alice", in: alice))
        #expect(try await storage.subscriptions(in: bob, subscriber: nil).count == 1, "bob's 'a' is his own")

        try await storage.deleteData(container: "c", environment: .development)
        #expect(try await storage.subscriptions(in: alice, subscriber: nil).isEmpty)
        #expect(try await storage.subscriptions(in: publicDatabase, subscriber: nil).isEmpty)
    }

    static func pushTokens(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        try await storage.createPushToken(
            hash: "h1", token: PushTokenInfo(container: "c", environment: .development, createdAt: 10, usedAt: 10))
        try await storage.createPushToken(
            hash: "h2", token: PushTokenInfo(container: "c", environment: .production, createdAt: 10, usedAt: 10))
        let fresh = try #require(try await storage.pushToken(hash: "h1"))
        #expect(fresh.userRecordName == nil, "a new token belongs to nobody yet")
        #expect(fresh.environment == .development)
        #expect(try await storage.pushToken(hash: "nope") == nil)

        #expect(try await storage.registerPushToken(hash: "h1", userRecordName: "_alice", deviceID: "phone", timestamp: 20))
        #expect(try await !storage.registerPushToken(hash: "nope", userRecordName: "_alice", deviceID: nil, timestamp: 20))
        let registered = try #require(try await storage.pushToken(hash: "h1"))
        #expect(registered.userRecordName == "_alice")
        #expect(registered.deviceID == "phone")
        #expect(registered.usedAt == 20)

        try await storage.markPushTokenUsed(hash: "h1", timestamp: 30)
        try await storage.markPushTokenUsed(hash: "h1", timestamp: 25)
        #expect(try await storage.pushToken(hash: "h1")?.usedAt == 30, "use times only move forward")
        #expect(try await storage.purgePushTokens(unusedSince: 25) == 1)
        #expect(try await storage.pushToken(hash: "h2") == nil)
        #expect(try await storage.pushToken(hash: "h1") != nil)
    }

    static func pushEndpoints(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        func endpoint(_ id: String, user: String = "_alice", channel: PushEndpointInfo.Channel = .apnsProduction, at time: Int64)
            -> PushEndpointInfo
        {
            PushEndpointInfo(
                id: id, container: "c", environment: .development, userRecordName: user, deviceID: "device-\(id)",
                channel: channel, address: "address-\(id)", publicKey: channel == .webPush ? "p256dh" : nil,
                authSecret: channel == .webPush ? "auth" : nil, createdAt: time, usedAt: time)
        }
        try await storage.registerPushEndpoint(endpoint("a", at: 10), keepingAtMost: 3)
        try await storage.registerPushEndpoint(endpoint("b", channel: .webPush, at: 20), keepingAtMost: 3)
        try await storage.registerPushEndpoint(endpoint("c", channel: .fcm, at: 30), keepingAtMost: 3)
        var alices = try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_alice")
        #expect(alices.map(\.id) == ["c", "b", "a"], "most recently registered first")
        #expect(alices[1] == endpoint("b", channel: .webPush, at: 20), "every column reads back")
        #expect(try await storage.pushEndpoints(container: "c", environment: .production, userRecordName: "_alice").isEmpty)

        // A fourth pushes out the least recently registered; registering again refreshes.
        try await storage.registerPushEndpoint(endpoint("a", at: 40), keepingAtMost: 3)
        try await storage.registerPushEndpoint(endpoint("d", at: 50), keepingAtMost: 3)
        alices = try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_alice")
        #expect(alices.map(\.id) == ["d", "a", "c"])
        #expect(alices[1].createdAt == 10 && alices[1].usedAt == 40, "registering again keeps the first registration's time")

        // Another user signing in on the device takes the endpoint over.
        try await storage.registerPushEndpoint(endpoint("a", user: "_bob", at: 60), keepingAtMost: 3)
        #expect(try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_alice").map(\.id) == ["d", "c"])
        #expect(try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_bob").map(\.id) == ["a"])

        #expect(try await storage.deletePushEndpoint(id: "d"))
        #expect(try await !storage.deletePushEndpoint(id: "d"))
        #expect(try await storage.purgePushTokens(unusedSince: 55) == 1, "c, registered at 30, goes")
        #expect(try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_alice").isEmpty)
        await #expect(throws: StratusError.self) {
            var stranger = endpoint("x", at: 70)
            stranger.container = "nope"
            try await storage.registerPushEndpoint(stranger, keepingAtMost: 3)
        }
    }
}
