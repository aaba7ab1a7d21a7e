import Foundation
import Hummingbird
import StratusModel

/// Asset bytes under a directory (its folders `0700`, its files `0600`, readable by the server's
/// account only), `<directory>/<hh>/<sha256 hex>` where `hh` is the checksum's first
/// two digits. Uploads are staged in `<directory>/tmp`, on the same file system, so that `rename(2)`
/// puts them in place at once. Several servers can share the directory (a network file system).
struct DirectoryAssetBlobStore: AssetBlobStore {
    /// The directory holding the assets.
    let directory: String

    var stagingDirectory: String { "\(directory)/tmp" }

    /// The file holding the asset with this checksum.
    func path(of checksum: String) -> String {
        "\(directory)/\(checksum.prefix(2))/\(checksum)"
    }

    func put(_ file: String, checksum: String, size: Int64) async throws {
        do {
            try FileManager.default.createDirectory(
                atPath: "\(directory)/\(checksum.prefix(2))", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            // rename(2) replaces an existing file atomically: equal content, so readers see no change.
            guard rename(file, path(of: checksum)) == 0 else {
                throw StratusError(.internalError, "could not store the asset")
            }
        } catch {
            try? FileManager.default.removeItem(atPath: file)
            throw error
        }
    }

    func size(of checksum: String) async throws -> Int? {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path(of: checksum))
        return (attributes?[.size] as? NSNumber)?.intValue
    }

    func body(of checksum: String, range: ClosedRange<Int>, context: some RequestContext) async throws -> ResponseBody {
        try await FileIO().loadFile(path: path(of: checksum), range: range, context: context)
    }

    func delete(_ checksum: String) async throws {
        let path = path(of: checksum)
        guard unlink(path) != 0 else { return }
        let failure = errno
        guard failure != ENOENT else { return }
        throw StratusError(.internalError, "could not delete \(path): \(String(cString: strerror(failure)))")
    }
}
