import Foundation
import Hummingbird
import Logging
import NIOCore
import StratusModel

/// Turns every error a handler throws into a CloudKit-shaped error response: the HTTP status of its
/// `serverErrorCode`, and a body with `reason`, `serverErrorCode` and `uuid`. Nothing escapes as a
/// bare 500: unexpected errors become `INTERNAL_ERROR` and are logged with the same `uuid`.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let failure = Self.stratusError(for: error, request: request)
            let uuid = UUID().uuidString
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
            return response
        }
    }

    static func stratusError(for error: any Error, request: Request) -> StratusError {
        switch error {
        case let error as StratusError:
            return error
        case let error as DecodingError:
            return .badRequest(describe(error))
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge:
                return StratusError(.limitExceeded, "the request body is larger than the server's limit")
            case .notFound:
                return StratusError(
                    .notFound, "no endpoint \(request.method) \(request.uri.path); see /openapi.json for the endpoints")
            default:
                return error.status.code < 500
                    ? .badRequest(error.body ?? error.status.reasonPhrase)
                    : StratusError(.internalError, "internal error")
            }
        default:
            return StratusError(.internalError, "internal error")
        }
    }

    /// Describes a decoding failure by the path of the bad value and the rule it breaks, e.g.
    /// `operations[2].record.fields.age.value: must be a whole number (or a string of one) for type INT64`.
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return "the request body is not valid JSON"
                    + (context.underlyingError.map { ": \(String(describing: $0))" } ?? "")
            }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is required"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) must be \(describe(type))"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath)) must not be null"
        @unknown default:
            return "the request body is malformed"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        guard !keys.isEmpty else { return "the request body" }
        var text = ""
        for key in keys {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Double.Type: "a number"
        case is any Collection.Type: "an array"
        default: "an object"
        }
    }
}

extension Response {
    /// A JSON response with the writer's bytes.
    static func json(_ writer: JSONWriter, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: writer.bytes)))
    }

    /// A JSON response with one writable value.
    static func json(_ value: some JSONWritable, status: HTTPResponse.Status = .ok) -> Response {
        var writer = JSONWriter()
        value.write(to: &writer)
        return json(writer, status: status)
    }
}

extension Request {
    /// Decodes the JSON body, refusing bodies over `limit` bytes.
    func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw StratusError(
                .limitExceeded, "the request body is larger than \(limit) bytes, the server's maxRequestBodyBytes")
        }
        guard buffer.readableBytes > 0 else {
            throw StratusError.badRequest("the request body is empty; expected a JSON object")
        }
        return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
    }

    /// A query parameter, if present and not empty.
    func query(_ name: String) -> String? {
        guard let value = uri.queryParameters[Substring(name)], !value.isEmpty else { return nil }
        return String(value)
    }
}
