import Foundation
import NIOCore
import StratusModel

/// The bytes of the one file part of a `multipart/form-data` upload body, streamed as they arrive:
/// what Apple's web library sends to an upload URL (a form with one file). The part's headers and
/// the boundaries are dropped, so the stored asset is exactly the file.
struct MultipartFileBody<Base: AsyncSequence>: AsyncSequence where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer

    /// The largest part header section read.
    static var maxHeaderBytes: Int { 16 << 10 }

    let base: Base
    /// The boundary of the form (`boundary=` of its `Content-Type`).
    let boundary: String

    /// The boundary of a `multipart/form-data` content type, or `nil` for any other content type;
    /// `BAD_REQUEST` for a multipart type without a usable boundary.
    static func boundary(ofContentType contentType: String?) throws -> String? {
        guard let contentType else { return nil }
        let parameters = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parameters.first?.lowercased() == "multipart/form-data" else { return nil }
        guard let parameter = parameters.dropFirst().first(where: { $0.lowercased().hasPrefix("boundary=") }) else {
            throw StratusError.badRequest("a multipart/form-data upload needs a boundary in its Content-Type")
        }
        var boundary = String(parameter.dropFirst("boundary=".count))
        if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 {
            boundary = String(boundary.dropFirst().dropLast())
        }
        guard (1...70).contains(boundary.utf8.count) else {
            throw StratusError.badRequest("the multipart boundary must be 1 to 70 characters")
        }
        return boundary
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), delimiter: Array("\r\n--\(boundary)".utf8))
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        enum Phase { case preamble, headers, content, closing, done }

        var base: Base.AsyncIterator
        /// `CRLF--boundary`: what ends the preamble and the file's bytes.
        let delimiter: [UInt8]
        /// Bytes received and not yet handed on; starts with the CRLF a body that opens with its
        /// first boundary leaves out.
        var pending: [UInt8] = [13, 10]
        var phase = Phase.preamble

        mutating func next() async throws -> ByteBuffer? {
            while true {
                switch phase {
                case .preamble:
                    if let range = Self.find(delimiter, in: pending) {
                        pending.removeFirst(range.upperBound)
                        phase = .headers
                    } else {
                        guard pending.count < MultipartFileBody.maxHeaderBytes else {
                            throw Self.malformed("no boundary in its first \(MultipartFileBody.maxHeaderBytes) bytes")
                        }
                        try await pull(orFail: "it ends before its first boundary")
                    }
                case .headers:
                    if let range = Self.find(Array("\r\n\r\n".utf8), in: pending) {
                        pending.removeFirst(range.upperBound)
                        phase = .content
                    } else {
                        guard pending.count < MultipartFileBody.maxHeaderBytes else {
                            throw Self.malformed("a part's headers are longer than \(MultipartFileBody.maxHeaderBytes) bytes")
                        }
                        try await pull(orFail: "it ends inside a part's headers")
                    }
                case .content:
                    if let range = Self.find(delimiter, in: pending) {
                        let file = ByteBuffer(bytes: pending[..<range.lowerBound])
                        pending.removeFirst(range.upperBound)
                        phase = .closing
                        if file.readableBytes > 0 { return file }
                    } else if pending.count >= delimiter.count {
                        // Everything but a tail that may be the start of the delimiter is the file's.
                        let safe = pending.count - delimiter.count + 1
                        let file = ByteBuffer(bytes: pending[..<safe])
                        pending.removeFirst(safe)
                        return file
                    } else {
                        try await pull(orFail: "it ends before the boundary that closes the file")
                    }
                case .closing:
                    guard pending.count >= 2 else {
                        try await pull(orFail: "it ends without closing its last boundary")
                        continue
                    }
                    guard pending[0] == UInt8(ascii: "-"), pending[1] == UInt8(ascii: "-") else {
                        throw StratusError.badRequest("a multipart upload must hold one file part; this one holds more")
                    }
                    phase = .done
                case .done:
                    return nil
                }
            }
        }

        /// Reads the next piece of the body into ``pending``; `BAD_REQUEST` saying `reason` at its end.
        private mutating func pull(orFail reason: String) async throws {
            guard let buffer = try await base.next() else { throw Self.malformed(reason) }
            pending.append(contentsOf: buffer.readableBytesView)
        }

        private static func malformed(_ reason: String) -> StratusError {
            .badRequest("the multipart/form-data upload is malformed: \(reason)")
        }

        /// Where `needle` first occurs in `haystack`.
        static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
            guard let first = needle.first, haystack.count >= needle.count else { return nil }
            var start = 0
            while let index = haystack[start...].firstIndex(of: first), index + needle.count <= haystack.count {
                if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index..<(index + needle.count) }
                start = index + 1
            }
            return nil
        }
    }
}
