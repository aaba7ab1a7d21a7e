import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel

/// Signed requests to an S3-compatible service through path-style URLs (`<endpoint>/<bucket>/<key>`).
/// Any failure, a service out of reach or an unexpected status, throws an `INTERNAL_ERROR` naming the
/// request and, when the service gives them, its error code and message.
struct S3Client: Sendable {
    /// How long a request may take until its response starts, an upload's bytes included.
    static let timeout = TimeAmount.minutes(10)
    /// The HTTP client of every bucket, for the life of the process. Connecting gives up after 10
    /// seconds (`HTTPClient.shared` keeps retrying for 90), a response silent for 90 seconds fails,
    /// and redirects are answers: S3 redirects a request signed for the wrong region, and the
    /// signature would not survive the redirect anyway.
    private static let http = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(90))))

    /// The service's base URL, without a trailing `/`.
    let endpoint: String
    let signer: S3Signer

    init(bucket: S3Bucket) {
        endpoint = bucket.endpoint.hasSuffix("/") ? String(bucket.endpoint.dropLast()) : bucket.endpoint
        signer = S3Signer(
            accessKeyID: bucket.accessKeyID, secretAccessKey: bucket.secretAccessKey, region: bucket.region)
    }

    /// Sends a signed `method` for `path` (`/<bucket>/<key>`, not yet encoded) and answers the
    /// response when its status is one of `expected`. `payloadHash` is the body's
    /// `x-amz-content-sha256`: ``S3Signer/emptyPayload`` without one.
    func response(
        _ method: HTTPMethod, _ path: String, headers: [String: String] = [:], body: HTTPClientRequest.Body? = nil,
        payloadHash: String = S3Signer.emptyPayload, expected: [HTTPResponseStatus]
    ) async throws -> HTTPClientResponse {
        let what = "\(method) \(path)"
        guard let base = URLComponents(string: endpoint), base.scheme == "http" || base.scheme == "https",
            let host = base.host, !host.isEmpty
        else {
            throw StratusError(.internalError, "the asset bucket's endpoint '\(endpoint)' is not an http or https URL")
        }
        let encodedPath = S3Signer.encodePath(path)
        var request = HTTPClientRequest(url: endpoint + encodedPath)
        request.method = method
        let authority = base.port.map { "\(host):\($0)" } ?? host
        for (name, value) in signer.signedHeaders(
            method: method.rawValue, path: base.percentEncodedPath + encodedPath,
            headers: headers.merging(["host": authority]) { $1 }, payloadHash: payloadHash, date: Date())
        {
            request.headers.add(name: name, value: value)
        }
        if let body { request.body = body }
        let response: HTTPClientResponse
        do {
            response = try await Self.http.execute(request, timeout: Self.timeout)
        } catch {
            throw StratusError(.internalError, "\(what) to the asset bucket at \(endpoint) failed: \(error)")
        }
        guard expected.contains(response.status) else {
            let document = String(buffer: (try? await response.body.collect(upTo: 64 << 10)) ?? ByteBuffer())
            let code = Self.element("Code", of: document).map { " \($0)" } ?? ""
            let message = Self.element("Message", of: document).map { ": \($0)" } ?? ""
            throw StratusError(
                .internalError,
                "the asset bucket at \(endpoint) answered \(what) with \(response.status.code)\(code)\(message)")
        }
        return response
    }

    /// ``response(_:_:headers:body:payloadHash:expected:)`` for a request whose answer has nothing
    /// to read: reads it to the end and answers its status.
    @discardableResult
    func send(
        _ method: HTTPMethod, _ path: String, body: HTTPClientRequest.Body? = nil,
        payloadHash: String = S3Signer.emptyPayload, expected: [HTTPResponseStatus]
    ) async throws -> HTTPResponseStatus {
        let response = try await response(method, path, body: body, payloadHash: payloadHash, expected: expected)
        for try await _ in response.body {}
        return response.status
    }

    /// The text of the first `<name>` element of an S3 error document.
    private static func element(_ name: String, of document: String) -> String? {
        guard let start = document.range(of: "<\(name)>"),
            let end = document.range(of: "</\(name)>", range: start.upperBound..<document.endIndex)
        else { return nil }
        return String(document[start.upperBound..<end.lowerBound])
    }
}
