/// Options of a coordinated read (docs/SEMANTICS.md §3.2); the raw values are
/// Apple's `NSFileCoordinatorReadingOptions`.
public struct CoordinatedReadingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Presenters need not save first: no `savePresentedItemChanges` before the read.
    public static let withoutChanges = CoordinatedReadingOptions(rawValue: 1 << 0)
    /// Coordinate the target of a final symbolic link, and hand the block the resolved path.
    public static let resolvesSymbolicLink = CoordinatedReadingOptions(rawValue: 1 << 1)
    /// Metadata only. ContainerFS deviation (docs/SEMANTICS.md §3.3): such a read never waits and asks no
    /// presenter, like `getattr` through the mount.
    public static let immediatelyAvailableMetadataOnly = CoordinatedReadingOptions(rawValue: 1 << 2)
    /// Copy the item under the read claim, give the claim up, and hand the block the copy,
    /// which is removed when the block returns (a directory is copied as a tree, not zipped).
    public static let forUploading = CoordinatedReadingOptions(rawValue: 1 << 3)
}

/// Options of a coordinated write (docs/SEMANTICS.md §3.2); the raw values are Apple's
/// `NSFileCoordinatorWritingOptions`. One option per write and item .
public struct CoordinatedWritingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// The item will be deleted: presenters are asked to accommodate the deletion; on a
    /// directory the write covers everything inside it (R4).
    public static let forDeleting = CoordinatedWritingOptions(rawValue: 1 << 0)
    /// The item will be moved: on a directory, running accesses inside finish first and
    /// queued ones wait for the move ; on a file a plain write .
    public static let forMoving = CoordinatedWritingOptions(rawValue: 1 << 1)
    /// The writer builds on the current contents: presenters save first.
    public static let forMerging = CoordinatedWritingOptions(rawValue: 1 << 2)
    /// The item is replaced by another one (create, rename over): like `forDeleting`.
    public static let forReplacing = CoordinatedWritingOptions(rawValue: 1 << 3)
    /// Metadata that does not depend on contents (mode, owner, xattrs): relinquish only.
    public static let contentIndependentMetadataOnly = CoordinatedWritingOptions(rawValue: 1 << 4)

    /// Options that make a write on a directory cover its whole subtree (R4).
    static let subtreeOptions: CoordinatedWritingOptions = [.forDeleting, .forMoving, .forReplacing]
    /// Options that ask presenters to accommodate a deletion (docs/SEMANTICS.md §3.6).
    static let deletionOptions: CoordinatedWritingOptions = [.forDeleting, .forReplacing]
}
