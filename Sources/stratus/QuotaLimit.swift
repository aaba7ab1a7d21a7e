import Foundation
import ArgumentParser

/// A quota's limit on the command line: a whole number, with an optional binary unit for bytes
/// (`KiB`, `MiB`, `GiB`, `TiB`; `KB`, `MB`, `GB`, `TB` are taken as the same), or `none` for no limit.
struct QuotaLimit: ExpressibleByArgument, Sendable, CustomStringConvertible {
    /// The limit; `nil` for none.
    let value: Int64?

    init(_ value: Int64?) {
        self.value = value
    }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        if text.lowercased() == "none" {
            value = nil
            return
        }
        let units: [(String, Int64)] = [
            ("tib", 1 << 40), ("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10),
            ("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10),
        ]
        let lowered = text.lowercased()
        let (number, scale) = units.first { lowered.hasSuffix($0.0) }.map {
            (String(text.dropLast($0.0.count)).trimmingCharacters(in: .whitespaces), $0.1)
        } ?? (text, 1)
        guard let count = Int64(number.replacingOccurrences(of: "_", with: "")), count >= 0,
            count <= Int64.max / scale
        else { return nil }
        value = count * scale
    }

    var description: String { value.map(String.init) ?? "none" }

    static var defaultCompletionKind: CompletionKind { .default }
}
