public import StratusModel

/// What a share record holds beside its fields: its short GUID, its public permission and its
/// participants.
///
/// It is stored inside the share record (under ``fieldName``, a name no client field can take), so
/// that a share travels, versions and conflicts like any record, and backends index it (the
/// `shares` and `share_participants` tables) from the record in the same write, as they index
/// references. Who may reach a shared zone is read from that index.
public struct ShareState: Hashable, Sendable {
    /// The reserved field that holds the state in the share record's stored fields.
    public static let fieldName = "___share"

    /// The share's short GUID: the last part of its URL, and what `records/resolve` takes.
    public var shortGUID: String
    /// What anyone who accepts through the link may do; ``SharePermission/none`` for a private share.
    public var publicPermission: SharePermission
    /// The participants, the owner first.
    public var participants: [Participant]
    /// The root record of a hierarchical share; `nil` for a zone-wide share.
    public var rootRecordName: String?

    /// One participant of a share.
    public struct Participant: Hashable, Sendable {
        /// The participant's ID in the share.
        public var participantID: String
        /// The participant's user record name.
        public var userRecordName: String
        /// The address the owner invited them by, if any.
        public var emailAddress: String?
        /// Owner, invited user, or public user.
        public var type: ShareParticipantType
        /// What they may do.
        public var permission: SharePermission
        /// Invited, accepted or removed.
        public var status: ShareAcceptanceStatus

        /// Creates a participant.
        public init(
            participantID: String, userRecordName: String, emailAddress: String? = nil, type: ShareParticipantType,
            permission: SharePermission, status: ShareAcceptanceStatus
        ) {
            self.participantID = participantID
            self.userRecordName = userRecordName
            self.emailAddress = emailAddress
            self.type = type
            self.permission = permission
            self.status = status
        }

        /// The participant as the wire shows it.
        public var dictionary: ShareParticipantDictionary {
            ShareParticipantDictionary(
                participantId: participantID,
                userIdentity: UserIdentityDictionary(
                    userRecordName: userRecordName,
                    lookupInfo: UserLookupInfo(emailAddress: emailAddress, userRecordName: userRecordName)),
                type: type, permission: permission, acceptanceStatus: status)
        }
    }

    /// Creates a share state.
    public init(
        shortGUID: String, publicPermission: SharePermission, participants: [Participant], rootRecordName: String? = nil
    ) {
        self.shortGUID = shortGUID
        self.publicPermission = publicPermission
        self.participants = participants
        self.rootRecordName = rootRecordName
    }

    /// The participant that is `userRecordName`, if any.
    public func participant(_ userRecordName: String) -> Participant? {
        participants.first { $0.userRecordName == userRecordName }
    }

    /// The share's owner.
    public var owner: Participant? { participants.first { $0.type == .owner } }

    /// This state, written by `writer` over the `stored` one inside the write's transaction: a
    /// participant's acceptance is theirs to change, so the writer changes only their own status.
    /// Every other participant keeps their stored status, unless the write removes them or invites a
    /// removed one again, and participants who joined since the writer read the share stay (removed
    /// when the share is no longer public, with its public permission when it still is). So an
    /// owner's save never undoes an acceptance it raced, nor an acceptance the owner's save.
    public func keepingStatuses(of stored: ShareState, writer: String) -> ShareState {
        var merged = self
        for index in merged.participants.indices {
            let participant = merged.participants[index]
            guard participant.userRecordName != writer, let old = stored.participant(participant.userRecordName),
                participant.status != .removed, !(old.status == .removed && participant.status == .invited)
            else { continue }
            merged.participants[index].status = old.status
        }
        for old in stored.participants where merged.participant(old.userRecordName) == nil {
            var joined = old
            if joined.type == .publicUser {
                if merged.publicPermission == .none { joined.status = .removed } else { joined.permission = merged.publicPermission }
            }
            merged.participants.append(joined)
        }
        return merged
    }

    /// The share keys a reader sees: the owner, the participants, and the reader among them.
    /// `urlPrefix` is the server's share page prefix (`{server}/share/`).
    public func keys(reader: String?, urlPrefix: String) -> ShareKeys {
        ShareKeys(
            publicPermission: publicPermission, participants: participants.map(\.dictionary), shortGUID: shortGUID,
            owner: owner?.dictionary, currentUserParticipant: reader.flatMap { participant($0) }?.dictionary,
            url: urlPrefix + shortGUID)
    }

    // MARK: Stored form

    /// The state as the reserved field's value.
    public var fieldValue: FieldValue {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("g", shortGUID)
        writer.field("p", publicPermission.rawValue)
        writer.field("r", rootRecordName)
        writer.key("u")
        writer.beginArray()
        for participant in participants {
            writer.beginObject()
            writer.field("i", participant.participantID)
            writer.field("u", participant.userRecordName)
            writer.field("e", participant.emailAddress)
            writer.field("t", participant.type.rawValue)
            writer.field("p", participant.permission.rawValue)
            writer.field("s", participant.status.rawValue)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .string(String(decoding: writer.bytes, as: UTF8.self))
    }

    /// Reads the state back from the reserved field's value.
    public init(fieldValue: FieldValue) throws {
        guard case .string(let text) = fieldValue else {
            throw JSONDecodingError(.invalid, "a share's state is a string")
        }
        let object = try JSONValue.parse(Array(text.utf8)).object()
        shortGUID = try object.decode("g")
        publicPermission = try object.decode("p")
        rootRecordName = try object.decodeIfPresent("r")
        participants = try object.decode("u", as: [JSONValue].self).map { value in
            let participant = try value.object()
            return Participant(
                participantID: try participant.decode("i"), userRecordName: try participant.decode("u"),
                emailAddress: try participant.decodeIfPresent("e"), type: try participant.decode("t"),
                permission: try participant.decode("p"), status: try participant.decode("s"))
        }
    }
}

extension StoredRecord {
    /// The share state of a live share record; `nil` for any other record.
    public var shareState: ShareState? {
        guard !deleted, recordType == ShareKeys.recordType,
            let value = try? decodeFields()[ShareState.fieldName]
        else { return nil }
        return try? ShareState(fieldValue: value)
    }
}
