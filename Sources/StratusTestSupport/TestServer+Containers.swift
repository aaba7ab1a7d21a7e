import NIOHTTP1
package import Foundation
package import Logging
package import Stratus
package import StratusServer

extension TestServer {
    /// A container on this server as one device of an app makes it: its own device ID and asset
    /// cache, and quick retries (waited on `clock` when one is given). `serverURL` reaches the
    /// server another way (through a ``FaultRelay``). With `inProcess` (by default, the server's
    /// ``clientsInProcess``) its requests reach the server in this process, without a socket.
    package func makeContainer(
        device: String = UUID().uuidString, session: Container.Session? = nil,
        retryPolicy: RetryPolicy = RetryPolicy(initialBackoff: .milliseconds(20)), logger: Logger? = nil,
        clock: (any Clock<Duration>)? = nil, serverURL: URL? = nil, inProcess: Bool? = nil
    ) -> Container {
        var configuration = Container.Configuration(
            retryPolicy: retryPolicy, deviceID: device,
            assetCacheDirectory: directory.appendingPathComponent("asset-cache-\(device)"))
        if let logger { configuration.logger = logger }
        if let clock { configuration.clock = clock }
        if serverURL == nil, inProcess ?? clientsInProcess { configuration.httpTransport = inProcessTransport }
        return Container(
            identifier: container, serverURL: serverURL ?? URL(string: baseURL)!, apiToken: apiToken, session: session,
            configuration: configuration)
    }

    /// A container signed in as a new user `username`.
    package func signedInContainer(_ username: String, device: String = UUID().uuidString) async throws -> Container {
        let container = makeContainer(device: device)
        try await container.signUp(username: username, password: "correct horse")
        return container
    }

    /// Another device of `username`'s account (made by ``signedInContainer(_:device:)``): its own
    /// container, signed in with the password.
    package func device(of username: String) async throws -> Container {
        let container = makeContainer()
        try await container.signIn(username: username, password: "correct horse")
        return container
    }
}

/// Runs `body` against a fresh server and removes it afterwards, whether `body` fails or not.
package func withServer(
    _ configuration: ServerConfiguration = ServerConfiguration(port: 0, passwordHashCost: 4), clientsInProcess: Bool = false,
    _ body: (TestServer) async throws -> Void
) async throws {
    let server = try await TestServer.start(configuration: configuration, clientsInProcess: clientsInProcess)
    do {
        try await body(server)
    } catch {
        try? await server.stopAndRemove()
        throw error
    }
    try await server.stopAndRemove()
}

/// Where the package's executables are built: beside the test bundle.
package var productsDirectory: URL {
    #if os(macOS)
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        return bundle.bundleURL.deletingLastPathComponent()
    }
    #endif
    return Bundle.main.bundleURL
}

/// Whether `condition` holds within `timeout`, checking every 10 ms: for what another device or a
/// background task does in its own time.
package func eventually(within timeout: Duration = .seconds(30), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}

extension TestServer {
    /// The schema of `environment` in CloudKit's schema language, read through the admin API.
    package func schemaText(_ environment: String = "development") async throws -> String {
        try await request(
            .GET, "/admin/1/containers/\(container)/environments/\(environment)/schema",
            headers: ["Authorization": "Bearer \(credentials.adminToken)"]
        ).text
    }
}
