import CoreMetrics
import NIOCore
import Synchronization

/// What one client network may hold of the server: connections, and requests whose bodies are
/// still arriving. A network is an IPv4 address or an IPv6 /64 (``VerifiedCaller/network(of:)``), so
/// that one host cannot multiply its share by choosing addresses.
///
/// - A connection past the per-network cap is answered `503` with `Retry-After` and closed at once.
/// - When every connection the server may hold is taken, a newcomer is not simply turned away: if
///   some network holds at least two more connections than the newcomer's, that network's oldest
///   connection is closed to make room (``admit(_:)``). So a client that holds a large share of the
///   server, slowly or not, gives way to the others, and a server full of one attacker's
///   connections still serves everybody else.
/// - A request whose body is still arriving holds a slot of its network (``beginBody(from:)``);
///   past ``maxBodiesPerClient`` (far below the connection cap) the request is answered `503`, so
///   one network cannot keep hundreds of bodies trickling in at once.
///
/// Trusted proxies (``ServerConfiguration/trustedProxies``) carry many clients: they are not held
/// to the per-network caps, and their connections are never closed to make room.
final class ConnectionAdmission: Sendable {
    /// Why a connection was closed or refused by the server, as counted in
    /// `stratus_connections_shed_total{reason}`.
    enum Shedding: String, CaseIterable, Sendable {
        /// Past the total or the per-network connection cap.
        case connectionCap = "connection_cap"
        /// Closed to make room for a client of a network holding fewer connections.
        case madeRoom = "made_room"
        /// A request whose body would pass the per-network cap of bodies under way.
        case bodyCap = "body_cap"
        /// A body that arrived more slowly than the minimum rate, or not within its deadline.
        case slowBody = "slow_body"
    }

    let maxConnections: Int
    let maxPerClient: Int
    let maxBodiesPerClient: Int
    private let unlimitedAddresses: Set<String>
    private let metrics: ServerMetrics
    private let state = Mutex(State())

    private struct Held {
        /// The network's connections by identity, with the order they came in.
        var connections: [ObjectIdentifier: (order: Int, channel: any Channel)] = [:]
        /// Requests of the network whose bodies are arriving.
        var bodies = 0
        /// Whether the network is a trusted proxy.
        var unlimited = false
    }

    private struct State {
        var total = 0
        var bodies = 0
        var nextOrder = 0
        var networks: [String: Held] = [:]
    }

    /// Caps of `maxConnections` in all, `maxPerClient` connections and `maxBodiesPerClient` bodies
    /// under way per network; `unlimitedAddresses` (trusted proxies) have no per-network caps.
    /// `metrics` counts each connection or request refused or closed, and the bodies under way.
    init(
        maxConnections: Int, maxPerClient: Int, maxBodiesPerClient: Int, unlimitedAddresses: Set<String>,
        metrics: ServerMetrics
    ) {
        self.maxConnections = maxConnections
        self.maxPerClient = maxPerClient
        self.maxBodiesPerClient = maxBodiesPerClient
        self.unlimitedAddresses = Set(unlimitedAddresses.map(AuthenticationMiddleware.unmapped))
        self.metrics = metrics
    }

    private func shed(_ reason: Shedding) {
        metrics.connectionShed(reason.rawValue)
    }

    /// Whom a connection's peer counts as: its network, or, for a trusted proxy, its own address
    /// (a proxy's neighbours in its /64 are other clients), and whether it is such a proxy.
    func client(of channel: any Channel) -> (network: String, unlimited: Bool) {
        let address = AuthenticationMiddleware.unmapped(channel.remoteAddress?.ipAddress ?? "")
        guard !unlimitedAddresses.contains(address) else { return ("proxy \(address)", true) }
        return (VerifiedCaller.network(of: address), false)
    }

    /// Counts `channel` in until it closes; `false` when it is past a cap (the caller refuses it).
    /// When the server is full, the oldest connection of the network holding the most (two more
    /// than `channel`'s at least, and not a trusted proxy) is closed to make room; a trusted proxy,
    /// which carries many clients, takes the place of any network's holding two or more.
    func admit(_ channel: any Channel) -> Bool {
        let (network, unlimited) = client(of: channel)
        let id = ObjectIdentifier(channel)
        let outcome = state.withLock { state -> (admitted: Bool, evicted: (any Channel)?) in
            let mine = state.networks[network]?.connections.count ?? 0
            guard unlimited || mine < maxPerClient else { return (false, nil) }
            var evicted: (any Channel)?
            if state.total >= maxConnections {
                guard let victim = Self.largestHolder(in: state.networks, above: unlimited ? 1 : mine + 1) else {
                    return (false, nil)
                }
                var held = state.networks[victim]!
                let oldest = held.connections.min { $0.value.order < $1.value.order }!
                held.connections[oldest.key] = nil
                state.networks[victim] = held
                state.total -= 1
                evicted = oldest.value.channel
            }
            state.total += 1
            state.nextOrder += 1
            state.networks[network, default: Held(unlimited: unlimited)].connections[id] = (state.nextOrder, channel)
            return (true, evicted)
        }
        if let evicted = outcome.evicted {
            shed(.madeRoom)
            evicted.close(promise: nil)
        }
        guard outcome.admitted else {
            shed(.connectionCap)
            return false
        }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLock { state in
                guard var held = state.networks[network], held.connections.removeValue(forKey: id) != nil else { return }
                state.total -= 1
                if held.connections.isEmpty, held.bodies == 0 {
                    state.networks[network] = nil
                } else {
                    state.networks[network] = held
                }
            }
        }
        return true
    }

    /// The network (not a trusted proxy) holding the most connections, when it holds more than `count`.
    private static func largestHolder(in networks: [String: Held], above count: Int) -> String? {
        var largest: (network: String, count: Int)?
        for (network, held) in networks where !held.unlimited && held.connections.count > count {
            if held.connections.count > largest?.count ?? 0 { largest = (network, held.connections.count) }
        }
        return largest?.network
    }

    /// Takes one of `network`'s slots for a body under way; `false` when it has none left (the
    /// caller answers `503`). Each slot taken is given back with ``endBody(from:)``.
    func beginBody(from network: String, unlimited: Bool) -> Bool {
        let taken = state.withLock { state in
            var held = state.networks[network, default: Held(unlimited: unlimited)]
            guard unlimited || held.bodies < maxBodiesPerClient else { return false }
            held.bodies += 1
            state.networks[network] = held
            state.bodies += 1
            metrics.requestBodiesArriving.set(state.bodies)
            return true
        }
        if !taken { shed(.bodyCap) }
        return taken
    }

    /// Gives back a slot ``beginBody(from:unlimited:)`` took.
    func endBody(from network: String) {
        state.withLock { state in
            guard var held = state.networks[network] else { return }
            held.bodies -= 1
            state.bodies -= 1
            metrics.requestBodiesArriving.set(state.bodies)
            if held.connections.isEmpty, held.bodies == 0 {
                state.networks[network] = nil
            } else {
                state.networks[network] = held
            }
        }
    }

    /// Counts a body closed for arriving too slowly.
    func shedSlowBody() {
        shed(.slowBody)
    }
}
