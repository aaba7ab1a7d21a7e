import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StratusModel
import StratusStorage

/// The console at `/console`: pages rendered on the server from ``ConsoleTemplates``, signed in with
/// the admin token. The pages only read; every change they make goes through the documented
/// endpoints (the admin API, and the database endpoints as a user the page names) from the
/// browser, with the session's CSRF token, so the same checks apply and the audit log records it.
struct ConsoleEndpoints: Sendable {
    let storage: any StratusStorage
    let configuration: ServerConfiguration
    let credential: AdminCredential
    let log: RequestLog
    let hub: PushHub
    /// Device pushes through APNs, FCM and Web Push: the containers' credentials, each device's last result.
    let devicePush: DevicePushTransport
    let housekeeping: HousekeepingStatus
    let quotas: QuotaKeeper
    /// The containers' sign-in methods.
    let signInMethods: IdentityProviderDirectory

    var sessions: ConsoleSessions { credential.console }

    func addRoutes(to router: Router<StratusRequestContext>) {
        let console = router.group("console")
        router.get("console") { request, _ in
            Self.redirect(sessions.session(of: request) == nil ? "/console/signin" : "/console/containers")
        }
        console.get("console.js") { _, _ in Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8") }
        console.get("console.css") { _, _ in Self.asset(ConsoleAssets.styleSheet, type: "text/css; charset=utf-8") }
        console.get("signin") { _, _ in Self.html(ConsoleTemplates.render("signin", [:])) }
        console.post("signin") { request, context in try await signIn(request, context) }
        console.post("signout") { request, context in
            let form = try await Self.form(request)
            guard let session = sessions.session(of: request),
                Secrets.constantTimeEquals(Array((form["csrf"] ?? "").utf8), Array(session.csrfToken.utf8))
            else { throw StratusError(.authenticationFailed, "sign out from a console page") }
            context.trace.act(as: "console session \(session.label)")
            sessions.end(request)
            var response = Self.redirect("/console/signin")
            response.headers[.setCookie] = cookie(value: "", maxAge: 0)
            return response
        }
        page(console, "containers", title: "Containers") { _, _ in try await containersPage() }
        page(console, "containers/:container", title: "Users and keys") { _, context in
            try await containerPage(try context.parameters.require("container"))
        }
        page(console, "containers/:container/data", title: "Data") { _, context in
            try await dataPage(try context.parameters.require("container"))
        }
        page(console, "containers/:container/schema", title: "Schema") { _, context in
            try await schemaPage(try context.parameters.require("container"))
        }
        page(console, "containers/:container/people", title: "Devices and subscriptions") { request, context in
            try await peoplePage(try context.parameters.require("container"), user: request.query("user"))
        }
        page(console, "requests", title: "Requests") { request, _ in try await requestsPage(request) }
        page(console, "requests/:id", title: "Request") { _, context in try requestPage(try context.parameters.require("id")) }
        page(console, "activity", title: "Activity") { _, _ in activityPage() }
        page(console, "health", title: "Health") { _, _ in try await healthPage() }
        page(console, "audit", title: "Audit log") { _, _ in
            ("audit", ["entries": try await storage.auditEntries(limit: 500).map { entry in
                ["time": Self.time(entry.time), "actor": entry.actor, "action": entry.action, "status": entry.status]
            }], nil)
        }
    }

    /// What a page handler answers: its template, the template's values, and the container it is
    /// about (for the container menu).
    typealias Page = (template: String, values: [String: Any], container: String?)

    /// Routes a page that needs a signed-in session: without one, the browser goes to sign in. The
    /// live request log asks for `?fragment=1` and gets the table alone.
    private func page(
        _ group: RouterGroup<StratusRequestContext>, _ path: String, title: String,
        _ build: @escaping @Sendable (Request, StratusRequestContext) async throws -> Page
    ) {
        group.get(RouterPath(path)) { request, context in
            guard let session = sessions.session(of: request) else { return Self.redirect("/console/signin") }
            let built = try await build(request, context)
            let body = ConsoleTemplates.render(built.template, built.values)
            if request.query("fragment") == "1", let table = built.values["table"] as? String { return Self.html(table) }
            var values: [String: Any] = [
                "title": built.values["title"] as? String ?? title, "csrf": session.csrfToken, "page": built.template,
                "body": body,
            ]
            if let container = built.container {
                values["container"] = ["identifier": container, "path": Self.pathSegment(container)]
            }
            return Self.html(ConsoleTemplates.render("layout", values))
        }
    }

    // MARK: Signing in

    private func signIn(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let form = try await Self.form(request)
        func refusal(_ error: String, _ status: HTTPResponse.Status) -> Response {
            var response = Self.html(ConsoleTemplates.render("signin", ["error": error]))
            response.status = status
            return response
        }
        let accepted: Bool
        do {
            accepted = try await credential.accepts(form["token"] ?? "", as: "console sign-in", context: context)
        } catch let error as StratusError where error.code == .throttled {
            let seconds = error.retryAfter ?? 1
            var response = refusal("Too many wrong tokens from this address: try again in \(seconds) seconds.", .tooManyRequests)
            response.headers[.retryAfter] = String(seconds)
            return response
        }
        guard accepted else { return refusal("That is not the admin token.", .unauthorized) }
        let (cookieValue, session) = sessions.create()
        context.trace.act(as: "console session \(session.label)")
        var response = Self.redirect("/console/containers")
        response.headers[.setCookie] = cookie(value: cookieValue, maxAge: Int(sessions.lifetime.components.seconds))
        return response
    }

    /// The session cookie: script cannot read it, other sites' requests do not carry it, and when
    /// the server is reached over TLS (its own, or a proxy's named by an `https` public URL) it travels
    /// only encrypted.
    private func cookie(value: String, maxAge: Int) -> String {
        let encrypted = configuration.tls != nil || configuration.publicURL?.hasPrefix("https://") == true
        return "\(ConsoleSessions.cookieName)=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Strict"
            + (encrypted ? "; Secure" : "")
    }

    // MARK: Pages

    private func containersPage() async throws -> Page {
        let containers = try await storage.containers().map { container -> [String: Any] in
            [
                "identifier": container.identifier, "path": Self.pathSegment(container.identifier),
                "signUp": container.allowsSignUp ? "open" : "by an administrator only",
                "created": Self.time(container.createdAt),
            ]
        }
        return ("containers", ["containers": containers], nil)
    }

    private func containerPage(_ container: String) async throws -> Page {
        try await storage.requireContainer(container)
        let api = "/admin/1/containers/" + Self.pathSegment(container)
        let path = Self.pathSegment(container)
        let accounts = try await storage.users(container: container).filter { !$0.username.hasPrefix("server-key:") }
            .sorted { $0.username < $1.username }
        let usage = try await quotas.usage(container: container)
        let identities = Dictionary(grouping: try await storage.identities(container: container), by: \.userRecordName)
        let users = accounts.map { user -> [String: Any] in
            let held = usage.byAccount[user.recordName] ?? .zero
            let signsInWith = (identities[user.recordName] ?? []).map { identity -> [String: Any] in
                [
                    "provider": identity.provider, "subject": identity.subject, "email": identity.emailAddress ?? "",
                    "unlink": "\(api)/users/\(user.recordName)/identities?issuer=\(identity.issuer.queryValueEncoded)"
                        + "&subject=\(identity.subject.queryValueEncoded)",
                ]
            }
            return [
                "username": AccountService.hasPassword(user) ? user.username : "", "recordName": user.recordName,
                "email": user.emailAddress ?? "", "identities": signsInWith,
                "created": Self.time(user.createdAt), "disabled": user.disabledAt.map(Self.time) ?? false,
                "api": api, "path": path, "holds": Self.holdings(held),
            ]
        }
        let methods = try await signInMethods.methods(container: container)
        let providers = methods.providers.map { provider -> [String: Any] in
            [
                "name": provider.name, "issuer": provider.issuer, "clientIDs": provider.clientIDs.joined(separator: ", "),
                "keysURL": provider.keysURL ?? "",
                "updated": Self.time(provider.updatedAt),
                "remove": api + (provider.isApple ? "/signin/apple" : "/signin/oidc/" + Self.pathSegment(provider.name)),
            ]
        }
        let quotas = try await quotas.quotas(container: container)
        func limits(_ quota: StorageQuota, pending: Int64??) -> [String: Any] {
            var limits: [String: Any] = [
                "records": quota.records.map(String.init) ?? "", "recordBytes": quota.recordBytes.map(String.init) ?? "",
                "assetBytes": quota.assetBytes.map(String.init) ?? "",
            ]
            if let pending { limits["pendingUploadBytes"] = pending.map(String.init) ?? "" }
            return limits
        }
        let tokens = try await storage.apiTokens(container: container).map { token -> [String: Any] in
            ["name": token.name, "created": Self.time(token.createdAt), "id": token.hash, "api": api]
        }
        let keys = try await storage.serverKeys(container: container).map { key -> [String: Any] in
            [
                "keyID": key.keyID, "environment": key.environment.rawValue, "created": Self.time(key.createdAt),
                "revoked": key.revokedAt.map(Self.time) ?? false, "api": api,
            ]
        }
        let usernames = Dictionary(accounts.map { ($0.recordName, $0.username) }) { first, _ in first }
        let written = try await storage.databases(container: container)
        var databases: [[String: Any]] = []
        for database in written.prefix(Self.databasesShown) {
            databases.append([
                "environment": database.environment.rawValue, "scope": database.scope.rawValue,
                "owner": database.scope == .public ? "everyone" : usernames[database.owner] ?? database.owner,
                "zones": try await storage.zones(in: database).count,
            ])
        }
        let push = try await devicePush.credentials.credentials(container: container)
        let pushHealth = devicePush.credentials.health(container: container)
        let channels = PushEndpointInfo.Channel.allCases.map { channel -> [String: Any] in
            let health = pushHealth[channel] ?? PushChannelHealth()
            return [
                "channel": channel.rawValue, "api": api, "configured": push.updatedAt(channel).map(Self.time) ?? "",
                "state": push.configures(channel)
                    ? health.problem.map { "refused by the service: \($0); resting until the credentials change" } ?? "working"
                    : "not set",
                "lastSuccess": health.lastSuccess.map(Self.time) ?? "", "lastFailure": health.lastFailure.map(Self.time) ?? "",
            ]
        }
        return (
            "container",
            [
                "users": users, "tokens": tokens, "keys": keys, "api": api, "databases": databases, "pushChannels": channels,
                "webPushKey": push.webPush?.publicKey ?? "", "providers": providers,
                "passwords": methods.passwordsEnabled, "returnPath": WebSignIn.returnPath(base: "", container: path),
                "userQuota": limits(quotas.perUser, pending: .some(quotas.perUserPendingUploadBytes)),
                "containerQuota": limits(quotas.perContainer, pending: nil),
                "quotaSource": quotas == self.quotas.defaults ? "the server's defaults" : "set for this container",
                "ownQuotas": quotas != self.quotas.defaults, "holds": Self.holdings(usage.total),
                "moreDatabases": written.count > Self.databasesShown, "shown": Self.databasesShown, "count": written.count,
            ],
            container
        )
    }

    /// What an account holds, as the console shows it: `12 records, 3.4 MB; 1.2 GB of assets`.
    static func holdings(_ usage: StorageUsage) -> String {
        "\(usage.records) records, \(bytes(usage.recordBytes)); \(bytes(usage.assetBytes)) of assets"
    }

    /// A number of bytes in the largest decimal unit that leaves at least 1 (`512 bytes`, `3.4 MB`).
    static func bytes(_ count: Int64) -> String {
        let units = ["bytes", "kB", "MB", "GB", "TB", "PB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) bytes" : String(format: "%.1f %@", value, units[unit])
    }

    /// How many of a container's databases its page lists (each costs a read of its zones).
    private static let databasesShown = 200

    private func dataPage(_ container: String) async throws -> Page {
        try await storage.requireContainer(container)
        let users = try await storage.users(container: container)
            .filter { $0.disabledAt == nil && !$0.username.hasPrefix("server-key:") }
            .sorted { $0.username < $1.username }
            .map { ["recordName": $0.recordName, "username": $0.username] }
        return ("data", ["users": users], container)
    }

    private func schemaPage(_ container: String) async throws -> Page {
        let schemas = SchemaAdministration(storage: storage)
        let development = try await schemas.export(container: container, environment: .development)
        let production = try await schemas.export(container: container, environment: .production)
        let changes = development.deployChanges(from: production)
        let diff = changes.map { change -> [String: Any] in
            [
                "kind": change.kind.rawValue, "recordType": change.recordType.isEmpty ? "(roles)" : change.recordType,
                "field": change.field ?? "", "detail": change.detail,
            ]
        }
        let environments = [("development", development), ("production", production)].map { name, schema -> [String: Any] in
            let fields = schema.recordTypes.keys.sorted().flatMap { typeName in
                let type = schema.recordTypes[typeName]!
                return type.fields.keys.sorted().map { fieldName -> [String: Any] in
                    let field = type.fields[fieldName]!
                    return [
                        "recordType": typeName, "name": fieldName, "type": field.type.rawValue,
                        "indexes": field.indexes.keywordList.joined(separator: ", "),
                    ]
                }
            }
            return ["name": name, "fields": fields, "text": schema.text]
        }
        return (
            "schema",
            [
                "api": "/admin/1/containers/" + Self.pathSegment(container), "diff": diff, "hasDiff": !diff.isEmpty,
                "blocked": changes.contains { $0.kind == .blocks },
                "environments": environments,
            ], container
        )
    }

    private func peoplePage(_ container: String, user selected: String?) async throws -> Page {
        try await storage.requireContainer(container)
        let users = try await storage.users(container: container).filter { !$0.username.hasPrefix("server-key:") }
            .sorted { $0.username < $1.username }
        var values: [String: Any] = [
            "users": users.map { ["recordName": $0.recordName, "username": $0.username, "selected": $0.recordName == selected] }
        ]
        guard let user = users.first(where: { $0.recordName == selected }) ?? (selected == nil ? users.first : nil) else {
            return ("people", values, container)
        }
        if selected == nil {
            values["users"] = users.map {
                ["recordName": $0.recordName, "username": $0.username, "selected": $0.recordName == user.recordName]
            }
        }
        let usernames = Dictionary(users.map { ($0.recordName, $0.username) }) { first, _ in first }
        let pushDevices = hub.registry.snapshots(container: container).filter { $0.owner.userRecordName == user.recordName }
        let now = configuration.clock.milliseconds
        // A device that made several push tokens (one per launch, say) is one row: connected when any
        // of its tokens is, with all that waits for them.
        var byDevice: [String: [PushDevice.Snapshot]] = [:]
        var order: [String] = []
        for (index, device) in pushDevices.enumerated() {
            let key = device.deviceID.map { "\($0)\u{0}\(device.owner.environment.rawValue)" } ?? "\u{1}\(index)"
            if byDevice[key] == nil { order.append(key) }
            byDevice[key, default: []].append(device)
        }
        let devices = order.map { key -> [String: Any] in
            let tokens = byDevice[key]!
            let device = tokens[0]
            let waiting = tokens.flatMap { zip($0.waiting, $0.waitingSince) }
            return [
                "deviceID": device.deviceID ?? "(unnamed)", "requestsPath": device.deviceID.map(Self.pathSegment) ?? "",
                "environment": device.owner.environment.rawValue, "connected": tokens.contains(where: \.connected) ? "yes" : "no",
                "waitingCount": waiting.count, "hasWaiting": !waiting.isEmpty,
                "waiting": waiting.map { notification, queuedAt in
                    [
                        "subscription": notification.subscriptionID, "database": notification.databaseScope.rawValue,
                        "zone": notification.zoneID?.zoneName ?? "", "record": notification.recordName ?? "",
                        "age": String(format: "%.1f s", Double(max(0, now - queuedAt)) / 1_000),
                    ]
                },
                "missed": tokens.contains(where: \.missed) ? "yes: it will be told to fetch everything" : "no",
                "lastSeen": Self.time(tokens.map(\.lastSeen).max() ?? device.lastSeen),
            ]
        }
        var platformDevices: [[String: Any]] = []
        for environment in ContainerEnvironment.allCases {
            for endpoint in try await storage.pushEndpoints(
                container: container, environment: environment, userRecordName: user.recordName)
            {
                let last = devicePush.lastResult(of: endpoint.id)
                platformDevices.append([
                    "deviceID": endpoint.deviceID ?? "(unnamed)", "environment": environment.rawValue,
                    "channel": endpoint.channel.rawValue, "registered": Self.time(endpoint.usedAt),
                    "lastResult": last.map { [$0.outcome, $0.reason].compactMap { $0 }.joined(separator: ": ") }
                        ?? "nothing sent by this instance yet",
                    "lastResultAt": last.map { Self.time($0.at) } ?? "",
                ])
            }
        }
        var subscriptions: [[String: Any]] = []
        var shares: [[String: Any]] = []
        for environment in ContainerEnvironment.allCases {
            for scope in [DatabaseScope.private, .shared, .public] {
                let database = DatabaseLocator(
                    container: container, environment: environment, scope: scope,
                    owner: scope == .public ? DatabaseLocator.publicOwner : user.recordName)
                for subscription in try await storage.subscriptions(in: database, subscriber: user.recordName) {
                    var row = Self.subscriptionRow(subscription.definition)
                    row["environment"] = environment.rawValue
                    row["database"] = scope.rawValue
                    subscriptions.append(row)
                }
            }
            let own = DatabaseLocator(container: container, environment: environment, scope: .private, owner: user.recordName)
            for zone in try await storage.zones(in: own) {
                // A zone-wide share lists everyone it names, invited and removed too, with what they
                // may do; for shares rooted at records, the share index tells who accepted.
                let zoneShare = try await storage.lookupRecords(names: [ShareKeys.zoneWideRecordName], zone: zone.name, in: own)
                    .first??.shareState
                let participants: [String]
                if let zoneShare {
                    participants = Self.participants(of: zoneShare, usernames: usernames)
                } else {
                    participants = try await storage.acceptedParticipants(zone: zone.name, in: own)
                        .map { (usernames[$0] ?? $0) + " (accepted)" }
                }
                guard !participants.isEmpty else { continue }
                shares.append([
                    "environment": environment.rawValue, "zone": zone.name, "owner": "this user",
                    "participants": participants.joined(separator: ", "),
                ])
            }
            for shared in try await storage.sharedZones(user: user.recordName, container: container, environment: environment) {
                shares.append([
                    "environment": environment.rawValue, "zone": shared.zone.name, "owner": usernames[shared.owner] ?? shared.owner,
                    "participants": "this user",
                ])
            }
        }
        // A device's requests that failed before it was known as the user's (an expired session, a
        // bad token) carry no user, only its device ID: the user's devices are those of its push
        // connections and of its requests this instance still keeps.
        var deviceIDs = Set(pushDevices.compactMap(\.deviceID))
        for entry in log.entries(limit: log.capacity, where: {
            $0.container == container && $0.userRecordName == user.recordName && $0.deviceID != nil
        }) {
            deviceIDs.insert(entry.deviceID!)
        }
        let recent = log.entries(limit: 50) { entry in
            entry.container == container
                && (entry.userRecordName == user.recordName
                    || (entry.userRecordName == nil && entry.deviceID.map(deviceIDs.contains) == true))
        }
        values["user"] = [
            "devices": devices, "platformDevices": platformDevices, "subscriptions": subscriptions, "shares": shares,
            "requests": ConsoleTemplates.render(
                "requestTable",
                ["entries": recent.map { Self.row($0, usernames: usernames) }]),
        ]
        values["title"] = "Devices and subscriptions of \(user.username)"
        return ("people", values, container)
    }

    private func requestsPage(_ request: Request) async throws -> Page {
        let user = request.query("user")
        let device = request.query("device")
        let endpoint = request.query("endpoint")
        let status = request.query("status")
        let id = request.query("id")
        // A user is named by record name or by username (in any container).
        var userRecordNames: Set<String> = []
        if let user {
            userRecordNames.insert(user)
            for container in try await storage.containers() {
                if let account = try await storage.users(container: container.identifier).first(where: { $0.username == user }) {
                    userRecordNames.insert(account.recordName)
                }
            }
        }
        let entries = log.entries(limit: 200) { entry in
            (user == nil || entry.userRecordName.map(userRecordNames.contains) == true)
                && (device == nil || entry.deviceID == device)
                && (endpoint == nil || entry.endpoint.contains(endpoint!) || entry.path.contains(endpoint!))
                && (id == nil || entry.id == id)
                && Self.status(entry.status, matches: status)
        }
        let usernames = try await usernames(in: entries.compactMap { $0.userRecordName == nil ? nil : $0.container })
        let table = ConsoleTemplates.render("requestTable", ["entries": entries.map { Self.row($0, usernames: usernames) }])
        let filter: [String: Any] = [
            "user": user ?? "", "device": device ?? "", "endpoint": endpoint ?? "", "id": id ?? "", "status": status ?? "",
            "live": request.query("live") == "1",
        ]
        return ("requests", ["filter": filter, "table": table], nil)
    }

    /// A share's participants besides its owner, as the people page lists them: who, what they may do,
    /// and whether they accepted; and, for a public share, what anyone with its link may do.
    private static func participants(of share: ShareState, usernames: [String: String]) -> [String] {
        let names: [SharePermission: String] = [.readOnly: "read-only", .readWrite: "read-write", .none: "no access"]
        // Those who joined through a public link are listed once they accepted.
        var listed = share.participants.filter { $0.type == .user || ($0.type == .publicUser && $0.status == .accepted) }
            .map { participant in
                "\(usernames[participant.userRecordName] ?? participant.userRecordName) "
                    + "(\(names[participant.permission] ?? participant.permission.rawValue), \(participant.status.rawValue.lowercased()))"
            }
        if share.publicPermission != .none { listed.append("anyone with the link (\(names[share.publicPermission]!))") }
        return listed
    }

    /// Whether a status passes the log's status filter: `error` (4xx and 5xx), `5xx`, or one code.
    private static func status(_ status: Int, matches filter: String?) -> Bool {
        switch filter {
        case nil, "": true
        case "error": status >= 400
        case "5xx": status >= 500
        case let code?: Int(code) == status
        }
    }

    private func requestPage(_ id: String) throws -> Page {
        guard let entry = log.entry(id: id) else {
            throw StratusError(
                .notFound, "request \(id) is not in this instance's log (it keeps the last \(log.capacity) requests)")
        }
        let facts: [(String, String)] = [
            ("Request ID", entry.id), ("Time", Self.time(entry.time)), ("Method", entry.method), ("Path", entry.path),
            ("Endpoint", entry.endpoint), ("Status", String(entry.status)), ("Error", entry.errorCode ?? ""),
            ("Reason", entry.reason ?? ""), ("Duration", String(format: "%.1f ms", entry.milliseconds)),
            ("Client address", entry.address), ("Container", entry.container ?? ""), ("User", entry.userRecordName ?? ""),
            ("Device", entry.deviceID ?? ""),
        ]
        return (
            "request", ["facts": facts.map { ["name": $0.0, "value": $0.1] }, "user": entry.userRecordName ?? "",
                        "title": "Request \(entry.id)"], nil
        )
    }

    private func activityPage() -> Page {
        let buckets = configuration.metrics.timeline.lastHour()
        let seconds = Double(ActivityTimeline.bucketMilliseconds) / 1_000
        let series: [(String, String, (ActivityTimeline.Bucket) -> Double)] = [
            ("Requests per second", "/s", { Double($0.requests) / seconds }),
            ("Mean latency", " ms", { $0.requests == 0 ? 0 : $0.latencyMilliseconds / Double($0.requests) }),
            ("5xx answers per second", "/s", { Double($0.failures) / seconds }),
            ("Records written per second", "/s", { Double($0.recordsWritten) / seconds }),
            ("Push fan-out: notifications sent per second", "/s", { Double($0.notificationsSent) / seconds }),
            ("Sync lag: mean wait of a notification before it reaches its device", " ms", {
                $0.notificationsSent == 0 ? 0 : $0.waitMilliseconds / Double($0.notificationsSent)
            }),
        ]
        let charts = series.map { title, unit, value -> [String: Any] in
            let values = buckets.map(value)
            return [
                "title": title,
                "svg": Self.chart(
                    values, unit: unit,
                    minutes: Int(Double(buckets.count) * seconds / 60)),
                "latest": String(format: "%.1f", values.last ?? 0) + unit,
                "peak": String(format: "%.1f", values.max() ?? 0) + unit,
            ]
        }
        return ("activity", ["charts": charts], nil)
    }

    /// A line chart of `values` (the last `minutes`, oldest first) as SVG, scaled to the largest:
    /// a y axis from 0 to the peak in `unit`, and an x axis marked every quarter of the span.
    static func chart(_ values: [Double], unit: String, minutes: Int) -> String {
        let left = 70.0, right = 950.0, top = 10.0, bottom = 140.0
        let peak = max(values.max() ?? 0, 1e-9)
        let step = (right - left) / Double(max(values.count - 1, 1))
        let points = values.enumerated().map { index, value in
            String(format: "%.1f,%.1f", left + Double(index) * step, bottom - (value / peak) * (bottom - top))
        }.joined(separator: " ")
        var svg = ##"<svg viewBox="0 0 960 165" role="img">"##
        svg += ##"<g stroke="#c9d0dc" stroke-width="1"><line x1="\##(left)" y1="\##(top)" x2="\##(left)" y2="\##(bottom)"/>"##
        svg += ##"<line x1="\##(left)" y1="\##(bottom)" x2="\##(right)" y2="\##(bottom)"/></g>"##
        svg += ##"<g font-size="11" fill="#5b6474" text-anchor="end">"##
        svg += ##"<text x="\##(left - 6)" y="\##(top + 4)">\##(String(format: "%.1f", values.max() ?? 0))\##(unit)</text>"##
        svg += ##"<text x="\##(left - 6)" y="\##(bottom + 4)">0</text></g><g font-size="11" fill="#5b6474" text-anchor="middle">"##
        for quarter in 0...4 {
            let x = left + (right - left) * Double(quarter) / 4
            let label = quarter == 4 ? "now" : "−\(minutes * (4 - quarter) / 4) min"
            svg += ##"<text x="\##(String(format: "%.0f", x))" y="158">\##(label)</text>"##
        }
        svg += ##"</g><polyline fill="none" stroke="#2f6fde" stroke-width="1.5" points="\##(points)"/></svg>"##
        return svg
    }

    private func healthPage() async throws -> Page {
        let health = try await storage.health()
        let state = housekeeping.current
        var facts: [(String, String)] = [
            ("Storage", health.backend), ("Storage size", ByteCountFormatter.string(fromByteCount: health.sizeBytes, countStyle: .file)),
        ]
        facts += health.details.map { ($0.name, $0.value) }
        facts += [
            ("Tombstone horizon", "\(configuration.tombstoneHorizonSeconds / 86_400) days (older sync tokens expire)"),
            ("Tombstones purged every", "\(configuration.purgeIntervalSeconds) seconds"),
            ("Last housekeeping", state.lastRun.map(Self.time) ?? "not yet"),
            ("Last housekeeping failure", state.lastFailure ?? "none"),
            ("Asset store", configuration.assetsBucket.map { "S3 bucket \($0.bucket) at \($0.endpoint)" }
                ?? configuration.assetsDirectory.map { "directory \($0)" } ?? "none (assets refused)"),
            ("Push devices (this instance)", "\(hub.registry.counts.connected) connected, \(hub.registry.counts.queued) with a queue"),
            ("Device push channels refused (this instance)",
                devicePush.credentials.unhealthyChannels == 0
                    ? "none" : "\(devicePush.credentials.unhealthyChannels): see each container's page"),
            ("Request body bytes budget", ByteCountFormatter.string(fromByteCount: Int64(configuration.maxBufferedRequestBytes), countStyle: .memory)),
            ("TLS", configuration.tls == nil ? "off (put a TLS proxy in front, or use --tls-cert)" : "on"),
        ]
        return ("health", ["facts": facts.map { ["name": $0.0, "value": $0.1] }], nil)
    }

    // MARK: Helpers

    /// A request of the log as its tables show it: the user by username beside the record name.
    private static func row(_ entry: RequestLogEntry, usernames: [String: String]) -> [String: Any] {
        let user = entry.userRecordName.map { recordName in usernames[recordName].map { "\($0) (\(recordName))" } ?? recordName }
        return [
            "id": entry.id, "time": time(entry.time), "method": entry.method, "path": entry.path, "status": entry.status,
            "errorCode": entry.errorCode ?? "", "milliseconds": String(format: "%.1f", entry.milliseconds),
            "user": user ?? "", "deviceID": entry.deviceID ?? "", "failed": entry.status >= 400,
        ]
    }

    /// The usernames of the users of `containers`, by record name.
    private func usernames(in containers: some Sequence<String>) async throws -> [String: String] {
        var usernames: [String: String] = [:]
        for container in Set(containers) {
            for user in try await storage.users(container: container) { usernames[user.recordName] = user.username }
        }
        return usernames
    }

    /// A subscription as the people page shows it: its ID and kind, what it watches (a zone, a
    /// record type and how many filters, or the whole database), what fires it, and whether its
    /// notifications are silent or alerts.
    static func subscriptionRow(_ definition: SubscriptionDictionary) -> [String: Any] {
        var watches: [String] = []
        if let zone = definition.zoneID?.zoneName { watches.append("zone \(zone)") }
        if definition.zoneWide == true { watches.append("every zone") }
        if let query = definition.query {
            let filters = query.filterBy.count
            watches.append("\(query.recordType) records" + (filters == 0 ? "" : ", \(filters) filter\(filters == 1 ? "" : "s")"))
        } else if let recordType = definition.recordType {
            watches.append("\(recordType) records")
        }
        if watches.isEmpty { watches.append("the database's custom zones") }
        let firesOn =
            definition.subscriptionType == .query
            ? (definition.firesOn ?? SubscriptionEvent.allCases).map(\.rawValue).joined(separator: ", ")
                + (definition.firesOnce == true ? " (once)" : "")
            : "any change"
        let notification: String
        if let info = definition.notificationInfo, !info.isSilent {
            notification = "alert" + (info.alertBody.map { ": \($0)" } ?? info.alertLocalizationKey.map { ": \($0)" } ?? "")
        } else {
            notification = "silent"
        }
        return [
            "subscriptionID": definition.subscriptionID ?? "", "type": definition.subscriptionType?.rawValue ?? "",
            "watches": watches.joined(separator: ", "), "firesOn": firesOn, "notification": notification,
        ]
    }

    /// A time in milliseconds since 1970 as ISO 8601, UTC.
    static func time(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1_000).formatted(.iso8601)
    }

    /// A value (a container identifier, a device ID) as one path segment or query value.
    static func pathSegment(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? value
    }

    /// The fields of an `application/x-www-form-urlencoded` body (a console form, or the answer
    /// Apple posts to the browser sign-in); `BAD_REQUEST` for a field whose percent-encoding is
    /// broken or that holds U+0000.
    static func form(_ request: Request) async throws -> [String: String] {
        let body = try await request.collectBody(limit: 16 << 10, limitName: "the limit of a form")
        var fields: [String: String] = [:]
        for pair in String(decoding: body.readableBytesView, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ text: Substring) throws -> String {
                guard let value = text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else {
                    throw StratusError.badRequest("the form field '\(parts[0])' is not valid percent-encoding")
                }
                guard !value.utf8.contains(0) else {
                    throw StratusError.badRequest("the form field '\(parts[0])' holds U+0000, which Stratus refuses in all text")
                }
                return value
            }
            fields[try decoded(parts[0])] = parts.count == 2 ? try decoded(parts[1]) : ""
        }
        return fields
    }

    /// Headers every console answer carries: nothing cached, not framed, scripts and styles from this
    /// server only.
    static let securityHeaders: HTTPFields = [
        .cacheControl: "no-store",
        HTTPField.Name("Content-Security-Policy")!:
            "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; frame-ancestors 'none'; form-action 'self'",
        HTTPField.Name("X-Frame-Options")!: "DENY", HTTPField.Name("Referrer-Policy")!: "no-referrer",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
    ]

    /// Headers of a page outside the console that no other site may frame: the sign-in page (where
    /// a user types their password) and a share's page. Their inline scripts keep the console's
    /// script policy away from them.
    static let unframedPageHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
        HTTPField.Name("Content-Security-Policy")!: "frame-ancestors 'none'", HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
    ]

    static func html(_ text: String) -> Response {
        asset(text, type: "text/html; charset=utf-8")
    }

    static func asset(_ text: String, type: String) -> Response {
        var headers = securityHeaders
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(_ location: String) -> Response {
        var headers = securityHeaders
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }
}
