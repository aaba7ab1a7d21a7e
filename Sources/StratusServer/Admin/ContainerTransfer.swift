import Foundation
import StratusModel
package import StratusStorage

/// Moves a container between storages (SQLite and PostgreSQL) as NDJSON: one JSON object per line,
/// each with a `type`: `container`, `apiToken`, `user`, `signInMethods`, `identity`, `schema`, `zone`, `asset`, `record`,
/// `subscription`, in an order an import can follow, and last `end` with the counts, so that an
/// import knows an export cut short (a full disk, a killed process) from a whole one.
///
/// What survives: the container and its settings, API tokens and users (by their hashes, so the
/// same secrets keep working; disabled users stay disabled), how they sign in (whether passwords
/// are on, the identity providers with their secrets) and their identities at providers (so that
/// Sign in with Apple and OpenID Connect find the same accounts), server-to-server keys, both schemas, every zone, every live record with its creation and
/// modification stamps, asset references (the bytes stay in the asset directory or bucket, which
/// the new server must reach), and subscriptions. What does not: tombstones, change tags and sync
/// tokens, which name the old storage's zones — clients get `CHANGE_TOKEN_EXPIRED` once and fetch
/// again from the start, and a save with an old change tag gets `CONFLICT` with the server record.
package enum ContainerTransfer {
    /// The export's layout: 3 may hold `identity` lines; 2 ends with an `end` line (and may hold
    /// `serverKey` lines); files of layout 1, which have no `format`, end with their last record or
    /// subscription.
    static let format = 3

    /// How much a transfer moved.
    package struct Counts: Sendable, Equatable {
        /// Lines written or read.
        package var lines = 0
        /// Records among them.
        package var records = 0
    }

    /// Writes a container's export, calling `write` with each line (newline included) and
    /// `progress` every 10,000 records.
    @discardableResult
    package static func export(
        container identifier: String, from storage: any StratusStorage, write: ([UInt8]) throws -> Void,
        progress: (Counts) -> Void = { _ in }
    ) async throws -> Counts {
        let container = try await storage.requireContainer(identifier)
        var counts = Counts()
        func line(_ body: (inout JSONWriter) -> Void) throws {
            var writer = JSONWriter()
            writer.beginObject()
            body(&writer)
            writer.endObject()
            try write(writer.bytes + [UInt8(ascii: "\n")])
            counts.lines += 1
        }
        try line { writer in
            writer.field("type", "container")
            writer.field("format", Int64(Self.format))
            writer.field("identifier", container.identifier)
            writer.field("allowsSignUp", container.allowsSignUp)
            writer.field("createdAt", container.createdAt)
        }
        for token in try await storage.apiTokens(container: identifier) {
            try line { writer in
                writer.field("type", "apiToken")
                writer.field("hash", token.hash)
                writer.field("name", token.name)
                writer.field("createdAt", token.createdAt)
            }
        }
        let users = try await storage.users(container: identifier)
        for user in users {
            try line { writer in
                writer.field("type", "user")
                writer.field("recordName", user.recordName)
                writer.field("username", user.username)
                writer.field("passwordHash", user.passwordHash)
                writer.field("createdAt", user.createdAt)
                writer.field("emailAddress", user.emailAddress)
                writer.field("discoverable", user.discoverable)
                writer.field("givenName", user.givenName)
                writer.field("familyName", user.familyName)
                writer.field("disabledAt", user.disabledAt)
            }
        }
        if let methods = try await storage.setting(IdentityProviderDirectory.settingKey(identifier)) {
            try line { writer in
                writer.field("type", "signInMethods")
                writer.field("stored", methods)
            }
        }
        for identity in try await storage.identities(container: identifier) {
            try line { writer in
                writer.field("type", "identity")
                writer.field("issuer", identity.issuer)
                writer.field("subject", identity.subject)
                writer.field("provider", identity.provider)
                writer.field("user", identity.userRecordName)
                writer.field("emailAddress", identity.emailAddress)
                writer.field("emailVerified", identity.emailVerified)
                writer.field("createdAt", identity.createdAt)
                writer.field("lastSignInAt", identity.lastSignInAt)
            }
        }
        for key in try await storage.serverKeys(container: identifier) {
            try line { writer in
                writer.field("type", "serverKey")
                writer.field("keyID", key.keyID)
                writer.field("environment", key.environment.rawValue)
                writer.field("publicKeyPEM", key.publicKeyPEM)
                writer.field("user", key.userRecordName)
                writer.field("createdAt", key.createdAt)
                writer.field("revokedAt", key.revokedAt)
            }
        }
        for environment in ContainerEnvironment.allCases {
            let schema = try await storage.schema(container: identifier, environment: environment)
            try line { writer in
                writer.field("type", "schema")
                writer.field("environment", environment.rawValue)
                writer.key("definition")
                writer.raw(schema.jsonBytes)
            }
        }
        var assets = Set<String>()
        let databases = try await storage.databases(container: identifier)
        func writeSubscriptions(of database: DatabaseLocator) async throws {
            for subscription in try await storage.subscriptions(in: database, subscriber: nil) {
                try line { writer in
                    writer.field("type", "subscription")
                    writer.field("database", database)
                    writer.field("subscriber", subscription.subscriber)
                    writer.field("createdAt", subscription.createdAt)
                    writer.key("definition")
                    writer.raw(subscription.definition.jsonBytes)
                }
            }
        }
        for database in databases {
            for zone in try await storage.zones(in: database) {
                try line { writer in
                    writer.field("type", "zone")
                    writer.field("database", database)
                    writer.field("name", zone.name)
                }
                var position: ChangePosition?
                while true {
                    let page = try await storage.recordChanges(
                        zone: zone.name, in: database, after: position, limit: 1_000, recordTypes: nil)
                    for record in page.records where !record.deleted {
                        for asset in try assetValues(of: record) where assets.insert(asset.checksum).inserted {
                            try line { writer in
                                writer.field("type", "asset")
                                writer.field("checksum", asset.checksum)
                                writer.field("size", asset.size)
                            }
                        }
                        try line { writer in
                            writer.field("type", "record")
                            writer.field("database", database)
                            writer.field("zone", zone.name)
                            writer.field("record", record)
                        }
                        counts.records += 1
                        if counts.records.isMultiple(of: 10_000) { progress(counts) }
                    }
                    position = page.position
                    if !page.moreComing { break }
                }
            }
            try await writeSubscriptions(of: database)
        }
        // A shared database holds no records of its own (its zones are other users'), so it is
        // never among the databases written; its subscriptions are its users'.
        for environment in ContainerEnvironment.allCases {
            for user in users {
                let shared = DatabaseLocator(
                    container: identifier, environment: environment, scope: .shared, owner: user.recordName)
                if !databases.contains(shared) { try await writeSubscriptions(of: shared) }
            }
        }
        let records = counts.records
        let lines = counts.lines + 1
        try line { writer in
            writer.field("type", "end")
            writer.field("lines", Int64(lines))
            writer.field("records", Int64(records))
        }
        progress(counts)
        return counts
    }

    /// The assets a record holds, with their sizes.
    private static func assetValues(of record: StoredRecord) throws -> [(checksum: String, size: Int64)] {
        guard !RecordWritePlanner.assetChecksums(of: record).isEmpty else { return [] }
        return try record.decodeFields().values.flatMap(\.elements).compactMap { value in
            guard case .asset(let asset) = value, let checksum = asset.fileChecksum else { return nil }
            return (checksum, asset.size ?? 0)
        }
    }

    /// Imports an export read line by line from `lines` into a storage that does not have the
    /// container yet (`EXISTS` otherwise), calling `progress` every 10,000 records. A bad line, a
    /// line after the `end` line, or an export without one (cut short) fails the import with
    /// `BAD_REQUEST` naming the line; what was imported before stays, so import into a fresh
    /// storage again once the file is whole.
    @discardableResult
    package static func importLines(
        _ lines: some Sequence<[UInt8]>, into storage: any StratusStorage, now: Int64,
        progress: (Counts) -> Void = { _ in }
    ) async throws -> Counts {
        var counts = Counts()
        var container: String?
        var ended = false
        var format = 1
        func requireContainer(of database: DatabaseLocator) throws {
            guard database.container == container else {
                throw StratusError.badRequest(
                    "the line names container '\(database.container)', not '\(container ?? "")' of the first line")
            }
        }
        var pending: (database: DatabaseLocator, zone: String, records: [StoredRecord])?
        func flush() async throws {
            if let batch = pending, !batch.records.isEmpty {
                try await storage.importRecords(batch.records, zone: batch.zone, in: batch.database)
            }
            pending = nil
        }
        for bytes in lines where !bytes.isEmpty {
            counts.lines += 1
            do {
                guard !ended else { throw StratusError.badRequest("a line follows the 'end' line") }
                // What an import writes is refused as a request's text is: U+0000 in it.
                let object = try JSONValue.parse(bytes, refusingNullCharacter: true).object()
                let type: String = try object.decode("type")
                if type != "record" { try await flush() }
                if type != "container", container == nil {
                    throw StratusError.badRequest("the first line must be the container")
                }
                switch type {
                case "container":
                    guard container == nil else { throw StratusError.badRequest("a second container line") }
                    format = try object.decodeIfPresent("format") ?? 1
                    guard format <= Self.format else {
                        throw StratusError.badRequest(
                            "the export has format \(format); this server reads formats up to \(Self.format): upgrade it first")
                    }
                    let identifier: String = try object.decode("identifier")
                    try await storage.createContainer(
                        ContainerInfo(identifier: identifier, allowsSignUp: try object.decode("allowsSignUp"),
                                      createdAt: try object.decode("createdAt")))
                    container = identifier
                case "apiToken":
                    try await storage.createAPIToken(
                        hash: try object.decode("hash"), container: container!, name: try object.decode("name"),
                        createdAt: try object.decode("createdAt"))
                case "user":
                    try await storage.createUser(
                        UserInfo(container: container!, recordName: try object.decode("recordName"),
                                 username: try object.decode("username"), passwordHash: try object.decode("passwordHash"),
                                 createdAt: try object.decode("createdAt"),
                                 emailAddress: try object.decodeIfPresent("emailAddress"),
                                 discoverable: try object.decodeIfPresent("discoverable") ?? false,
                                 givenName: try object.decodeIfPresent("givenName"),
                                 familyName: try object.decodeIfPresent("familyName"),
                                 disabledAt: try object.decodeIfPresent("disabledAt")))
                case "signInMethods":
                    let stored: String = try object.decode("stored")
                    _ = try SignInMethods(stored: stored)
                    try await storage.setSetting(IdentityProviderDirectory.settingKey(container!), to: stored)
                case "identity":
                    try await storage.linkIdentity(
                        FederatedIdentity(
                            container: container!, issuer: try object.decode("issuer"), subject: try object.decode("subject"),
                            provider: try object.decode("provider"), userRecordName: try object.decode("user"),
                            emailAddress: try object.decodeIfPresent("emailAddress"),
                            emailVerified: try object.decodeIfPresent("emailVerified") ?? false,
                            createdAt: try object.decode("createdAt"), lastSignInAt: try object.decode("lastSignInAt")))
                case "serverKey":
                    let environment: String = try object.decode("environment")
                    guard let environment = ContainerEnvironment(rawValue: environment) else {
                        throw StratusError.badRequest("environment must be development or production")
                    }
                    try await storage.createServerKey(
                        ServerKeyInfo(
                            keyID: try object.decode("keyID"), container: container!, environment: environment,
                            publicKeyPEM: try object.decode("publicKeyPEM"), userRecordName: try object.decode("user"),
                            createdAt: try object.decode("createdAt"), revokedAt: try object.decodeIfPresent("revokedAt")))
                case "schema":
                    let environment: String = try object.decode("environment")
                    guard let environment = ContainerEnvironment(rawValue: environment) else {
                        throw StratusError.badRequest("environment must be development or production")
                    }
                    let schema: Schema = try object.decode("definition")
                    _ = try await storage.updateSchema(container: container!, environment: environment) { _ in schema }
                case "zone":
                    let database: DatabaseLocator = try object.decode("database")
                    try requireContainer(of: database)
                    let name: String = try object.decode("name")
                    if name != ZoneID.defaultZoneName {
                        _ = try await storage.createZone(named: name, in: database, timestamp: now)
                    }
                case "asset":
                    try await storage.registerAsset(
                        checksum: try object.decode("checksum"), size: try object.decode("size"), timestamp: now)
                case "record":
                    let database: DatabaseLocator = try object.decode("database")
                    let zone: String = try object.decode("zone")
                    let record: StoredRecord = try object.decode("record")
                    try requireContainer(of: database)
                    // Stored fields go to clients as they are: they must be what a save would store.
                    do {
                        _ = try record.decodeFields()
                    } catch {
                        throw StratusError.badRequest("record '\(record.name)': its fields are not a record's fields: \(error)")
                    }
                    if pending.map({ $0.database != database || $0.zone != zone || $0.records.count >= 500 }) ?? false {
                        try await flush()
                    }
                    if pending == nil { pending = (database, zone, []) }
                    pending!.records.append(record)
                    counts.records += 1
                    if counts.records.isMultiple(of: 10_000) { progress(counts) }
                case "subscription":
                    let database: DatabaseLocator = try object.decode("database")
                    try requireContainer(of: database)
                    try await storage.saveSubscription(
                        StoredSubscription(
                            database: database, subscriber: try object.decode("subscriber"),
                            definition: try object.decode("definition"), createdAt: try object.decode("createdAt")))
                case "end":
                    try await flush()
                    let (lines, records): (Int, Int) = (try object.decode("lines"), try object.decode("records"))
                    guard lines == counts.lines, records == counts.records else {
                        throw StratusError.badRequest(
                            "the export says it has \(lines) lines and \(records) records; \(counts.lines) and "
                                + "\(counts.records) were read")
                    }
                    ended = true
                default:
                    throw StratusError.badRequest("unknown type '\(type)'")
                }
            } catch let error as StratusError {
                throw StratusError(error.code, "line \(counts.lines): \(error.reason)")
            } catch {
                throw StratusError.badRequest("line \(counts.lines): \(error)")
            }
        }
        // A file of the first format ends with its last batch of records, not with an `end` line.
        try await flush()
        guard container != nil else { throw StratusError.badRequest("the file holds no container: it is empty") }
        guard ended || format < 2 else {
            throw StratusError.badRequest(
                "the export ends at line \(counts.lines) without its 'end' line: it was cut short; export it again")
        }
        progress(counts)
        return counts
    }
}
