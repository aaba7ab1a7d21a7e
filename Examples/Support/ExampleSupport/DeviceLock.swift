public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One process's claim on a device directory, held while the process uses it.
///
/// An example app keeps its device in memory (the records, the sync engine's state) and writes it
/// back after each change: a second process on the same directory would write its own copy over
/// the first's, losing a committed edit. The claim is an exclusive `flock(2)` on the directory's
/// `lock` file, which the system releases when the process ends, however it ends; a second
/// process is refused with ``InUse`` naming the first.
public final class DeviceLock: Sendable {
    /// The directory is in use by another process.
    public struct InUse: Error, Equatable, CustomStringConvertible {
        public let directory: String
        public let app: String
        /// The process holding the directory, as it wrote itself in the lock file.
        public let holder: Int32?

        public var description: String {
            let process = holder.map { "process \($0)" } ?? "another process"
            return "\(directory) is in use by \(process) (a running '\(app) watch', or another command): one process "
                + "at a time uses a device's folder, as two would write over each other's edits. Stop the other, "
                + "or run this command on another device's folder"
        }
    }

    private let descriptor: Int32

    /// Claims `directory` for this process, creating the directory when missing.
    ///
    /// - Throws: ``InUse`` when another process holds it (or this process, through another lock).
    public init(_ directory: URL, app: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let waitedOn = errno
            var text = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &text, text.count, 0)
            close(descriptor)
            guard waitedOn == EWOULDBLOCK else {
                throw CocoaError(.fileLocking, userInfo: [NSFilePathErrorKey: path])
            }
            let holder = count > 0 ? Int32(String(decoding: text[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) : nil
            throw InUse(directory: directory.path, app: app, holder: holder)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}
