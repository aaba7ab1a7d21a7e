import Foundation
import Logging
import ServiceLifecycle
import StratusStorage

/// Periodic upkeep, at start and then every `purgeIntervalSeconds`: removes tombstones older than
/// the horizon, deletes assets no record refers to, and push tokens unused for their lifetime.
struct Housekeeping: Service {
    let storage: any StratusStorage
    let assets: AssetStore?
    let configuration: ServerConfiguration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let cutoff = Int64(Date().timeIntervalSince1970 * 1000) - configuration.tombstoneHorizonSeconds * 1000
                do {
                    let removed = try await storage.purgeTombstones(before: cutoff)
                    if removed > 0 { logger.info("purged tombstones", metadata: ["count": "\(removed)"]) }
                    if let collected = try await assets?.collect(), collected > 0 {
                        logger.info("deleted unreferenced assets", metadata: ["count": "\(collected)"])
                    }
                    let now = Int64(Date().timeIntervalSince1970 * 1000)
                    let expired = try await storage.purgePushTokens(
                        unusedSince: now - configuration.pushTokenLifetimeSeconds * 1000)
                    if expired > 0 { logger.info("deleted unused push tokens", metadata: ["count": "\(expired)"]) }
                } catch {
                    logger.error("housekeeping failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(configuration.purgeIntervalSeconds))
            }
        }
    }
}
