import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

/// The memory case of docs/reliability.md: many large `records/modify` bodies at once from one user.
/// The server's budget of buffered request bytes refuses what does not fit with `503` and
/// `Retry-After`, its resident memory stays within the budget's reach, and it gives back most of
/// what the burst took once the burst is over.
///
/// `scripts/test` sends 8 bodies of 16 MB against a 64 MiB budget; `scripts/campaign memory` sends
/// `STRATUS_CAMPAIGN_BODIES` bodies of 60 MB against the default budget.
@Suite("campaign: a burst of large bodies")
struct MemoryBurstCampaignTests {
    @Test("large bodies at once: the excess is refused with 503, memory stays bounded and falls back after")
    func burst() async throws {
        let environment = ProcessInfo.processInfo.environment
        let bodies = environment["STRATUS_CAMPAIGN_BODIES"].flatMap(Int.init) ?? 8
        let full = environment["STRATUS_CAMPAIGN_BODIES"] != nil
        let recordBytes = full ? 300_000 : 80_000
        let budget = full ? 256 << 20 : 64 << 20
        let server = try CampaignServer(["--max-buffered-request-bytes", String(budget)])
        defer { server.stopAndRemove() }
        let url = "\(server.database())/records/modify?\(try await server.session("burst"))"
        // A warm-up write, so the baseline includes what any first write allocates.
        _ = try await Self.send(url, body: Self.body(batch: -1, records: 2, recordBytes: 1000))
        try await Task.sleep(for: .seconds(1))
        let baseline = server.process.residentBytes

        let peak = Atomic<Int>(0)
        let sampler = Task {
            while !Task.isCancelled {
                let resident = server.process.residentBytes
                peak.max(resident)
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let payloads = (0..<bodies).map { Self.body(batch: $0, records: 200, recordBytes: recordBytes) }
        let bodyBytes = payloads[0].readableBytes
        // Every client sends at once; a refused one waits its Retry-After and sends again.
        let outcomes = try await withThrowingTaskGroup(of: (saved: Bool, refusals: Int).self) { group in
            for payload in payloads {
                group.addTask {
                    var refusals = 0
                    while true {
                        let (status, retryAfter) = try await Self.send(url, body: payload)
                        if status == 200 { return (true, refusals) }
                        guard status == 503, let retryAfter else { return (false, refusals) }
                        refusals += 1
                        try await Task.sleep(for: .seconds(retryAfter))
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        sampler.cancel()
        let saved = outcomes.filter(\.saved).count
        #expect(saved == bodies, "every body is saved in the end")
        let refusals = outcomes.map(\.refusals).reduce(0, +)
        #expect(refusals > 0, "more bodies than the budget holds were refused at first")
        // Memory falls back once the burst is over (the allocator returns what it freed): at most 60 % of
        // what the burst took is still held after five seconds (measured: 37–44 % with the trim, about
        // 52 % without it, so this bound guards against a regression, not the trim itself).
        let peakResident = peak.load(ordering: .relaxed)
        let fallenBack = { (resident: Int) in (resident - baseline) * 10 <= (peakResident - baseline) * 6 }
        var after = server.process.residentBytes
        for _ in 0..<50 where !fallenBack(after) {
            try await Task.sleep(for: .milliseconds(100))
            after = server.process.residentBytes
        }
        let megabytes = { (bytes: Int) in bytes >> 20 }
        print(
            "memory burst: \(bodies) bodies of \(megabytes(bodyBytes)) MB, budget \(megabytes(budget)) MB, "
                + "\(refusals) refusals; resident \(megabytes(baseline)) MB before, \(megabytes(peak.load(ordering: .relaxed))) MB at peak, "
                + "\(megabytes(after)) MB after")
        #expect(peak.load(ordering: .relaxed) < baseline + 6 * budget, "the peak stays within reach of the budget")
        #expect(fallenBack(after), "resident memory falls back toward its baseline")
    }

    /// A `records/modify` body of `records` new records with a string field of `recordBytes`.
    static func body(batch: Int, records: Int, recordBytes: Int) -> ByteBuffer {
        let text = String(repeating: "x", count: recordBytes)
        let operations = (0..<records).map { index in
            """
            {"operationType":"create","record":{"recordName":"b\(batch)-\(index)","recordType":"Blob",\
            "fields":{"text":{"value":"\(text)","type":"STRING"}}}}
            """
        }
        return ByteBuffer(string: "{\"operations\":[\(operations.joined(separator: ","))]}")
    }

    /// Sends a body; the status and the `Retry-After` seconds.
    static func send(_ url: String, body: ByteBuffer) async throws -> (Int, Int?) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        // Plain answers: the shared client refuses to inflate past 25 times, which repetitive records pass.
        request.headers.add(name: "Accept-Encoding", value: "identity")
        request.body = .bytes(body)
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        _ = try await response.body.collect(upTo: 64 << 20)
        return (Int(response.status.code), response.headers.first(name: "Retry-After").flatMap(Int.init))
    }
}

extension Atomic<Int> {
    /// Raises the value to `value` if it is larger.
    func max(_ value: Int) {
        var current = load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
