import Synchronization

/// Runs concurrent jobs in groups, one group at a time per key: jobs that arrive while their key's
/// group is being committed wait, and then go together in the next group. A backend commits a group
/// in one transaction, so that many writers share its fixed costs (a commit's fsync, a lock's round
/// trips).
///
/// The first job of an idle key leads: it commits groups until nobody waits, and each job is
/// answered with its own result when its group is done. Under no contention a group holds one job
/// and nothing waits; the extra latency a job may see is the duration of the group committing when
/// it arrived.
public final class CommitGroups<Key: Hashable & Sendable, Job: Sendable, Outcome: Sendable>: Sendable {
    /// Commits one group; answers one result per job, in the group's order.
    public typealias Commit = @Sendable (_ key: Key, _ group: [Job]) async -> [Result<Outcome, any Error>]

    private struct Waiting: Sendable {
        let job: Job
        let continuation: CheckedContinuation<Outcome, any Error>
    }

    private struct State {
        var waiting: [Key: [Waiting]] = [:]
        var committing: Set<Key> = []
        var groups = 0
        var jobs = 0
    }

    private let state = Mutex(State())

    /// Creates an empty set of groups.
    public init() {}

    /// How many groups were committed (or failed), and how many jobs they held.
    public var counts: (groups: Int, jobs: Int) {
        state.withLock { ($0.groups, $0.jobs) }
    }

    /// Runs `job` in the next group of `key`, which `commit` commits, and answers with its result.
    public func submit(_ job: Job, to key: Key, committing commit: @escaping Commit) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            let leads = state.withLock { state in
                state.waiting[key, default: []].append(Waiting(job: job, continuation: continuation))
                return state.committing.insert(key).inserted
            }
            if leads { Task { await self.commitGroups(of: key, commit) } }
        }
    }

    /// Commits the groups of `key` until nobody waits.
    private func commitGroups(of key: Key, _ commit: Commit) async {
        while true {
            let group = state.withLock { state in
                let group = state.waiting.removeValue(forKey: key) ?? []
                if group.isEmpty {
                    state.committing.remove(key)
                } else {
                    state.groups += 1
                    state.jobs += group.count
                }
                return group
            }
            guard !group.isEmpty else { return }
            let results = await commit(key, group.map(\.job))
            precondition(results.count == group.count, "a group's commit answers one result per job")
            for (waiting, result) in zip(group, results) { waiting.continuation.resume(with: result) }
        }
    }
}
