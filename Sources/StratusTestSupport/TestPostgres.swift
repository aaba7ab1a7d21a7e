import Foundation
import StratusPostgres
import Testing

/// The PostgreSQL server that `scripts/test` provisions, named by `STRATUS_TEST_POSTGRES_URL`.
package enum TestPostgres {
    /// A fresh, empty database.
    package struct Database: Sendable {
        package let name: String
        package let url: String
    }

    /// The server's URL; a test that needs PostgreSQL fails, never skips, without it.
    package static func serverURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["STRATUS_TEST_POSTGRES_URL"], !url.isEmpty else {
            throw TestPostgresMissing()
        }
        return url
    }

    struct TestPostgresMissing: Error, CustomStringConvertible {
        var description: String {
            "STRATUS_TEST_POSTGRES_URL is not set: run the tests with scripts/test, which provisions PostgreSQL, "
                + "or point it at a server where databases may be created"
        }
    }

    /// Creates a new database on the test server and returns its URL.
    package static func createDatabase() async throws -> Database {
        let server = try serverURL()
        let name = "stratus_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await execute("CREATE DATABASE \(name)", at: server)
        guard var components = URLComponents(string: server) else { throw TestPostgresMissing() }
        components.path = "/" + name
        return Database(name: name, url: components.string!)
    }

    /// Runs one statement on the database at `url`, as an administrator would with psql.
    package static func execute(_ sql: String, at url: String) async throws {
        try await PostgresStorage.execute(sql, at: url)
    }
}
