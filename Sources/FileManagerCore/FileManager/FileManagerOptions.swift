/// NSDirectoryEnumerationOptions (docs/SEMANTICS.md §8.9; the raw values are Apple's).
/// `contentsOfDirectory(atPath:options:)` honours only `skipsHiddenFiles`.
public struct DirectoryEnumerationOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Lists the root's entries without descending into any directory.
    public static let skipsSubdirectoryDescendants = DirectoryEnumerationOptions(rawValue: 1 << 0)
    /// Lists a package but not what is inside it (docs/SEMANTICS.md §1.3).
    public static let skipsPackageDescendants = DirectoryEnumerationOptions(rawValue: 1 << 1)
    /// Skips names beginning with `.`, and everything below them.
    public static let skipsHiddenFiles = DirectoryEnumerationOptions(rawValue: 1 << 2)
}

/// NSFileManagerItemReplacementOptions (docs/SEMANTICS.md §8.9).
public struct ItemReplacementOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Keep the new item's mode, owner, creation date and xattrs instead of the original's.
    public static let usingNewMetadataOnly = ItemReplacementOptions(rawValue: 1 << 0)
    /// Leave the backup item in place after a successful replacement (default: delete it).
    public static let withoutDeletingBackupItem = ItemReplacementOptions(rawValue: 1 << 1)
}
