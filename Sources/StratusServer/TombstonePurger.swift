import Foundation
import Logging
import ServiceLifecycle
import StratusStorage

/// Removes tombstones older than the horizon, at start and then periodically.
struct TombstonePurger: Service {
    let storage: any StratusStorage
    let configuration: ServerConfiguration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let cutoff = Int64(Date().timeIntervalSince1970 * 1000) - configuration.tombstoneHorizonSeconds * 1000
                do {
                    let removed = try await storage.purgeTombstones(before: cutoff)
                    if removed > 0 { logger.info("purged tombstones", metadata: ["count": "\(removed)"]) }
                } catch {
                    logger.error("purging tombstones failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(configuration.purgeIntervalSeconds))
            }
        }
    }
}
