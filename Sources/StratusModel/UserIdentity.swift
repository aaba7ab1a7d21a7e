/// How to find a user (CloudKit's User Identity Lookup Information Dictionary): by e-mail address or
/// by user record name. Phone numbers are not kept by Stratus and never match.
public struct UserLookupInfo: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// An e-mail address an administrator recorded for the account.
    public var emailAddress: String?
    /// A phone number (accepted for compatibility; matches no one).
    public var phoneNumber: String?
    /// The user's record name.
    public var userRecordName: String?

    /// Creates lookup information.
    public init(emailAddress: String? = nil, phoneNumber: String? = nil, userRecordName: String? = nil) {
        self.emailAddress = emailAddress
        self.phoneNumber = phoneNumber
        self.userRecordName = userRecordName
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        emailAddress = try object.decodeIfPresent("emailAddress")
        phoneNumber = try object.decodeIfPresent("phoneNumber")
        userRecordName = try object.decodeIfPresent("userRecordName")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("emailAddress", emailAddress)
        writer.field("phoneNumber", phoneNumber)
        writer.field("userRecordName", userRecordName)
        writer.endObject()
    }
}

/// The parts of a person's name a user chose to show (CloudKit's Name Components Dictionary).
public struct NameComponents: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The given (first) name.
    public var givenName: String?
    /// The family (last) name.
    public var familyName: String?

    /// Creates name components.
    public init(givenName: String? = nil, familyName: String? = nil) {
        self.givenName = givenName
        self.familyName = familyName
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        givenName = try object.decodeIfPresent("givenName")
        familyName = try object.decodeIfPresent("familyName")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("givenName", givenName)
        writer.field("familyName", familyName)
        writer.endObject()
    }
}

/// A user as others may see them (CloudKit's User Identity Dictionary): the record name, the lookup
/// information they were found by, and the name they chose to show.
public struct UserIdentityDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The user's record name.
    public var userRecordName: String?
    /// How the user was found.
    public var lookupInfo: UserLookupInfo?
    /// The user's name, when they are discoverable.
    public var nameComponents: NameComponents?

    /// Creates an identity.
    public init(userRecordName: String?, lookupInfo: UserLookupInfo? = nil, nameComponents: NameComponents? = nil) {
        self.userRecordName = userRecordName
        self.lookupInfo = lookupInfo
        self.nameComponents = nameComponents
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        userRecordName = try object.decodeIfPresent("userRecordName")
        lookupInfo = try object.decodeIfPresent("lookupInfo")
        nameComponents = try object.decodeIfPresent("nameComponents")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("userRecordName", userRecordName)
        writer.field("lookupInfo", lookupInfo)
        writer.field("nameComponents", nameComponents)
        writer.endObject()
    }
}

/// A user in the older shape of `users/lookup/email` and `users/lookup/id` (CloudKit's User
/// Dictionary): `emailAddress` only in answers to lookups by e-mail.
public struct UserDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The user's record name.
    public var userRecordName: String
    /// The given name, when the user chose to show one.
    public var firstName: String?
    /// The family name, when the user chose to show one.
    public var lastName: String?
    /// The e-mail address looked up.
    public var emailAddress: String?

    /// Creates a user dictionary.
    public init(userRecordName: String, firstName: String? = nil, lastName: String? = nil, emailAddress: String? = nil) {
        self.userRecordName = userRecordName
        self.firstName = firstName
        self.lastName = lastName
        self.emailAddress = emailAddress
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        userRecordName = try object.decode("userRecordName")
        firstName = try object.decodeIfPresent("firstName")
        lastName = try object.decodeIfPresent("lastName")
        emailAddress = try object.decodeIfPresent("emailAddress")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("userRecordName", userRecordName)
        writer.field("firstName", firstName)
        writer.field("lastName", lastName)
        writer.field("emailAddress", emailAddress)
        writer.endObject()
    }
}

/// The body of `POST users/discover`: the people to find.
public struct DiscoverUsersRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Lookup information, one per person.
    public var lookupInfos: [UserLookupInfo]

    /// Creates a request.
    public init(lookupInfos: [UserLookupInfo]) { self.lookupInfos = lookupInfos }

    public init(json: JSONValue) throws {
        lookupInfos = try json.object().decode("lookupInfos")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("lookupInfos", array: lookupInfos)
        writer.endObject()
    }
}

/// A body holding a list under `users`: the answers of `users/discover` (identities), of
/// `users/lookup/email` and `users/lookup/id` (the older user shape), and the body of the lookups
/// (lookup information). Answers list the discoverable users found, in the order asked; people not
/// found, or not discoverable, are left out.
public struct UsersList<User: Hashable & Sendable & JSONDecodable & JSONWritable>: Hashable, Sendable, JSONDecodable,
    JSONWritable
{
    /// The users.
    public var users: [User]

    /// Creates a list.
    public init(users: [User]) { self.users = users }

    public init(json: JSONValue) throws {
        users = try json.object().decode("users")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("users", array: users)
        writer.endObject()
    }
}

/// The answer of `users/discover`.
public typealias DiscoverUsersResponse = UsersList<UserIdentityDictionary>
/// The body of `users/lookup/email` (`[{emailAddress}]`) and `users/lookup/id` (`[{userRecordName}]`).
public typealias LookupUsersRequest = UsersList<UserLookupInfo>
/// The answer of `users/lookup/email` and `users/lookup/id`.
public typealias LookupUsersResponse = UsersList<UserDictionary>

/// The body and answer of `users/discoverability` (a Stratus extension): whether the signed-in user
/// may be found by others, and the name they show when found. Off for every new account, as in
/// CloudKit.
public struct Discoverability: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Whether others may find the user by e-mail address or record name.
    public var discoverable: Bool
    /// The name others see.
    public var nameComponents: NameComponents?

    /// Creates a setting.
    public init(discoverable: Bool, nameComponents: NameComponents? = nil) {
        self.discoverable = discoverable
        self.nameComponents = nameComponents
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        discoverable = try object.decode("discoverable")
        nameComponents = try object.decodeIfPresent("nameComponents")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("discoverable", discoverable)
        writer.field("nameComponents", nameComponents)
        writer.endObject()
    }
}
