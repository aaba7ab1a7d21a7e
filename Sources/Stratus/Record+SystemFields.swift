public import Foundation

extension Record {
    /// The record's system fields, without its field values (CloudKit's `encodeSystemFields(with:)`).
    ///
    /// Store this beside your own copy of the data. Rebuild the record with
    /// ``init(systemFieldsData:)``, set the fields you changed, and save: the change tag inside tells
    /// the server which version your edit is based on, so the save succeeds unless someone else
    /// changed the record in the meantime.
    public func encodeSystemFields() -> Data {
        let fields = SystemFields(
            version: SystemFields.currentVersion, recordName: recordID.recordName, zoneName: recordID.zoneID.zoneName,
            ownerName: recordID.zoneID.ownerName, recordType: recordType, recordChangeTag: recordChangeTag,
            creationDate: creationDate, creatorUserRecordName: creatorUserRecordID?.recordName,
            modificationDate: modificationDate, lastModifiedUserRecordName: lastModifiedUserRecordID?.recordName,
            lastModifiedDeviceID: lastModifiedDeviceID)
        // Encoding a struct of strings and dates cannot fail.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return (try? encoder.encode(fields)) ?? Data()
    }

    /// A record with the system fields that ``encodeSystemFields()`` wrote and no field values.
    ///
    /// - Throws: ``CloudError`` `invalidArguments` when `systemFieldsData` was not written by
    ///   ``encodeSystemFields()``.
    public init(systemFieldsData: Data) throws {
        let fields: SystemFields
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .millisecondsSince1970
            fields = try decoder.decode(SystemFields.self, from: systemFieldsData)
        } catch {
            throw CloudError(
                .invalidArguments, "systemFieldsData is not the output of Record.encodeSystemFields(): \(error)")
        }
        guard fields.version == SystemFields.currentVersion else {
            throw CloudError(
                .invalidArguments,
                "systemFieldsData has version \(fields.version); this SDK reads version \(SystemFields.currentVersion)")
        }
        self.init(
            recordType: fields.recordType,
            recordID: ID(
                recordName: fields.recordName, zoneID: RecordZone.ID(zoneName: fields.zoneName, ownerName: fields.ownerName)))
        recordChangeTag = fields.recordChangeTag
        creationDate = fields.creationDate
        creatorUserRecordID = fields.creatorUserRecordName.map { ID(recordName: $0) }
        modificationDate = fields.modificationDate
        lastModifiedUserRecordID = fields.lastModifiedUserRecordName.map { ID(recordName: $0) }
        lastModifiedDeviceID = fields.lastModifiedDeviceID
    }

    /// A record with the system fields that ``encodeSystemFields()`` wrote and `serverValues`, the
    /// field values the server held at that version, taken as unchanged: what is set afterwards
    /// (`nil` included, which removes a field) is what a save sends. For stores that keep the
    /// server's last values beside their own copy of the data, as a mirror of a local database does.
    ///
    /// - Throws: ``CloudError`` `invalidArguments` when `systemFieldsData` was not written by
    ///   ``encodeSystemFields()``.
    public init(systemFieldsData: Data, serverValues: [String: RecordFieldValue]) throws {
        try self.init(systemFieldsData: systemFieldsData)
        values = serverValues
    }
}

/// The stored form of a record's system fields.
private struct SystemFields: Codable {
    static let currentVersion = 1

    var version: Int
    var recordName: String
    var zoneName: String
    var ownerName: String
    var recordType: String
    var recordChangeTag: String?
    var creationDate: Date?
    var creatorUserRecordName: String?
    var modificationDate: Date?
    var lastModifiedUserRecordName: String?
    var lastModifiedDeviceID: String?
}
