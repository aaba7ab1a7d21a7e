import StratusModel

/// Makes change tags: short, opaque, and different on every write.
public enum ChangeTag {
    /// The tag of the write with `sequence` in the zone whose storage identifier is `zoneID`.
    public static func make(zoneID: Int64, sequence: Int64) -> String {
        String(zoneID, radix: 36) + "-" + String(sequence, radix: 36)
    }
}
