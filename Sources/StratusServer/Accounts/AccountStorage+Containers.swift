import StratusModel
package import StratusStorage

extension AccountStorage {
    /// The container named `identifier`; `NOT_FOUND` naming it when there is none.
    @discardableResult
    package func requireContainer(_ identifier: String) async throws -> ContainerInfo {
        guard let container = try await container(identifier) else {
            throw StratusError(.notFound, "container '\(identifier)' does not exist")
        }
        return container
    }
}
