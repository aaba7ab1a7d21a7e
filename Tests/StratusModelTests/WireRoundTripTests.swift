import Foundation
import StratusModel
import Testing

/// A value's JSON text.
private func jsonText(_ value: some JSONWritable) -> String { String(decoding: value.jsonBytes, as: UTF8.self) }

/// Decodes JSON text.
private func decoded<T: JSONDecodable>(_ type: T.Type, _ json: String) throws -> T { try T(jsonBytes: Array(json.utf8)) }

/// The error dictionary that took an item's place, or `nil` for a success.
private func failure<S>(_ result: Result<S, ErrorDictionary>) -> ErrorDictionary? {
    if case .failure(let error) = result { return error }
    return nil
}

/// One round trip (value → JSON bytes → value → JSON bytes), type-erased so that values of different types can
/// share a parameterized test.
struct RoundTrip: Sendable, CustomTestStringConvertible {
    let testDescription: String
    /// `equal` is `nil` for types that are not `Equatable`: their round trip is judged by the bytes alone.
    let run: @Sendable () throws -> (equal: Bool?, written: String, rewritten: String)

    static func of<T: JSONDecodable & JSONWritable & Equatable & Sendable>(_ value: T, _ note: String = "") -> RoundTrip {
        RoundTrip(testDescription: note.isEmpty ? "\(T.self)" : "\(T.self) (\(note))") {
            let decodedValue = try T(jsonBytes: value.jsonBytes)
            let equal: Bool? = decodedValue == value
            return (equal: equal, written: jsonText(value), rewritten: jsonText(decodedValue))
        }
    }

    static func bytes<T: JSONDecodable & JSONWritable & Sendable>(_ value: T, _ note: String = "") -> RoundTrip {
        RoundTrip(testDescription: note.isEmpty ? "\(T.self)" : "\(T.self) (\(note))") {
            let decodedValue = try T(jsonBytes: value.jsonBytes)
            return (equal: nil, written: jsonText(value), rewritten: jsonText(decodedValue))
        }
    }

    /// Runs the round trip: the decoded value equals the original and writes the same bytes.
    func check() throws {
        let result = try run()
        if let equal = result.equal { #expect(equal, "decoded value differs from the one written as \(result.written)") }
        #expect(result.rewritten == result.written)
    }
}

/// Every wire type of StratusModel through value → JSON → value. Types with both a writer and a decoder come back
/// equal and re-write the same bytes; decode-only types read samples shaped like docs/protocol.md's. (Schema JSON is
/// covered by SchemaLanguageTests, single field values and inference by WireModelTests.)
@Suite("wire round trips")
struct WireRoundTripTests {
    // MARK: Fixtures (names and values of docs/protocol.md)

    static let owner = "_2b7e1516a8f04c1d9e3b5a6c7d8e9f01"
    static let notes = ZoneID(zoneName: "Notes", ownerRecordName: owner)
    static let token = "AQEAAAAAAAAAAgAAAAAAAAAD3pcpXCJgmOqaFTutO3x/sA=="
    static let checksum = "3927cdee98950de3408a456299b59e4218efbfdce836f8940cff81472a20a05d"
    static let stamp = RecordStamp(timestamp: 1_763_800_000_000, userRecordName: owner, deviceID: "iphone-7F3A")
    static let note1 = RecordDictionary(
        recordName: "note-1", recordType: "Note", recordChangeTag: "2-1",
        fields: ["pinned": .int64(1), "title": .string("Groceries")], created: stamp, modified: stamp, zoneID: notes)
    static let tombstone = RecordDictionary(
        recordName: "note-2", recordType: "Note", recordChangeTag: "2-3", created: stamp,
        modified: RecordStamp(timestamp: 1_763_800_060_000, userRecordName: owner, deviceID: "iphone-7F3A"),
        deleted: true, zoneID: notes)
    static let fullLocation = Location(
        latitude: 37.33182, longitude: -122.03118, horizontalAccuracy: 5, verticalAccuracy: 3.5, altitude: -12.25,
        speed: 1.5, course: 359.9, timestamp: 1_763_800_000_000)
    static let fullAsset = AssetValue(
        fileChecksum: checksum, size: 48_213, referenceChecksum: "rc", wrappingKey: "wk", receipt: "eyJraW5k",
        downloadURL: "http://127.0.0.1:8080/assets/download/\(checksum)?zoneName=Notes&recordName=note-1")
    static let fullInfo: NotificationInfo = {
        var info = NotificationInfo(
            alertBody: "Urgent", title: "Title", subtitle: "Sub", soundName: "ping.aiff", desiredKeys: ["title"],
            shouldBadge: true, shouldSendContentAvailable: true, category: "NOTE")
        info.alertLocalizationKey = "ALERT"
        info.alertLocalizationArgs = ["a", "b"]
        info.titleLocalizationKey = "TITLE"
        info.titleLocalizationArgs = ["c"]
        info.subtitleLocalizationKey = "SUB"
        info.subtitleLocalizationArgs = []
        info.alertActionLocalizationKey = "OPEN"
        info.alertLaunchImage = "launch.png"
        info.shouldSendMutableContent = false
        info.collapseIDKey = "note-1"
        return info
    }()
    static let queryNotification = PushNotificationDictionary(
        notificationID: "5F0C2F9E-2C69-4E4E-8B8A-3C6D0E1F2A3B", notificationType: .query, subscriptionID: "urgent",
        containerIdentifier: "iCloud.com.example.notes", databaseScope: .private, zoneID: notes, recordName: "note-1",
        queryNotificationReason: .recordCreated, recordFields: ["title": .string("Pay rent")],
        notificationInfo: NotificationInfo(alertBody: "Urgent"))
    static let zoneNotification = PushNotificationDictionary(
        notificationID: "n2", notificationType: .recordZone, subscriptionID: "notes",
        containerIdentifier: "iCloud.com.example.notes", databaseScope: .private, zoneID: notes)

    /// A filter with a value that suits `comparator`.
    static func filter(_ comparator: QueryComparator) -> QueryFilter {
        switch comparator {
        case .near:
            return QueryFilter(comparator: .near, fieldName: "place", fieldValue: .location(fullLocation), distance: 500)
        case .in, .notIn, .listContainsAny, .notListContainsAny, .listContainsAll, .notListContainsAll:
            return QueryFilter(
                comparator: comparator, fieldName: "tags", fieldValue: .list(elementType: .string, [.string("a"), .string("b")]))
        case .containsAllTokens, .containsAnyTokens:
            return QueryFilter(
                comparator: comparator, fieldName: QueryFilter.allSearchableFields, fieldValue: .string("pay rent"))
        default:
            return QueryFilter(comparator: comparator, fieldName: "priority", fieldValue: .int64(5))
        }
    }

    static let query = Query(
        recordType: "Note", filterBy: [filter(.greaterThanOrEquals), filter(.near)],
        sortBy: [QuerySort(fieldName: "priority", ascending: false),
                 QuerySort(fieldName: "place", relativeLocation: fullLocation)])

    static let allBytes = Data(UInt8.min...UInt8.max)
    static let referenceOfEveryAction: [FieldValue] = ReferenceAction.allCases.map { action in
        FieldValue.reference(Reference(recordName: action.rawValue, action: action))
    }

    /// One value of every FieldType, with edge values.
    static let everyType: [String: FieldValue] = [
        "string": .string("Grocer\"ies\" ✓\n\t\\"), "int64": .int64(Int64.min), "double": .double(-1.5e-7),
        "timestamp": .timestamp(-86_400_000), "bytes": .bytes(allBytes),
        "reference": .reference(Reference(recordName: "folder", zoneID: notes, action: .deleteSelf)),
        "asset": .asset(fullAsset), "location": .location(fullLocation),
        "strings": .list(elementType: .string, [.string(""), .string("b")]),
        "int64s": .list(elementType: .int64, [.int64(0), .int64(Int64.max)]),
        "doubles": .list(elementType: .double, [.double(0.1), .double(1e300), .double(-2.0)]),
        "timestamps": .list(elementType: .timestamp, [.timestamp(0), .timestamp(1_763_800_000_000)]),
        "bytesList": .list(elementType: .bytes, [.bytes(Data()), .bytes(Data([0xFF]))]),
        "references": .list(elementType: .reference, referenceOfEveryAction),
        "assets": .list(elementType: .asset, [.asset(AssetValue(fileChecksum: "c", size: 1)), .asset(fullAsset)]),
        "locations": .list(
            elementType: .location, [.location(Location(latitude: 90, longitude: -180)), .location(fullLocation)]),
        "unknown": .list(elementType: nil, []),
    ]

    // MARK: Round trips

    static let valueSamples: [RoundTrip] = [
        .of(ZoneID.defaultZone, "default zone"), .of(notes), .of(ZoneID(zoneName: "Archive"), "without owner"),
        .of(ZoneDictionary(zoneID: notes, syncToken: token, atomic: true), "live"),
        .of(ZoneDictionary(zoneID: .defaultZone, atomic: false), "default"),
        .of(ZoneDictionary(zoneID: ZoneID(zoneName: "Old", ownerRecordName: owner), deleted: true), "deleted"),
        .of(stamp), .of(RecordStamp(timestamp: 0, userRecordName: owner), "without device"),
        .of(Reference(recordName: "r", zoneID: .defaultZone, action: .validate)), .of(Reference(recordName: "r"), "NONE"),
        .of(fullAsset), .of(AssetValue(), "empty"), .of(fullLocation), .of(Location(latitude: -90, longitude: 180), "minimal"),
        .of(note1), .of(tombstone, "tombstone"), .of(RecordDictionary(recordName: "r", deleted: false), "no fields"),
        .of(RecordDictionary(
            recordName: "note-1", recordChangeTag: "2-1", fields: ["title": .string("Shopping")],
            removedFieldNames: ["pinned", "due"]), "with removals"),
        .of(ErrorDictionary(
            serverErrorCode: .conflict, reason: "record 'note-1' has changed", recordName: "note-1", zoneID: notes,
            subscriptionID: "s", retryAfter: 30, uuid: "5A4B3C2D", redirectURL: "https://example.com/signin",
            serverRecord: note1), "every key"),
        .of(ErrorDictionary(serverErrorCode: .internalError, reason: "", uuid: ""), "empty strings"),
        .of(Limits()), .of(Limits(maxOperationsPerRequest: 10, maxAssetSizeBytes: 1, maxRequestBodyBytes: 1_048_576), "custom"),
        .of(Capabilities(limits: Limits(), tombstoneHorizonSeconds: 2_592_000, sessionLifetimeSeconds: 1_209_600)),
        .of(Capabilities(protocolVersion: 2, limits: Limits(), tombstoneHorizonSeconds: 1, sessionLifetimeSeconds: 2,
                         databases: [.private]), "private only"),
        .of(WebAuthSession(ckWebAuthToken: "tok/+=", userRecordName: owner, expires: 1_765_009_600_000)),
        .of(CurrentUserResponse(userRecordName: owner)),
        .of(DiscoverUsersResponse(users: [
            UserIdentityDictionary(
                userRecordName: owner, lookupInfo: UserLookupInfo(emailAddress: "bob@example.com"),
                nameComponents: NameComponents(givenName: "Bob", familyName: "Builder")),
            UserIdentityDictionary(userRecordName: owner),
        ])),
        .of(LookupUsersResponse(users: [
            UserDictionary(userRecordName: owner, firstName: "Bob", lastName: nil, emailAddress: "bob@example.com"),
        ])),
        .of(Discoverability(discoverable: true, nameComponents: NameComponents(givenName: "Bob"))),
        .of(Discoverability(discoverable: false)),
        .of(UploadAssetsResponse.Token(recordName: "note-1", fieldName: "photo", url: "http://h/assets/1/upload?ticket=eyJ%3D")),
        .bytes(AssetUploadResponse(singleFile: AssetValue(fileChecksum: checksum, size: 48_213, receipt: "eyJraW5k"))),
    ]

    static let operationSamples: [RoundTrip] = RecordOperationType.allCases.map { type in
        let desiredKeys: [String]? = type.isDelete ? nil : ["title"]
        return RoundTrip.of(RecordOperation(operationType: type, record: note1, desiredKeys: desiredKeys), type.rawValue)
    }

    static let requestSamples: [RoundTrip] = [
        .of(DiscoverUsersRequest(lookupInfos: [
            UserLookupInfo(emailAddress: "bob@example.com"), UserLookupInfo(userRecordName: owner),
            UserLookupInfo(phoneNumber: "+15550100"),
        ])),
        .of(LookupUsersRequest(users: [UserLookupInfo(emailAddress: "bob@example.com")])),
        .of(ModifyRecordsRequest(
            operations: [RecordOperation(operationType: .create, record: note1),
                         RecordOperation(operationType: .forceDelete, record: RecordDictionary(recordName: "note-2"))],
            zoneID: ZoneID(zoneName: "Notes"), atomic: false, desiredKeys: [], numbersAsStrings: true)),
        .of(ModifyRecordsRequest(operations: []), "empty"),
        .of(LookupRecordsRequest.Item(recordName: "note-1", desiredKeys: ["title"])),
        .of(LookupRecordsRequest(
            records: [LookupRecordsRequest.Item(recordName: "note-1"),
                      LookupRecordsRequest.Item(recordName: "gone", desiredKeys: [])],
            zoneID: notes, desiredKeys: ["title"], numbersAsStrings: false)),
        .of(RecordChangesRequest(
            zoneID: notes, syncToken: token, resultsLimit: 100, desiredKeys: ["title"], recordTypes: ["Note"],
            numbersAsStrings: true)),
        .of(RecordChangesRequest(zoneID: nil), "empty"),
        .of(DatabaseChangesRequest(syncToken: token, resultsLimit: 50)), .of(DatabaseChangesRequest(), "empty"),
        .of(LookupZonesRequest(zones: [ZoneID(zoneName: "Notes"), .defaultZone])),
        .of(ModifyZonesRequest.Operation(operationType: .delete, zoneID: notes)),
        .of(ModifyZonesRequest(operations: [
            ModifyZonesRequest.Operation(operationType: .create, zoneID: ZoneID(zoneName: "Notes")),
            ModifyZonesRequest.Operation(operationType: .delete, zoneID: ZoneID(zoneName: "Old")),
        ])),
        .of(UploadAssetsRequest.Token(recordName: "note-1", recordType: "Note", fieldName: "photo")),
        .of(UploadAssetsRequest(zoneID: ZoneID(zoneName: "Notes"), tokens: [
            UploadAssetsRequest.Token(recordName: "note-1", recordType: "Note", fieldName: "photo"),
            UploadAssetsRequest.Token(fieldName: "scan"),
        ])),
        .of(PasswordCredentials(username: "alice", password: "p@ss \"word\"\\")),
        .of(QueryRecordsRequest(
            zoneID: notes, resultsLimit: 1, query: query, continuationMarker: "AXsi", desiredKeys: ["title"], zoneWide: false,
            numbersAsStrings: true)),
        .of(QueryRecordsRequest(query: Query(recordType: "Note")), "minimal"),
        .of(QueryRecordsRequest(query: Query(recordType: "Note"), zoneWide: true), "zone-wide"),
    ]

    static let filterSamples: [RoundTrip] = QueryComparator.allCases.map { RoundTrip.of(filter($0), $0.rawValue) }

    static let querySamples: [RoundTrip] = [
        .of(QuerySort(fieldName: "title"), "ascending by default"), .of(QuerySort(fieldName: "price", ascending: false)),
        .of(QuerySort(fieldName: "place", relativeLocation: fullLocation), "relative location"),
        .of(Query(recordType: "Note"), "no filters"), .of(query),
    ]

    static let subscriptionOperations: [ModifySubscriptionsRequest.Operation] = SubscriptionOperationType.allCases.map {
        let subscription = SubscriptionDictionary(subscriptionID: $0.rawValue, subscriptionType: .zone, zoneID: notes)
        return ModifySubscriptionsRequest.Operation(operationType: $0, subscription: subscription)
    }

    static let subscriptionSamples: [RoundTrip] = [
        .of(fullInfo, "every key"), .of(NotificationInfo(), "empty"),
        .of(SubscriptionDictionary(
            subscriptionID: "urgent", subscriptionType: .query, query: Query(recordType: "Note", filterBy: [filter(.equals)]),
            firesOn: [.create, .delete], firesOnce: true, zoneID: notes, zoneWide: false, notificationInfo: fullInfo), "query"),
        .of(SubscriptionDictionary(
            subscriptionID: "notes", subscriptionType: .zone, zoneID: notes, recordType: "Note",
            notificationInfo: NotificationInfo(shouldSendContentAvailable: true)), "zone"),
        .of(SubscriptionDictionary(subscriptionType: .database), "database"),
        .of(SubscriptionDictionary(subscriptionID: "old"), "delete"),
        .of(subscriptionOperations[0]), .of(ModifySubscriptionsRequest(operations: subscriptionOperations)),
        .of(LookupSubscriptionsRequest(subscriptionIDs: ["urgent", "notes"])),
        .of(LookupSubscriptionsRequest(subscriptionIDs: []), "empty"),
    ]

    static let pushSamples: [RoundTrip] = [
        .of(CreatePushTokenRequest(), "empty"), .of(CreatePushTokenRequest(apnsEnvironment: .production)),
        .of(PushTokenResponse(
            apnsEnvironment: .development, apnsToken: "Yt0q8w", webcourierURL: "http://127.0.0.1:8080/push/1/Yt0q8w")),
        .of(RegisterPushTokenRequest(apnsToken: "Yt0q8w")),
        .of(RegisterPushTokenRequest(apnsEnvironment: .development, apnsToken: "Yt0q8w"), "with environment"),
        .of(queryNotification, "query"), .of(zoneNotification, "zone"),
        .of(PushNotificationDictionary(
            notificationID: "n3", notificationType: .database, subscriptionID: "db", containerIdentifier: "iCloud.x",
            databaseScope: .shared, recordFields: [:], notificationInfo: fullInfo), "database"),
        .of(PushMessage.connected(missedNotifications: false)),
        .of(PushMessage.connected(missedNotifications: true), "connected, missed"),
        .of(PushMessage.notification(queryNotification), "notification"), .of(PushMessage.missedNotifications, "missed"),
        .of(PushPollResponse(notifications: [queryNotification, zoneNotification], missedNotifications: true)),
        .of(PushPollResponse(notifications: [], missedNotifications: false), "timed out"),
    ]

    @Test("zones, records, values, errors and account answers", arguments: WireRoundTripTests.valueSamples)
    func values(_ sample: RoundTrip) throws { try sample.check() }

    @Test("request bodies", arguments: WireRoundTripTests.operationSamples + WireRoundTripTests.requestSamples)
    func requests(_ sample: RoundTrip) throws { try sample.check() }

    @Test("queries, filters of every comparator and sort descriptors",
          arguments: WireRoundTripTests.filterSamples + WireRoundTripTests.querySamples)
    func queries(_ sample: RoundTrip) throws { try sample.check() }

    @Test("subscriptions", arguments: WireRoundTripTests.subscriptionSamples)
    func subscriptions(_ sample: RoundTrip) throws { try sample.check() }

    @Test("push tokens, notifications and messages", arguments: WireRoundTripTests.pushSamples)
    func push(_ sample: RoundTrip) throws { try sample.check() }

    @Test("a record holding every field type round-trips, with and without numbersAsStrings")
    func everyFieldType() throws {
        #expect(Set(Self.everyType.values.map(\.type)) == Set(FieldType.allCases), "a FieldType has no sample")
        let record = RecordDictionary(recordName: "all", recordType: "Everything", fields: Self.everyType, zoneID: Self.notes)
        #expect(try RecordDictionary(jsonBytes: record.jsonBytes) == record)
        var writer = JSONWriter()
        record.write(to: &writer, numbersAsStrings: true)
        #expect(try RecordDictionary(jsonBytes: writer.bytes) == record, "requests read numbers written as strings")
        for (name, value) in Self.everyType {
            #expect(try FieldValue(jsonBytes: value.jsonBytes) == value, "\(name)")
            #expect(try FieldSlot(jsonBytes: value.jsonBytes).value == value, "\(name)")
        }
        #expect(try decoded(FieldSlot.self, #"{"value": null}"#).value == nil)
        #expect(try decoded(FieldSlot.self, "{}").value == nil, "a field without value removes it too")
    }

    @Test("an error dictionary of every code round-trips", arguments: ServerErrorCode.allCases)
    func errorCodes(_ code: ServerErrorCode) throws {
        try RoundTrip.of(ErrorDictionary(serverErrorCode: code, reason: "because", recordName: "r", uuid: "u")).check()
    }

    @Test("every case of every wire enum decodes from its raw value")
    func wireEnums() throws {
        func check<E: WireEnum>(_: E.Type) throws {
            for value in E.allCases {
                #expect(try E(jsonBytes: value.rawValue.jsonBytes).rawValue == value.rawValue, "\(E.self).\(value)")
            }
        }
        let types: [any WireEnum.Type] = [
            RecordOperationType.self, ZoneOperationType.self, ReferenceAction.self, ServerErrorCode.self, DatabaseScope.self,
            ContainerEnvironment.self, SchemaPermission.self, SubscriptionEvent.self, SubscriptionOperationType.self,
            NotificationType.self, QueryNotificationReason.self, QueryComparator.self,
        ]
        for type in types { try check(type) }
    }

    @Test("subscription types accept the Web Services and CloudKit JS names", arguments: [
        ("query", SubscriptionType.query), ("QUERY", SubscriptionType.query), ("zone", SubscriptionType.zone),
        ("RECORD_ZONE", SubscriptionType.zone), ("ZONE", SubscriptionType.zone), ("database", SubscriptionType.database),
        ("DATABASE", SubscriptionType.database),
    ])
    func subscriptionTypes(_ name: String, _ type: SubscriptionType) throws {
        #expect(try SubscriptionType(jsonBytes: name.jsonBytes) == type)
    }

    // MARK: Decode-only types, from docs/protocol.md

    static let stampJSON = #"{"timestamp": 1763800000000, "userRecordName": "\#(owner)", "deviceID": "iphone-7F3A"}"#
    static let notesJSON = #"{"zoneName": "Notes", "ownerRecordName": "\#(owner)", "zoneType": "REGULAR_CUSTOM_ZONE"}"#
    static let note1JSON = #"""
        {"recordName": "note-1", "recordType": "Note",
         "fields": {"pinned": {"value": 1, "type": "INT64"}, "title": {"value": "Groceries", "type": "STRING"}},
         "recordChangeTag": "2-1", "created": \#(stampJSON), "modified": \#(stampJSON), "zoneID": \#(notesJSON)}
        """#
    static let tombstoneJSON = #"""
        {"recordName": "note-2", "recordType": "Note", "recordChangeTag": "2-3", "created": \#(stampJSON),
         "modified": {"timestamp": 1763800060000, "userRecordName": "\#(owner)", "deviceID": "iphone-7F3A"},
         "deleted": true, "zoneID": \#(notesJSON)}
        """#

    @Test("record answers and change feed pages decode records, tombstones and per-item errors in order")
    func recordsResponse() throws {
        let response = try decoded(RecordsResponse.self, #"""
            {"records": [\#(Self.note1JSON),
              {"recordName": "note-2", "reason": "record 'note-2' does not exist", "serverErrorCode": "NOT_FOUND",
               "uuid": "3F2A9C1E-7B4D-4E8A-9C21-5D6E7F8A9B0C"}],
             "continuationMarker": "AXsidCI6Ik5vdGUi"}
            """#)
        #expect(response.records.count == 2)
        #expect(try response.records[0].get() == Self.note1)
        #expect(failure(response.records[1]) == ErrorDictionary(
            serverErrorCode: .notFound, reason: "record 'note-2' does not exist", recordName: "note-2",
            uuid: "3F2A9C1E-7B4D-4E8A-9C21-5D6E7F8A9B0C"))
        #expect(response.continuationMarker == "AXsidCI6Ik5vdGUi")
        #expect(try decoded(RecordsResponse.self, #"{"records": []}"#).continuationMarker == nil)

        let page = try decoded(RecordChangesResponse.self, #"""
            {"zoneID": \#(Self.notesJSON), "records": [\#(Self.note1JSON), \#(Self.tombstoneJSON)],
             "syncToken": "AQEAAAAAAAAAAgAAAAAAAAAF2dAW/J97GBXC6vAJhftADw==", "moreComing": false}
            """#)
        #expect(page.zoneID == Self.notes && page.records == [Self.note1, Self.tombstone])
        #expect(page.syncToken == "AQEAAAAAAAAAAgAAAAAAAAAF2dAW/J97GBXC6vAJhftADw==" && !page.moreComing)
    }

    @Test("zone answers and the database change feed decode")
    func zoneResponses() throws {
        let zones = try decoded(ZonesResponse.self, #"""
            {"zones": [{"zoneID": \#(Self.notesJSON), "syncToken": "\#(Self.token)", "atomic": true},
              {"zoneID": {"zoneName": "Archive", "ownerRecordName": "\#(Self.owner)", "zoneType": "REGULAR_CUSTOM_ZONE"},
               "reason": "zone 'Archive' does not exist", "serverErrorCode": "ZONE_NOT_FOUND", "uuid": "0D9C"}]}
            """#)
        #expect(zones.zones.count == 2)
        #expect(try zones.zones[0].get() == ZoneDictionary(zoneID: Self.notes, syncToken: Self.token, atomic: true))
        #expect(failure(zones.zones[1])?.zoneID == ZoneID(zoneName: "Archive", ownerRecordName: Self.owner))
        #expect(failure(zones.zones[1])?.serverErrorCode == ServerErrorCode.zoneNotFound)

        let feed = try decoded(DatabaseChangesResponse.self, #"""
            {"zones": [{"zoneID": \#(Self.notesJSON), "syncToken": "\#(Self.token)", "atomic": true},
                       {"zoneID": \#(Self.notesJSON), "deleted": true}],
             "syncToken": "AQIAAAAAAAAAAQAAAAAAAAAGwDltoMpNadCsuj8Czp/3Eg==", "moreComing": true}
            """#)
        #expect(feed.zones == [ZoneDictionary(zoneID: Self.notes, syncToken: Self.token, atomic: true),
                               ZoneDictionary(zoneID: Self.notes, deleted: true)])
        #expect(feed.syncToken == "AQIAAAAAAAAAAQAAAAAAAAAGwDltoMpNadCsuj8Czp/3Eg==" && feed.moreComing)
        #expect(try decoded(DatabaseChangesResponse.self, #"{"zones": [], "syncToken": "t"}"#).moreComing == false)
    }

    @Test("asset upload and subscription answers decode")
    func otherResponses() throws {
        let upload = try decoded(UploadAssetsResponse.self, #"""
            {"tokens": [{"recordName": "note-1", "fieldName": "photo",
                         "url": "http://127.0.0.1:8080/assets/1/upload?ticket=eyJ%3D%3D"}]}
            """#)
        #expect(upload.tokens == [UploadAssetsResponse.Token(
            recordName: "note-1", fieldName: "photo", url: "http://127.0.0.1:8080/assets/1/upload?ticket=eyJ%3D%3D")])
        let file = try decoded(
            AssetUploadResponse.self, #"{"singleFile": {"fileChecksum": "\#(Self.checksum)", "size": 48213, "receipt": "eyJ"}}"#)
        #expect(file.singleFile == AssetValue(fileChecksum: Self.checksum, size: 48_213, receipt: "eyJ"))

        let subscriptions = try decoded(SubscriptionsResponse.self, #"""
            {"subscriptions": [{"subscriptionID": "urgent", "subscriptionType": "query", "zoneID": \#(Self.notesJSON),
               "query": {"recordType": "Note", "filterBy": [
                 {"comparator": "GREATER_THAN_OR_EQUALS", "fieldName": "priority", "fieldValue": {"value": 5}}]},
               "firesOn": ["create", "delete"], "notificationInfo": {"alertBody": "Urgent", "desiredKeys": ["title"]}},
              {"subscriptionID": "gone", "reason": "no such subscription", "serverErrorCode": "NOT_FOUND", "uuid": "u"}]}
            """#)
        #expect(subscriptions.subscriptions.count == 2)
        #expect(try subscriptions.subscriptions[0].get() == SubscriptionDictionary(
            subscriptionID: "urgent", subscriptionType: .query,
            query: Query(recordType: "Note", filterBy: [Self.filter(.greaterThanOrEquals)]), firesOn: [.create, .delete],
            zoneID: Self.notes, notificationInfo: NotificationInfo(alertBody: "Urgent", desiredKeys: ["title"])))
        #expect(failure(subscriptions.subscriptions[1])?.subscriptionID == "gone")
    }

    @Test("documented requests decode to the values they describe")
    func documentedRequests() throws {
        let zoneChanges = try decoded(ZoneChangesRequest.self, #"""
            {"zones": [{"zoneID": {"zoneName": "Notes"}, "syncToken": "\#(Self.token)"}, {"zoneID": {"zoneName": "Trash"}}],
             "resultsLimit": 100}
            """#)
        #expect(zoneChanges.zones == [RecordChangesRequest(zoneID: ZoneID(zoneName: "Notes"), syncToken: Self.token),
                                      RecordChangesRequest(zoneID: ZoneID(zoneName: "Trash"))])
        #expect(zoneChanges.resultsLimit == 100)
        #expect(zoneChanges.desiredKeys == nil && zoneChanges.recordTypes == nil && zoneChanges.numbersAsStrings == nil)
        #expect(try decoded(DatabaseChangesRequest.self, #"{"metaSyncToken": "m"}"#) == DatabaseChangesRequest(syncToken: "m"))

        #expect(try decoded(ModifyZonesRequest.self, #"""
            {"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Notes"}}},
                            {"operationType": "delete", "zone": {"zoneID": {"zoneName": "Old"}}}]}
            """#) == ModifyZonesRequest(operations: [
                ModifyZonesRequest.Operation(operationType: .create, zoneID: ZoneID(zoneName: "Notes")),
                ModifyZonesRequest.Operation(operationType: .delete, zoneID: ZoneID(zoneName: "Old")),
            ]))
        #expect(try decoded(LookupSubscriptionsRequest.self, #"{"subscriptions": [{"subscriptionID": "urgent"}]}"#)
            == LookupSubscriptionsRequest(subscriptionIDs: ["urgent"]))
        #expect(try decoded(RegisterPushTokenRequest.self, #"{"apnsToken": "Yt0q8w"}"#)
            == RegisterPushTokenRequest(apnsToken: "Yt0q8w"))
    }

    @Test("the push channel's documented messages decode")
    func pushMessages() throws {
        #expect(try decoded(PushMessage.self, #"{"type": "connected", "missedNotifications": false}"#)
            == .connected(missedNotifications: false))
        #expect(try decoded(PushMessage.self, #"{"type": "connected"}"#) == .connected(missedNotifications: false))
        #expect(try decoded(PushMessage.self, #"{"type": "missedNotifications"}"#) == .missedNotifications)
        #expect(try decoded(PushMessage.self, #"""
            {"type": "notification", "notification": {
               "notificationID": "5F0C2F9E-2C69-4E4E-8B8A-3C6D0E1F2A3B", "notificationType": "query",
               "subscriptionID": "urgent",
               "containerIdentifier": "iCloud.com.example.notes", "databaseScope": "private", "zoneID": \#(Self.notesJSON),
               "recordName": "note-1", "queryNotificationReason": "recordCreated",
               "recordFields": {"title": {"value": "Pay rent", "type": "STRING"}}, "notificationInfo": {"alertBody": "Urgent"}}}
            """#) == .notification(Self.queryNotification))
        #expect(try decoded(PushPollResponse.self, #"{"notifications": []}"#)
            == PushPollResponse(notifications: [], missedNotifications: false))
    }
}
