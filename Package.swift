// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Stratus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StratusModel", targets: ["StratusModel"]),
        .library(name: "StratusStorage", targets: ["StratusStorage"]),
        .library(name: "StratusSQLite", targets: ["StratusSQLite"]),
        .library(name: "StratusPostgres", targets: ["StratusPostgres"]),
        .library(name: "StratusServer", targets: ["StratusServer"]),
        .library(name: "Stratus", targets: ["Stratus"]),
        .library(name: "StratusSync", targets: ["StratusSync"]),
        .library(name: "StratusStore", targets: ["StratusStore"]),
        // Runs a `stratus` executable as a child process; the benchmarks (Benchmarks/) use it.
        .library(name: "StratusProcess", targets: ["StratusProcess"]),
        .executable(name: "stratus", targets: ["stratus"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // `swift package generate-documentation` builds the DocC catalogs of Stratus, StratusSync and StratusStore.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // OTLP over HTTP only: the gRPC exporter would build gRPC for an option that is off by default.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(
            name: "StratusModel", dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusStorage",
            dependencies: [
                "StratusModel", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusStorageConformance",
            dependencies: ["StratusStorage", "StratusModel"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusSQLite",
            dependencies: [
                "StratusStorage", "StratusModel", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "StratusProcess", swiftSettings: swiftSettings),
        .target(
            name: "StratusPostgres",
            dependencies: [
                "StratusStorage", "StratusModel",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusServer",
            dependencies: [
                "StratusModel", "StratusStorage",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                // RS256, for the JWTs of Google service accounts (FCM).
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
            ],
            resources: [.copy("Resources/openapi.json")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Stratus",
            dependencies: [
                "StratusModel",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "WSClient", package: "swift-websocket"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusSync",
            dependencies: ["Stratus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusStore",
            dependencies: [
                "Stratus", "StratusModel", "StratusSync", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "StratusTestSupport",
            dependencies: [
                "StratusServer", "StratusSQLite", "StratusPostgres", "StratusModel", "StratusStorage", "Stratus",
                "StratusSync", "StratusProcess",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // How a command line reaches a running server as a client: the examples' and `stratus`'s client commands.
        .target(
            name: "StratusCommandLine",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "stratus",
            dependencies: [
                "StratusServer", "StratusSQLite", "StratusPostgres", "StratusStorage", "StratusModel", "StratusProcess", "Stratus",
                "StratusCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ExampleSupport", dependencies: ["Stratus"], path: "Examples/Support/ExampleSupport",
            swiftSettings: swiftSettings),
        .target(
            name: "ExampleCommands",
            dependencies: [
                "ExampleSupport", "StratusCommandLine", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Support/ExampleCommands", swiftSettings: swiftSettings),
        .target(
            name: "NotesCore",
            dependencies: ["Stratus", "StratusSync", "StratusStore", "ExampleSupport", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Examples/Notes/NotesCore", swiftSettings: swiftSettings),
        .executableTarget(
            name: "notes",
            dependencies: [
                "NotesCore", "ExampleCommands", "ExampleSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Notes/notes", swiftSettings: swiftSettings),
        .target(
            name: "ContactsCore",
            dependencies: ["Stratus", "StratusSync", "StratusStore", "ExampleSupport", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Examples/Contacts/ContactsCore", swiftSettings: swiftSettings),
        .executableTarget(
            name: "contacts",
            dependencies: [
                "ContactsCore", "ExampleCommands", "ExampleSupport", "Stratus", "StratusSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Contacts/contacts", swiftSettings: swiftSettings),
        .target(
            name: "PhotosCore", dependencies: ["Stratus", "StratusSync", "ExampleSupport"],
            path: "Examples/Photos/PhotosCore", swiftSettings: swiftSettings),
        .executableTarget(
            name: "photos",
            dependencies: [
                "PhotosCore", "ExampleCommands", "ExampleSupport", "Stratus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Photos/photos", swiftSettings: swiftSettings),
        .target(
            name: "TodoCore",
            dependencies: ["Stratus", "StratusStore", "ExampleSupport", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Examples/Todo/TodoCore", swiftSettings: swiftSettings),
        .executableTarget(
            name: "todo",
            dependencies: [
                "TodoCore", "Stratus", "StratusStore", "ExampleCommands", "ExampleSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Todo/todo", swiftSettings: swiftSettings),
        .testTarget(name: "StratusModelTests", dependencies: ["StratusModel"], swiftSettings: swiftSettings),
        .testTarget(
            name: "StratusSQLiteTests",
            dependencies: [
                "StratusSQLite", "StratusStorageConformance", "StratusStorage", "StratusModel", "StratusTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StratusPostgresTests",
            dependencies: [
                "StratusPostgres", "StratusStorageConformance", "StratusStorage", "StratusModel", "StratusTestSupport",
                "StratusServer", "StratusSQLite",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StratusServerTests",
            dependencies: [
                "StratusServer", "StratusSQLite", "StratusStorage", "StratusModel", "StratusTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CloudKitWireTests",
            dependencies: [
                "StratusServer", "StratusStorage", "StratusModel", "StratusTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesTests",
            dependencies: ["NotesCore", "ExampleSupport", "Stratus", "StratusTestSupport", "StratusServer"],
            path: "Examples/Notes/Tests", swiftSettings: swiftSettings),
        .testTarget(
            name: "PhotosTests",
            dependencies: [
                "PhotosCore", "ExampleSupport", "Stratus", "StratusTestSupport", "StratusServer",
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Examples/Photos/Tests", swiftSettings: swiftSettings),
        .testTarget(
            name: "ContactsTests",
            dependencies: [
                "ContactsCore", "ExampleSupport", "Stratus", "StratusSync", "StratusStore", "StratusTestSupport", "StratusServer",
                "StratusProcess",
            ],
            path: "Examples/Contacts/Tests", swiftSettings: swiftSettings),
        .testTarget(
            name: "TodoTests",
            dependencies: [
                "TodoCore", "ExampleSupport", "Stratus", "StratusStore", "StratusTestSupport", "StratusServer",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Examples/Todo/Tests", swiftSettings: swiftSettings),
        .testTarget(
            name: "StratusSyncTests",
            dependencies: [
                "StratusSync", "Stratus", "StratusTestSupport", "StratusServer", "StratusStorage",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StratusStoreTests", dependencies: ["StratusStore", "Stratus", "StratusModel", "StratusStorage", "StratusSync", "StratusTestSupport", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "StratusTests",
            dependencies: [
                "Stratus", "StratusTestSupport", "StratusServer", "StratusModel", "StratusProcess",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
