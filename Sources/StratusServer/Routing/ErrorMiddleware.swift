import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import StratusModel
import _NIOFileSystem

/// Turns every error a handler throws into a CloudKit-shaped error response: the HTTP status of its
/// `serverErrorCode`, and a body with `reason`, `serverErrorCode` and `uuid`. Nothing escapes as a
/// bare 500: unexpected errors become `INTERNAL_ERROR` and are logged with the same `uuid`.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    /// The router's routes, for the `Allow` of a `405`.
    let routes: RouteTable

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let failure = stratusError(for: error, request: request)
            let uuid = context.trace.id
            context.trace.fail(failure)
            if failure.code == .internalError {
                context.logger.error(
                    "request failed", metadata: ["error": "\(String(reflecting: error))", "uuid": "\(uuid)"])
            }
            var writer = JSONWriter()
            ErrorDictionary(
                serverErrorCode: failure.code, reason: failure.reason, retryAfter: failure.retryAfter, uuid: uuid,
                redirectURL: failure.redirectURL
            ).write(to: &writer)
            var response = Response.json(writer, status: .init(code: failure.code.httpStatus))
            if let retryAfter = failure.retryAfter {
                response.headers[.retryAfter] = String(retryAfter)
            }
            // A body over the limit is left unread: the connection closes rather than wait for the rest.
            // (A body the budget refused is read and dropped after the answer for a few seconds, so the
            // client sees it; see BodyPaceHandler.)
            if failure.code == .limitExceeded {
                response.headers[.connection] = "close"
                response.body = context.closingConnection(after: response.body)
            }
            if let allowed = allowedMethods(for: error, request: request) {
                response.status = .methodNotAllowed
                response.headers[.allow] = allowed.joined(separator: ", ")
            }
            return response
        }
    }

    /// When the router found no route because the path is routed with other methods, those
    /// methods: the answer is then `405` with `Allow`.
    func allowedMethods(for error: any Error, request: Request) -> [String]? {
        guard let error = error as? HTTPError, error.status == .notFound else { return nil }
        let methods = routes.methods(matching: request.uri.path)
        return methods.isEmpty ? nil : methods
    }

    func stratusError(for error: any Error, request: Request) -> StratusError {
        switch error {
        case let error as StratusError:
            return error
        case let error as JSONDecodingError:
            return .badRequest(error.description)
        case let error as JSONSyntaxError:
            switch error.kind {
            case .malformed: return .badRequest("the request body is not valid JSON: \(error)")
            // Valid JSON holding a refused character: the description names where, as a field's error does.
            case .refusedCharacter: return .badRequest("the request body is refused: \(error)")
            }
        case let error as HTTPParserError:
            // The client sent broken HTTP, or went away in the middle of its body.
            return .badRequest("the request is not valid HTTP: \(error)")
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge:
                return StratusError(.limitExceeded, "the request body is larger than the server's limit")
            case .notFound:
                if let allowed = allowedMethods(for: error, request: request) {
                    return .badRequest(
                        "\(request.uri.path) answers \(allowed.joined(separator: " and ")), not \(request.method)")
                }
                return StratusError(
                    .notFound, "no endpoint \(request.method) \(request.uri.path); see /openapi.json for the endpoints")
            default:
                return error.status.code < 500
                    ? .badRequest(error.body ?? error.status.reasonPhrase)
                    : StratusError(.internalError, "internal error")
            }
        case is ChannelError, is NIOHTTP2Errors.StreamClosed:
            // The connection or stream went while the request was read (its body too slow, or the
            // client gone): nobody reads the answer, and nothing failed on the server's side.
            return .badRequest("the connection closed before the request arrived whole")
        case let error where Self.isOutOfFileDescriptors(error):
            // The process or the system holds as many files as it may: shed this request, keep running.
            return StratusError(
                .tryAgainLater, "the server has too many files open to answer now; retry after the retryAfter seconds",
                retryAfter: 1)
        default:
            return StratusError(.internalError, "internal error")
        }
    }

    /// Whether `error` says the process (`EMFILE`) or the system (`ENFILE`) ran out of file
    /// descriptors, as NIO, its file system and Foundation report it.
    static func isOutOfFileDescriptors(_ error: any Error) -> Bool {
        let codes: Set<Int32> = [EMFILE, ENFILE]
        switch error {
        case let error as IOError: return codes.contains(error.errnoCode)
        case let error as FileSystemError.SystemCallError: return codes.contains(error.errno.rawValue)
        case let error as FileSystemError: return error.cause.map(isOutOfFileDescriptors) ?? false
        default:
            let error = error as NSError
            return error.domain == NSPOSIXErrorDomain && codes.contains(Int32(error.code))
        }
    }
}

extension Response {
    /// A JSON response with the writer's bytes.
    static func json(_ writer: JSONWriter, status: HTTPResponse.Status = .ok) -> Response {
        json(bytes: writer.bytes, status: status)
    }

    /// A JSON response of bytes already written.
    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON response `{"<key>": [ … ]}` with each item written by `write`.
    static func jsonList<Item>(
        _ key: String, _ items: some Sequence<Item>, _ write: (Item, inout JSONWriter) -> Void
    ) -> Response {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key(key)
        writer.beginArray()
        for item in items { write(item, &writer) }
        writer.endArray()
        writer.endObject()
        return json(writer)
    }

    /// A JSON response with one writable value.
    static func json(_ value: some JSONWritable, status: HTTPResponse.Status = .ok) -> Response {
        var writer = JSONWriter()
        value.write(to: &writer)
        return json(writer, status: status)
    }
}

extension Request {
    /// The whole body; `LIMIT_EXCEEDED` naming `limitName` when it is over `limit` bytes, refused before
    /// a byte of it is read when its `Content-Length` says so.
    ///
    /// Its bytes are charged to the server's budget of buffered request bytes as they arrive (through
    /// the request's ``RequestBodyReservation``), so a client sending slowly holds only what it has
    /// sent; `TRY_AGAIN_LATER` when the budget is spent.
    func collectBody(limit: Int, limitName: String = "this endpoint's limit") async throws -> ByteBuffer {
        if let length = headers[.contentLength].flatMap(Int.init), length > limit {
            throw StratusError(.limitExceeded, "the request body is \(length) bytes, over \(limit), \(limitName)")
        }
        let reservation = try RequestBodyReservation.required
        var collected = ByteBuffer()
        for try await var chunk in body {
            guard collected.readableBytes + chunk.readableBytes <= limit else {
                throw StratusError(.limitExceeded, "the request body is larger than \(limit) bytes, \(limitName)")
            }
            try reservation.reserve(atLeast: collected.readableBytes + chunk.readableBytes)
            collected.writeBuffer(&chunk)
        }
        return collected
    }

    /// Decodes the JSON body, refusing bodies over `limit` bytes.
    func decodeJSON<T: JSONDecodable>(_ type: T.Type, limit: Int) async throws -> T {
        try T(jsonBytes: await jsonBodyBytes(limit: limit), refusingNullCharacter: true)
    }

    /// The JSON body's bytes, at most `limit` of them, and not none.
    func jsonBodyBytes(limit: Int) async throws -> [UInt8] {
        let buffer = try await jsonBody(limit: limit)
        guard buffer.readableBytes > 0 else {
            throw StratusError.badRequest("the request body is empty; expected a JSON object")
        }
        return Array(buffer.readableBytesView)
    }

    /// A query parameter, if present and not empty. (Each call parses the query: a caller reading
    /// several parameters parses it once, with `uri.queryParameters.nonEmpty(_:)`.)
    func query(_ name: String) -> String? {
        uri.queryParameters.nonEmpty(name)
    }
}

extension FlatDictionary where Key == Substring, Value == Substring {
    /// A parameter of a parsed query, if present and not empty.
    func nonEmpty(_ name: String) -> String? {
        guard let value = self[Substring(name)], !value.isEmpty else { return nil }
        return String(value)
    }
}
