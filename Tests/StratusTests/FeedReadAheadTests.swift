import Stratus
import Testing

@Suite("reading a change feed ahead")
struct FeedReadAheadTests {
    typealias Plan = FeedReadAhead<String>

    /// The starts of the pages `plan` requests now.
    static func request(_ plan: inout Plan) -> [String?] { plan.pagesToRequest().map(\.start) }

    @Test("pages are requested from the starts the server hands out, a window at a time, one asking ahead")
    func window() {
        var plan = Plan(start: nil, window: 4)
        let first = Self.request(&plan)
        #expect(first == [nil])
        #expect(plan.requested.map(\.asksAhead) == [true], "the first request asks where the pages after it end")
        let none = Self.request(&plan)
        #expect(none.isEmpty, "nothing more is known")

        #expect(plan.pagesAskedAhead == 8, "two windows")

        // Page 1 ends at a; the pages after it end at b … i.
        let dropped = plan.answered(next: "a", ends: ["b", "c", "d", "e", "f", "g", "h", "i"])
        #expect(!dropped)
        let sent = plan.pagesToRequest()
        #expect(sent.map(\.start) == ["a", "b", "c", "d"], "a window's worth")
        #expect(sent.map(\.asksAhead) == [false, false, false, false], "a window of starts remains: none asks ahead")

        // As pages are answered, their slots go to the next starts; the one that leaves fewer than a
        // window of starts asks ahead.
        _ = plan.answered(next: "b", ends: [])
        let afterA = plan.pagesToRequest()
        #expect(afterA.map(\.start) == ["e"] && afterA.map(\.asksAhead) == [false])
        _ = plan.answered(next: "c", ends: [])
        let afterB = plan.pagesToRequest()
        #expect(afterB.map(\.start) == ["f"] && afterB.map(\.asksAhead) == [true])
        for next in ["d", "e", "f"] {
            _ = plan.answered(next: next, ends: [])
        }
        let meanwhile = Self.request(&plan)
        #expect(meanwhile == ["g", "h", "i"], "the starts known carry the window until f's answer is read")
        // f's answer extends what is known, and the window stays full.
        let stale = plan.answered(next: "g", ends: ["h", "i", "j", "k", "l", "m", "n", "o"])
        #expect(!stale)
        let extended = Self.request(&plan)
        #expect(extended == ["j"])
        #expect(plan.requested.map(\.start) == ["g", "h", "i", "j"])
    }

    @Test("an answer that does not end where the next request starts drops the stale requests and goes on from it")
    func staleGuess() {
        var plan = Plan(start: "s", window: 8)
        _ = plan.pagesToRequest()
        _ = plan.answered(next: "a", ends: ["b", "c", "d"])
        let sent = Self.request(&plan)
        #expect(sent == ["a", "b", "c", "d"])
        // The zone changed: page a now ends at x, not b.
        let dropped = plan.answered(next: "x", ends: [])
        #expect(dropped, "the requests for b, c and d are dropped")
        #expect(plan.requested.isEmpty)
        let resumed = Self.request(&plan)
        #expect(resumed == ["x"])
    }

    @Test("ends that disagree with the starts known are not added; the last page or a server that says nothing ends the plan")
    func endsAndEnd() {
        var plan = Plan(start: nil, window: 8)
        _ = plan.pagesToRequest()
        _ = plan.answered(next: "a", ends: ["b", "c"])
        _ = plan.pagesToRequest()
        let dropped = plan.answered(next: "b", ends: ["z", "d"])
        #expect(!dropped, "a's answer agrees on b")
        let none = Self.request(&plan)
        #expect(none.isEmpty, "z disagrees with c: nothing is added")
        let last = plan.answered(next: nil, ends: [])
        #expect(last, "the last page drops what was requested after it")
        let after = Self.request(&plan)
        #expect(plan.requested.isEmpty && after.isEmpty)

        var silent = Plan(start: nil, window: 8)
        _ = silent.pagesToRequest()
        let silentDropped = silent.answered(next: nil, ends: [])
        #expect(!silentDropped)
        silent.continue(from: "a")
        let next = Self.request(&silent)
        #expect(next == ["a"], "a server without the headers is read a page at a time")
    }
}
