/// What a share lets its participants do (CloudKit's `publicPermission` and participant `permission`).
public enum SharePermission: String, Hashable, Sendable, WireEnum {
    /// No access: a share that only invited participants reach (as `publicPermission`).
    case none = "NONE"
    /// Read the shared records.
    case readOnly = "READ_ONLY"
    /// Read, create, change and delete the shared records.
    case readWrite = "READ_WRITE"
}

/// A participant's role in a share (the `type` of a Share Participant Dictionary).
public enum ShareParticipantType: String, Hashable, Sendable, WireEnum {
    /// The user who shares.
    case owner = "OWNER"
    /// A user the owner invited.
    case user = "USER"
    /// A user who joined a public share through its link.
    case publicUser = "PUBLIC_USER"
}

/// Where a participant stands with a share.
public enum ShareAcceptanceStatus: String, Hashable, Sendable, WireEnum {
    /// Invited, not yet accepted (CloudKit JS calls it `PENDING`, which is accepted on input).
    case invited = "INVITED"
    /// Accepted: the shared zone is in the participant's shared database.
    case accepted = "ACCEPTED"
    /// Removed by the owner, or left.
    case removed = "REMOVED"

    public init(json: JSONValue) throws {
        if case .string("PENDING") = json {
            self = .invited
            return
        }
        let raw = try String(json: json)
        guard let status = Self(rawValue: raw) else {
            throw JSONDecodingError(
                .invalid, "'\(raw)' is not one of " + Self.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self = status
    }
}

/// A participant of a share on the wire (CloudKit's Share Participant Dictionary).
public struct ShareParticipantDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The participant's ID in the share, stable while they take part.
    public var participantId: String?
    /// Who the participant is: in requests, how to find them (`lookupInfo`).
    public var userIdentity: UserIdentityDictionary?
    /// The participant's role.
    public var type: ShareParticipantType?
    /// What the participant may do.
    public var permission: SharePermission?
    /// Whether the participant accepted.
    public var acceptanceStatus: ShareAcceptanceStatus?

    /// Creates a participant.
    public init(
        participantId: String? = nil, userIdentity: UserIdentityDictionary?, type: ShareParticipantType? = nil,
        permission: SharePermission? = nil, acceptanceStatus: ShareAcceptanceStatus? = nil
    ) {
        self.participantId = participantId
        self.userIdentity = userIdentity
        self.type = type
        self.permission = permission
        self.acceptanceStatus = acceptanceStatus
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        participantId = try object.decodeIfPresent("participantId")
        userIdentity = try object.decodeIfPresent("userIdentity")
        type = try object.decodeIfPresent("type")
        permission = try object.decodeIfPresent("permission")
        acceptanceStatus = try object.decodeIfPresent("acceptanceStatus")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("participantId", participantId)
        writer.field("userIdentity", userIdentity)
        writer.field("type", type?.rawValue)
        writer.field("permission", permission?.rawValue)
        writer.field("acceptanceStatus", acceptanceStatus?.rawValue)
        writer.endObject()
    }
}

/// The keys a share record carries beside a record's own (Apple's "Share Request Keys" and "Share
/// Response Keys"): in requests `forRecord`, `publicPermission` and `participants`; in responses also
/// `shortGUID`, `owner`, `currentUserParticipant` and the share's `url`.
public struct ShareKeys: Hashable, Sendable {
    /// The record type of shares, as the wire spells it (Apple's documents write `cloudKit.share`,
    /// which is accepted too).
    public static let recordType = "cloudkit.share"
    /// The record name of a zone-wide share (CloudKit's `CKRecordNameZoneWideShare`).
    public static let zoneWideRecordName = "cloudkit.zoneshare"

    /// Whether `recordType` names the share type, in either spelling.
    public static func isShareType(_ recordType: String?) -> Bool {
        recordType?.lowercased() == Self.recordType
    }

    /// The root record of a hierarchical share (`{recordName, recordChangeTag}`).
    public var forRecord: Reference?
    /// What anyone with the share's link may do.
    public var publicPermission: SharePermission?
    /// The participants.
    public var participants: [ShareParticipantDictionary]?
    /// The share's short GUID, the last part of its URL.
    public var shortGUID: String?
    /// The owner, as a participant.
    public var owner: ShareParticipantDictionary?
    /// The reader, as a participant, when they are one.
    public var currentUserParticipant: ShareParticipantDictionary?
    /// The share's URL (`{server}/share/{shortGUID}`).
    public var url: String?

    /// Creates share keys.
    public init(
        forRecord: Reference? = nil, publicPermission: SharePermission? = nil,
        participants: [ShareParticipantDictionary]? = nil, shortGUID: String? = nil,
        owner: ShareParticipantDictionary? = nil, currentUserParticipant: ShareParticipantDictionary? = nil,
        url: String? = nil
    ) {
        self.forRecord = forRecord
        self.publicPermission = publicPermission
        self.participants = participants
        self.shortGUID = shortGUID
        self.owner = owner
        self.currentUserParticipant = currentUserParticipant
        self.url = url
    }

    /// The share keys of a Record Dictionary, or `nil` when it has none.
    init?(_ object: JSONObject) throws {
        self.init(
            forRecord: try object.decodeIfPresent("forRecord"),
            publicPermission: try object.decodeIfPresent("publicPermission"),
            participants: try object.decodeIfPresent("participants"), shortGUID: try object.decodeIfPresent("shortGUID"),
            owner: try object.decodeIfPresent("owner"),
            currentUserParticipant: try object.decodeIfPresent("currentUserParticipant"),
            url: try object.decodeIfPresent("url"))
        if self == ShareKeys() { return nil }
    }

    /// Writes the keys present into the record object being written.
    func writeMembers(to writer: inout JSONWriter) {
        writer.field("forRecord", forRecord)
        writer.field("shortGUID", shortGUID)
        writer.field("url", url)
        writer.field("publicPermission", publicPermission?.rawValue)
        if let participants { writer.field("participants", array: participants) }
        writer.field("owner", owner)
        writer.field("currentUserParticipant", currentUserParticipant)
    }
}

/// One item of `records/resolve` and `records/accept` (CloudKit's ShortGUID Dictionary).
public struct ShortGUIDDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The short GUID, or a share URL ending in it.
    public var value: String
    /// Whether to answer with the root record (for a zone-wide share there is none).
    public var shouldFetchRootRecord: Bool?
    /// The root record's fields to answer with (all when absent).
    public var rootRecordDesiredKeys: [String]?

    /// Creates an item.
    public init(value: String, shouldFetchRootRecord: Bool? = nil, rootRecordDesiredKeys: [String]? = nil) {
        self.value = value
        self.shouldFetchRootRecord = shouldFetchRootRecord
        self.rootRecordDesiredKeys = rootRecordDesiredKeys
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        value = try object.decode("value")
        shouldFetchRootRecord = try object.decodeIfPresent("shouldFetchRootRecord")
        rootRecordDesiredKeys = try object.decodeIfPresent("rootRecordDesiredKeys")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("value", value)
        writer.field("shouldFetchRootRecord", shouldFetchRootRecord)
        if let rootRecordDesiredKeys { writer.field("rootRecordDesiredKeys", array: rootRecordDesiredKeys) }
        writer.endObject()
    }

    /// The short GUID itself: the value, or the last path component of a share URL.
    public var shortGUID: String {
        guard let slash = value.lastIndex(of: "/") else { return value }
        return String(value[value.index(after: slash)...])
    }
}

/// The body of `records/resolve` and `records/accept`: `{"shortGUIDs": [ShortGUID Dictionary]}`.
public struct ShortGUIDsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The shares to resolve or accept.
    public var shortGUIDs: [ShortGUIDDictionary]

    /// Creates a request.
    public init(shortGUIDs: [ShortGUIDDictionary]) { self.shortGUIDs = shortGUIDs }

    public init(json: JSONValue) throws {
        shortGUIDs = try json.object().decode("shortGUIDs")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("shortGUIDs", array: shortGUIDs)
        writer.endObject()
    }
}

/// What `records/resolve` and `records/accept` answer for one short GUID (CloudKit's ShortGUID
/// Result Dictionary): where the share is, the share itself, its owner, and the caller's place in it.
public struct ShareMetadataDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The request item this answers.
    public var shortGUID: ShortGUIDDictionary
    /// The container.
    public var containerIdentifier: String
    /// The environment.
    public var environment: ContainerEnvironment
    /// Where the caller finds the shared zone: `SHARED` for a participant, `PRIVATE` for the owner.
    public var databaseScope: DatabaseScope
    /// The shared zone, with its owner's record name.
    public var zoneID: ZoneID
    /// The root record's name, for a share rooted at a record (none for a zone-wide share).
    public var rootRecordName: String?
    /// The share record.
    public var share: RecordDictionary
    /// The owner.
    public var ownerIdentity: UserIdentityDictionary
    /// The caller's role.
    public var participantType: ShareParticipantType
    /// The caller's status.
    public var participantStatus: ShareAcceptanceStatus
    /// What the caller may do.
    public var participantPermission: SharePermission

    /// Creates share metadata.
    public init(
        shortGUID: ShortGUIDDictionary, containerIdentifier: String, environment: ContainerEnvironment,
        databaseScope: DatabaseScope, zoneID: ZoneID, rootRecordName: String? = nil, share: RecordDictionary,
        ownerIdentity: UserIdentityDictionary, participantType: ShareParticipantType,
        participantStatus: ShareAcceptanceStatus, participantPermission: SharePermission
    ) {
        self.shortGUID = shortGUID
        self.containerIdentifier = containerIdentifier
        self.environment = environment
        self.databaseScope = databaseScope
        self.zoneID = zoneID
        self.rootRecordName = rootRecordName
        self.share = share
        self.ownerIdentity = ownerIdentity
        self.participantType = participantType
        self.participantStatus = participantStatus
        self.participantPermission = participantPermission
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        shortGUID = try object.decode("shortGUID")
        containerIdentifier = try object.decode("containerIdentifier")
        environment = try object.decode("environment")
        databaseScope = try DatabaseScope(wireName: try object.decode("databaseScope"))
        zoneID = try object.decode("zoneID")
        rootRecordName = try object.decodeIfPresent("rootRecordName")
        share = try object.decode("share")
        ownerIdentity = try object.decode("ownerIdentity")
        participantType = try object.decode("participantType")
        participantStatus = try object.decode("participantStatus")
        participantPermission = try object.decode("participantPermission")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("shortGUID", shortGUID)
        writer.field("containerIdentifier", containerIdentifier)
        writer.field("environment", environment.rawValue)
        writer.field("databaseScope", databaseScope.rawValue.uppercased())
        writer.field("zoneID", zoneID)
        writer.field("rootRecordName", rootRecordName)
        writer.field("share", share)
        writer.field("ownerIdentity", ownerIdentity)
        writer.field("participantType", participantType.rawValue)
        writer.field("participantStatus", participantStatus.rawValue)
        writer.field("participantPermission", participantPermission.rawValue)
        writer.endObject()
    }
}

/// The answer of `records/resolve` and `records/accept`: one result per short GUID, in order.
public struct ShareMetadataResponse: Sendable, JSONDecodable {
    /// Share metadata, or why a short GUID has none for the caller.
    public var results: [Result<ShareMetadataDictionary, ErrorDictionary>]

    public init(json: JSONValue) throws {
        results = try json.object().decode("results")
    }
}

extension DatabaseScope {
    /// The scope a share's metadata names (`PRIVATE`, `SHARED`, `PUBLIC`, in any case).
    init(wireName: String) throws {
        guard let scope = DatabaseScope(rawValue: wireName.lowercased()) else {
            throw JSONDecodingError(.invalid, "'\(wireName)' is not a database scope")
        }
        self = scope
    }
}
