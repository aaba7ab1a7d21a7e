import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StratusModel
import StratusStorage
import Synchronization

/// The body of `assets/rereference`.
struct RereferenceAssetsRequest: JSONDecodable {
    struct Item: JSONDecodable {
        var recordName: String
        var fieldName: String

        init(json: JSONValue) throws {
            let object = try json.object()
            recordName = try object.decode("recordName")
            fieldName = try object.decode("fieldName")
        }
    }

    var zoneID: ZoneID?
    var assets: [Item]

    init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decodeIfPresent("zoneID")
        assets = try object.decode("assets")
    }
}

/// What a `Range: bytes=…` header asks of a file.
enum ByteRange: Equatable {
    /// The whole file: no header, or one Stratus does not serve (such as several ranges).
    case whole
    /// These bytes.
    case part(ClosedRange<Int>)
    /// No byte of the file is in the range: `416`.
    case unsatisfiable

    /// The request of a header for a file of `size` bytes.
    init(header: String?, size: Int) {
        guard let header, header.hasPrefix("bytes="), !header.contains(",") else {
            self = .whole
            return
        }
        let parts = header.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            self = .whole
            return
        }
        let bounds: (Int, Int)
        switch (Int(parts[0]), Int(parts[1])) {
        case (let start?, let end?) where start <= end: bounds = (start, min(end, size - 1))
        case (let start?, nil) where parts[1].isEmpty: bounds = (start, size - 1)
        case (nil, let suffix?) where parts[0].isEmpty && suffix > 0: bounds = (max(0, size - suffix), size - 1)
        default:
            self = .whole
            return
        }
        self = bounds.0 < size && bounds.0 <= bounds.1 ? .part(bounds.0...bounds.1) : .unsatisfiable
    }
}

extension DatabaseEndpoints {
    func addAssetRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.assetsUpload, authorizedBy: authenticator) { request, context, access in try await requestUploads(request, context, access) }
        router.on(Endpoints.assetsRereference, authorizedBy: authenticator) { request, context, access in try await rereference(request, context, access) }
        router.on(Endpoints.assetsDownload, authorizedBy: authenticator) { request, context, access in try await download(request, context, access) }
        router.post("assets/1/upload") { request, context in try await receiveUpload(request, context) }
        router.get("assets/1/download/:checksum/:file") { request, context in try await signedDownload(request, context) }
    }

    private func requireAssets() throws -> AssetStore {
        guard let assets else {
            throw StratusError.badRequest("this server has no asset storage configured, so it accepts no assets")
        }
        return assets
    }

    /// Checks the asset values of a write: receipts are verified, values reduced to checksum and size,
    /// and newly uploaded checksums noted for storage to check.
    func admitAssets(_ write: inout RecordWrite, field: String, container: String) throws {
        for (name, value) in write.fields where value.type == .asset || value.type == .assetList {
            let assets = try requireAssets()
            write.fields[name] = try value.mappingAssets { asset in
                let (stored, uploaded) = try assets.admit(asset, container: container, field: "\(field).\(name)")
                if uploaded, let checksum = stored.fileChecksum { write.uploadedAssets.insert(checksum) }
                return stored
            }
        }
    }

    /// `assets/upload`: one upload URL per requested field.
    func requestUploads(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let user = try access.requireUser()
        let assets = try requireAssets()
        let body = try await request.decodeJSON(UploadAssetsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        _ = try await access.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
        try checkCount(body.tokens.count, field: "tokens", limit: limits.maxOperationsPerRequest)
        let validator = RecordValidator(limits: limits)
        for (index, token) in body.tokens.enumerated() {
            if let violation = validator.violation(ofIdentifier: token.fieldName) {
                throw StratusError.badRequest("tokens[\(index)].fieldName '\(token.fieldName)' \(violation)")
            }
        }
        // One asset per token, each up to the size limit: what the URL may bring in all.
        let ticket = assets.uploadTicket(
            container: target.container, user: user, allowance: Int64(body.tokens.count) * Int64(limits.maxAssetSizeBytes))
        let url = target.baseURL + "/assets/1/upload?ticket=" + ticket.queryValueEncoded
        return await listResponse("tokens") { writer in
            for token in body.tokens {
                UploadAssetsResponse.Token(
                    recordName: token.recordName ?? UUID().uuidString, fieldName: token.fieldName, url: url
                ).write(to: &writer)
            }
        }
    }

    /// `POST /assets/1/upload?ticket=…`: the bytes of one asset, raw or as the one file part of a
    /// `multipart/form-data` body, answered with its receipt. The upload must fit the ticket's bytes
    /// and its user's quota of uploads not yet held by a record (``QuotaKeeper``): `QUOTA_EXCEEDED`
    /// otherwise, from `Content-Length` before a byte is read when it says so, and nothing is kept.
    func receiveUpload(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let assets = try requireAssets()
        guard let text = request.query("ticket") else {
            throw StratusError.badRequest("ticket is required: use the url that assets/upload returned")
        }
        let limit = limits.maxAssetSizeBytes
        // A URL issued before tickets carried their bytes allows as many assets as one request may ask.
        let ticket = try assets.ticket(text, defaultAllowance: Int64(limits.maxOperationsPerRequest) * Int64(limit))
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw StratusError(.limitExceeded, "the asset is \(length) bytes; the limit is \(limit) bytes per asset")
        }
        let room = try await quotas.uploadRoom(ticket)
        let allowed = Int(min(Int64(limit), room.bytes))
        if let length = request.headers[.contentLength].flatMap(Int.init), length > allowed { throw room.refusal }
        let overLimit = allowed < limit ? room.refusal : nil
        // The upload counts once its size is known and fits; if its bytes are then not stored, it counts for nobody.
        let recorded = Mutex<PendingUpload?>(nil)
        let admit = { (checksum: String, size: Int64) in
            let upload = try await quotas.recordUpload(ticket, checksum: checksum, size: size)
            recorded.withLock { $0 = upload }
        }
        // The upload's staging file is open until it is stored.
        let transfer = try assets.transfers.begin()
        defer { transfer.end() }
        // The bytes raw, or the one file of a multipart/form-data form, as Apple's web library sends.
        let (checksum, size): (String, Int64)
        do {
            (checksum, size) =
                if let boundary = try MultipartFileBody<RequestBody>.boundary(ofContentType: request.headers[.contentType]) {
                    try await assets.receive(
                        MultipartFileBody(base: request.body, boundary: boundary), limit: allowed, overLimit: overLimit,
                        admit: admit)
                } else {
                    try await assets.receive(request.body, limit: allowed, overLimit: overLimit, admit: admit)
                }
        } catch {
            if let upload = recorded.withLock({ $0 }) { await quotas.forgetUpload(upload) }
            throw error
        }
        metrics.assetBytesIn.increment(by: size)
        return .json(
            AssetUploadResponse(
                singleFile: AssetValue(
                    fileChecksum: checksum, size: size,
                    receipt: assets.receipt(checksum: checksum, size: size, container: ticket.container))))
    }

    /// `assets/rereference`: fresh receipts for assets that records the caller can read already hold,
    /// so another record can hold them without uploading the bytes again. Each item answers with an
    /// Asset Dictionary (with its `recordName` and `fieldName`), ready to save as an ASSETID value.
    func rereference(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let assets = try requireAssets()
        let body = try await request.decodeJSON(RereferenceAssetsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        let zone = try await access.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
        try checkCount(body.assets.count, field: "assets", limit: limits.maxOperationsPerRequest)
        let found = try await storage.lookupRecords(
            names: body.assets.map(\.recordName), zone: zone.name, in: zone.locator)
        let schema = try await storage.schema(container: target.container, environment: target.environment)
        return try await listResponse("assets") { writer in
            for (item, record) in zip(body.assets, found) {
                guard let record, access.mayRead(record, in: zone, schema: schema),
                    let value = try record.decodeFields()[item.fieldName],
                    value.type == .asset || value.type == .assetList
                else {
                    ErrorDictionary(
                        serverErrorCode: .notFound,
                        reason: "record '\(item.recordName)' has no asset field '\(item.fieldName)' you can read",
                        recordName: item.recordName, uuid: RequestTrace.nextID()
                    ).write(to: &writer)
                    continue
                }
                // Each item is an Asset Dictionary beside the record and field it came from, which
                // clients save as the value of an ASSETID field; a list field gives an item per asset.
                let held: [FieldValue] = if case .list(_, let elements) = value { elements } else { [value] }
                for case .asset(let asset) in held {
                    let renewed = asset.fileChecksum.flatMap { checksum in
                        asset.size.map { size in
                            AssetValue(
                                fileChecksum: checksum, size: size,
                                receipt: assets.receipt(checksum: checksum, size: size, container: target.container))
                        }
                    } ?? asset
                    writer.beginObject()
                    writer.field("recordName", item.recordName)
                    writer.field("fieldName", item.fieldName)
                    renewed.writeMembers(to: &writer)
                    writer.endObject()
                }
            }
        }
    }

    /// `GET …/assets/download/{checksum}?zoneName=…&recordName=…&fieldName=…`: the bytes of an asset
    /// that a record the caller can read holds in that field, with `Range` support.
    func download(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let assets = try requireAssets()
        let checksum = try context.parameters.require("checksum")
        guard let recordName = request.query("recordName"), let fieldName = request.query("fieldName") else {
            throw StratusError.badRequest("recordName and fieldName are required: use the record's downloadURL")
        }
        let zone = try await access.zone(
            request.query("zoneName").map { ZoneID(zoneName: $0, ownerRecordName: request.query("ownerRecordName")) },
            field: "zoneName", limits: limits, shares: storage)
        let record = try await storage.lookupRecords(names: [recordName], zone: zone.name, in: zone.locator)[0]
        let schema = access.enforcesGrants
            ? try await storage.schema(container: target.container, environment: target.environment) : Schema()
        guard let record, access.mayRead(record, in: zone, schema: schema),
            try Self.holds(record, checksum, in: fieldName)
        else {
            throw StratusError(
                .notFound, "record '\(recordName)' has no asset \(checksum) in field '\(fieldName)' that you can read")
        }
        return try await serve(checksum, from: assets, request, context)
    }

    /// `GET /assets/1/download/{checksum}/{file name}?ticket=…`: a record's signed `downloadURL`, which
    /// works without tokens until it expires, while the record still holds the asset. The file name
    /// (Apple's `${f}`) may be anything.
    func signedDownload(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let assets = try requireAssets()
        let checksum = try context.parameters.require("checksum")
        guard let ticket = request.query("ticket") else {
            throw StratusError.badRequest("ticket is required: use the record's downloadURL as returned")
        }
        let granted = try assets.download(ofTicket: ticket, checksum: checksum)
        let record = try await storage.lookupRecords(names: [granted.record], zone: granted.zone, in: granted.database)[0]
        guard let record, try Self.holds(record, checksum, in: granted.field) else {
            throw StratusError(
                .notFound, "record '\(granted.record)' no longer holds asset \(checksum) in field '\(granted.field)'")
        }
        return try await serve(checksum, from: assets, request, context)
    }

    /// Whether `record` holds the asset `checksum` in `field`.
    private static func holds(_ record: StoredRecord, _ checksum: String, in field: String) throws -> Bool {
        guard !record.deleted, let value = try record.decodeFields()[field] else { return false }
        return value.elements.contains { if case .asset(let asset) = $0 { asset.fileChecksum == checksum } else { false } }
    }

    /// The asset's bytes, whole or the range asked for.
    private func serve(
        _ checksum: String, from assets: AssetStore, _ request: Request, _ context: StratusRequestContext
    ) async throws -> Response {
        guard let size = try await assets.blobs.size(of: checksum) else {
            throw StratusError(.internalError, "the bytes of asset \(checksum) are missing")
        }
        var headers: HTTPFields = [
            .contentType: "application/octet-stream", .acceptRanges: "bytes", .eTag: "\"\(checksum)\"",
            // An asset opened in a browser is never run as a page of this origin.
            HTTPField.Name("X-Content-Type-Options")!: "nosniff", HTTPField.Name("Content-Security-Policy")!: "sandbox",
        ]
        guard size > 0 else { return Response(status: .ok, headers: headers, body: ResponseBody()) }
        // The bytes of `range`, holding a transfer's place (a file, or a bucket connection, open) while
        // they are written.
        func bytes(_ range: ClosedRange<Int>) async throws -> ResponseBody {
            let transfer = try assets.transfers.begin()
            let body = try await assets.blobs.body(of: checksum, range: range, context: context)
            return ResponseBody(contentLength: body.contentLength) { writer in
                defer { transfer.end() }
                try await body.write(writer)
            }
        }
        switch ByteRange(header: request.headers[.range], size: size) {
        case .whole:
            let body = try await bytes(0...(size - 1))
            metrics.assetBytesOut.increment(by: size)
            return Response(status: .ok, headers: headers, body: body)
        case .part(let range):
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            let body = try await bytes(range)
            metrics.assetBytesOut.increment(by: range.count)
            return Response(status: .partialContent, headers: headers, body: body)
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
    }
}
