import StratusModel
public import StratusStorage
import Testing

/// Federated identities, single-use nonces, a second way to sign in, and deleting an account: the
/// checks every backend runs through ``StorageConformance``.
public enum AccountCheck {
    typealias Conformance = StorageConformance

    static let apple = "https://appleid.apple.com"
    static let google = "https://accounts.google.com"

    static func identity(
        _ subject: String, of user: String, issuer: String = apple, provider: String = "apple", at time: Int64
    ) -> FederatedIdentity {
        FederatedIdentity(
            container: "c", issuer: issuer, subject: subject, provider: provider, userRecordName: user, createdAt: time,
            lastSignInAt: time)
    }

    /// An account as a federated sign-in makes it: no username of the user's choosing, no usable password.
    static func federatedUser(_ recordName: String, at time: Int64) -> UserInfo {
        UserInfo(container: "c", recordName: recordName, username: "id:" + recordName, passwordHash: "!", createdAt: time)
    }

    static func federatedIdentities(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        var first = identity("001", of: "_ann", at: 10)
        first.emailAddress = "Ann@Example.com"
        first.emailVerified = true
        try await storage.createUser(federatedUser("_ann", at: 10), identity: first)
        #expect(try await storage.user(container: "c", recordName: "_ann") == federatedUser("_ann", at: 10))
        var stored = first
        stored.emailAddress = "ann@example.com"
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "001") == stored,
                "found by issuer and subject, the address lowercased")
        #expect(try await storage.identity(container: "c", issuer: google, subject: "001") == nil, "subjects are per issuer")
        #expect(try await storage.identity(container: "other", issuer: apple, subject: "001") == nil)

        // An identity linked already, or a username taken, creates no user and links nothing.
        await Conformance.expectError(.exists) {
            try await storage.createUser(federatedUser("_bob", at: 11), identity: identity("001", of: "_bob", at: 11))
        }
        #expect(try await storage.user(container: "c", recordName: "_bob") == nil, "the user went with the identity")
        await Conformance.expectError(.exists) {
            try await storage.createUser(
                UserInfo(container: "c", recordName: "_bob", username: "id:_ann", passwordHash: "!", createdAt: 11),
                identity: identity("002", of: "_bob", at: 11))
        }
        #expect(try await storage.user(container: "c", recordName: "_bob") == nil)
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "002") == nil)
        try await storage.createUser(federatedUser("_bob", at: 11), identity: identity("002", of: "_bob", at: 11))

        // A user may have several identities, oldest first, then by issuer and subject; an identity names one user.
        try await storage.linkIdentity(identity("g-1", of: "_ann", issuer: google, provider: "google", at: 30))
        try await storage.linkIdentity(identity("z", of: "_ann", issuer: "https://a.example", provider: "a", at: 30))
        try await storage.linkIdentity(identity("g-3", of: "_ann", issuer: google, provider: "google", at: 20))
        try await storage.linkIdentity(identity("g-2", of: "_ann", issuer: google, provider: "google", at: 20))
        await Conformance.expectError(.exists) { try await storage.linkIdentity(identity("002", of: "_ann", at: 40)) }
        await Conformance.expectError(.exists) { try await storage.linkIdentity(identity("001", of: "_ann", at: 40)) }
        await Conformance.expectError(.notFound) { try await storage.linkIdentity(identity("003", of: "_nobody", at: 40)) }
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "003") == nil)
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "002")?.userRecordName == "_bob")
        #expect(try await storage.identities(container: "c", userRecordName: "_ann").map(\.subject)
                    == ["001", "g-2", "g-3", "z", "g-1"])
        #expect(try await storage.identities(container: "c", userRecordName: "_bob").map(\.subject) == ["002"])
        #expect(try await storage.identities(container: "c", userRecordName: "_nobody").isEmpty)
        #expect(try await storage.identities(container: "c").map(\.subject) == ["001", "g-2", "g-3", "z", "g-1", "002"],
                "a container's identities, by user, for its export")

        // Unlinked, an identity may be linked again, to anyone.
        #expect(try await storage.unlinkIdentity(container: "c", issuer: google, subject: "g-3"))
        #expect(try await !storage.unlinkIdentity(container: "c", issuer: google, subject: "g-3"))
        #expect(try await !storage.unlinkIdentity(container: "other", issuer: apple, subject: "001"))
        #expect(try await storage.identity(container: "c", issuer: google, subject: "g-3") == nil)
        try await storage.linkIdentity(identity("g-3", of: "_bob", issuer: google, provider: "google", at: 50))
        #expect(try await storage.identity(container: "c", issuer: google, subject: "g-3")?.userRecordName == "_bob")

        // A sign-in records its time always, and the e-mail address only when the provider gave one.
        try await storage.recordIdentitySignIn(
            container: "c", issuer: apple, subject: "001", emailAddress: nil, emailVerified: false, at: 60)
        var signedIn = try #require(try await storage.identity(container: "c", issuer: apple, subject: "001"))
        #expect(signedIn.lastSignInAt == 60)
        #expect(signedIn.emailAddress == "ann@example.com" && signedIn.emailVerified,
                "a sign-in without an address keeps the known one and its verification")
        try await storage.recordIdentitySignIn(
            container: "c", issuer: apple, subject: "001", emailAddress: "Ann@Relay.Example", emailVerified: false, at: 70)
        signedIn = try #require(try await storage.identity(container: "c", issuer: apple, subject: "001"))
        #expect(signedIn.lastSignInAt == 70 && signedIn.emailAddress == "ann@relay.example" && !signedIn.emailVerified)
        #expect(signedIn.createdAt == 10 && signedIn.provider == "apple" && signedIn.userRecordName == "_ann")
        await Conformance.expectError(.notFound) {
            try await storage.recordIdentitySignIn(
                container: "c", issuer: apple, subject: "003", emailAddress: nil, emailVerified: false, at: 80)
        }
    }

    static func nonces(_ storage: any StratusStorage) async throws {
        #expect(try await storage.claimNonce("n1", expiresAt: 100, now: 10))
        #expect(try await !storage.claimNonce("n1", expiresAt: 200, now: 50), "a nonce is claimed once")
        #expect(try await storage.claimNonce("n2", expiresAt: 100, now: 50), "other nonces are free")
        #expect(try await !storage.claimNonce("n1", expiresAt: 200, now: 99))
        #expect(try await storage.claimNonce("n1", expiresAt: 300, now: 100), "an expired claim is forgotten")
        #expect(try await !storage.claimNonce("n1", expiresAt: 400, now: 150), "the new claim holds until it expires")
        // Instances racing with one token: exactly one claims its nonce.
        let claimed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask { try await storage.claimNonce("raced", expiresAt: 1_000, now: 200) }
            }
            return try await group.reduce(into: 0) { count, won in count += won ? 1 : 0 }
        }
        #expect(claimed == 1)
    }

    static func usernameAndPassword(_ storage: any StratusStorage) async throws {
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        try await storage.createUser(federatedUser("_ann", at: 1), identity: identity("001", of: "_ann", at: 1))
        try await storage.createUser(
            UserInfo(container: "c", recordName: "_bob", username: "bob", passwordHash: "b", createdAt: 1))
        let session = SessionInfo(container: "c", userRecordName: "_ann", expiresAt: 99)
        #expect(try await storage.createSession(hash: "s1", session: session, passwordHash: "!"))

        try await storage.setUsernameAndPassword(username: "ann", passwordHash: "h", container: "c", recordName: "_ann")
        let ann = try #require(try await storage.user(container: "c", username: "ann"))
        #expect(ann.recordName == "_ann" && ann.passwordHash == "h" && ann.createdAt == 1)
        #expect(try await storage.user(container: "c", username: "id:_ann") == nil)
        #expect(try await storage.session(hash: "s1") == session, "sessions go on")
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "001")?.userRecordName == "_ann",
                "and so does the identity")
        #expect(try await storage.createSession(hash: "s2", session: session, passwordHash: "h"), "the password signs in")
        try await storage.setUsernameAndPassword(username: "ann", passwordHash: "h2", container: "c", recordName: "_ann")
        #expect(try await storage.user(container: "c", recordName: "_ann")?.passwordHash == "h2", "a user may keep their username")

        await Conformance.expectError(.exists) {
            try await storage.setUsernameAndPassword(username: "bob", passwordHash: "x", container: "c", recordName: "_ann")
        }
        let unchanged = try await storage.user(container: "c", recordName: "_ann")
        #expect(unchanged?.username == "ann" && unchanged?.passwordHash == "h2", "nothing changed")
        await Conformance.expectError(.notFound) {
            try await storage.setUsernameAndPassword(username: "carol", passwordHash: "x", container: "c", recordName: "_nobody")
        }
        await Conformance.expectError(.notFound) {
            try await storage.setUsernameAndPassword(username: "ann2", passwordHash: "x", container: "other", recordName: "_ann")
        }
    }

    /// A zone-wide share of `owner`'s that `participant` accepted.
    static func zoneShare(_ shortGUID: String, owner: String, participant: String) -> RecordWrite {
        let state = ShareState(
            shortGUID: shortGUID, publicPermission: .none,
            participants: [
                ShareState.Participant(
                    participantID: "o", userRecordName: owner, type: .owner, permission: .readWrite, status: .accepted),
                ShareState.Participant(
                    participantID: "p", userRecordName: participant, type: .user, permission: .readWrite,
                    status: .accepted),
            ])
        return Conformance.create(
            ShareKeys.zoneWideRecordName, [ShareState.fieldName: state.fieldValue], type: ShareKeys.recordType)
    }

    static func deletion(_ storage: any StratusStorage) async throws {
        let alice = Conformance.alice
        let bob = Conformance.bob
        let carol = DatabaseLocator(container: "c", environment: .development, scope: .private, owner: "_carol")
        let world = DatabaseLocator(container: "c", environment: .development, scope: .public, owner: "")
        try await storage.createContainer(ContainerInfo(identifier: "c", allowsSignUp: true, createdAt: 1))
        try await storage.createUser(
            UserInfo(container: "c", recordName: "_alice", username: "alice", passwordHash: "a", createdAt: 1),
            identity: identity("001", of: "_alice", at: 1))
        for (name, username) in [("_bob", "bob"), ("_carol", "carol")] {
            try await storage.createUser(
                UserInfo(container: "c", recordName: name, username: username, passwordHash: "x", createdAt: 1))
        }
        for (hash, user, password) in [("s1", "_alice", "a"), ("s2", "_alice", "a"), ("s3", "_bob", "x")] {
            #expect(
                try await storage.createSession(
                    hash: hash, session: SessionInfo(container: "c", userRecordName: user, expiresAt: 99),
                    passwordHash: password))
        }

        // Alice's private databases: a zone she shares with Bob, holding an asset; her default zone;
        // a zone in production.
        let held = String(repeating: "a", count: 64)
        let kept = String(repeating: "b", count: 64)
        for checksum in [held, kept] {
            try await storage.registerAsset(checksum: checksum, size: 3, timestamp: 10)
        }
        func holding(_ name: String, _ checksum: String) -> RecordWrite {
            var write = Conformance.create(name, ["file": .asset(AssetValue(fileChecksum: checksum, size: 3))])
            write.uploadedAssets = [checksum]
            return write
        }
        _ = try await storage.createZone(named: "Z", in: alice, timestamp: 1)
        #expect(try await Conformance.write(storage, [Conformance.create("r"), holding("f", held)]).map(Conformance.code)
                    == [nil, nil])
        #expect(try await Conformance.write(storage, [zoneShare("guid-alice", owner: "_alice", participant: "_bob")])
                    .map(Conformance.code) == [nil])
        try await Conformance.write(storage, [Conformance.create("d")], zone: ZoneID.defaultZoneName, atomic: false)
        _ = try await storage.createZone(named: "P", in: Conformance.production, timestamp: 1)
        try await Conformance.write(storage, [Conformance.create("prod")], zone: "P", in: Conformance.production)
        let databasePosition = try await storage.databaseChanges(in: alice, after: nil, limit: 10).position
        let defaultZonePosition = try await storage.recordChanges(
            zone: ZoneID.defaultZoneName, in: alice, after: nil, limit: 10, recordTypes: nil
        ).position
        // Carol shares a zone with Alice; Bob has a zone of his own; Alice wrote in the public database.
        _ = try await storage.createZone(named: "C", in: carol, timestamp: 1)
        #expect(try await Conformance.write(
            storage, [zoneShare("guid-carol", owner: "_carol", participant: "_alice")], zone: "C", in: carol,
            context: Conformance.context("_carol")
        ).map(Conformance.code) == [nil])
        try await Conformance.write(storage, [Conformance.create("c1")], zone: "C", in: carol, context: Conformance.context("_carol"))
        _ = try await storage.createZone(named: "B", in: bob, timestamp: 1)
        try await Conformance.write(storage, [Conformance.create("b1")], zone: "B", in: bob, context: Conformance.context("_bob"))
        #expect(try await Conformance.write(
            storage, [holding("p", kept)], zone: ZoneID.defaultZoneName, in: world, atomic: false,
            context: Conformance.context("_alice")
        ).map(Conformance.code) == [nil])
        // Her subscriptions, push token, push endpoint and an upload no record holds yet.
        func subscription(_ id: String, _ subscriber: String, in database: DatabaseLocator) -> StoredSubscription {
            StoredSubscription(
                database: database, subscriber: subscriber,
                definition: SubscriptionDictionary(
                    subscriptionID: id, subscriptionType: .query, query: Query(recordType: "Note"), firesOn: [.create]),
                createdAt: 1)
        }
        try await storage.saveSubscription(subscription("mine", "_alice", in: alice))
        try await storage.saveSubscription(subscription("feed", "_alice", in: world))
        try await storage.saveSubscription(subscription("feed", "_bob", in: world))
        try await storage.createPushToken(
            hash: "p1", token: PushTokenInfo(container: "c", environment: .development, createdAt: 10, usedAt: 10))
        #expect(try await storage.registerPushToken(hash: "p1", userRecordName: "_alice", deviceID: "phone", timestamp: 20))
        try await storage.registerPushEndpoint(
            PushEndpointInfo(
                id: "e1", container: "c", environment: .development, userRecordName: "_alice", deviceID: "phone",
                channel: .apnsProduction, address: "address", createdAt: 10, usedAt: 10),
            keepingAtMost: 3)
        let upload = PendingUpload(
            container: "c", user: "_alice", ticket: "t", checksum: String(repeating: "c", count: 64), size: 5,
            timestamp: 2_000)
        #expect(try await storage.recordUpload(upload, since: 0, maxPendingBytes: nil, ticketAllowance: 100))

        #expect(try await storage.sharedZones(user: "_bob", container: "c", environment: .development).map(\.owner)
                    == ["_alice"])
        #expect(try await storage.sharedZones(user: "_alice", container: "c", environment: .development).map(\.owner)
                    == ["_carol"])
        #expect(try await storage.collectAssets(registeredBefore: 1_000) == [], "every asset is held")

        #expect(try await storage.deleteUser(container: "c", recordName: "_alice").sorted() == ["s1", "s2"])

        // The account, and everything that signs in to it or reaches its devices.
        #expect(try await storage.databases(container: "c").filter { $0.owner == "_alice" }.isEmpty,
                "her databases are gone, in both environments")
        #expect(try await storage.user(container: "c", recordName: "_alice") == nil)
        #expect(try await storage.session(hash: "s1") == nil)
        #expect(try await storage.session(hash: "s2") == nil)
        #expect(try await storage.session(hash: "s3") != nil, "other users' sessions stay")
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "001") == nil)
        #expect(try await storage.identities(container: "c", userRecordName: "_alice").isEmpty)
        #expect(try await storage.pushToken(hash: "p1") == nil)
        #expect(try await storage.pushEndpoints(container: "c", environment: .development, userRecordName: "_alice").isEmpty)
        #expect(try await storage.subscriptions(in: alice, subscriber: nil).isEmpty)
        #expect(try await storage.subscriptions(in: world, subscriber: nil).map(\.subscriber) == ["_bob"])
        let uploaded = try await storage.uploadedBytes(container: "c", user: "_alice", ticket: "t", since: 0)
        #expect(uploaded.pending == 0 && uploaded.ticket == 0)

        // Her shares: Bob no longer reaches hers; she no longer takes part in Carol's, which stays.
        #expect(try await storage.sharedZones(user: "_bob", container: "c", environment: .development).isEmpty)
        #expect(try await storage.share(shortGUID: "guid-alice")?.zone == nil)
        #expect(try await storage.sharedZones(user: "_alice", container: "c", environment: .development).isEmpty)
        #expect(try await storage.acceptedParticipants(zone: "C", in: carol).isEmpty)
        #expect(try await storage.shareMemberships(zone: "C", in: carol, user: "_alice").isEmpty)
        #expect(try await storage.share(shortGUID: "guid-carol")?.zone == "C")
        #expect(try await storage.lookupRecords(names: ["c1"], zone: "C", in: carol)[0] != nil)
        #expect(try await storage.lookupRecords(names: ["b1"], zone: "B", in: bob)[0] != nil)

        // What she wrote in the public database stays, and counts for her; her private records'
        // assets are collected.
        let record = try await storage.lookupRecords(names: ["p"], zone: ZoneID.defaultZoneName, in: world)[0]
        #expect(record?.created.userRecordName == "_alice")
        #expect(try await storage.usageByAccount(container: "c")["_alice"]?.records == 1)
        #expect(try await storage.collectAssets(registeredBefore: 1_000) == [held])

        // Her private database, reached again, is a new one: empty, and her devices' tokens expired.
        #expect(try await storage.zone(named: "Z", in: alice) == nil)
        #expect(try await storage.zone(named: "P", in: Conformance.production) == nil)
        #expect(try await storage.lookupRecords(names: ["d"], zone: ZoneID.defaultZoneName, in: alice) == [nil])
        await Conformance.expectError(.changeTokenExpired) {
            _ = try await storage.databaseChanges(in: alice, after: databasePosition, limit: 10)
        }
        await Conformance.expectError(.changeTokenExpired) {
            _ = try await storage.recordChanges(
                zone: ZoneID.defaultZoneName, in: alice, after: defaultZonePosition, limit: 10, recordTypes: nil)
        }

        await Conformance.expectError(.notFound) { _ = try await storage.deleteUser(container: "c", recordName: "_alice") }
        await Conformance.expectError(.notFound) { _ = try await storage.deleteUser(container: "other", recordName: "_bob") }
        // The username and the identity are free for a new account.
        try await storage.createUser(
            UserInfo(container: "c", recordName: "_alice2", username: "alice", passwordHash: "a", createdAt: 2),
            identity: identity("001", of: "_alice2", at: 2))
        #expect(try await storage.identity(container: "c", issuer: apple, subject: "001")?.userRecordName == "_alice2")
    }
}
