import StratusModel

extension Database {
    /// Saves a subscription, replacing the user's subscription of the same ID (CloudKit's `save(_:)`).
    @discardableResult
    public func save(_ subscription: Subscription) async throws -> Subscription {
        guard let result = try await modifySubscriptions(saving: [subscription], deleting: []).saveResults[subscription.subscriptionID]
        else { throw CloudError(.internalError, "the server did not answer for subscription '\(subscription.subscriptionID)'") }
        return try result.get()
    }

    /// The user's subscription with `subscriptionID` (CloudKit's `subscription(for:)`).
    ///
    /// - Throws: ``CloudError`` `unknownItem` when there is none.
    public func subscription(for subscriptionID: Subscription.ID) async throws -> Subscription {
        let answer = try await call(
            Endpoints.subscriptionsLookup.erased, body: LookupSubscriptionsRequest(subscriptionIDs: [subscriptionID]),
            idempotent: true, as: SubscriptionsResponse.self)
        guard let item = answer.subscriptions.first else {
            throw CloudError(.internalError, "the server did not answer for subscription '\(subscriptionID)'")
        }
        return try item.mapError(CloudError.init).get().subscription(in: self)
    }

    /// Every subscription of the user in this database (CloudKit's `allSubscriptions()`).
    public func allSubscriptions() async throws -> [Subscription] {
        let answer = try await connection.call(
            .database(databaseScope, Endpoints.subscriptionsList.erased), as: SubscriptionsResponse.self)
        return try answer.subscriptions.map { try $0.mapError(CloudError.init).get().subscription(in: self) }
    }

    /// Deletes a subscription; returns its ID (CloudKit's `deleteSubscription(withID:)`).
    ///
    /// - Throws: ``CloudError`` `unknownItem` when there is none.
    @discardableResult
    public func deleteSubscription(withID subscriptionID: Subscription.ID) async throws -> Subscription.ID {
        guard let result = try await modifySubscriptions(saving: [], deleting: [subscriptionID]).deleteResults[subscriptionID]
        else { throw CloudError(.internalError, "the server did not answer for subscription '\(subscriptionID)'") }
        try result.get()
        return subscriptionID
    }

    /// Saves and deletes subscriptions, each succeeding or failing on its own (CloudKit's
    /// `modifySubscriptions(saving:deleting:)`).
    ///
    /// - Throws: ``CloudError`` `invalidArguments` for a subscription the database does not take
    ///   (query subscriptions in the public and private databases, zone subscriptions in the
    ///   private database, database subscriptions in the private and shared databases).
    public func modifySubscriptions(
        saving subscriptionsToSave: [Subscription], deleting subscriptionIDsToDelete: [Subscription.ID]
    ) async throws -> ModifyResults<Subscription.ID, Subscription> {
        let operations =
            subscriptionsToSave.map { ModifySubscriptionsRequest.Operation(operationType: .create, subscription: wireSubscription($0)) }
            + subscriptionIDsToDelete.map {
                ModifySubscriptionsRequest.Operation(operationType: .delete, subscription: SubscriptionDictionary(subscriptionID: $0))
            }
        let ids = subscriptionsToSave.map(\.subscriptionID) + subscriptionIDsToDelete
        let limits = try await connection.limits()
        var results = ModifyResults<Subscription.ID, Subscription>(itemID: CloudError.ItemID.subscription)
        for chunk in Array(zip(ids, operations)).chunked(into: limits.maxOperationsPerRequest) {
            let answer = try await call(
                Endpoints.subscriptionsModify.erased, body: ModifySubscriptionsRequest(operations: chunk.map(\.1)),
                // Saving replaces; deleting twice fails the second time.
                idempotent: chunk.allSatisfy { $0.1.operationType == .create }, as: SubscriptionsResponse.self)
            for ((id, operation), item) in zip(chunk, answer.subscriptions) {
                let result = item.mapError(CloudError.init)
                switch operation.operationType {
                case .create, .update:
                    results.saveResults[id] = result.flatMap { wire in
                        Result { () throws(CloudError) in try subscription(wire) }
                    }
                case .delete:
                    results.deleteResults[id] = result.map { _ in () }
                }
            }
        }
        return results
    }
}

extension SubscriptionDictionary {
    fileprivate func subscription(in database: Database) throws(CloudError) -> Subscription {
        try database.subscription(self)
    }
}
