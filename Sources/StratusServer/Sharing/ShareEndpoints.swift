import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// Finding and joining shares: `records/resolve` and `records/accept` (any database of the path,
/// as Apple pins them on `public`), and the page a share's URL opens (`GET /share/{shortGUID}`).
///
/// A short GUID that names no live share, a share of another container or environment, a private
/// share the caller was not invited to, or one they were removed from, all answer `NOT_FOUND` alike,
/// so a link reveals nothing to whom it is not for.
struct ShareEndpoints: Sendable {
    let storage: any RecordStorage & ShareStorage & AccountStorage
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    /// Every write of records, which publishes what it commits.
    let changeWriter: ChangeWriter

    var rules: ShareRules { ShareRules(writer: changeWriter) }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.recordsResolve, authorizedBy: authenticator) { request, _, access in
            try await answer(request, access, accepting: false)
        }
        router.on(Endpoints.recordsAccept, authorizedBy: authenticator) { request, _, access in
            try await answer(request, access, accepting: true)
        }
        router.get("share/:shortGUID") { request, context in try await page(request, context) }
    }

    /// The caller's place in a share: a participant's own, or a newcomer's through a public link;
    /// `nil` when the share is not open to them.
    static func place(
        of user: String, in state: ShareState
    ) -> (type: ShareParticipantType, status: ShareAcceptanceStatus, permission: SharePermission)? {
        if let participant = state.participant(user), participant.status != .removed {
            return (participant.type, participant.status, participant.permission)
        }
        guard state.publicPermission != .none else { return nil }
        return (.publicUser, .invited, state.publicPermission)
    }

    private func answer(_ request: Request, _ access: DatabaseAccess, accepting: Bool) async throws -> Response {
        let target = access.target
        let user = try access.requireUser()
        let body = try await request.decodeJSON(ShortGUIDsRequest.self, limit: configuration.limits.maxSmallRequestBodyBytes)
        guard !body.shortGUIDs.isEmpty, body.shortGUIDs.count <= configuration.limits.maxOperationsPerRequest else {
            throw StratusError.badRequest(
                "shortGUIDs must hold 1 to \(configuration.limits.maxOperationsPerRequest) items, not \(body.shortGUIDs.count)")
        }
        var results: [Result<ShareMetadataDictionary, ErrorDictionary>] = []
        for item in body.shortGUIDs {
            do {
                results.append(.success(try await metadata(item, target: target, user: user, accepting: accepting)))
            } catch let error as StratusError {
                results.append(
                    .failure(ErrorDictionary(serverErrorCode: error.code, reason: error.reason, uuid: RequestTrace.nextID())))
            }
        }
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("results", array: results)
        writer.endObject()
        return .json(writer)
    }

    /// The metadata of one short GUID for `user`, accepting the share first when asked.
    private func metadata(
        _ item: ShortGUIDDictionary, target: DatabaseRequest, user: String, accepting: Bool
    ) async throws -> ShareMetadataDictionary {
        let notFound = StratusError(.notFound, "no share '\(item.shortGUID)' is open to you")
        guard let located = try await storage.share(shortGUID: item.shortGUID),
            located.database.container == target.container, located.database.environment == target.environment,
            var state = located.record.shareState, var place = Self.place(of: user, in: state)
        else { throw notFound }
        var record = located.record
        if accepting, place.status != .accepted {
            let written = try await rules.changeParticipant(
                of: located, user: user, deviceID: target.deviceID, timestamp: configuration.clock.milliseconds,
                limits: configuration.limits
            ) { current in
                guard let joining = Self.place(of: user, in: current) else { throw notFound }
                var changed = current
                if let at = changed.participants.firstIndex(where: { $0.userRecordName == user }) {
                    changed.participants[at].status = .accepted
                    if joining.type == .publicUser {
                        // One who joins through the link (an invitee the owner removed, too) is a public
                        // participant from now on: making the share private removes them.
                        changed.participants[at].type = .publicUser
                        changed.participants[at].permission = current.publicPermission
                    }
                } else {
                    changed.participants.append(
                        ShareState.Participant(
                            participantID: ShareRules.makeParticipantID(), userRecordName: user, type: .publicUser,
                            permission: current.publicPermission, status: .accepted))
                }
                return changed
            }
            record = written
            guard let written = record.shareState, let joined = Self.place(of: user, in: written) else { throw notFound }
            state = written
            place = joined
        }
        let owner = located.database.owner
        let ownerAccount = try await storage.user(container: target.container, recordName: owner)
        let zoneID = ZoneID(zoneName: located.zone, ownerRecordName: owner)
        return ShareMetadataDictionary(
            shortGUID: item, containerIdentifier: target.container, environment: target.environment,
            databaseScope: owner == user ? .private : .shared, zoneID: zoneID, rootRecordName: state.rootRecordName,
            share: try record.dictionary(zoneID: zoneID, shareKeys: target.shareKeys),
            ownerIdentity: UserIdentityDictionary(
                userRecordName: owner,
                nameComponents: ownerAccount.flatMap { account in
                    account.discoverable
                        ? NameComponents(givenName: account.givenName, familyName: account.familyName) : nil
                }),
            participantType: place.type, participantStatus: place.status, participantPermission: place.permission)
    }

    /// The page a share's URL opens: what is shared and how to open it. It names only the container
    /// and the share's title, never who shares it or what it holds.
    private func page(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let shortGUID = context.parameters.get("shortGUID") ?? ""
        let located = try await storage.share(shortGUID: shortGUID)
        var title: String?
        if case .string(let value)? = try? located?.record.decodeFields()["cloudkit.title"] { title = value }
        let html = SharePage.html(
            shortGUID: shortGUID, container: located?.database.container, title: title,
            resolveURL: located.map {
                authenticator.baseURL(request) + "/database/1/" + $0.database.container + "/"
                    + $0.database.environment.rawValue + "/public/records/resolve"
            })
        return Response(
            status: located == nil ? .notFound : .ok, headers: ConsoleEndpoints.unframedPageHeaders,
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}

/// The HTML of a share's page.
enum SharePage {
    static func html(shortGUID: String, container: String?, title: String?, resolveURL: String?) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        guard let container, let resolveURL else {
            return """
                <!doctype html>
                <html lang="en"><head><meta charset="utf-8"><title>Share not found</title></head>
                <body><h1>Share not found</h1><p>This link names no share, or the share was stopped.</p></body></html>
                """
        }
        let name = title.map(escaped) ?? "A shared collection"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(name)</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <meta name="stratus-container" content="\(escaped(container))">
            <meta name="stratus-short-guid" content="\(escaped(shortGUID))">
            <style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}
            code{word-break:break-all}</style></head>
            <body><h1>\(name)</h1>
            <p>Someone shared this with you in an app of <b>\(escaped(container))</b>.</p>
            <p>Open this link in that app to join. The app accepts the share with its short GUID
            <code>\(escaped(shortGUID))</code> (<code>Container.shareMetadata(for:)</code> and
            <code>Container.accept(_:)</code> in the Stratus SDK, or <code>POST \(escaped(resolveURL))</code> and
            <code>records/accept</code> over CloudKit Web Services).</p>
            </body></html>
            """
    }
}
