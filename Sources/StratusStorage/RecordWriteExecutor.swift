public import StratusModel

/// The record-write transaction of `records/modify`, written once for every backend.
///
/// Inside its write transaction, with the zone locked, a backend creates an executor and answers its
/// steps until it finishes. The executor decides everything: what each operation means
/// (``RecordWritePlanner``), whether the assets a record holds are known, which records a deletion
/// takes with it through `DELETE_SELF` and whether a `VALIDATE` reference forbids it, whether a
/// saved record's `VALIDATE` targets exist and its `DELETE_SELF` targets stay under their limit,
/// the sequence number and change tag of every record written, the query index entries that change,
/// and whether an atomic batch rolls back. A backend only reads and writes rows:
///
/// ```swift
/// var executor = RecordWriteExecutor(writes: writes, zone: zone, schema: schema, …)
/// var step = executor.start()
/// while true {
///     switch step {
///     case .fetchRecords(let names): step = executor.resume(.records(read(names)))
///     …
///     case .finish(let completion): return commit(completion)
///     }
/// }
/// ```
///
/// It holds no I/O of its own (a state machine, as postgres-nio's protocol handling is), so a
/// synchronous backend (GRDB's write closure) and an asynchronous one (postgres-nio) drive the same
/// code, and the conformance suite pins its behaviour through both.
public struct RecordWriteExecutor: Sendable {
    /// What the executor needs next.
    public enum Step: Sendable {
        /// Read these records of the zone, tombstones included; answer ``Answer/records(_:)`` with
        /// those found.
        case fetchRecords([String])
        /// Which of `checksums` may `record` hold: those in `uploaded` when the asset store has
        /// them, the others when the record's previous version already held them. Answer
        /// ``Answer/knownAssets(_:)``.
        case checkAssets(record: String, checksums: [String], uploaded: Set<String>)
        /// The records whose references with `action` point at `target`; answer ``Answer/names(_:)``.
        case findReferrers(target: String, action: ReferenceAction)
        /// How many records other than `excludingSource` point at `target` with `action`; answer
        /// ``Answer/count(_:)``.
        case countReferrers(target: String, action: ReferenceAction, excludingSource: String)
        /// What `account` holds in the container now (in every zone of the container's databases, this
        /// transaction's earlier writes included, this executor's own not): asked once per account
        /// whose holdings a write grows while a quota applies (``WriteContext/quota``). Answer
        /// ``Answer/usage(_:)``.
        case readUsage(account: String)
        /// Write these rows, in order; answer ``Answer/written``.
        case write(RecordRows)
        /// The transaction's work is done: commit or roll back as the completion says.
        case finish(Completion)
    }

    /// A backend's answer to the last ``Step``.
    public enum Answer: Sendable {
        /// The records found, by name.
        case records([String: StoredRecord])
        /// The checksums known.
        case knownAssets(Set<String>)
        /// The referring records' names.
        case names([String])
        /// A number of referring records.
        case count(Int)
        /// What an account holds.
        case usage(StorageUsage)
        /// The rows were written.
        case written
    }

    /// The rows one operation writes.
    public struct RecordRows: Sendable {
        /// The records, each with its sequence number and change tag: the operation's own record
        /// first, then those a deletion takes with it.
        public var records: [RowChange]
        /// The asset checksums the operation's record holds, to record as its holdings.
        public var assets: Set<String>
        /// The enforced references of the operation's record, to record as its links.
        public var references: [ReferenceLink]
    }

    /// One record's row and what changes around it.
    public struct RowChange: Sendable {
        /// The record as stored from now on.
        public var record: StoredRecord
        /// Its previous version, if any (possibly a tombstone).
        public var previous: StoredRecord?
        /// Query index entries of the previous version that go (under the previous record type).
        public var removedIndexEntries: [IndexEntry]
        /// Query index entries that are new.
        public var addedIndexEntries: [IndexEntry]
        /// Whether the previous version's reference rows must be deleted first.
        public var clearsReferences: Bool
        /// Whether the previous version's asset holdings must be deleted first.
        public var clearsAssets: Bool
        /// Whether the previous version was a share, whose index rows must be deleted first.
        public var clearsShare: Bool
        /// The share to index (`shares` and `share_participants` rows), when the record is a live share.
        public var share: ShareState?
    }

    /// How the transaction ends.
    public struct Completion: Sendable {
        /// The results and changes to answer with.
        public var outcome: ModifyRecordsOutcome
        /// Whether to commit; `false` when an atomic batch failed and everything rolls back.
        public var commits: Bool
        /// The schema to store, when development writes grew it.
        public var grownSchema: Schema?
        /// The zone's new last sequence number, when anything was written.
        public var zoneSequence: Int64?
        /// How much what each account holds in the zone changed (accounts whose holdings did not
        /// change are left out); empty when nothing commits.
        public var usageChanges: [String: StorageUsage]
    }

    private struct Cascade {
        var planned: StoredRecord
        var doomed: [String: StoredRecord]
        var frontier: [String]
        var writes: [StoredRecord]
        var unguarded: [String] = []
    }

    private enum Phase {
        case fetchingCurrent
        case checkingAssets(StoredRecord, uploaded: Set<String>, checksums: [String])
        case findingCascade(Cascade)
        case fetchingCascade(Cascade, sources: [String])
        case findingGuardians(Cascade)
        case bindingLinks(StoredRecord, links: [ReferenceLink])
        case checkingLinks(StoredRecord, remaining: [ReferenceLink])
        case shaping(HierarchyShaper)
        case readingUsage(records: [StoredRecord], reshaped: [StoredRecord], account: String)
        case writing(StoredRecord)
        case finished
    }

    private let writes: [RecordWrite]
    private let database: DatabaseLocator
    private let atomic: Bool
    private let context: WriteContext
    private let zoneID: Int64
    private let startSequence: Int64
    private var schema: SchemaInForce
    private var sequence: Int64
    private var current: [String: StoredRecord] = [:]
    private var results: [RecordWriteResult] = []
    private var changes: [RecordChange] = []
    private var phase = Phase.fetchingCurrent
    /// In the public database or for a participant, the links the current operation's record keeps
    /// (``bind(_:of:targets:)``).
    private var boundLinks: [ReferenceLink]?
    /// The search tokens of the strings indexed so far, so that each is tokenized once per request.
    private var searchTokens = SearchTokens()
    /// Records the request's operations re-placed in hierarchies so far.
    private var reshapedCount = 0
    /// What the batch's operations written so far changed of each account's holdings.
    private var usageChanges: [String: StorageUsage] = [:]
    /// What accounts held before the batch, as read for a quota check.
    private var accountUsage: [String: StorageUsage] = [:]

    /// An executor for `writes` into `zone` of `database` (locked by the caller) under `schema`.
    public init(
        writes: [RecordWrite], zone: ZoneState, database: DatabaseLocator, schema: Schema, atomic: Bool,
        context: WriteContext
    ) {
        self.writes = writes
        self.database = database
        self.atomic = atomic
        self.context = context
        zoneID = zone.id
        startSequence = zone.sequence
        sequence = zone.sequence
        self.schema = SchemaInForce(schema, environment: database.environment)
        results.reserveCapacity(writes.count)
    }

    /// The first step: reading the records the batch names.
    public mutating func start() -> Step {
        phase = .fetchingCurrent
        return .fetchRecords(writes.map(\.recordName))
    }

    /// The next step, given the answer to the last one.
    public mutating func resume(_ answer: Answer) -> Step {
        switch (phase, answer) {
        case (.fetchingCurrent, .records(let records)):
            current = records
            return nextWrite()
        case (.checkingAssets(let planned, let uploaded, let checksums), .knownAssets(let known)):
            if let unknown = checksums.first(where: { !known.contains($0) }) {
                return fail(
                    RecordWritePlanner.unknownAsset(
                        record: planned.name, checksum: unknown, uploaded: uploaded.contains(unknown)))
            }
            return checkReferences(of: planned)
        case (.findingCascade(let cascade), .names(let sources)):
            let added = sources.filter { cascade.doomed[$0] == nil }
            guard !added.isEmpty else { return continueCascade(cascade) }
            phase = .fetchingCascade(cascade, sources: added)
            return .fetchRecords(added)
        case (.fetchingCascade(var cascade, let sources), .records(let records)):
            for source in sources {
                guard let record = records[source], !record.deleted else { continue }
                current[source] = record
                let tombstone = RecordWritePlanner.tombstone(of: record, context: context)
                cascade.doomed[source] = tombstone
                cascade.writes.append(tombstone)
                cascade.frontier.append(source)
            }
            return continueCascade(cascade)
        case (.findingGuardians(var cascade), .names(let guardians)):
            let name = cascade.unguarded.removeFirst()
            if let guardian = guardians.sorted().first(where: { cascade.doomed[$0] == nil }) {
                return fail(
                    RecordWritePlanner.guardedDeletion(
                        record: name, cascaded: name != cascade.planned.name,
                        guardian: context.participantShares == nil ? guardian : nil))
            }
            return nextGuardian(cascade)
        case (.bindingLinks(let planned, let links), .records(let records)):
            return bind(links, of: planned, targets: records)
        case (.checkingLinks(let planned, var remaining), .records(let records)):
            let target = remaining.removeFirst().target
            guard let record = records[target], !record.deleted else {
                return fail(RecordWritePlanner.missingTarget(record: planned.name, target: target))
            }
            return checkLinks(planned, remaining: remaining)
        case (.checkingLinks(let planned, var remaining), .count(let count)):
            let target = remaining.removeFirst().target
            let limit = context.limits.maxDeleteSelfReferencesPerTarget
            guard count < limit else {
                return fail(
                    RecordWritePlanner.tooManyDeleteSelfReferences(
                        record: planned.name, target: target, count: count, limit: limit))
            }
            return checkLinks(planned, remaining: remaining)
        case (.shaping(var shaper), _):
            return shaped(shaper.resume(answer), by: shaper)
        case (.readingUsage(let records, let reshaped, let account), .usage(let usage)):
            accountUsage[account] = usage
            return number(records, reshaped: reshaped)
        case (.writing(let record), .written):
            results.append(.success(record))
            return nextWrite()
        default:
            preconditionFailure("RecordWriteExecutor: answer \(answer) does not fit the step asked")
        }
    }

    // MARK: Steps

    /// Plans the next write, or finishes.
    private mutating func nextWrite() -> Step {
        while results.count < writes.count {
            let write = writes[results.count]
            if let denial = RecordWritePlanner.participantDenial(write, current: current[write.recordName], context: context) {
                results.append(.failure(denial))
                continue
            }
            switch RecordWritePlanner.plan(write, current: current[write.recordName], context: context, schema: &schema) {
            case .failure(let failure):
                results.append(.failure(failure))
            case .success(let planned):
                let checksums = RecordWritePlanner.assetChecksums(of: planned)
                guard checksums.isEmpty else {
                    let uploaded = write.uploadedAssets.intersection(checksums)
                    let sorted = checksums.sorted()
                    phase = .checkingAssets(planned, uploaded: uploaded, checksums: sorted)
                    return .checkAssets(record: planned.name, checksums: sorted, uploaded: uploaded)
                }
                return checkReferences(of: planned)
            }
        }
        return finish()
    }

    /// The current write fails with `failure`; the batch goes on with the next one.
    private mutating func fail(_ failure: RecordWriteFailure) -> Step {
        results.append(.failure(failure))
        return nextWrite()
    }

    /// A deletion gathers its `DELETE_SELF` dependents; a save checks its enforced references.
    private mutating func checkReferences(of planned: StoredRecord) -> Step {
        boundLinks = nil
        if planned.deleted {
            return continueCascade(
                Cascade(planned: planned, doomed: [planned.name: planned], frontier: [planned.name], writes: [planned]))
        }
        let links = RecordWritePlanner.links(of: planned)
        let targets = Set(links.filter { $0.action != .none && $0.target != planned.name }.map(\.target))
        guard context.enforcesGrants || context.participantShares != nil, !targets.isEmpty else {
            return checkLinks(planned, remaining: links)
        }
        phase = .bindingLinks(planned, links: links)
        return .fetchRecords(targets.sorted())
    }

    /// In the public database a `VALIDATE` or `DELETE_SELF` reference binds only records of one
    /// creator, so that nobody can keep another user's record from being deleted, use up its
    /// `DELETE_SELF` references, or have their own records deleted with it: a reference to another
    /// user's record, or a `DELETE_SELF` one to a record that does not exist, is kept as a plain
    /// reference (``RecordWritePlanner/boundLinks(_:of:targets:context:)``). A participant of
    /// hierarchical shares binds only records of their shares, and a record outside them is missing
    /// to their `VALIDATE` references, as it is to their reads.
    private mutating func bind(_ links: [ReferenceLink], of planned: StoredRecord, targets: [String: StoredRecord]) -> Step {
        var targets = targets.filter { !$0.value.deleted }
        if let shares = context.participantShares {
            targets = targets.filter { $0.value.shareName.map { shares[$0] != nil } ?? false }
        }
        if let missing = links.first(where: {
            $0.action == .validate && $0.target != planned.name && targets[$0.target] == nil
        }) {
            return fail(RecordWritePlanner.missingTarget(record: planned.name, target: missing.target))
        }
        let bound = RecordWritePlanner.boundLinks(links, of: planned, targets: targets, context: context)
        boundLinks = bound
        // Their VALIDATE targets were just found; what is left to check is the DELETE_SELF limit.
        return checkLinks(planned, remaining: bound.filter { $0.action == .deleteSelf })
    }

    /// The next record of the cascade whose `DELETE_SELF` referrers are not known yet, then the
    /// `VALIDATE` guards of everything doomed.
    private mutating func continueCascade(_ cascade: Cascade) -> Step {
        var cascade = cascade
        if let target = cascade.frontier.popLast() {
            phase = .findingCascade(cascade)
            return .findReferrers(target: target, action: .deleteSelf)
        }
        cascade.unguarded = cascade.doomed.keys.sorted()
        return nextGuardian(cascade)
    }

    /// Asks for the `VALIDATE` referrers of the next doomed record, or writes the cascade.
    private mutating func nextGuardian(_ cascade: Cascade) -> Step {
        guard let name = cascade.unguarded.first else { return write(cascade.writes, of: cascade.planned) }
        phase = .findingGuardians(cascade)
        return .findReferrers(target: name, action: .validate)
    }

    /// Checks the next enforced reference of a saved record, or writes it.
    private mutating func checkLinks(_ planned: StoredRecord, remaining: [ReferenceLink]) -> Step {
        var remaining = remaining
        while let link = remaining.first {
            switch link.action {
            case .validate where link.target != planned.name:
                phase = .checkingLinks(planned, remaining: remaining)
                return .fetchRecords([link.target])
            case .deleteSelf:
                phase = .checkingLinks(planned, remaining: remaining)
                return .countReferrers(target: link.target, action: .deleteSelf, excludingSource: planned.name)
            default:
                remaining.removeFirst()
            }
        }
        return write([planned], of: planned)
    }

    /// Places the records of one operation in their hierarchies (``HierarchyShaper``), then writes them.
    private mutating func write(_ records: [StoredRecord], of planned: StoredRecord) -> Step {
        // Records outside any hierarchy, before and after (most), have nothing to shape.
        if records.allSatisfy({ !$0.mayHoldReservedFields && current[$0.name]?.mayHoldReservedFields != true }) {
            return place(records, reshaped: [])
        }
        var shaper = HierarchyShaper(
            rows: records, known: current, context: context,
            budget: context.maxReshapedRecordsPerRequest - reshapedCount)
        return shaped(shaper.start(), by: shaper)
    }

    /// Follows the shaper's step: passes its question on, or writes what it decided.
    private mutating func shaped(_ step: HierarchyShaper.Step, by shaper: HierarchyShaper) -> Step {
        switch step {
        case .ask(let question):
            phase = .shaping(shaper)
            return question
        case .failed(let failure):
            return fail(failure)
        case .done(let records, let reshaped):
            current.merge(shaper.fetched) { mine, _ in mine }
            return place(records, reshaped: reshaped)
        }
    }

    /// Writes an operation's records as placed, unless a participant would leave their shares, or
    /// reach records outside them: deleted with theirs (`DELETE_SELF`), or moved by their write.
    private mutating func place(_ records: [StoredRecord], reshaped: [StoredRecord]) -> Step {
        if let denial = RecordWritePlanner.participantDenial(placing: records[0], context: context)
            ?? RecordWritePlanner.participantDenial(
                touching: records.dropFirst().map(\.name) + reshaped.map(\.name), before: current, context: context)
        {
            return fail(denial)
        }
        return number(records, reshaped: reshaped)
    }

    /// Numbers the records of one operation and hands over their rows: `records` with their
    /// index, reference and asset changes (the operation's own first), then the `reshaped` records
    /// whose place in a hierarchy alone changed. The operation fails with `QUOTA_EXCEEDED` instead
    /// when what it adds would take an account or the container past its quota.
    private mutating func number(_ records: [StoredRecord], reshaped: [StoredRecord]) -> Step {
        var rows: [RowChange] = []
        rows.reserveCapacity(records.count + reshaped.count)
        var sequence = self.sequence
        // The operation's own rows, which a later one of its rows (never, in practice) would follow.
        var numbered: [String: StoredRecord] = [:]
        var change: [String: StorageUsage] = [:]
        for (record, isReshaped) in records.map({ ($0, false) }) + reshaped.map({ ($0, true) }) {
            let previous = numbered[record.name] ?? current[record.name]
            let row = Self.row(
                record, after: &sequence, zoneID: zoneID, previous: previous, schema: schema.schema,
                tokens: &searchTokens, reshaped: isReshaped)
            numbered[record.name] = row.record
            Self.charge(row, in: database, to: &change)
            rows.append(row)
        }
        if let quota = context.quota {
            switch check(change, against: quota) {
            case .passes: break
            case .needsUsage(let account):
                phase = .readingUsage(records: records, reshaped: reshaped, account: account)
                return .readUsage(account: account)
            case .fails(let reason):
                return fail(RecordWriteFailure(.quotaExceeded, "record '\(records[0].name)': \(reason)"))
            }
        }
        self.sequence = sequence
        reshapedCount += reshaped.count
        for row in rows {
            current[row.record.name] = row.record
            changes.append(RecordChange(previous: row.previous, record: row.record))
        }
        for (account, usage) in change { usageChanges[account, default: .zero] += usage }
        phase = .writing(rows[0].record)
        return .write(
            RecordRows(
                records: rows, assets: RecordWritePlanner.assetChecksums(of: records[0]),
                references: boundLinks ?? RecordWritePlanner.links(of: records[0])))
    }

    /// Adds what `row` changes of its account's holdings to `change`: a record is charged to its
    /// database's owner, or in the public database to its creator (``StorageUsage``).
    private static func charge(_ row: RowChange, in database: DatabaseLocator, to change: inout [String: StorageUsage]) {
        if let previous = row.previous, !previous.deleted {
            change[StorageUsage.account(of: previous, in: database), default: .zero] += .zero - StorageUsage.of(previous)
        }
        if !row.record.deleted {
            change[StorageUsage.account(of: row.record, in: database), default: .zero] += StorageUsage.of(row.record)
        }
    }

    private enum QuotaCheck {
        case passes
        case needsUsage(account: String)
        case fails(String)
    }

    /// Whether an operation that changes holdings by `change` stays within `quota`: each account
    /// it grows, with what it held before the batch and what the batch added, and the container,
    /// with what the batch added.
    private func check(_ change: [String: StorageUsage], against quota: WriteQuota) -> QuotaCheck {
        if !quota.perAccount.isUnlimited {
            for (account, growth) in change.sorted(by: { $0.key < $1.key }) where growth.grows {
                guard let held = accountUsage[account] else { return .needsUsage(account: account) }
                let whose = account == context.userRecordName
                    ? "your" : database.scope == .public ? "the record creator's" : "the zone owner's"
                let after = held + usageChanges[account, default: .zero] + growth
                if let violation = quota.perAccount.violation(of: after, growingBy: growth, whose: whose) {
                    return .fails(violation)
                }
            }
        }
        let growth = change.values.reduce(StorageUsage.zero, +)
        if growth.grows, !quota.containerRemaining.isUnlimited {
            let added = usageChanges.values.reduce(StorageUsage.zero, +) + growth
            if let violation = quota.containerRemaining.violation(of: added, growingBy: growth, whose: "the container's remaining") {
                return .fails(violation)
            }
        }
        return .passes
    }

    /// The rows that store `records` as they are, as an import does (their stamps and fields kept):
    /// each takes the zone's next sequence number and a change tag, and what they change of each
    /// account's holdings comes back with them. `current` holds the zone's rows
    /// of those names; the zone's last sequence number comes back with the rows. The share a record
    /// last left is not kept: it names a position in the old storage's change order, which an
    /// import renumbers.
    public static func importRows(
        _ records: [StoredRecord], zone: ZoneState, database: DatabaseLocator, current: [String: StoredRecord],
        schema: Schema
    ) -> (rows: [RecordRows], sequence: Int64, usageChanges: [String: StorageUsage]) {
        var current = current
        var sequence = zone.sequence
        var tokens = SearchTokens()
        var usageChanges: [String: StorageUsage] = [:]
        let rows = records.map { record in
            let record = record.formerShare == nil
                ? record
                : record.settingReserved([RecordHierarchy.formerShareField: nil, RecordHierarchy.formerShareSequenceField: nil])
            let row = Self.row(
                record, after: &sequence, zoneID: zone.id, previous: current[record.name], schema: schema, tokens: &tokens)
            current[record.name] = row.record
            charge(row, in: database, to: &usageChanges)
            return RecordRows(
                records: [row], assets: RecordWritePlanner.assetChecksums(of: record),
                references: RecordWritePlanner.links(of: record))
        }
        return (rows, sequence, usageChanges.filter { !$0.value.isZero })
    }

    /// A record with the zone's next sequence number and its change tag, and the index, reference
    /// and asset rows that change from its previous version. A `reshaped` record (only its place in
    /// a hierarchy changed) keeps its change tag, so that no client holding it meets a conflict, and
    /// its other rows. A live record that leaves a share records which, and when.
    private static func row(
        _ record: StoredRecord, after sequence: inout Int64, zoneID: Int64, previous: StoredRecord?, schema: Schema,
        tokens: inout SearchTokens, reshaped: Bool = false
    ) -> RowChange {
        var record = record
        sequence += 1
        record.sequence = sequence
        if !record.deleted, let previous, previous.mayHoldReservedFields {
            // A tombstone keeps its share, so a record created again outside it has left it too.
            if let left = previous.shareName, left != record.shareName {
                record = record.settingReserved([
                    RecordHierarchy.formerShareField: .string(left),
                    RecordHierarchy.formerShareSequenceField: .int64(sequence),
                ])
            } else if previous.deleted, record.formerShare == nil, let left = previous.formerShare {
                record = record.settingReserved([
                    RecordHierarchy.formerShareField: .string(left.shareName),
                    RecordHierarchy.formerShareSequenceField: .int64(left.sequence),
                ])
            }
        }
        if reshaped {
            return RowChange(
                record: record, previous: previous, removedIndexEntries: [], addedIndexEntries: [], clearsReferences: false,
                clearsAssets: false, clearsShare: false, share: nil)
        }
        record.changeTag = ChangeTag.make(zoneID: zoneID, sequence: sequence)
        let new = IndexEntry.entries(of: record, schema: schema, tokens: &tokens)
        let old = IndexEntry.entries(of: previous, schema: schema, tokens: &tokens)
        var removed: [IndexEntry] = []
        var added = new
        // A new record (or one that had no entries) only inserts: no sets to compare. Stored entries
        // are keyed by the record's creation time as well, so an entry stays as it is only while that
        // time does (a write keeps it; an import over a record may bring another).
        if !old.isEmpty {
            if previous?.created.timestamp == record.created.timestamp {
                let (oldSet, newSet) = (Set(old), Set(new))
                removed = Array(oldSet.subtracting(newSet))
                added = Array(newSet.subtracting(oldSet))
            } else {
                removed = old
            }
        }
        return RowChange(
            record: record, previous: previous, removedIndexEntries: removed, addedIndexEntries: added,
            clearsReferences: previous.map { !RecordWritePlanner.links(of: $0).isEmpty } ?? false,
            clearsAssets: previous.map { !RecordWritePlanner.assetChecksums(of: $0).isEmpty } ?? false,
            clearsShare: previous?.shareState != nil, share: record.shareState)
    }

    /// Every write has its result: commit, or roll back an atomic batch that had a failure.
    private mutating func finish() -> Step {
        phase = .finished
        if atomic, results.contains(where: { (try? $0.get()) == nil }) {
            return .finish(
                Completion(
                    outcome: ModifyRecordsOutcome(
                        results: RecordWritePlanner.failAtomically(results, names: writes.map(\.recordName)),
                        changes: []),
                    commits: false, grownSchema: nil, zoneSequence: nil, usageChanges: [:]))
        }
        return .finish(
            Completion(
                outcome: ModifyRecordsOutcome(results: results, changes: changes), commits: true,
                grownSchema: schema.changed ? schema.schema : nil,
                zoneSequence: sequence > startSequence ? sequence : nil,
                usageChanges: usageChanges.filter { !$0.value.isZero }))
    }
}
