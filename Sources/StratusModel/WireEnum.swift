/// A string enum of the wire protocol whose decoding error lists the values it accepts.
public protocol WireEnum: RawRepresentable<String>, CaseIterable, Decodable {}

extension WireEnum {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let value = Self(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "'\(raw)' is not one of " + Self.allCases.map(\.rawValue).joined(separator: ", "))
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
