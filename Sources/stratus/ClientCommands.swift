import ArgumentParser
import Foundation
import Stratus
import StratusCommandLine

/// A running server's public database, as Apple's `cktool` reaches CloudKit's: with an API token
/// alone (reading), or signed with a server-to-server key (reading and writing, as the key's user).
struct PublicDatabaseOptions: ParsableArguments {
    @OptionGroup var server: ServerOptions

    @Option(help: "development or production.")
    var environment: String = "development"

    @Option(help: "A server-to-server key's ID (from 'stratus admin create-key'): requests are signed with it, to write as the key's user.")
    var keyID: String?

    @Option(help: "The PEM file of that key's private half.")
    var privateKey: String?

    /// The container these options name, signing with the key when one is given.
    func makeContainer() throws -> Container {
        let (serverURL, container, apiToken) = try server.resolved()
        guard let environment = Container.Environment(rawValue: environment) else {
            throw ValidationError("--environment is development or production, not '\(environment)'")
        }
        var key: ServerToServerKey?
        switch (keyID, privateKey) {
        case (let keyID?, let file?):
            guard let pem = FileManager.default.contents(atPath: file) else { throw ValidationError("there is no file \(file)") }
            key = try ServerToServerKey(keyID: keyID, privateKeyPEM: String(decoding: pem, as: UTF8.self))
        case (nil, nil):
            key = nil
        default:
            throw ValidationError("give --key-id and --private-key together")
        }
        return Container(
            identifier: container, serverURL: serverURL, apiToken: apiToken, environment: environment,
            configuration: Container.Configuration(serverToServerKey: key))
    }

    /// The public database, the one an API token or a server-to-server key reaches.
    func database() throws -> Database { try makeContainer().publicCloudDatabase }
}

/// `name=value` pairs of `--field`, as record values: an integer, a decimal number, or text.
private func fieldValues(_ pairs: [String]) throws -> [(String, RecordFieldValue)] {
    try pairs.map { pair in
        guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
            throw ValidationError("--field takes NAME=VALUE, not '\(pair)'")
        }
        let name = String(pair[..<equals])
        let text = String(pair[pair.index(after: equals)...])
        if let integer = Int64(text) { return (name, .int64(integer)) }
        if let number = Double(text), text.contains(".") { return (name, .double(number)) }
        return (name, .string(text))
    }
}

/// Writes `line` to standard output at once (a follower reads each as it comes).
private func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// One line per record: its name, type, change tag and fields.
private func describe(_ record: Record) -> String {
    let fields = record.allKeys().sorted().map { key in "\(key)=\(describe(record.fieldValue(forKey: key)))" }
    return ([record.recordID.recordName, record.recordType, record.recordChangeTag ?? "-"] + fields).joined(separator: "  ")
}

private func describe(_ value: RecordFieldValue?) -> String {
    switch value {
    case .string(let text)?: text
    case .int64(let integer)?: "\(integer)"
    case .double(let number)?: "\(number)"
    case .date(let date)?: date.formatted(.iso8601)
    case .reference(let reference)?: "→\(reference.recordID.recordName)"
    case .asset(let asset)?: "asset(\(asset.fileChecksum ?? "?"))"
    case .bytes(let data)?: "\(data.count) bytes"
    case let other?: "\(other)"
    case nil: ""
    }
}

/// The client commands: records, zones and changes of a running server's public database.
struct RecordsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "records",
        abstract: "Query, read and change records of a running server's public database, as cktool does.",
        discussion: """
            With an API token alone, records are read; signed with a server-to-server key (--key-id and \
            --private-key), they are written as the key's user. Each record prints as one line: name, type, \
            change tag, then NAME=VALUE for each field.
            """,
        subcommands: [Query.self, Get.self, Create.self, Update.self, Delete.self])

    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the records of a type, optionally where fields equal values.")
        @OptionGroup var options: PublicDatabaseOptions
        @Argument(help: "The record type.") var recordType: String
        @Option(name: .customLong("where"), help: "NAME=VALUE: only records whose field equals the value (repeatable).")
        var filters: [String] = []
        @Option(help: "The most records to print.") var limit: Int?

        func run() async throws {
            var predicate = Stratus.Query.Predicate.all
            for (name, value) in try fieldValues(filters) {
                switch value {
                case .int64(let integer): predicate = predicate && .equals(name, integer)
                case .double(let number): predicate = predicate && .equals(name, number)
                case .string(let text): predicate = predicate && .equals(name, text)
                default: break
                }
            }
            let database = try options.database()
            var page = try await database.records(matching: Stratus.Query(recordType: recordType, predicate: predicate))
            var printed = 0
            while true {
                for (_, result) in page.matchResults {
                    guard limit.map({ printed < $0 }) ?? true else { return }
                    emit(describe(try result.get()))
                    printed += 1
                }
                guard let cursor = page.queryCursor else { return }
                page = try await database.records(continuingMatchFrom: cursor)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print one record.")
        @OptionGroup var options: PublicDatabaseOptions
        @Argument(help: "The record's name.") var recordName: String

        func run() async throws {
            emit(describe(try await options.database().record(for: Record.ID(recordName: recordName))))
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a record (signed with a server-to-server key).")
        @OptionGroup var options: PublicDatabaseOptions
        @Argument(help: "The record type.") var recordType: String
        @Option(help: "The record's name (a new UUID by default).") var name: String?
        @Option(help: "NAME=VALUE: a field (repeatable); integers and decimals are numbers, anything else text.")
        var field: [String] = []

        func run() async throws {
            var record = Record(recordType: recordType, recordID: Record.ID(recordName: name ?? UUID().uuidString))
            for (key, value) in try fieldValues(field) { record.setFieldValue(value, forKey: key) }
            emit(describe(try await options.database().save(record)))
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change fields of a record (signed with a server-to-server key); refused if it changed meanwhile.")
        @OptionGroup var options: PublicDatabaseOptions
        @Argument(help: "The record's name.") var recordName: String
        @Option(help: "NAME=VALUE: a field to set (repeatable).") var field: [String] = []
        @Option(help: "A field to remove (repeatable).") var remove: [String] = []

        func run() async throws {
            let database = try options.database()
            var record = try await database.record(for: Record.ID(recordName: recordName))
            for (key, value) in try fieldValues(field) { record.setFieldValue(value, forKey: key) }
            for key in remove { record.setFieldValue(nil, forKey: key) }
            emit(describe(try await database.save(record)))
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a record (signed with a server-to-server key).")
        @OptionGroup var options: PublicDatabaseOptions
        @Argument(help: "The record's name.") var recordName: String

        func run() async throws {
            _ = try await options.database().deleteRecord(withID: Record.ID(recordName: recordName))
            emit("deleted \(recordName)")
        }
    }
}

struct ZonesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zones", abstract: "List the zones of a running server's public database.")
    @OptionGroup var options: PublicDatabaseOptions

    func run() async throws {
        for zone in try await options.database().allRecordZones() { emit(zone.zoneID.zoneName) }
    }
}

struct ChangesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "Print the records of a type created or changed in a running server's public database, and with --follow keep printing them as they change.",
        discussion: """
            The public database has no change feed: the command reads by modification time, from the start, \
            then every --interval seconds from the last change it saw (a minute earlier, so a save committed \
            late is not missed; records already printed at their change tag are not printed again). Deletions \
            are not seen. It runs until interrupted.
            """)
    @OptionGroup var options: PublicDatabaseOptions
    @Argument(help: "The record type.") var recordType: String
    @Flag(help: "Keep printing changes as they happen, until interrupted.") var follow = false
    @Option(help: "Seconds between reads while following.") var interval: Double = 2

    func run() async throws {
        let database = try options.database()
        var since: Date?
        var printed: [String: String] = [:]
        while true {
            let query = Stratus.Query(
                recordType: recordType, predicate: since.map { .greaterThanOrEquals("___modTime", $0.addingTimeInterval(-60)) } ?? .all,
                sortDescriptors: [Stratus.Query.SortDescriptor(key: "___modTime")])
            do {
                var page = try await database.records(matching: query)
                while true {
                    for (_, result) in page.matchResults {
                        let record = try result.get()
                        let tag = record.recordChangeTag ?? ""
                        if printed[record.recordID.recordName] != tag {
                            printed[record.recordID.recordName] = tag
                            emit(describe(record))
                        }
                        if let modified = record.modificationDate, modified > (since ?? .distantPast) { since = modified }
                    }
                    guard let cursor = page.queryCursor else { break }
                    page = try await database.records(continuingMatchFrom: cursor)
                }
            } catch let error as CloudError where error.code == .unknownItem && follow {
                // No record of the type yet: the schema does not know it until one is saved.
            }
            guard follow else { return }
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
    }
}
