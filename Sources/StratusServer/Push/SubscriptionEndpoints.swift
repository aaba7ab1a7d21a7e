import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify`: a user's subscriptions
/// in one database.
///
/// Which kinds a database takes follows CloudKit: query subscriptions in the public and private
/// databases, zone subscriptions in the private and shared databases (a shared zone's, there),
/// database subscriptions in the private and shared databases. A subscription belongs to the user who saved it, who alone receives its
/// notifications and sees it in these endpoints.
struct SubscriptionEndpoints: Sendable {
    let storage: any SubscriptionStorage & SchemaStorage & RecordStorage & ShareStorage
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    let hub: PushHub

    /// The most `desiredKeys` a notification carries, as in CloudKit.
    static let maxDesiredKeys = 3

    var limits: Limits { configuration.limits }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.subscriptionsList, authorizedBy: authenticator) { request, context, access in try await list(request, context, access) }
        router.on(Endpoints.subscriptionsLookup, authorizedBy: authenticator) { request, _, access in
            try await lookup(request, in: [access])
        }
        router.on(Endpoints.environmentSubscriptionsLookup, authorizedInEachDatabaseBy: authenticator) { request, _, accesses in
            try await lookup(request, in: accesses)
        }
        router.on(Endpoints.subscriptionsModify, authorizedBy: authenticator) { request, context, access in try await modify(request, context, access) }
    }

    func list(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let stored = try await storage.subscriptions(in: access.locator, subscriber: try access.requireUser())
        return respond(try stored.map { .success(try answered($0.definition, target: target)) })
    }

    /// `subscriptions/lookup` in each database of `accesses`: the path's, or for the path without a
    /// database segment (as Apple's reference gives it) the caller's private, shared and public
    /// databases, the first found per ID.
    func lookup(_ request: Request, in accesses: [DatabaseAccess]) async throws -> Response {
        let body = try await request.decodeJSON(LookupSubscriptionsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        try checkCount(body.subscriptionIDs.count)
        var found: [String: SubscriptionDictionary] = [:]
        for access in accesses {
            for stored in try await storage.subscriptions(in: access.locator, subscriber: try access.requireUser())
            where found[stored.subscriptionID] == nil {
                found[stored.subscriptionID] = try answered(stored.definition, target: access.target)
            }
        }
        return respond(body.subscriptionIDs.map { id in found[id].map { .success($0) } ?? .failure(notFound(id)) })
    }

    func modify(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let user = try access.requireUser()
        let locator = access.locator
        let body = try await request.decodeJSON(ModifySubscriptionsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        try checkCount(body.operations.count)
        let schema = try await storage.schema(container: target.container, environment: target.environment)
        var seen = Set<String>()
        let definitions = try body.operations.enumerated().map { index, operation in
            let definition = try validated(operation, path: "operations[\(index)]", target: target, schema: schema)
            if let id = definition.subscriptionID, !seen.insert(id).inserted {
                throw StratusError.badRequest(
                    "operations[\(index)].subscription.subscriptionID '\(id)' appears twice; change each subscription once per request")
            }
            return definition
        }
        var existing = Set(try await storage.subscriptions(in: locator, subscriber: user).map(\.subscriptionID))
        var results: [Result<SubscriptionDictionary, ErrorDictionary>] = []
        for (operation, definition) in zip(body.operations, definitions) {
            let id = definition.subscriptionID ?? ""
            switch operation.operationType {
            case .create, .update:
                if operation.operationType == .update, !existing.contains(id) {
                    results.append(.failure(notFound(id)))
                } else if !existing.contains(id), existing.count >= Limits.maxSubscriptionsPerDatabase {
                    results.append(
                        .failure(
                            ErrorDictionary(
                                serverErrorCode: .limitExceeded,
                                reason: "you keep \(existing.count) subscriptions in this database, the most one user may; "
                                    + "delete some first", subscriptionID: id, uuid: RequestTrace.nextID())))
                } else if let zoneID = definition.zoneID, zoneID.zoneName != ZoneID.defaultZoneName,
                    try await !reaches(zoneID, access: access)
                {
                    let zone = zoneID.zoneName
                    results.append(
                        .failure(
                            ErrorDictionary(
                                serverErrorCode: .zoneNotFound, reason: "zone '\(zone)' does not exist",
                                subscriptionID: id, uuid: RequestTrace.nextID())))
                } else {
                    try await storage.saveSubscription(
                        StoredSubscription(
                            database: locator, subscriber: user, definition: definition,
                            createdAt: configuration.clock.milliseconds))
                    existing.insert(id)
                    results.append(.success(definition))
                }
            case .delete:
                let deleted = try await storage.deleteSubscription(id: id, subscriber: user, in: locator)
                if deleted { existing.remove(id) }
                results.append(deleted ? .success(SubscriptionDictionary(subscriptionID: id, deleted: true)) : .failure(notFound(id)))
            }
        }
        hub.publish(.subscriptionsChanged(locator))
        return respond(
            try results.map { result in
                switch result {
                case .success(let definition): .success(try answered(definition, target: target))
                case .failure(let error): .failure(error)
                }
            })
    }

    /// Whether the zone a subscription names exists and the caller reaches it (in the shared
    /// database: a zone whose share they accepted).
    private func reaches(_ zoneID: ZoneID, access: DatabaseAccess) async throws -> Bool {
        do {
            let zone = try await access.zone(zoneID, field: "zoneID", limits: limits, shares: storage)
            return try await storage.zone(named: zone.name, in: zone.locator) != nil
        } catch let error as StratusError where error.code == .zoneNotFound {
            return false
        }
    }

    // MARK: Validation

    /// The subscription to store for an operation, with its ID (a new UUID for a create without
    /// one) and its zone by name; throws `BAD_REQUEST` naming the field and the rule.
    private func validated(
        _ operation: ModifySubscriptionsRequest.Operation, path: String, target: DatabaseRequest, schema: Schema
    ) throws -> SubscriptionDictionary {
        var subscription = operation.subscription
        let field = "\(path).subscription"
        if let id = subscription.subscriptionID {
            if let violation = limits.violation(ofName: id) {
                throw StratusError.badRequest("\(field).subscriptionID \(violation)")
            }
        } else if operation.operationType == .create {
            subscription.subscriptionID = UUID().uuidString
        } else {
            throw StratusError.badRequest("\(field).subscriptionID is required for \(operation.operationType.rawValue)")
        }
        guard operation.operationType != .delete else { return SubscriptionDictionary(subscriptionID: subscription.subscriptionID) }
        guard let type = subscription.subscriptionType else {
            throw StratusError.badRequest("\(field).subscriptionType is required: query, zone or database")
        }
        let scope = target.scope
        func refuse(_ rule: String) -> StratusError { StratusError.badRequest("\(field): \(rule)") }
        switch type {
        case .query:
            guard scope != .shared else {
                throw refuse("query subscriptions are available in the public and private databases, not the shared one")
            }
            guard var query = subscription.query else { throw refuse("query is required for a query subscription") }
            query.sortBy = []
            let validator = QueryValidator(schema: schema, environment: target.environment, limits: limits)
            do {
                if let recordType = try validator.recordType(of: query) { try validator.check(query, type: recordType) }
            } catch let error as StratusError {
                throw StratusError(error.code, "\(field).\(error.reason)")
            }
            subscription.query = query
            if let firesOn = subscription.firesOn {
                guard !firesOn.isEmpty else { throw refuse("firesOn must name at least one of create, update, delete") }
                subscription.firesOn = SubscriptionEvent.allCases.filter(firesOn.contains)
            }
            guard subscription.recordType == nil else { throw refuse("recordType applies to zone and database subscriptions; a query subscription names its type in query.recordType") }
            if scope == .public, let zone = subscription.zoneID, !zone.isDefaultZone {
                throw refuse("the public database has only the default zone")
            }
        case .zone:
            guard scope != .public else {
                throw refuse("zone subscriptions are available in the private and shared databases; the public one has only the default zone")
            }
            guard let zone = subscription.zoneID else { throw refuse("zoneID is required for a zone subscription") }
            guard !zone.isDefaultZone else {
                throw refuse("the default zone has no change feed to follow; subscribe to a custom zone")
            }
            try checkQueryOnly(subscription, field: field, type: type)
        case .database:
            guard scope != .public else {
                throw refuse("database subscriptions are available in the private and shared databases, not the public one")
            }
            guard subscription.zoneID == nil else { throw refuse("zoneID does not apply to a database subscription") }
            try checkQueryOnly(subscription, field: field, type: type)
        }
        if let zoneID = subscription.zoneID {
            // In the shared database a zone is another user's: its owner stays part of its ID.
            subscription.zoneID = ZoneID(
                zoneName: try target.zoneName(zoneID, field: "\(field).zoneID", limits: limits),
                ownerRecordName: target.scope == .shared ? zoneID.ownerRecordName : nil)
        }
        if let recordType = subscription.recordType,
            let violation = RecordValidator(limits: limits).violation(ofIdentifier: recordType)
        {
            throw StratusError.badRequest("\(field).recordType '\(recordType)' \(violation)")
        }
        if let keys = subscription.notificationInfo?.desiredKeys {
            guard keys.count <= Self.maxDesiredKeys else {
                throw StratusError.badRequest(
                    "\(field).notificationInfo.desiredKeys has \(keys.count) fields; a notification carries at most "
                        + "\(Self.maxDesiredKeys)")
            }
        }
        return subscription
    }

    /// Refuses the keys that belong to query subscriptions on a zone or database subscription.
    private func checkQueryOnly(_ subscription: SubscriptionDictionary, field: String, type: SubscriptionType) throws {
        for (key, present) in [
            ("query", subscription.query != nil), ("firesOn", subscription.firesOn != nil),
            ("firesOnce", subscription.firesOnce != nil), ("zoneWide", subscription.zoneWide != nil),
        ] where present {
            throw StratusError.badRequest("\(field).\(key) applies to query subscriptions, not \(type.rawValue) subscriptions")
        }
    }

    private func checkCount(_ count: Int) throws {
        guard count > 0 else { throw StratusError.badRequest("the request names no subscriptions") }
        guard count <= limits.maxOperationsPerRequest else {
            throw StratusError.badRequest(
                "the request names \(count) subscriptions; the limit is \(limits.maxOperationsPerRequest) per request")
        }
    }

    private func notFound(_ id: String) -> ErrorDictionary {
        ErrorDictionary(
            serverErrorCode: .notFound, reason: "subscription '\(id)' does not exist", subscriptionID: id,
            uuid: RequestTrace.nextID())
    }

    /// A subscription as answered from `target`'s database: its zone ID carries the database's owner
    /// (a shared database's zones keep their own owners).
    private func answered(_ definition: SubscriptionDictionary, target: DatabaseRequest) throws -> SubscriptionDictionary {
        guard target.scope != .shared, let zone = definition.zoneID else { return definition }
        var owned = definition
        owned.zoneID = try target.wireZoneID(zone.zoneName)
        return owned
    }

    /// `{"subscriptions": [...]}`.
    private func respond(_ items: [Result<SubscriptionDictionary, ErrorDictionary>]) -> Response {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("subscriptions", array: items)
        writer.endObject()
        return .json(writer)
    }
}
