package import StratusModel
package import StratusStorage

/// The schema workflow of CloudKit's console and `cktool`, for the admin API and the `stratus
/// schema` commands: export, import into development, deploy development to production, and reset
/// development.
///
/// Production only ever grows: a deploy that would remove a record type or field, or change a
/// field's type, is refused with every such change named, and so is an import that development could
/// never deploy.
package struct SchemaAdministration: Sendable {
    let storage: any SchemaStorage & AccountStorage

    /// Creates the administration over a storage backend.
    package init(storage: any SchemaStorage & AccountStorage) {
        self.storage = storage
    }

    private static func refusal(_ what: String, _ changes: [String]) -> StratusError {
        StratusError.badRequest(
            "\(what) would not be additive to production, whose record types and fields can only be added: "
                + changes.joined(separator: "; "))
    }

    /// The schema of an environment.
    package func export(container: String, environment: ContainerEnvironment) async throws -> Schema {
        try await storage.requireContainer(container)
        return try await storage.schema(container: container, environment: environment)
    }

    /// Parses schema-language text, turning a syntax error into `BAD_REQUEST` with its position.
    package static func parse(_ text: String) throws -> Schema {
        do {
            return try Schema(parsing: text)
        } catch {
            throw StratusError.badRequest("schema: \(error.description)")
        }
    }

    /// Replaces development's schema. Records of fields that gain an index get index entries.
    @discardableResult
    package func importSchema(_ schema: Schema, container: String) async throws -> Schema {
        try await storage.requireContainer(container)
        let production = try await storage.schema(container: container, environment: .production)
        let changes = schema.nonAdditiveChanges(from: production)
        guard changes.isEmpty else { throw Self.refusal("importing this schema", changes) }
        return try await storage.updateSchema(container: container, environment: .development) { _ in schema }
    }

    /// Copies development's schema to production.
    @discardableResult
    package func deploy(container: String) async throws -> Schema {
        try await storage.requireContainer(container)
        let development = try await storage.schema(container: container, environment: .development)
        return try await storage.updateSchema(container: container, environment: .production) { production in
            let changes = development.nonAdditiveChanges(from: production)
            guard changes.isEmpty else { throw Self.refusal("deploying development's schema", changes) }
            return development
        }
    }

    /// Deletes development's records and zones and reverts its schema to production's.
    package func resetDevelopment(container: String) async throws {
        try await storage.requireContainer(container)
        try await storage.deleteData(container: container, environment: .development)
        let production = try await storage.schema(container: container, environment: .production)
        _ = try await storage.updateSchema(container: container, environment: .development) { _ in production }
    }
}
