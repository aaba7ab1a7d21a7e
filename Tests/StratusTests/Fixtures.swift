import Foundation
import Logging
import Stratus
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

/// The error `body` throws, as a ``CloudError``; fails the test when it throws none or another kind.
func cloudError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> CloudError? {
    do {
        try await body()
        Issue.record("expected a CloudError, but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as CloudError {
        return error
    } catch {
        Issue.record("expected a CloudError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Keeps every message logged through its ``logger``, to check what the SDK logged.
final class LogRecorder: Sendable {
    private let lines = Mutex<[String]>([])

    var messages: [String] { lines.withLock { $0 } }

    var logger: Logger {
        Logger(label: "stratus-test") { _ in Handler(recorder: self) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.lines.withLock { $0.append(event.message.description) }
        }
    }
}

extension Result where Failure == CloudError {
    /// The failure's code; `nil` for a success.
    var errorCode: CloudError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }
}

/// Collects a container's push events in the background, for tests to wait on.
final class PushEventCollector: Sendable {
    private final class Store: Sendable {
        let state = Mutex<(events: [PushEvent], error: CloudError?, ended: Bool)>(([], nil, false))
    }

    private let store = Store()
    private let task: Task<Void, Never>

    init(_ container: Container) {
        let store = store
        task = Task {
            do {
                for try await event in container.notifications() { store.state.withLock { $0.events.append(event) } }
            } catch {
                store.state.withLock { $0.error = error as? CloudError }
            }
            store.state.withLock { $0.ended = true }
        }
    }

    deinit { task.cancel() }

    var events: [PushEvent] { store.state.withLock { $0.events } }
    var notifications: [PushNotification] {
        events.compactMap { if case .notification(let notification) = $0 { notification } else { nil } }
    }
    var gaps: Int { events.filter { $0 == .missedNotifications }.count }
    var error: CloudError? { store.state.withLock { $0.error } }
    var ended: Bool { store.state.withLock { $0.ended } }

    /// Waits until `condition` holds, up to `timeout`; returns whether it did.
    @discardableResult
    func wait(for timeout: Duration = .seconds(20), until condition: (PushEventCollector) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(self) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(self)
    }

    func stop() { task.cancel() }
}
