/// A string enum of the wire protocol whose decoding error lists the values it accepts.
public protocol WireEnum: RawRepresentable<String>, CaseIterable, JSONDecodable {}

extension WireEnum {
    public init(json: JSONValue) throws {
        let raw = try String(json: json)
        guard let value = Self(rawValue: raw) else {
            throw JSONDecodingError(
                .invalid, "'\(raw)' is not one of " + Self.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self = value
    }
}

extension RecordOperationType: WireEnum {}
extension ZoneOperationType: WireEnum {}
extension ReferenceAction: WireEnum {}
extension ServerErrorCode: WireEnum {}
extension DatabaseScope: WireEnum {}
extension ContainerEnvironment: WireEnum {}
