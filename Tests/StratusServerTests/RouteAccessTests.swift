import Foundation
import NIOHTTP1
import StratusModel
import StratusTestSupport
import Testing

@testable import StratusServer

/// Every database endpoint declares the access it needs, so none can be routed without it (the
/// router refuses to route a database endpoint any other way).
@Suite("database routes declare their access")
struct RouteAccessTests {
    @Test("every endpoint of a database in the endpoint table declares its access, and only those")
    func everyDatabaseEndpointDeclaresAccess() {
        let database = Endpoints.all.filter { $0.base == .database }
        let undeclared = database.filter {
            DatabaseRoutes.access[$0] == nil && !DatabaseRoutes.environmentOperations.contains($0)
        }
        #expect(undeclared.isEmpty, "routed without a declared access: \(undeclared.map(\.path))")
        let strays = DatabaseRoutes.access.keys.filter { $0.base != .database || !Endpoints.all.contains($0) }
        #expect(strays.isEmpty, "declared for what is not a database endpoint: \(strays.map(\.path))")
        for endpoint in DatabaseRoutes.eachDatabaseAccess.keys {
            #expect(endpoint.base == .environment && Endpoints.all.contains(endpoint), "\(endpoint.path)")
        }
    }

    @Test("writes, zone changes and share changes need a signed-in user; reads of the public database do not")
    func declaredAccessMeansWhatItSays() {
        #expect(DatabaseRoutes.access[Endpoints.recordsModify.erased] == .write)
        #expect(DatabaseRoutes.access[Endpoints.zonesModify.erased] == .manageZones)
        #expect(DatabaseRoutes.access[Endpoints.recordsAccept.erased] == .joinShares)
        #expect(DatabaseRoutes.access[Endpoints.recordsQuery.erased] == .read)
        #expect(DatabaseRoutes.access[Endpoints.subscriptionsModify.erased] == .ownData)
    }

    @Test("every admin route the OpenAPI document lists refuses a caller without the admin token, before its handler runs")
    func adminRoutesAuthenticateFirst() async throws {
        try await withServer { server in
            let document = try await server.request(.GET, "/openapi.json")
            let paths = try #require(document.body["paths"] as? [String: [String: Any]])
            var checked = 0
            for (template, operations) in paths where template.hasPrefix("/admin/1/") {
                let path = template.replacingOccurrences(of: "{container}", with: server.container)
                    .replacingOccurrences(of: "{environment}", with: "development")
                    .replacingOccurrences(of: "{tokenID}", with: "t").replacingOccurrences(of: "{user}", with: "u")
                    .replacingOccurrences(of: "{key}", with: "k")
                for method in operations.keys where method != "parameters" {
                    let reply = try await server.request(HTTPMethod(rawValue: method.uppercased()), path, body: [:])
                    #expect(reply.status == 401 && reply.text.contains("AUTHENTICATION_FAILED"), "\(method) \(path): \(reply.text)")
                    checked += 1
                }
            }
            #expect(checked >= 20)
            let admin = try await server.request(
                .GET, "/admin/1/containers", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(admin.status == 200, "\(admin.text)")
        }
    }
}
