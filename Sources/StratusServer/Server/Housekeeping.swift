import Foundation
import Logging
import ServiceLifecycle
import StratusStorage
import Synchronization

/// Periodic upkeep, at start and then every `purgeIntervalSeconds`: removes tombstones older than
/// the horizon, deletes assets no record refers to, and push tokens unused for their lifetime.
struct Housekeeping: Service, CustomStringConvertible {
    /// Its name alone: service groups log their services, and the configuration holds secrets.
    var description: String { "Housekeeping" }

    let storage: any MaintenanceStorage & SubscriptionStorage
    let assets: AssetStore?
    let configuration: ServerConfiguration
    let status: HousekeepingStatus
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                // Each chore runs whatever happened to the others: a bucket that is down must not keep
                // tombstones or push tokens forever.
                await chore("purging tombstones") {
                    let cutoff = configuration.clock.milliseconds - configuration.tombstoneHorizonSeconds * 1000
                    let removed = try await storage.purgeTombstones(before: cutoff)
                    if removed > 0 { logger.info("purged tombstones", metadata: ["count": "\(removed)"]) }
                }
                await chore("deleting unreferenced assets") {
                    if let collected = try await assets?.collect(), collected > 0 {
                        logger.info("deleted unreferenced assets", metadata: ["count": "\(collected)"])
                    }
                }
                await chore("deleting unused push tokens") {
                    let now = configuration.clock.milliseconds
                    let expired = try await storage.purgePushTokens(
                        unusedSince: now - configuration.pushTokenLifetimeSeconds * 1000)
                    if expired > 0 { logger.info("deleted unused push tokens", metadata: ["count": "\(expired)"]) }
                }
                status.finished(at: configuration.clock.milliseconds)
                try? await Task.sleep(for: .seconds(configuration.purgeIntervalSeconds))
            }
        }
    }

    private func chore(_ name: String, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            logger.error("housekeeping: \(name) failed", metadata: ["error": "\(error)"])
            status.failed("\(name): \(error)")
        }
    }
}

/// When housekeeping last finished a round, and its last failure, for the console's health page.
final class HousekeepingStatus: Sendable {
    struct State: Sendable {
        /// When the last round finished, in milliseconds since 1970.
        var lastRun: Int64?
        /// The last chore that failed, and why.
        var lastFailure: String?
    }

    private let state = Mutex(State())

    func finished(at time: Int64) {
        state.withLock { $0.lastRun = time }
    }

    func failed(_ failure: String) {
        state.withLock { $0.lastFailure = failure }
    }

    var current: State { state.withLock { $0 } }
}
