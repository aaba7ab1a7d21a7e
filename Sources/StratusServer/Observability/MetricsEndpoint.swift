import CoreMetrics
import Hummingbird
import NIOCore
import StratusModel
import StratusStorage

/// `GET /metrics`: the server's metrics in Prometheus's text format, for the admin token or the
/// configured metrics token (`Authorization: Bearer …`).
struct MetricsEndpoint: Sendable {
    let storage: any StratusStorage
    let configuration: ServerConfiguration
    let hub: PushHub
    let credential: AdminCredential

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.get("metrics") { request, context in
            try await authenticate(request, context: context)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: snapshot())))
        }
    }

    /// The exposition, with the gauges read at scrape time brought up to date first.
    func snapshot() -> [UInt8] {
        let metrics = configuration.metrics
        let devices = hub.registry.counts
        metrics.pushDevicesQueued.set(devices.queued)
        metrics.pushDevicesConnected.set(devices.connected)
        if let pool = storage.connectionPoolUsage {
            metrics.storageConnectionsInUse.set(pool.inUse)
            metrics.storageConnectionsMax.set(pool.capacity)
        }
        return metrics.exposition()
    }

    private func authenticate(_ request: Request, context: StratusRequestContext) async throws {
        guard let token = AdminCredential.bearerToken(request) else {
            throw StratusError(
                .authenticationFailed, "/metrics needs 'Authorization: Bearer <token>': the admin token or the metrics token")
        }
        if let metricsToken = configuration.metricsToken,
            Secrets.constantTimeEquals(Array(Secrets.hash(token).utf8), Array(Secrets.hash(metricsToken).utf8))
        {
            return
        }
        guard try await credential.accepts(token, as: "admin token", context: context) else {
            throw StratusError(.authenticationFailed, "the token is neither the metrics token nor the admin token")
        }
    }
}
