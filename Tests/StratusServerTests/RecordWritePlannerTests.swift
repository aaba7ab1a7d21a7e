import StratusModel
import StratusStorage
import Testing

/// The record a write planned, when it succeeded.
private func saved(_ result: RecordWriteResult) -> StoredRecord? {
    try? result.get()
}

/// Why a write failed, when it did.
private func failure(_ result: RecordWriteResult) -> RecordWriteFailure? {
    if case .failure(let failure) = result { return failure }
    return nil
}

/// The seven operation types against a missing record, a live one and a tombstone, as every backend applies them.
@Suite struct RecordWritePlannerTests {
    static let alice = WriteContext(userRecordName: "_alice", deviceID: "phone", timestamp: 2_000)
    static let aliceStamp = RecordStamp(timestamp: 2_000, userRecordName: "_alice", deviceID: "phone")
    static let bobStamp = RecordStamp(timestamp: 1_000, userRecordName: "_bob")
    static let liveFields: [String: FieldValue] = ["title": .string("Hello"), "body": .string("World")]

    /// `note-1`, a Note created by Bob, with change tag `tag-1` (a tombstone when `deleted`).
    static func stored(deleted: Bool = false) -> StoredRecord {
        var writer = JSONWriter()
        RecordDictionary.writeFields(liveFields, to: &writer)
        return StoredRecord(
            name: "note-1", recordType: "Note", changeTag: "tag-1", fieldsJSON: deleted ? [] : writer.bytes,
            created: bobStamp, modified: bobStamp, deleted: deleted, sequence: 7)
    }

    static func plan(
        _ write: RecordWrite, current: StoredRecord?, context: WriteContext = RecordWritePlannerTests.alice,
        environment: ContainerEnvironment = .development
    ) -> RecordWriteResult {
        var schema = SchemaInForce(Schema(), environment: environment)
        return RecordWritePlanner.plan(write, current: current, context: context, schema: &schema)
    }

    @Test(arguments: [RecordOperationType.create, .forceUpdate, .forceReplace])
    func createsAMissingOrDeletedRecord(operation: RecordOperationType) throws {
        let fields: [String: FieldValue] = ["title": .string("New")]
        let write = RecordWrite(
            operationType: operation, recordName: "note-1", recordType: "Note", recordChangeTag: "stale", fields: fields)
        let currents: [StoredRecord?] = [nil, Self.stored(deleted: true)]
        for current in currents {
            let record = try #require(saved(Self.plan(write, current: current)))
            #expect(record.name == "note-1" && record.recordType == "Note" && !record.deleted)
            #expect(record.changeTag == "" && record.sequence == 0, "the backend assigns both")
            #expect(record.created == Self.aliceStamp && record.modified == Self.aliceStamp)
            #expect(try record.decodeFields() == fields)
        }
        let untyped = RecordWrite(operationType: operation, recordName: "note-1", fields: fields)
        let refused = failure(Self.plan(untyped, current: nil))
        #expect(refused?.code == .badRequest)
        #expect(refused?.reason.contains("recordType is required") == true)
    }

    @Test(arguments: [RecordOperationType.update, .replace, .delete, .forceDelete])
    func needsALiveRecord(operation: RecordOperationType) {
        let write = RecordWrite(operationType: operation, recordName: "note-1", recordType: "Note", recordChangeTag: "tag-1")
        let currents: [StoredRecord?] = [nil, Self.stored(deleted: true)]
        for current in currents {
            let refused = failure(Self.plan(write, current: current))
            #expect(refused?.code == .notFound)
            #expect(refused?.reason == "record 'note-1' does not exist")
            #expect(refused?.serverRecord == nil)
        }
    }

    @Test func createOverALiveRecordIsRefusedWithTheServerRecord() {
        let live = Self.stored()
        let write = RecordWrite(operationType: .create, recordName: "note-1", recordType: "Note", fields: ["title": .string("x")])
        let refused = failure(Self.plan(write, current: live))
        #expect(refused?.code == .exists)
        #expect(refused?.serverRecord == live)
    }

    @Test func updatesMergeFieldsAndForceUpdateIgnoresTheTag() throws {
        let attempts: [(RecordOperationType, String?)] = [(.update, "tag-1"), (.forceUpdate, "stale"), (.forceUpdate, nil)]
        for (operation, tag) in attempts {
            let write = RecordWrite(
                operationType: operation, recordName: "note-1", recordChangeTag: tag,
                fields: ["title": .string("Hi"), "done": .int64(1)], removedFieldNames: ["body"])
            let record = try #require(saved(Self.plan(write, current: Self.stored())))
            let expected: [String: FieldValue] = ["title": .string("Hi"), "done": .int64(1)]
            #expect(try record.decodeFields() == expected)
            #expect(record.recordType == "Note", "the type is kept when the write does not name it")
            #expect(record.created == Self.bobStamp && record.modified == Self.aliceStamp)
            #expect(record.changeTag == "" && !record.deleted)
        }
        let keep = RecordWrite(operationType: .update, recordName: "note-1", recordChangeTag: "tag-1", fields: ["title": .string("Hi")])
        let kept = try #require(saved(Self.plan(keep, current: Self.stored())))
        let merged: [String: FieldValue] = ["title": .string("Hi"), "body": .string("World")]
        #expect(try kept.decodeFields() == merged, "fields the write does not name are kept")
    }

    @Test func replacesSwapEveryFieldAndForceReplaceIgnoresTheTag() throws {
        let attempts: [(RecordOperationType, String?)] = [(.replace, "tag-1"), (.forceReplace, "stale")]
        for (operation, tag) in attempts {
            let write = RecordWrite(
                operationType: operation, recordName: "note-1", recordType: "Note", recordChangeTag: tag,
                fields: ["title": .string("Only")])
            let record = try #require(saved(Self.plan(write, current: Self.stored())))
            let only: [String: FieldValue] = ["title": .string("Only")]
            #expect(try record.decodeFields() == only)
            #expect(record.created == Self.bobStamp && record.modified == Self.aliceStamp)
        }
    }

    @Test func deletesLeaveATombstone() throws {
        let live = Self.stored()
        let attempts: [(RecordOperationType, String?)] = [(.delete, "tag-1"), (.forceDelete, "stale"), (.forceDelete, nil)]
        for (operation, tag) in attempts {
            let write = RecordWrite(operationType: operation, recordName: "note-1", recordChangeTag: tag)
            let tombstone = try #require(saved(Self.plan(write, current: live)))
            #expect(tombstone.deleted && tombstone.fieldsJSON.isEmpty)
            #expect(tombstone.name == "note-1" && tombstone.recordType == "Note")
            #expect(tombstone.changeTag == "" && tombstone.sequence == 0)
            #expect(tombstone.created == Self.bobStamp && tombstone.modified == Self.aliceStamp)
            #expect(tombstone == RecordWritePlanner.tombstone(of: live, context: Self.alice))
        }
    }

    @Test(arguments: [RecordOperationType.update, .replace, .delete])
    func aStaleChangeTagIsAConflictCarryingTheServerRecord(operation: RecordOperationType) {
        let live = Self.stored()
        for tag in ["tag-0", nil] as [String?] {
            let write = RecordWrite(
                operationType: operation, recordName: "note-1", recordType: "Note", recordChangeTag: tag,
                fields: ["title": .string("Mine")])
            let refused = failure(Self.plan(write, current: live))
            #expect(refused?.code == .conflict)
            #expect(refused?.serverRecord == live)
            #expect(refused?.reason.contains("recordChangeTag '\(tag ?? "")' is not the current 'tag-1'") == true)
        }
    }

    @Test(arguments: [RecordOperationType.update, .forceUpdate, .replace, .forceReplace, .delete, .forceDelete])
    func aWriteCannotChangeTheRecordType(operation: RecordOperationType) {
        let write = RecordWrite(operationType: operation, recordName: "note-1", recordType: "Task", recordChangeTag: "tag-1")
        let refused = failure(Self.plan(write, current: Self.stored()))
        #expect(refused?.code == .badRequest)
        #expect(refused?.reason == "record 'note-1' has recordType 'Note'; a write cannot change it to 'Task'")
    }

    @Test func developmentExtendsTheSchemaAndProductionEnforcesIt() {
        var schema = SchemaInForce(Schema(), environment: .development)
        let write = RecordWrite(operationType: .create, recordName: "n", recordType: "Note", fields: ["title": .string("x")])
        #expect(saved(RecordWritePlanner.plan(write, current: nil, context: Self.alice, schema: &schema)) != nil)
        #expect(schema.changed)
        #expect(schema.schema.recordTypes["Note"]?.fields["title"]?.type == .string)
        let wrongType = RecordWrite(operationType: .create, recordName: "m", recordType: "Note", fields: ["title": .int64(3)])
        let mismatch = failure(RecordWritePlanner.plan(wrongType, current: nil, context: Self.alice, schema: &schema))
        #expect(mismatch?.code == .badRequest)
        #expect(mismatch?.reason.contains("field 'title' of record type 'Note'") == true)
        let production = failure(Self.plan(write, current: nil, environment: .production))
        #expect(production?.code == .badRequest)
        #expect(production?.reason.contains("record type 'Note' is not in the production schema") == true)
    }

    @Test func limitsAndGrantsAreEnforced() {
        let tight = WriteContext(userRecordName: "_alice", timestamp: 2_000, limits: Limits(maxFieldsPerRecord: 1))
        let twoFields = RecordWrite(operationType: .create, recordName: "n", recordType: "Note", fields: Self.liveFields)
        #expect(failure(Self.plan(twoFields, current: nil, context: tight))?.reason == "record 'n' has 2 fields; the limit is 1")
        let write = RecordWrite(operationType: .forceUpdate, recordName: "note-1", fields: ["title": .string("Mine")])
        let strict = WriteContext(userRecordName: "_alice", timestamp: 2_000, enforcesGrants: true)
        let denied = failure(Self.plan(write, current: Self.stored(), context: strict))
        #expect(denied?.code == .accessDenied)
        #expect(denied?.reason.contains("only its creator may change or delete it") == true)
        let creator = WriteContext(userRecordName: "_bob", timestamp: 2_000, enforcesGrants: true)
        #expect(saved(Self.plan(write, current: Self.stored(), context: creator)) != nil)
    }

    @Test func failAtomicallyTurnsEverySuccessIntoAnAtomicError() throws {
        let create = RecordWrite(operationType: .create, recordName: "a", recordType: "Note", fields: ["title": .string("x")])
        let ok = try #require(saved(Self.plan(create, current: nil)))
        let conflict = RecordWriteFailure(.conflict, "changed", serverRecord: Self.stored())
        let results: [RecordWriteResult] = [.success(ok), .failure(conflict), .success(ok)]
        let failed = RecordWritePlanner.failAtomically(results, names: ["a", "b", "c"])
        #expect(failed.count == 3)
        #expect(failure(failed[1]) == conflict, "the failed item keeps its own error")
        for index in [0, 2] {
            #expect(failure(failed[index])?.code == .atomicError)
            #expect(failure(failed[index])?.reason == "not saved: the atomic batch failed at record 'b'")
        }
        let allSaved: [RecordWriteResult] = [.success(ok), .success(ok)]
        #expect(RecordWritePlanner.failAtomically(allSaved, names: ["a", "b"]) == allSaved)
    }
}
