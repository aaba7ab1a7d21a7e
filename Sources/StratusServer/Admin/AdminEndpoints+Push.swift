import Hummingbird
import StratusModel
import StratusStorage

extension AdminEndpoints {
    /// `…/containers/{container}/push`: the credentials the container sends device pushes with.
    /// Private keys go in and never come out; every route answers what `GET` shows: each channel's
    /// public parts, when they were set, and how the channel fares on this instance.
    ///
    /// - `PUT …/push/apns/{development|production}`: `teamID`, `keyID`, `privateKey` (the `.p8`
    ///   file's text) and `topic` (the bundle ID) of the APNs environment.
    /// - `PUT …/push/fcm`: the Google service account's JSON key file, as downloaded.
    /// - `POST …/push/webpush`: `subject` (a `mailto:` or `https:` URL); makes a new VAPID key pair,
    ///   whose public key web apps subscribe with (subscriptions made with an earlier one end).
    /// - `DELETE …/push/{apns-development|apns-production|fcm|webpush}`: stops that channel.
    func addPushRoutes(to admin: RouterGroup<StratusRequestContext>) {
        @Sendable func answer(_ container: String, _ credentials: PushCredentials) -> Response {
            var writer = JSONWriter()
            credentials.summary(to: &writer, health: pushCredentials.health(container: container))
            return Response.json(writer)
        }
        @Sendable func update(
            _ context: StratusRequestContext, _ change: @escaping (inout PushCredentials) throws -> Void
        ) async throws -> Response {
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            return answer(container, try await pushCredentials.update(container: container, change))
        }
        admin.get("containers/:container/push") { request, context in
            let container = try await storage.requireContainer(try context.parameters.require("container")).identifier
            return answer(container, try await pushCredentials.credentials(container: container))
        }
        admin.put("containers/:container/push/apns/:environment") { request, context in
            let name = try context.parameters.require("environment")
            guard let environment = ContainerEnvironment(rawValue: name) else {
                throw StratusError.badRequest("the APNs environment must be development or production, not '\(name)'")
            }
            let apns = try PushCredentials.apns(
                json: try await request.decodeJSON(JSONValue.self, limit: 64 << 10), at: clock.milliseconds)
            return try await update(context) { credentials in
                if environment == .production { credentials.apnsProduction = apns } else { credentials.apnsDevelopment = apns }
            }
        }
        admin.put("containers/:container/push/fcm") { request, context in
            let fcm = try PushCredentials.fcm(
                json: try await request.decodeJSON(JSONValue.self, limit: 64 << 10), at: clock.milliseconds)
            return try await update(context) { $0.fcm = fcm }
        }
        admin.post("containers/:container/push/webpush") { request, context in
            let webPush = try PushCredentials.webPush(
                json: try await request.decodeJSON(JSONValue.self, limit: 64 << 10), at: clock.milliseconds)
            return try await update(context) { $0.webPush = webPush }
        }
        // `push/fcm` and `push/webpush` are routes of their own (a path's literal segment wins over
        // `:channel`), so each takes its DELETE itself.
        admin.delete("containers/:container/push/fcm") { request, context in
            try await update(context) { $0.remove(.fcm) }
        }
        admin.delete("containers/:container/push/webpush") { request, context in
            try await update(context) { $0.remove(.webPush) }
        }
        admin.delete("containers/:container/push/:channel") { request, context in
            let name = try context.parameters.require("channel")
            guard let channel = PushEndpointInfo.Channel(rawValue: name) else {
                throw StratusError.badRequest(
                    "the push channel must be one of "
                        + PushEndpointInfo.Channel.allCases.map(\.rawValue).joined(separator: ", ") + ", not '\(name)'")
            }
            return try await update(context) { $0.remove(channel) }
        }
    }
}
