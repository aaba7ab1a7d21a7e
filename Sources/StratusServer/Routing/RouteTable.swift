import Hummingbird
import Synchronization

/// The method and path pattern of every route, recorded once the router has them all, so that a
/// request to a routed path with another method is answered `405` with `Allow` rather than `404`.
final class RouteTable: Sendable {
    private let patterns = Mutex<[(method: String, segments: [Substring])]>([])

    /// Records the router's routes (called once, after the last route is added).
    func record(_ routes: [Router<StratusRequestContext>.RouteDescription]) {
        let recorded = routes.map { route in
            (method: route.method.rawValue, segments: route.path.description.split(separator: "/"))
        }
        patterns.withLock { $0 = recorded }
    }

    /// The methods routed at `path`, sorted; a `{name}` segment matches any one segment.
    func methods(matching path: String) -> [String] {
        let segments = path.split(separator: "/")
        let methods = patterns.withLock { patterns in
            patterns.filter { pattern in
                pattern.segments.count == segments.count
                    && zip(pattern.segments, segments).allSatisfy { expected, actual in
                        expected.hasPrefix("{") ? !actual.isEmpty : expected == actual
                    }
            }.map(\.method)
        }
        // Every GET route answers HEAD too (the router generates those).
        return Array(Set(methods + (methods.contains("GET") ? ["HEAD"] : []))).sorted()
    }
}
