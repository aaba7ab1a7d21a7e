/// A geographic location (CloudKit's Location Dictionary).
public struct Location: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Degrees north of the equator, -90...90.
    public var latitude: Double
    /// Degrees east of Greenwich, -180...180.
    public var longitude: Double
    /// Radius of uncertainty in meters.
    public var horizontalAccuracy: Double?
    /// Altitude uncertainty in meters.
    public var verticalAccuracy: Double?
    /// Meters above sea level.
    public var altitude: Double?
    /// Meters per second.
    public var speed: Double?
    /// Degrees clockwise from true north.
    public var course: Double?
    /// When the location was determined, in milliseconds since 1970.
    public var timestamp: Int64?

    /// Creates a location.
    public init(
        latitude: Double, longitude: Double, horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
        altitude: Double? = nil, speed: Double? = nil, course: Double? = nil, timestamp: Int64? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.altitude = altitude
        self.speed = speed
        self.course = course
        self.timestamp = timestamp
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        latitude = try object.decode("latitude")
        longitude = try object.decode("longitude")
        guard (-90...90).contains(latitude) else {
            throw JSONDecodingError(.invalid, "latitude must be between -90 and 90", at: [.key("latitude")])
        }
        guard (-180...180).contains(longitude) else {
            throw JSONDecodingError(.invalid, "longitude must be between -180 and 180", at: [.key("longitude")])
        }
        horizontalAccuracy = try object.decodeIfPresent("horizontalAccuracy")
        verticalAccuracy = try object.decodeIfPresent("verticalAccuracy")
        altitude = try object.decodeIfPresent("altitude")
        speed = try object.decodeIfPresent("speed")
        course = try object.decodeIfPresent("course")
        timestamp = try object.decodeIfPresent("timestamp")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("latitude")
        writer.double(latitude)
        writer.key("longitude")
        writer.double(longitude)
        for (name, value) in [
            ("horizontalAccuracy", horizontalAccuracy), ("verticalAccuracy", verticalAccuracy),
            ("altitude", altitude), ("speed", speed), ("course", course),
        ] {
            if let value {
                writer.key(name)
                writer.double(value)
            }
        }
        writer.field("timestamp", timestamp)
        writer.endObject()
    }
}
