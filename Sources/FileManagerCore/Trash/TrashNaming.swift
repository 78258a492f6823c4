/// Names in a trash directory (docs/DESIGN.md 49): `CollisionNames`, each candidate leaving
/// room for `.trashinfo` within a 255-byte name.
public enum TrashNaming {
    static let suffix = Array(".trashinfo".utf8)
    public static let maximumLength = 255 - suffix.count

    /// The `attempt`th candidate for `name` (0: the name itself; `CollisionNames`).
    public static func candidate(_ name: [UInt8], attempt: Int) -> [UInt8] {
        CollisionNames.candidate(name, attempt + 1, maximumLength: maximumLength)
    }

    /// The info file's name for the trash name `name`.
    public static func infoName(_ name: [UInt8]) -> [UInt8] { name + suffix }

    /// The trash name an info file's name stands for; nil for other files.
    public static func trashName(ofInfo file: [UInt8]) -> [UInt8]? {
        guard file.count > suffix.count, Array(file.suffix(suffix.count)) == suffix else { return nil }
        return Array(file.dropLast(suffix.count))
    }
}
