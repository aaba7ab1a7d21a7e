import AsyncHTTPClient
import Foundation
import NIOHTTP1
import StratusModel
@testable import StratusServer
import StratusTestSupport
import Testing

@Suite("S3 request signing")
struct S3SignerTests {
    @Test("the signature of AWS's published example, GET /test.txt with a Range")
    func awsExample() {
        let signer = S3Signer(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            region: "us-east-1")
        let headers = signer.signedHeaders(
            method: "GET", path: "/test.txt",
            headers: ["host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9"],
            payloadHash: S3Signer.emptyPayload, date: Date(timeIntervalSince1970: 1_369_353_600))
        #expect(headers["x-amz-date"] == "20130524T000000Z")
        #expect(headers["x-amz-content-sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            headers["authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test("paths are percent-encoded but for unreserved characters and slashes")
    func pathEncoding() {
        #expect(S3Signer.encodePath("/bucket/a b/ü~x-_.+") == "/bucket/a%20b/%C3%BC~x-_.%2B")
    }

    @Test("an s3:// URL gives the bucket and the key prefix")
    func parsing() {
        func parse(_ url: String, endpoint: String = "http://127.0.0.1:9000") -> S3Bucket? {
            S3Bucket(url: url, endpoint: endpoint, accessKeyID: "key", secretAccessKey: "secret")
        }
        #expect(
            parse("s3://assets/stratus//prod/")
                == S3Bucket(
                    endpoint: "http://127.0.0.1:9000", bucket: "assets", prefix: "stratus/prod", region: "us-east-1",
                    accessKeyID: "key", secretAccessKey: "secret"))
        #expect(parse("s3://my.assets-1")?.prefix == "")
        for url in ["assets", "s3://", "s3:///prefix", "s3://Assets", "http://assets", "s3://as_sets/x"] {
            #expect(parse(url) == nil, "\(url)")
        }
        for endpoint in ["127.0.0.1:9000", "ftp://127.0.0.1", "http://"] {
            #expect(parse("s3://assets", endpoint: endpoint) == nil, "\(endpoint)")
        }
    }
}

/// Assets in a real S3-compatible service: moto's server, which `scripts/test` starts and names in
/// `STRATUS_TEST_S3_ENDPOINT`.
@Suite("assets in an S3 bucket")
struct S3AssetTests {
    /// A new, empty bucket on the test service, with a key prefix.
    static func makeBucket() async throws -> S3Bucket {
        let endpoint = try #require(
            ProcessInfo.processInfo.environment["STRATUS_TEST_S3_ENDPOINT"],
            "STRATUS_TEST_S3_ENDPOINT is not set: run scripts/test, which starts an S3-compatible server for these tests (or start one with `eval \"$(scripts/start-s3)\"`)"
        )
        let bucket = S3Bucket(
            endpoint: endpoint, bucket: "stratus-\(UUID().uuidString.lowercased())", prefix: "stratus/assets",
            accessKeyID: "test", secretAccessKey: "test")
        try await S3Client(bucket: bucket).send(.PUT, "/\(bucket.bucket)", expected: [.ok])
        return bucket
    }

    /// A server storing asset bytes in `bucket`.
    static func startServer(bucket: S3Bucket, directory: URL? = nil) async throws -> TestServer {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.assetsBucket = bucket
        return try await TestServer.start(directory: directory, configuration: configuration)
    }

    /// A staging folder of the tests' own: collection sweeps its abandoned uploads.
    static let stagingDirectory = FileManager.default.temporaryDirectory
        .appendingPathComponent("stratus-s3-tests-\(UUID().uuidString)").path

    /// The status of a signed `HEAD` of the object holding an asset.
    static func headStatus(of checksum: String, in bucket: S3Bucket) async throws -> HTTPResponseStatus {
        let blobs = S3AssetBlobStore(bucket: bucket, stagingDirectory: Self.stagingDirectory)
        return try await blobs.client.response(.HEAD, blobs.path(of: checksum), expected: [.ok, .notFound]).status
    }

    /// Uploads `bytes` and saves them in a new record `name`; returns the asset's checksum and downloadURL.
    static func save(_ bytes: [UInt8], as name: String, on server: TestServer, user: String) async throws
        -> (checksum: String, url: String)
    {
        let uploaded = try await AssetTests.upload(server, bytes, user: user)
        let singleFile = try #require(uploaded.body["singleFile"] as? [String: Any], "\(uploaded.text)")
        let saved = try await server.modify(
            [operation("create", name, fields: ["text": ["value": singleFile, "type": "ASSETID"]])], user: user)
        #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved.text)")
        let lookup = try await server.database(
            "private", "records/lookup", ["records": [["recordName": name]]], user: user)
        let asset = try #require(
            ((lookup.records.first?["fields"] as? [String: Any])?["text"] as? [String: Any])?["value"]
                as? [String: Any], "\(lookup.text)")
        return (try #require(asset["fileChecksum"] as? String), try #require(asset["downloadURL"] as? String))
    }

    @Test("uploads go to the bucket; downloads, ranges included, come from it on every instance")
    func roundTrip() async throws {
        let bucket = try await Self.makeBucket()
        let server = try await Self.startServer(bucket: bucket)
        defer { Task { try? await server.stopAndRemove() } }
        let (alice, _) = try await server.signUp("alice")
        let bytes = AssetTests.randomBytes(3 << 20 + 123)
        let (checksum, url) = try await Self.save(bytes, as: "doc", on: server, user: alice)
        #expect(AssetTests.assetFiles(server).isEmpty, "the bytes are in the bucket, not in the directory")
        #expect(try await Self.headStatus(of: checksum, in: bucket) == .ok)

        let whole = try await AssetTests.download(server, url, user: alice)
        #expect(whole.status == 200 && whole.bytes == bytes)
        #expect(whole.headers["Content-Length"].first == "\(bytes.count)")
        let part = try await AssetTests.download(server, url, user: alice, range: "bytes=1000-1999")
        #expect(part.status == 206 && part.bytes == Array(bytes[1000...1999]))
        #expect(part.headers["Content-Range"].first == "bytes 1000-1999/\(bytes.count)")
        let tail = try await AssetTests.download(server, url, user: alice, range: "bytes=-10")
        #expect(tail.status == 206 && tail.bytes == Array(bytes.suffix(10)))
        let outside = try await AssetTests.download(server, url, user: alice, range: "bytes=\(bytes.count)-")
        #expect(outside.status == 416)

        // A second instance over the same database and bucket, as servers sharing PostgreSQL run.
        let second = try await Self.startServer(bucket: bucket, directory: server.directory)
        defer { Task { try? await second.stop() } }
        let elsewhere = try await AssetTests.download(
            second, url.replacingOccurrences(of: server.baseURL, with: second.baseURL), user: alice,
            range: "bytes=100-")
        #expect(elsewhere.status == 206 && elsewhere.bytes == Array(bytes[100...]))
    }

    @Test("collection deletes the objects of assets no record holds")
    func collection() async throws {
        let bucket = try await Self.makeBucket()
        let server = try await Self.startServer(bucket: bucket)
        defer { Task { try? await server.stopAndRemove() } }
        let (alice, _) = try await server.signUp("alice")
        let (kept, _) = try await Self.save(AssetTests.randomBytes(2000), as: "kept", on: server, user: alice)
        let orphan = try await AssetTests.upload(server, AssetTests.randomBytes(1000), user: alice)
        let dropped = try #require((orphan.body["singleFile"] as? [String: Any])?["fileChecksum"] as? String)
        #expect(try await Self.headStatus(of: dropped, in: bucket) == .ok)

        let store = AssetStore(
            blobs: S3AssetBlobStore(bucket: bucket, stagingDirectory: Self.stagingDirectory), storage: server.storage,
            tokens: SyncTokenCodec(secret: SyncTokenCodec.makeSecret()), graceSeconds: 60)
        let later = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
        #expect(try await store.collect(now: later) == 1)
        #expect(try await Self.headStatus(of: dropped, in: bucket) == .notFound)
        #expect(try await Self.headStatus(of: kept, in: bucket) == .ok)
    }

    @Test("a bucket that fails answers INTERNAL_ERROR with the service's reason")
    func failures() async throws {
        var missing = try await Self.makeBucket()
        missing.bucket += "-missing"
        let server = try await Self.startServer(bucket: missing)
        defer { Task { try? await server.stopAndRemove() } }
        let (alice, _) = try await server.signUp("alice")
        let refused = try await AssetTests.upload(server, AssetTests.randomBytes(1000), user: alice)
        #expect(refused.status == 500 && refused.code == "INTERNAL_ERROR", "\(refused.text)")
        #expect(refused.reason.contains("answered PUT") && refused.reason.contains("NoSuchBucket"), "\(refused.text)")

        var unreachable = missing
        unreachable.endpoint = "http://127.0.0.1:9"
        let offline = try await Self.startServer(bucket: unreachable)
        defer { Task { try? await offline.stopAndRemove() } }
        let (bob, _) = try await offline.signUp("bob")
        let failed = try await AssetTests.upload(offline, AssetTests.randomBytes(1000), user: bob)
        #expect(
            failed.status == 500 && failed.reason.contains("to the asset bucket at http://127.0.0.1:9 failed"),
            "\(failed.text)")
    }
}
