@testable import StratusSync
import Testing

/// The automatic scheduler's decision, a pure function of its state and the time: tested by moving
/// an instant, with no engine, server or sleep.
@Suite("sync engine: scheduling")
struct ScheduleTests {
    typealias Schedule = SyncEngine.Schedule
    let start = ContinuousClock.now

    static func work(_ step: SyncEngine.ScheduledStep) -> SyncEngine.ScheduledWork? {
        if case .run(let work) = step { return work }
        return nil
    }

    static func waitUntil(_ step: SyncEngine.ScheduledStep) -> ContinuousClock.Instant?? {
        if case .wait(let until) = step { return .some(until) }
        return .none
    }

    @Test("an engine fetches and sends as soon as it starts, then waits for the catch-up")
    func startsWithBoth() {
        var schedule = Schedule(catchUpInterval: .seconds(60), now: start)
        #expect(Self.work(schedule.next(at: start)) == [.fetch, .send])
        #expect(Self.waitUntil(schedule.next(at: start + .seconds(1))) == .some(start + .seconds(60)))
    }

    @Test("a fetch is due when asked for or when the catch-up interval has passed")
    func fetches() {
        var schedule = Schedule(catchUpInterval: .seconds(60), now: start)
        _ = schedule.next(at: start)
        schedule.fetchRequested = true
        #expect(Self.work(schedule.next(at: start + .seconds(5))) == [.fetch])
        #expect(Self.waitUntil(schedule.next(at: start + .seconds(6))) == .some(start + .seconds(65)),
                "the catch-up counts from the last fetch")
        #expect(Self.work(schedule.next(at: start + .seconds(65))) == [.fetch])
    }

    @Test("after a passing failure, fetches and sends wait out the retry; state updates do not")
    func retries() {
        var schedule = Schedule(catchUpInterval: .seconds(60), now: start)
        _ = schedule.next(at: start)
        schedule.retry(after: .seconds(30), at: start + .seconds(1), fetch: false, send: true)
        #expect(schedule.failures == 1)
        #expect(Self.waitUntil(schedule.next(at: start + .seconds(2))) == .some(start + .seconds(31)))
        schedule.stateUpdateRequested = true
        #expect(Self.work(schedule.next(at: start + .seconds(3))) == [.stateUpdate], "a state update runs at once")
        #expect(Self.work(schedule.next(at: start + .seconds(31))) == [.send])
    }

    @Test("a shorter retry never shortens a longer wait the server asked for")
    func longestWaitWins() {
        var schedule = Schedule(catchUpInterval: .seconds(600), now: start)
        _ = schedule.next(at: start)
        schedule.retry(after: .seconds(120), at: start, fetch: true, send: false)
        schedule.retry(after: .seconds(5), at: start + .seconds(1), fetch: false, send: true)
        #expect(Self.waitUntil(schedule.next(at: start + .seconds(10))) == .some(start + .seconds(120)))
        #expect(Self.work(schedule.next(at: start + .seconds(120))) == [.fetch, .send])
    }
}
