import Glibc
import SystemPackage

/// The questions a recursive copy, link or removal asks about each item; a
/// `CoreFileManager` answers them from its delegate (docs/SEMANTICS.md §8.1). The
/// defaults proceed with every item and stop at the first error, which is what the core's
/// own walks (staging, purge, container removal) want.
///
/// Paths are the logical ones the user named, for the delegate and error messages; the
/// walks themselves work on descriptors and single names.
struct TreeHooks {
    /// Before each item, a directory before its contents; false skips the item. `destination`
    /// is nil for a removal.
    var shouldProcess: (_ source: FilePath, _ destination: FilePath?) -> Bool = { _, _ in true }
    /// After an item failed: true skips it and goes on, false stops the walk with the error.
    var shouldProceed: (_ error: FileManagerError, _ source: FilePath, _ destination: FilePath?) -> Bool = { _, _, _ in false }
    /// A copy met a FIFO, socket or device node it was told not to recreate (`type`: its
    /// `S_IFMT` bits).
    var skipped: (_ source: FilePath, _ type: mode_t) -> Void = { _, _ in }

    init() {}

    /// Hooks whose answers come from `manager`'s delegate, or the defaults without one.
    init(manager: CoreFileManager, operation: TreeOperation) {
        guard let delegate = manager.delegate else { return }
        switch operation {
        case .copy:
            shouldProcess = { [weak delegate] s, d in delegate?.fileManager(manager, shouldCopyItemAt: s, to: d ?? s) ?? true }
            shouldProceed = { [weak delegate] e, s, d in delegate?.fileManager(manager, shouldProceedAfterError: e, copyingItemAt: s, to: d ?? s) ?? false }
        case .link:
            shouldProcess = { [weak delegate] s, d in delegate?.fileManager(manager, shouldLinkItemAt: s, to: d ?? s) ?? true }
            shouldProceed = { [weak delegate] e, s, d in delegate?.fileManager(manager, shouldProceedAfterError: e, linkingItemAt: s, to: d ?? s) ?? false }
        case .remove:
            shouldProcess = { [weak delegate] s, _ in delegate?.fileManager(manager, shouldRemoveItemAt: s) ?? true }
            shouldProceed = { [weak delegate] e, s, _ in delegate?.fileManager(manager, shouldProceedAfterError: e, removingItemAt: s) ?? false }
        }
    }

    /// Asks `shouldProceed` about a failure: returns normally to skip the item, throws to stop.
    func failed(_ errno: Errno, at path: FilePath, source: FilePath, destination: FilePath?) throws(FileManagerError) {
        let error = FileManagerError(errno, path: path.string)
        if !shouldProceed(error, source, destination) { throw error }
    }
}

/// Which delegate questions a walk asks.
enum TreeOperation {
    case copy, link, remove
}
