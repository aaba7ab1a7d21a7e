import Foundation

/// An S3-compatible bucket that holds asset bytes (Amazon S3, MinIO, Garage, Ceph and the like), so
/// that several server instances over one database serve the same assets.
///
/// Objects are at `<endpoint>/<bucket>/<prefix>/<sha256 hex>` (path-style URLs), requests are signed
/// with AWS Signature Version 4, and each asset is uploaded with a single `PUT`.
public struct S3Bucket: Sendable, Equatable {
    /// The service's base URL, `http://` or `https://`, such as `https://s3.eu-west-1.amazonaws.com`
    /// or `http://127.0.0.1:9000`.
    public var endpoint: String
    /// The bucket's name; it must exist.
    public var bucket: String
    /// What the objects' keys start with, as folders separated by `/`; empty (the default) puts the
    /// objects at the top of the bucket.
    public var prefix: String
    /// The region requests are signed for; `us-east-1` by default, which S3-compatible services
    /// usually accept.
    public var region: String
    /// The access key ID of the credentials requests are signed with.
    public var accessKeyID: String
    /// The secret access key of the credentials requests are signed with.
    public var secretAccessKey: String

    /// Creates the settings of a bucket.
    public init(
        endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1", accessKeyID: String,
        secretAccessKey: String
    ) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }

    /// Parses `s3://bucket` or `s3://bucket/key/prefix`, as a command line takes it, into the
    /// settings of that bucket; `nil` when `url` is not such a URL with a bucket name of lowercase
    /// letters, digits, dots and hyphens, or `endpoint` is not an `http` or `https` URL.
    public init?(
        url: String, endpoint: String, region: String = "us-east-1", accessKeyID: String, secretAccessKey: String
    ) {
        guard url.hasPrefix("s3://"), let endpointURL = URLComponents(string: endpoint),
            endpointURL.scheme == "http" || endpointURL.scheme == "https", endpointURL.host?.isEmpty == false
        else { return nil }
        let path = url.dropFirst("s3://".count).split(separator: "/", omittingEmptySubsequences: false)
        let bucket = path[0]
        guard !bucket.isEmpty,
            bucket.utf8.allSatisfy({ (97...122).contains($0) || (48...57).contains($0) || $0 == 45 || $0 == 46 })
        else { return nil }
        let prefix = path.dropFirst().filter { !$0.isEmpty }.joined(separator: "/")
        self.init(
            endpoint: endpoint, bucket: String(bucket), prefix: prefix, region: region, accessKeyID: accessKeyID,
            secretAccessKey: secretAccessKey)
    }
}

extension S3Bucket: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The bucket without its keys, so that logging a configuration never prints them.
    public var description: String {
        "S3Bucket(endpoint: \(endpoint), bucket: \(bucket), prefix: \(prefix), region: \(region), keys: <redacted>)"
    }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without the keys, for `dump` and the default printing of types holding a bucket.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["endpoint": endpoint, "bucket": bucket, "prefix": prefix, "region": region, "keys": "<redacted>"])
    }
}
