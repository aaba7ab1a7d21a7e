import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import StratusModel

/// gzip on the wire, both ways.
///
/// Answers: a JSON answer of at least ``minimumBytes`` goes gzip-compressed to a client whose
/// `Accept-Encoding` takes gzip (change feeds, queries and lookups above all: a feed page of records
/// shrinks to a fraction, which is what a phone on a slow link waits for). Smaller answers and other
/// bodies (asset bytes, already compressed or served by range) go as they are. Every JSON answer
/// says `Vary: Accept-Encoding`.
///
/// Requests: ``Request/decodeJSON(_:limit:)`` takes bodies sent with `Content-Encoding: gzip`, and
/// bounds what they inflate to by the same limit as a plain body.
struct ResponseCompression<Context: RequestContext>: RouterMiddleware {
    /// Answers smaller than this are not worth compressing.
    static var minimumBytes: Int { 1024 }

    /// zlib's fastest level: on a feed page it keeps most of the saving at a fraction of the time.
    static var algorithm: CompressionAlgorithm { .gzip(configuration: ZlibConfiguration(compressionLevel: 1)) }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        guard response.headers[.contentType]?.hasPrefix("application/json") == true,
            response.headers[.contentEncoding] == nil
        else { return response }
        response.headers[.vary] = "Accept-Encoding"
        guard let length = response.body.contentLength, length >= Self.minimumBytes,
            Self.acceptsGzip(request.headers[values: .acceptEncoding])
        else { return response }
        let collected = CollectedBody()
        try await response.body.write(CollectingWriter(collected: collected))
        var plain = collected.buffer
        let compressed = try plain.compress(with: Self.algorithm)
        response.headers[.contentEncoding] = "gzip"
        response.headers[.contentLength] = String(compressed.readableBytes)
        response.body = ResponseBody(byteBuffer: compressed)
        return response
    }

    /// Whether an `Accept-Encoding` header takes gzip: `gzip`, `x-gzip` or `*`, with a `q` above 0.
    static func acceptsGzip(_ values: [String]) -> Bool {
        for value in values {
            for element in value.split(separator: ",") {
                let parts = element.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                guard let coding = parts.first, ["gzip", "x-gzip", "*"].contains(coding) else { continue }
                let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                if quality > 0 { return true }
            }
        }
        return false
    }
}

/// The bytes of a response body as it writes them.
private final class CollectedBody {
    var buffer = ByteBuffer()
}

private struct CollectingWriter: ResponseBodyWriter {
    let collected: CollectedBody

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        collected.buffer.writeBuffer(&buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

extension Request {
    /// The body as JSON bytes: inflated when sent with `Content-Encoding: gzip`, within `limit` bytes
    /// both as sent and as inflated.
    func jsonBody(limit: Int) async throws -> ByteBuffer {
        var buffer = try await collectBody(limit: limit)
        let encodings = headers[values: .contentEncoding].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty && $0 != "identity" }
        guard !encodings.isEmpty else { return buffer }
        guard encodings == ["gzip"] || encodings == ["x-gzip"] else {
            throw StratusError.badRequest(
                "Content-Encoding '\(encodings.joined(separator: ", "))' is not supported; send gzip or an uncompressed body")
        }
        let tooLarge = StratusError(
            .limitExceeded, "the request body inflates to more than \(limit) bytes, this endpoint's limit")
        // The inflated copy may take the whole limit beside the compressed one.
        try RequestBodyReservation.required.reserve(atLeast: buffer.readableBytes + limit)
        let inflated: ByteBuffer
        do {
            // Inflating stops near `limit` (its buffers may round up past it, hence the check after).
            inflated = try buffer.decompress(with: .gzip(), maxSize: limit)
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw tooLarge
        } catch {
            throw StratusError.badRequest("the request body is not valid gzip (Content-Encoding: gzip)")
        }
        guard inflated.readableBytes <= limit else { throw tooLarge }
        return inflated
    }
}
