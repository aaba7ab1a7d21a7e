// swift-tools-version: 6.1
import PackageDescription

// The benchmarks, a package of their own beside the product graph (apps that depend on Stratus never
// resolve them): they depend on the main package by path. `scripts/bench` builds and runs them in
// release mode; BENCHMARKS.md has the commands and figures.
let package = Package(
    name: "StratusBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Stratus", path: ".."),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .executableTarget(
            name: "stratus-bench",
            dependencies: [
                .product(name: "StratusServer", package: "Stratus"),
                .product(name: "StratusSQLite", package: "Stratus"),
                .product(name: "StratusPostgres", package: "Stratus"),
                .product(name: "StratusProcess", package: "Stratus"),
                .product(name: "StratusStorage", package: "Stratus"),
                .product(name: "StratusModel", package: "Stratus"),
                .product(name: "Stratus", package: "Stratus"),
                .product(name: "StratusSync", package: "Stratus"),
                .product(name: "StratusStore", package: "Stratus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        )
    ]
)
