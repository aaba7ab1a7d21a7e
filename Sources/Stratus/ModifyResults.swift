/// What a batch of saves and deletes did, item by item (the results of CloudKit's
/// `modifyRecords(saving:deleting:)` and `modifyRecordZones(saving:deleting:)`).
public struct ModifyResults<ID: BatchItemID, Saved: Sendable>: Sendable {
    /// For each item saved: the item as saved, or why it was not.
    public var saveResults: [ID: Result<Saved, CloudError>]
    /// For each item deleted: success, or why it was not deleted.
    public var deleteResults: [ID: Result<Void, CloudError>]

    /// The failures as one ``CloudError/Code/partialFailure`` error whose
    /// ``CloudError/partialErrorsByItemID`` holds each failed item's error, the way CloudKit's
    /// operations report a batch in which some items failed; `nil` when every item succeeded.
    public var partialFailure: CloudError? {
        var errors: [CloudError.ItemID: CloudError] = [:]
        for (id, result) in saveResults {
            if case .failure(let error) = result { errors[id.itemID] = error }
        }
        for (id, result) in deleteResults {
            if case .failure(let error) = result { errors[id.itemID] = error }
        }
        guard !errors.isEmpty else { return nil }
        var failure = CloudError(
            .partialFailure, "\(errors.count) of \(saveResults.count + deleteResults.count) item(s) failed")
        failure.partialErrorsByItemID = errors
        return failure
    }
}

/// The ID of an item a batch call saves or deletes: a record's or a zone's.
public protocol BatchItemID: Hashable, Sendable {
    /// The ID as a key of ``CloudError/partialErrorsByItemID``.
    var itemID: CloudError.ItemID { get }
}

extension Record.ID: BatchItemID {
    public var itemID: CloudError.ItemID { .record(self) }
}

extension RecordZone.ID: BatchItemID {
    public var itemID: CloudError.ItemID { .zone(self) }
}
