/// A container's name: a reverse-DNS bundle identifier (`com.example.notes`).
///
/// Letters, digits, `-` and `.` only; at least two non-empty labels; at most 255 bytes
/// (it is one path component). These are the characters `CFBundleIdentifier` allows.
public struct BundleIdentifier: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init?(_ raw: String) {
        guard Self.isValid(Array(raw.utf8)) else { return nil }
        rawValue = raw
    }

    /// Validates raw name bytes as they come from the kernel.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        var labels = 1, labelLength = 0
        for b in bytes {
            switch b {
            case UInt8(ascii: "."):
                if labelLength == 0 { return false }
                labels += 1
                labelLength = 0
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                labelLength += 1
            default:
                return false
            }
        }
        return labels >= 2 && labelLength > 0
    }

    /// The bundle directory's name: the last label, capitalised, plus `.app`
    /// (`com.example.notes` → `Notes.app`), as docs/SEMANTICS.md §1 shows.
    public var bundleDirectoryName: String {
        let last = rawValue.split(separator: ".").last.map(String.init) ?? rawValue
        return last.prefix(1).uppercased() + last.dropFirst() + ".app"
    }

    /// A human name for listings: the last label, capitalised.
    public var displayName: String { String(bundleDirectoryName.dropLast(4)) }

    public var description: String { rawValue }
}
