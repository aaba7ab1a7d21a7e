import ArgumentParser
import Foundation
import StratusModel
import StratusServer
import StratusStorage

extension Admin {
    /// The sign-in subcommands of `stratus admin`, in the order `--help` lists them.
    static let signInCommands: [any ParsableCommand.Type] = [
        SignInStatus.self, SetPasswords.self, SetApple.self, SetOpenIDConnect.self, RemoveProvider.self,
        ListIdentities.self, UnlinkIdentity.self, DeleteUser.self,
    ]

    struct SignInStatus: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "signin-status",
            abstract: "Print how a container's users sign in: passwords, and its identity providers (never their secrets).")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String

        func run() async throws {
            try await SignInCommands.update(container, storageOptions, nil) { _ in }
        }
    }

    struct SetPasswords: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-passwords",
            abstract: "Turn password sign-up and sign-in on or off for a container (off: its identity providers only).")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "on or off.")
        var state: String

        func run() async throws {
            guard state == "on" || state == "off" else { throw ValidationError("say on or off, not '\(state)'") }
            let enabled = state == "on"
            try await SignInCommands.update(container, storageOptions, "admin set-passwords \(container) \(state)") {
                $0.passwordsEnabled = enabled
            }
        }
    }

    struct SetApple: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-apple",
            abstract: "Let a container's users sign in with Apple.",
            discussion: """
                --client-id names each app's bundle ID and the web's services ID (Certificates, Identifiers & \
                Profiles). The browser sign-in trades codes with a Sign in with Apple key: give --team-id, --key-id \
                and --key-file (its .p8) for it. Apple's account notifications go to \
                <server>/auth/1/<container>/signin/apple/notifications.
                """)
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Option(help: "A bundle ID or services ID identity tokens may be meant for (repeat for several).")
        var clientID: [String]
        @Option(help: "The developer team ID, for the browser sign-in.")
        var teamID: String?
        @Option(help: "The Sign in with Apple key's ID.")
        var keyID: String?
        @Option(help: "The key's .p8 file.")
        var keyFile: String?

        func run() async throws {
            var members: JSONMembers = ["clientIDs": .array(clientID.map(JSONValue.string))]
            if let teamID { members["teamID"] = .string(teamID) }
            if let keyID { members["keyID"] = .string(keyID) }
            if let keyFile { members["privateKey"] = .string(try String(contentsOfFile: keyFile, encoding: .utf8)) }
            let body = JSONValue.object(members)
            try await SignInCommands.update(container, storageOptions, "admin set-apple \(container)") {
                $0.set(try SignInMethods.apple(json: body, at: Timestamp.now.milliseconds))
            }
        }
    }

    struct SetOpenIDConnect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-oidc",
            abstract: "Let a container's users sign in with an OpenID Connect provider (Google, Microsoft, Keycloak, …).",
            discussion: """
                The provider's discovery document is read from <issuer>/.well-known/openid-configuration when first \
                needed. Register <server>/auth/1/<container>/signin/return/<name> as the client's redirect URI for the \
                browser sign-in.
                """)
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "The provider's name in this container (lowercase letters, digits, hyphens), such as google.")
        var name: String
        @Option(help: "The issuer URL, the iss of its tokens.")
        var issuer: String
        @Option(help: "The client ID registered with the provider.")
        var clientID: String
        @Option(help: "The client secret of a confidential client (left out: the one set before stays; none for PKCE alone).")
        var clientSecret: String?
        @Option(help: "Another client ID tokens may be meant for, such as an Android app's (repeat for several).")
        var audience: [String] = []
        @Option(help: "A scope the browser sign-in asks for (repeat; openid email profile by default).")
        var scope: [String] = []
        @Option(help: "sha256 (the token carries the SHA-256 of the app's nonce, as Apple's) or plain (the nonce itself).")
        var nonce = "sha256"
        @Flag(help: "Take the addresses the provider says it verified as the users' (for discovery and invitations by e-mail).")
        var trustsEmail = false

        func run() async throws {
            var members: JSONMembers = [
                "issuer": .string(issuer), "clientID": .string(clientID), "nonce": .string(nonce), "trustsEmail": .bool(trustsEmail),
                "audiences": .array(audience.map(JSONValue.string)),
            ]
            if let clientSecret { members["clientSecret"] = .string(clientSecret) }
            if !scope.isEmpty { members["scopes"] = .array(scope.map(JSONValue.string)) }
            let body = JSONValue.object(members)
            let keepsSecret = clientSecret == nil
            try await SignInCommands.update(container, storageOptions, "admin set-oidc \(container) \(name)") { methods in
                var provider = try SignInMethods.openIDConnect(name: name, json: body, at: Timestamp.now.milliseconds)
                // Left out, the secret set before stays (as the admin API's PUT keeps it).
                if keepsSecret { provider.clientSecret = methods.providers.first { $0.name == name }?.clientSecret }
                methods.set(provider)
            }
        }
    }

    struct RemoveProvider: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-provider",
            abstract: "Stop signing a container's users in with a provider; their identities stay for when it is back.")
        @OptionGroup var storageOptions: DataOptions
        @Argument(help: "The container identifier.")
        var container: String
        @Argument(help: "apple, or an OpenID Connect provider's name.")
        var provider: String

        func run() async throws {
            try await SignInCommands.update(container, storageOptions, "admin remove-provider \(container) \(provider)") {
                methods in
                guard methods.providers.contains(where: { $0.name == provider }) else {
                    throw StratusError(.notFound, "container '\(container)' has no provider '\(provider)'")
                }
                methods.providers.removeAll { $0.name == provider }
            }
        }
    }

    struct ListIdentities: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-identities", abstract: "List the identity providers' identities a user signs in with.")
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions

        func run() async throws {
            try await storageOptions.withStorage { storage in
                let recordName = try await userOptions.recordName(in: storage)
                let accounts = AccountService(storage: storage, configuration: .init())
                let identities = try await accounts.identities(container: userOptions.container, userRecordName: recordName)
                if identities.isEmpty { print("\(userOptions.user) has no identities at providers") }
                for identity in identities {
                    let email = identity.emailAddress.map { " \($0)\(identity.emailVerified ? "" : " (unverified)")" } ?? ""
                    print("\(identity.provider)  \(identity.issuer)  \(identity.subject)\(email)")
                }
            }
        }
    }

    struct UnlinkIdentity: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unlink-identity",
            abstract: "Unlink an identity from a user: it no longer signs them in.",
            discussion: """
                Its next sign-in would make a new account, unless its e-mail address is this user's: then it is refused \
                until the user links it again.
                """)
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions
        @Option(help: "The identity's issuer, as list-identities prints it.")
        var issuer: String
        @Option(help: "The identity's subject, as list-identities prints it.")
        var subject: String

        func run() async throws {
            try await userOptions.change("unlink-identity", in: storageOptions) { accounts, recordName in
                try await accounts.revokeIdentity(
                    issuer: issuer, subject: subject, container: userOptions.container, userRecordName: recordName)
                print("unlinked \(issuer) \(subject) from \(userOptions.user) (\(recordName))")
            }
        }
    }

    struct DeleteUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete-user",
            abstract: "Delete a user's account and private data; what they shared is shared no more.",
            discussion: "Their records in the public database stay. A running server refuses their sessions within 10 seconds (its cache of sessions).")
        @OptionGroup var storageOptions: DataOptions
        @OptionGroup var userOptions: UserOptions

        func run() async throws {
            try await userOptions.change("delete-user", in: storageOptions) { accounts, recordName in
                try await accounts.deleteAccount(container: userOptions.container, recordName: recordName)
                print("deleted \(userOptions.user) (\(recordName)) and their private data")
            }
        }
    }
}

/// What the sign-in subcommands of `stratus admin` share: a change to a container's sign-in
/// methods, then what they are, as the admin API shows them.
enum SignInCommands {
    static func update(
        _ container: String, _ storageOptions: DataOptions, _ audit: String?,
        _ change: @escaping @Sendable (inout SignInMethods) throws -> Void
    ) async throws {
        let body: @Sendable (any StratusStorage) async throws -> String = { storage in
            try await storage.requireContainer(container)
            let methods = try await IdentityProviderDirectory(storage: storage, clock: .system).update(container: container, change)
            var writer = JSONWriter()
            methods.summary(to: &writer)
            return String(decoding: writer.bytes, as: UTF8.self)
        }
        print(try await storageOptions.withStorage(audited: audit, body))
    }
}
