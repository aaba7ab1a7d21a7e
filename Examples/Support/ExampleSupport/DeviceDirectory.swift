public import Foundation
public import Stratus

/// The state directory of one device of an example app.
///
/// - `device.json`: the server, container, API token and this device's ID, written at sign-in;
/// - `session.json`: the signed-in session;
/// - the app's own files, written atomically: a crash leaves the old file or the new one;
/// - `lock`: the claim of the process using the device (``DeviceLock``).
///
/// The secrets (`device.json`, `session.json`) are written readable by the owner only.
public struct DeviceDirectory: Sendable {
    /// How a device reaches its server.
    public struct Setup: Codable, Sendable {
        public var serverURL: URL
        public var containerIdentifier: String
        public var apiToken: String
        public var deviceID: String
    }

    /// How to reach the server and as whom, to set a directory up as a device.
    public struct Account: Sendable {
        public var stateDirectory: URL
        public var serverURL: URL
        public var containerIdentifier: String
        public var apiToken: String
        public var username: String
        public var password: String
        /// An identity provider's ID token to sign in with instead of the password (the account
        /// is made on its first sign-in, so sign-up and sign-in do the same).
        public var identityToken: IdentityToken?

        /// An ID token a provider issued, with the nonce the app made for it.
        public struct IdentityToken: Sendable {
            public var provider: String
            public var token: String
            public var nonce: String

            public init(provider: String, token: String, nonce: String) {
                self.provider = provider
                self.token = token
                self.nonce = nonce
            }
        }

        public init(
            stateDirectory: URL, serverURL: URL, containerIdentifier: String, apiToken: String, username: String,
            password: String, identityToken: IdentityToken? = nil
        ) {
            self.stateDirectory = stateDirectory
            self.serverURL = serverURL
            self.containerIdentifier = containerIdentifier
            self.apiToken = apiToken
            self.username = username
            self.password = password
            self.identityToken = identityToken
        }
    }

    /// The directory has no signed-in device.
    public struct NotSetUp: Error, Equatable, CustomStringConvertible {
        public let directory: String
        public let app: String

        public var description: String {
            "\(directory) has no signed-in device: run '\(app) signup' or '\(app) signin' with it first"
        }
    }

    /// The directory.
    public let url: URL

    /// The directory at `url`.
    public init(_ url: URL) {
        self.url = url
    }

    /// The file `name` in the directory.
    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// The JSON value in file `name`; `nil` when there is no such file.
    public func read<Value: Decodable>(_ type: Value.Type, from name: String) throws -> Value? {
        guard let data = try? Data(contentsOf: file(name)) else { return nil }
        return try JSONDecoder().decode(Value.self, from: data)
    }

    /// Writes `value` as JSON to file `name`, atomically.
    public func write(_ value: some Encodable, to name: String, secret: Bool = false) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(value).write(to: file(name), options: .atomic)
        if secret { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file(name).path) }
    }

    /// Claims the directory for this process until the lock is released: take it before reading
    /// the device's files, and hold it while the device is in use.
    ///
    /// - Throws: ``DeviceLock/InUse`` when another process uses the device.
    public func claim(app: String) throws -> DeviceLock {
        try DeviceLock(url, app: app)
    }

    /// The device set up in this directory, and its container signed in with the saved session.
    ///
    /// - Throws: ``NotSetUp`` (naming `app`'s commands) when the directory has no device.
    public func device(app: String) throws -> (setup: Setup, container: Container) {
        guard let setup = try read(Setup.self, from: "device.json") else {
            throw NotSetUp(directory: url.path, app: app)
        }
        let container = Container(
            identifier: setup.containerIdentifier, serverURL: setup.serverURL, apiToken: setup.apiToken,
            session: try read(Container.Session.self, from: "session.json"),
            configuration: Container.Configuration(
                connectTimeout: .seconds(5),
                // Give up quickly when the server is away: edits are safe on disk meanwhile.
                retryPolicy: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(100)),
                deviceID: setup.deviceID,
                assetCacheDirectory: file("assets")))
        return (setup, container)
    }

    /// How a device joins its account.
    public enum Enrollment: Sendable {
        /// The account is created.
        case signUp
        /// The account exists: its password signs in.
        case signIn
    }

    /// Signs up or in as `account` and sets the account's state directory up as a device of `app`,
    /// keeping its device ID if it had one.
    public static func setUp(_ account: Account, app: String, _ enrollment: Enrollment) async throws {
        let directory = DeviceDirectory(account.stateDirectory)
        let lock = try directory.claim(app: app)
        defer { withExtendedLifetime(lock) {} }
        let deviceID = try directory.read(Setup.self, from: "device.json")?.deviceID
            ?? "\(app)-\(UUID().uuidString.prefix(8).lowercased())"
        let container = Container(
            identifier: account.containerIdentifier, serverURL: account.serverURL, apiToken: account.apiToken)
        switch (enrollment, account.identityToken) {
        case (_, let identity?):
            try await container.signIn(
                identityToken: identity.token, provider: identity.provider, nonce: Container.SignInNonce(value: identity.nonce))
        case (.signUp, nil): try await container.signUp(username: account.username, password: account.password)
        case (.signIn, nil): try await container.signIn(username: account.username, password: account.password)
        }
        try directory.write(
            Setup(
                serverURL: account.serverURL, containerIdentifier: account.containerIdentifier,
                apiToken: account.apiToken, deviceID: deviceID),
            to: "device.json", secret: true)
        try directory.write(container.session, to: "session.json", secret: true)
    }
}
