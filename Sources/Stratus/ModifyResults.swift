/// What a batch of saves and deletes did, item by item (the results of CloudKit's
/// `modifyRecords(saving:deleting:)`, `modifyRecordZones(saving:deleting:)` and
/// `modifySubscriptions(saving:deleting:)`).
public struct ModifyResults<ID: Hashable & Sendable, Saved: Sendable>: Sendable {
    /// For each item saved: the item as saved, or why it was not.
    public var saveResults: [ID: Result<Saved, CloudError>] = [:]
    /// For each item deleted: success, or why it was not deleted.
    public var deleteResults: [ID: Result<Void, CloudError>] = [:]
    /// How an item's ID is keyed in ``CloudError/partialErrorsByItemID``.
    let itemID: @Sendable (ID) -> CloudError.ItemID

    init(itemID: @escaping @Sendable (ID) -> CloudError.ItemID) {
        self.itemID = itemID
    }

    /// The failures as one ``CloudError/Code/partialFailure`` error whose
    /// ``CloudError/partialErrorsByItemID`` holds each failed item's error, the way CloudKit's
    /// operations report a batch in which some items failed; `nil` when every item succeeded.
    public var partialFailure: CloudError? {
        var errors: [CloudError.ItemID: CloudError] = [:]
        for (id, result) in saveResults {
            if case .failure(let error) = result { errors[itemID(id)] = error }
        }
        for (id, result) in deleteResults {
            if case .failure(let error) = result { errors[itemID(id)] = error }
        }
        guard !errors.isEmpty else { return nil }
        var failure = CloudError(
            .partialFailure, "\(errors.count) of \(saveResults.count + deleteResults.count) item(s) failed")
        failure.partialErrorsByItemID = errors
        return failure
    }
}
