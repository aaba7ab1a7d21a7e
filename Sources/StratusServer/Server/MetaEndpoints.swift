import Foundation
import Hummingbird
import StratusModel

/// Endpoints about the server itself: capabilities and limits, the OpenAPI document, health.
struct MetaEndpoints: Sendable {
    let authenticator: Authenticator
    let configuration: ServerConfiguration

    /// The OpenAPI document describing every endpoint, shipped as a resource of this module.
    static let openAPIDocument: Data = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
            let data = try? Data(contentsOf: url)
        else { preconditionFailure("the openapi.json resource is missing from the StratusServer bundle") }
        return data
    }()

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.capabilities) { request, context in
            _ = try authenticator.authenticateApp(context)
            _ = try authenticator.environment(context)
            return Response.json(
                Capabilities(
                    limits: configuration.limits, tombstoneHorizonSeconds: configuration.tombstoneHorizonSeconds,
                    sessionLifetimeSeconds: configuration.sessionLifetimeSeconds))
        }
        router.get("openapi.json") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: Self.openAPIDocument)))
        }
        router.get("health") { _, _ in
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("status", "ok")
            writer.endObject()
            return Response.json(writer)
        }
    }
}
