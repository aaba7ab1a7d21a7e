/// A field value that points at another record (CloudKit's `CKRecord.Reference`).
public struct Reference: Hashable, Sendable {
    /// What happens to the record holding the reference when the target is deleted
    /// (CloudKit's `CKRecord.ReferenceAction`).
    public enum Action: Int, Hashable, Sendable {
        /// Nothing: the reference may dangle.
        case none = 0
        /// Deleting the target deletes the record that holds the reference.
        case deleteSelf = 1
        /// The target must exist when the record is saved, and cannot be deleted while the record
        /// points at it (a Stratus addition, `VALIDATE` on the wire).
        case validate = 2
    }

    /// The record pointed at.
    public let recordID: Record.ID
    /// The delete rule.
    public let action: Action

    /// A reference to the record with `recordID`.
    public init(recordID: Record.ID, action: Action) {
        self.recordID = recordID
        self.action = action
    }

    /// A reference to `record`.
    public init(record: Record, action: Action) {
        self.init(recordID: record.recordID, action: action)
    }
}
