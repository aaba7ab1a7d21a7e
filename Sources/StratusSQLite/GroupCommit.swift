import GRDB
import StratusStorage
import Synchronization

/// Commits concurrent record writes together: writes that arrive while a transaction is being
/// committed wait, and are then applied one after another in a single transaction, each in a
/// savepoint of its own, and committed with one fsync.
///
/// Each write keeps its own outcome: one that rolls back (a failed atomic batch) or fails rolls back
/// its savepoint alone, and the others commit. Writes of a group take their sequence numbers in the
/// order they are applied, which is the commit order. None is answered before the group's commit is
/// durable; if the commit fails, every write of the group fails with its error (none of them was
/// acknowledged, and none is in the database).
///
/// The grouping is ``CommitGroups``'s: the extra latency a write may see is the duration of the group
/// committing when it arrived, and under no contention a group holds one write and nothing waits.
final class GroupCommit: Sendable {
    /// What a write's body decides: its outcome, and whether its changes stay.
    struct Decision: Sendable {
        var outcome: ModifyRecordsOutcome
        var commits: Bool
    }

    private struct Job: @unchecked Sendable {
        // The body runs on GRDB's writer queue, inside the group's transaction; only the committer
        // calls it, once.
        let body: (Database) throws -> Decision
    }

    /// How many groups were committed (or failed), and how many writes they held.
    var counts: (groups: Int, writes: Int) {
        let counts = groups.counts
        return (counts.groups, counts.jobs)
    }

    private let pool: DatabasePool
    /// Called when a group's transaction failed as a whole: caches filled from its uncommitted
    /// state must be forgotten.
    private let onFailedGroup: @Sendable () -> Void
    /// SQLite has one writer: every write goes under one key, one group at a time.
    private let groups = CommitGroups<Int, Job, ModifyRecordsOutcome>()

    init(pool: DatabasePool, onFailedGroup: @escaping @Sendable () -> Void) {
        self.pool = pool
        self.onFailedGroup = onFailedGroup
    }

    /// Applies `body` in the next group and answers once that group is committed.
    func write(_ body: @escaping (Database) throws -> Decision) async throws -> ModifyRecordsOutcome {
        try await groups.submit(Job(body: body), to: 0) { [pool, onFailedGroup] _, jobs in
            await Self.commit(jobs, pool: pool, onFailedGroup: onFailedGroup)
        }
    }

    /// Applies a group's writes in one transaction, each in a savepoint of its own.
    private static func commit(
        _ jobs: [Job], pool: DatabasePool, onFailedGroup: @Sendable () -> Void
    ) async -> [Result<ModifyRecordsOutcome, any Error>] {
        do {
            return try await pool.writeWithoutTransaction { db in
                if jobs.count == 1 { return [try alone(jobs[0], db)] }
                var results: [Result<ModifyRecordsOutcome, any Error>] = []
                try db.inTransaction(.immediate) {
                    for job in jobs {
                        do {
                            results.append(.success(try inSavepoint(db) { try job.body(db) }))
                        } catch {
                            // A write that fails alone rolled back its savepoint; if SQLite ended the
                            // whole transaction, the group fails.
                            guard db.isInsideTransaction else { throw error }
                            results.append(.failure(error))
                        }
                    }
                    return .commit
                }
                return results
            }
        } catch {
            onFailedGroup()
            return jobs.map { _ in .failure(error) }
        }
    }

    /// Applies a group's only write in a transaction of its own, which rolls back when the body fails
    /// or decides so. A savepoint would cost SQLite a copy of every page the write changes (its
    /// sub-journal, a temporary file), and a write alone has no other to keep.
    private static func alone(_ job: Job, _ db: Database) throws -> Result<ModifyRecordsOutcome, any Error> {
        var result: Result<ModifyRecordsOutcome, any Error>!
        try db.inTransaction(.immediate) {
            do {
                let decision = try job.body(db)
                result = .success(decision.outcome)
                return decision.commits ? .commit : .rollback
            } catch {
                result = .failure(error)
                return .rollback
            }
        }
        return result
    }

    /// Runs a write's `body` in a savepoint, and rolls the savepoint back when the body fails or
    /// decides so. The savepoint's statements are prepared once per connection (GRDB's `inSavepoint`
    /// parses them on every call: about a tenth of a single save's time on the writer).
    private static func inSavepoint(_ db: Database, _ body: () throws -> Decision) throws -> ModifyRecordsOutcome {
        try db.cachedStatement(sql: "SAVEPOINT stratus_write").run()
        let decision: Decision
        do {
            decision = try body()
        } catch {
            // If SQLite ended the whole transaction, there is no savepoint left: the caller sees it.
            try? db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT stratus_write").run()
            try? db.cachedStatement(sql: "RELEASE SAVEPOINT stratus_write").run()
            throw error
        }
        if !decision.commits {
            try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT stratus_write").run()
        }
        try db.cachedStatement(sql: "RELEASE SAVEPOINT stratus_write").run()
        return decision.outcome
    }
}
