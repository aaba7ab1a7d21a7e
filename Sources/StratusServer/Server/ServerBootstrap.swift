public import Foundation
public import StratusStorage

/// First-start set-up: the token secret, the admin token, a default container and its API token.
public enum ServerBootstrap {
    /// The container created on first start.
    public static let defaultContainer = "iCloud.com.example.stratus"
    /// The settings key of the secret that signs sync tokens.
    static let tokenSecretSetting = "sync_token_secret"

    /// What ``prepare(storage:configuration:credentialsFile:)`` found or made.
    public struct Outcome: Sendable {
        /// The credentials: just created, or read back from the credentials file if it is still
        /// there (only hashes of tokens are stored, so they cannot be recovered otherwise).
        public var credentials: ServerCredentials?
        /// Whether this start created them; only then are the tokens worth printing.
        public var created: Bool
    }

    /// Prepares storage for serving. On first start it creates the admin token, the default
    /// container and an API token, and writes them to `credentialsFile` (mode 0600).
    public static func prepare(
        storage: any SettingsStorage & AccountStorage, configuration: ServerConfiguration, credentialsFile: URL
    ) async throws -> Outcome {
        if try await storage.setting(AdminCredential.tokenHashSetting) == nil {
            let adminToken = Secrets.makeToken()
            let adminTokenHash = Secrets.hash(adminToken)
            // Instances starting together on one database: the first to set the admin token sets up.
            if try await storage.initializeSetting(AdminCredential.tokenHashSetting, to: adminTokenHash)
                == adminTokenHash
            {
                let accounts = AccountService(storage: storage, configuration: configuration)
                if try await storage.container(defaultContainer) == nil {
                    try await accounts.createContainer(defaultContainer)
                }
                let apiToken = try await accounts.createAPIToken(container: defaultContainer)
                let credentials = ServerCredentials(
                    url: "\(configuration.scheme)://\(configuration.host):\(configuration.port)", container: defaultContainer,
                    apiToken: apiToken, adminToken: adminToken)
                try write(credentials, to: credentialsFile)
                return Outcome(credentials: credentials, created: true)
            }
        }
        let saved = (try? Data(contentsOf: credentialsFile)).flatMap { try? JSONDecoder().decode(ServerCredentials.self, from: $0) }
        return Outcome(credentials: saved, created: false)
    }

    /// Writes the credentials file, readable by its owner only (mode 0600).
    public static func write(_ credentials: ServerCredentials, to file: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(credentials)
        let path = file.path
        if FileManager.default.fileExists(atPath: path) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            try data.write(to: file)
        } else {
            guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
        }
    }
}
