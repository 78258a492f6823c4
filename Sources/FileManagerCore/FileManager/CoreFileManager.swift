import Glibc
import SystemPackage

/// NSFileManager's API for the core, in Foundation's vocabulary without its prefix, on
/// absolute `FilePath`s of any directory tree (the store, a container, a scratch directory).
///
/// Every operation opens the parent of the path it names (`O_PATH | O_DIRECTORY`, following
/// links in the *intermediate* components as path resolution always does) and then acts on
/// the final name with `*at()` calls and `O_NOFOLLOW`: a final symlink is followed only where
/// NSFileManager's rule says so (docs/SEMANTICS.md §8.9). Failures are thrown as
/// `FileManagerError`s naming the path they concern; nothing traps.
///
/// Every method takes the `Caller` it works for (docs/SEMANTICS.md §8.1): new items get the caller's
/// owner (through `Credentials.asCaller`) and a mode computed from the caller's umask and set
/// explicitly, so the daemon's own umask never shows. Paths must be absolute: the core has no
/// current directory (docs/SEMANTICS.md §8.1).
///
/// Sendable note: the only stored state is the delegate reference, which is immutable and
/// weak; the methods themselves keep nothing between calls, so any thread may call them.
public final class CoreFileManager: Sendable {
    /// The shared instance. It has no delegate and never will (docs/SEMANTICS.md §8.1).
    public static let `default` = CoreFileManager()

    /// Asked before and after the items of a copy, move, link or removal; held weakly, so a
    /// released delegate behaves as no delegate.
    public weak let delegate: (any FileManagerDelegate)?

    /// A file manager without a delegate.
    public init() {
        delegate = nil
    }

    /// A private file manager whose operations consult `delegate` (docs/SEMANTICS.md §8.1).
    public init(delegate: any FileManagerDelegate) {
        self.delegate = delegate
    }
}

// MARK: - Paths

extension CoreFileManager {
    /// Splits an absolute path into its parent and final name. `/` itself is named `.` in `/`,
    /// which the mutating operations refuse like any `.`.
    static func split(_ path: FilePath) throws(FileManagerError) -> (parent: FilePath, name: FilePath.Component) {
        guard !path.isEmpty, path.isAbsolute else { throw .invalidArgument(path.string) }
        guard let name = path.lastComponent else { return (path, FilePath.Component(".")) }
        return (path.removingLastComponent(), name)
    }

    /// Opens the parent directory of `path` and calls `body` with its descriptor and the
    /// final name. A missing parent is `noSuchItem`, a file among the parents `notADirectory`,
    /// both naming `path`.
    static func withParent<R>(of path: FilePath, _ body: (CInt, FilePath.Component) throws(FileManagerError) -> R) throws(FileManagerError) -> R {
        let (parent, name) = try split(path)
        let dir = try attempt(path) { () throws(Errno) in
            try parent.withName { p throws(Errno) in try Syscall.open(p, O_PATH | O_DIRECTORY) }
        }
        defer { Syscall.close(dir) }
        return try body(dir, name)
    }

    /// Runs a system call sequence and names `path` in its error.
    @inline(__always)
    static func attempt<R>(_ path: FilePath, _ body: () throws(Errno) -> R) throws(FileManagerError) -> R {
        do { return try body() } catch { throw FileManagerError(error, path: path.string) }
    }

    /// Opens the final name `name` of `dir` with `flags` (add `O_NOFOLLOW` to stay on a link).
    static func open(_ dir: CInt, _ name: FilePath.Component, _ flags: CInt, _ mode: mode_t = 0) throws(Errno) -> CInt {
        try name.withName { p throws(Errno) in try Syscall.openat(dir, p, flags, mode) }
    }

    /// `lstat` of the final name.
    static func lstat(_ dir: CInt, _ name: FilePath.Component) throws(Errno) -> stat {
        try name.withName { p throws(Errno) in try Syscall.fstatat(dir, p) }
    }

    /// Refuses `.`, `..` and `/` as the item of a mutation (docs/SEMANTICS.md §8.5).
    static func requireRegularName(_ path: FilePath) throws(FileManagerError) {
        guard let last = path.lastComponent, last.kind == .regular else { throw .invalidArgument(path.string) }
    }

    /// A fresh hidden name in the same directory, for assembling an item before it is
    /// renamed into place (`RENAME_NOREPLACE`): a crash leaves a stray temporary, never a
    /// partial item under the real name.
    static func temporaryName() -> FilePath.Component {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return FilePath.Component(".containerfs-" + hex + ".tmp")!
    }

    /// Removes a temporary left by a failed operation; failures are ignored (it is hidden,
    /// and the error that matters is the one being reported).
    static func discard(_ dir: CInt, _ name: FilePath.Component) {
        var outcome = TreeRemoval.Outcome()
        _ = try? TreeRemoval.remove(dir, name, at: FilePath(root: nil, [name]), hooks: TreeHooks(), outcome: &outcome)
    }
}
