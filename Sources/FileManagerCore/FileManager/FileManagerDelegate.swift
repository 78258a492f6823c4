import SystemPackage

/// NSFileManagerDelegate without the prefix (docs/SEMANTICS.md §8.1): asked before each
/// item a copy, link or remove touches, once for a move, and after an error.
///
/// Every method has a default: `should…Item` proceeds (true), `shouldProceedAfterError`
/// stops (false), as an unimplemented Objective-C method behaves. A file manager made with
/// `CoreFileManager(delegate:)` holds its delegate weakly; a released delegate behaves as no
/// delegate. Paths are the logical ones the caller named (a copy is assembled under a
/// temporary name, but the delegate is told the destination path it asked for).
///
/// Called on the thread that called the file manager, synchronously.
public protocol FileManagerDelegate: AnyObject, Sendable {
    /// Before copying each item of a tree; false skips the item (and what is below it).
    func fileManager(_ fileManager: CoreFileManager, shouldCopyItemAt source: FilePath, to destination: FilePath) -> Bool
    /// After copying an item failed; true skips the item and goes on, false stops with `error`.
    func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                     copyingItemAt source: FilePath, to destination: FilePath) -> Bool

    /// Before a move, once, even for a directory.
    func fileManager(_ fileManager: CoreFileManager, shouldMoveItemAt source: FilePath, to destination: FilePath) -> Bool
    /// After the move failed; true reports success anyway, false throws `error`.
    func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                     movingItemAt source: FilePath, to destination: FilePath) -> Bool

    /// Before linking each item of a tree; false skips the item.
    func fileManager(_ fileManager: CoreFileManager, shouldLinkItemAt source: FilePath, to destination: FilePath) -> Bool
    /// After linking an item failed; true skips it and goes on, false stops with `error`.
    func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                     linkingItemAt source: FilePath, to destination: FilePath) -> Bool

    /// Before removing each item, a directory before its contents; false keeps the item.
    func fileManager(_ fileManager: CoreFileManager, shouldRemoveItemAt path: FilePath) -> Bool
    /// After removing an item failed; true keeps it and goes on, false stops with `error`.
    func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                     removingItemAt path: FilePath) -> Bool
}

extension FileManagerDelegate {
    public func fileManager(_ fileManager: CoreFileManager, shouldCopyItemAt source: FilePath, to destination: FilePath) -> Bool { true }
    public func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                            copyingItemAt source: FilePath, to destination: FilePath) -> Bool { false }
    public func fileManager(_ fileManager: CoreFileManager, shouldMoveItemAt source: FilePath, to destination: FilePath) -> Bool { true }
    public func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                            movingItemAt source: FilePath, to destination: FilePath) -> Bool { false }
    public func fileManager(_ fileManager: CoreFileManager, shouldLinkItemAt source: FilePath, to destination: FilePath) -> Bool { true }
    public func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                            linkingItemAt source: FilePath, to destination: FilePath) -> Bool { false }
    public func fileManager(_ fileManager: CoreFileManager, shouldRemoveItemAt path: FilePath) -> Bool { true }
    public func fileManager(_ fileManager: CoreFileManager, shouldProceedAfterError error: FileManagerError,
                            removingItemAt path: FilePath) -> Bool { false }
}
