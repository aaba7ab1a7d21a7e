import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP server on a loopback port that reads each HTTP request and closes the connection without
/// answering: a server that may have applied a request whose answer was lost. It counts the
/// requests it swallowed.
final class SilentServer: Sendable {
    let port: Int
    private let socket: Int32
    private let received = Mutex(0)

    /// Requests read so far.
    var requestCount: Int { received.withLock { $0 } }

    init() throws {
        let listener = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        socket = listener
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                var request: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                // Read the head and as much of the body as its Content-Length says.
                while true {
                    let count = read(connection, &buffer, buffer.count)
                    guard count > 0 else { break }
                    request += buffer[0..<count]
                    let text = String(decoding: request, as: UTF8.self)
                    guard let headEnd = text.range(of: "\r\n\r\n") else { continue }
                    let length = text.components(separatedBy: "\r\n")
                        .first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                    if text.utf8.distance(from: text.utf8.startIndex, to: headEnd.upperBound) + length <= request.count { break }
                }
                if !request.isEmpty { received.withLock { $0 += 1 } }
                close(connection)
            }
        }
    }

    deinit {
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }
}
