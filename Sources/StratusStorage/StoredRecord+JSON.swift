public import StratusModel

/// The complete stored form of a record as JSON, for messages between instances and exports: every
/// system field, and the fields' JSON as text so that it comes back byte for byte.
extension StoredRecord: JSONWritable, JSONDecodable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("name", name)
        writer.field("recordType", recordType)
        writer.field("changeTag", changeTag)
        writer.field("fieldsJSON", String(decoding: fieldsJSON, as: UTF8.self))
        writer.field("created", created)
        writer.field("modified", modified)
        writer.field("deleted", deleted)
        writer.field("sequence", sequence)
        writer.endObject()
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        self.init(
            name: try object.decode("name"), recordType: try object.decode("recordType"),
            changeTag: try object.decode("changeTag"), fieldsJSON: Array((try object.decode("fieldsJSON") as String).utf8),
            created: try object.decode("created"), modified: try object.decode("modified"),
            deleted: try object.decode("deleted"), sequence: try object.decode("sequence"))
    }
}

extension DatabaseLocator: JSONWritable, JSONDecodable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("container", container)
        writer.field("environment", environment.rawValue)
        writer.field("scope", scope.rawValue)
        writer.field("owner", owner)
        writer.endObject()
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        let environment: String = try object.decode("environment")
        let scope: String = try object.decode("scope")
        guard let environment = ContainerEnvironment(rawValue: environment), let scope = DatabaseScope(rawValue: scope)
        else { throw StratusError.badRequest("database: unknown environment '\(environment)' or scope '\(scope)'") }
        self.init(container: try object.decode("container"), environment: environment, scope: scope,
                  owner: try object.decode("owner"))
    }
}
