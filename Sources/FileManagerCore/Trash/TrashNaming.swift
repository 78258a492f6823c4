/// How a name is made free in a trash directory (docs/DESIGN.md 49): the name itself, then
/// `.2`, `.3`, … inserted before its first dot (a leading dot belongs to the name), or
/// appended when it has none: `a.tar.gz`, `a.2.tar.gz`, `a.3.tar.gz`; `notes`, `notes.2`.
/// Deterministic, and the extension stays, as GLib names collisions. Every candidate leaves
/// room for `.trashinfo` within a 255-byte name.
public enum TrashNaming {
    static let suffix = Array(".trashinfo".utf8)
    public static let maximumLength = 255 - suffix.count

    /// The `attempt`th candidate for `name` (0: the name itself).
    public static func candidate(_ name: [UInt8], attempt: Int) -> [UInt8] {
        let dot = name.dropFirst().firstIndex(of: 0x2E) ?? name.endIndex
        var stem = Array(name[..<dot]), rest = Array(name[dot...])
        let number = attempt == 0 ? [] : Array(".\(attempt + 1)".utf8)
        let over = stem.count + number.count + rest.count - maximumLength
        if over > 0 {
            // Too long: shorten the stem, then (for a name that is nearly all extension) the rest.
            let fromStem = min(over, max(stem.count - 1, 0))
            stem.removeLast(fromStem)
            if over > fromStem { rest.removeLast(min(over - fromStem, rest.count)) }
        }
        return stem + number + rest
    }

    /// The info file's name for the trash name `name`.
    public static func infoName(_ name: [UInt8]) -> [UInt8] { name + suffix }

    /// The trash name an info file's name stands for; nil for other files.
    public static func trashName(ofInfo file: [UInt8]) -> [UInt8]? {
        guard file.count > suffix.count, Array(file.suffix(suffix.count)) == suffix else { return nil }
        return Array(file.dropLast(suffix.count))
    }
}
