import Glibc
import SystemPackage

/// NSDirectoryEnumerator for the core: a deep, pre-order walk from a root directory
/// (docs/SEMANTICS.md §8.3). Made by `CoreFileManager.enumerator(at:…)`.
///
/// - Yields absolute paths (and `relativePath`, the path below the root). The root itself
///   is not yielded and is level 0; its entries are level 1.
/// - Never yields `.`, `..` or `._*` (AppleDouble resource forks, which NSFileManager does not
///   show as items); with `.skipsHiddenFiles` no name beginning with `.` either, nor anything
///   below one.
/// - Symlinks are yielded, never followed; a directory on another file system than its
///   parent (a mount point met on the way) is yielded but not entered. A root that is a
///   mount point is walked: the comparison starts there.
/// - A root that is a file or a symlink yields nothing; the walk works on descriptors, so a
///   directory renamed during the walk is followed by its contents, not by its old path.
/// - Errors (an unreadable directory, a vanished entry) go to the error handler with the path
///   they concern: true goes on without that item's contents, false ends the walk. No handler
///   means true .
///
/// Not thread-safe: one walk, one thread. Holds one descriptor per level being walked.
public final class DirectoryEnumerator: Sequence, IteratorProtocol {
    /// One directory being walked: its descriptor and the names still to yield.
    private struct Frame {
        let fd: CInt
        let path: FilePath
        let relative: FilePath
        let device: dev_t
        var names: [FilePath.Component]
        var index = 0
    }

    private let options: DirectoryEnumerationOptions
    private let errorHandler: ((FilePath, FileManagerError) -> Bool)?
    private let hidesResourceForks: Bool
    private let caller: Caller
    private var stack: [Frame] = []
    /// The directory last yielded, entered on the next call unless `skipDescendants()`.
    private var pending: (name: FilePath.Component, st: stat)?
    private var finished = false

    /// How deep the last yielded item is: 1 for the root's entries.
    public private(set) var level = 0
    /// The last yielded item's path below the root.
    public private(set) var relativePath = FilePath()
    /// The last yielded item's attributes (lstat: a link describes itself), as read when it
    /// was met; nil before the first item. Only the stat-derived fields: `creationDate` is nil
    /// and `extensionHidden` false (they cost a call each; `attributesOfItem` reads them).
    public var fileAttributes: FileAttributes? {
        lastStat.map { FileAttributes($0, creationDate: nil, extensionHidden: false) }
    }
    private var lastStat: stat?

    init(root: FilePath, followsRootSymlink: Bool, hidesResourceForks: Bool, options: DirectoryEnumerationOptions,
         caller: Caller, errorHandler: ((FilePath, FileManagerError) -> Bool)?) {
        self.options = options
        self.errorHandler = errorHandler
        self.hidesResourceForks = hidesResourceForks
        self.caller = caller
        let flags = O_RDONLY | O_DIRECTORY | O_NONBLOCK | (followsRootSymlink ? 0 : O_NOFOLLOW)
        do throws(FileManagerError) {
            let frame = try Credentials.asCaller(caller) { () throws(FileManagerError) in
                try CoreFileManager.withParent(of: root) { dir, name throws(FileManagerError) in
                    try CoreFileManager.attempt(root) { () throws(Errno) in
                        try Self.frame(DirectoryStream(fd: CoreFileManager.open(dir, name, flags)), path: root, relative: FilePath())
                    }
                }
            }
            stack.append(frame)
        } catch .notADirectory, .system(.tooManySymbolicLinkLevels, _) {
            finished = true  // a file or a link: nothing to enumerate 
        } catch {
            finished = true
            _ = errorHandler?(root, error)
        }
    }

    deinit {
        for frame in stack { Syscall.close(frame.fd) }
    }

    /// Reads the directory behind `stream` whole: a walk holds one descriptor per level, not
    /// a reading position, so it can go on while the tree changes.
    private static func frame(_ stream: DirectoryStream, path: FilePath, relative: FilePath) throws(Errno) -> Frame {
        let names = try stream.allNames()
        let fd = try Syscall.openat(stream.fd, ".", O_PATH | O_DIRECTORY)
        let st: stat
        do { st = try Syscall.fstat(fd) } catch {
            Syscall.close(fd)
            throw error
        }
        return Frame(fd: fd, path: path, relative: relative, device: st.st_dev, names: names)
    }

    /// Does not enter the directory last yielded.
    public func skipDescendants() {
        pending = nil
    }

    /// The next item, or nil at the end.
    public func next() -> FilePath? {
        if finished { return nil }
        Credentials.asCaller(caller) { descendIfPending() }
        while !finished, var frame = stack.popLast() {
            guard frame.index < frame.names.count else {
                Syscall.close(frame.fd)
                continue
            }
            let name = frame.names[frame.index]
            frame.index += 1
            stack.append(frame)
            if isSkipped(name) { continue }
            let path = frame.path.appending(name)
            let st: stat
            do throws(Errno) {
                st = try Credentials.asCaller(caller) { () throws(Errno) in try CoreFileManager.lstat(frame.fd, name) }
            } catch .noSuchFileOrDirectory {
                continue  // removed since the listing: it is simply no longer there
            } catch {
                if !handle(FileManagerError(error, path: path.string), at: path) { return nil }
                continue
            }
            level = stack.count
            relativePath = frame.relative.appending(name)
            lastStat = st
            if (st.st_mode & S_IFMT) == S_IFDIR { pending = (name, st) }
            return path
        }
        finished = true
        return nil
    }

    private func isSkipped(_ name: FilePath.Component) -> Bool {
        name.withPlatformString { p in
            guard p[0] == 0x2E else { return false }  // "."
            return options.contains(.skipsHiddenFiles) || (hidesResourceForks && p[1] == 0x5F)  // "._"
        }
    }

    /// Enters the directory yielded last, unless told otherwise.
    private func descendIfPending() {
        guard let (name, st) = pending, let parent = stack.last else { return }
        pending = nil
        if options.contains(.skipsSubdirectoryDescendants) { return }
        if st.st_dev != parent.device { return }  // a mount point: listed, not entered
        let path = parent.path.appending(name)
        do throws(Errno) {
            let stream = DirectoryStream(fd: try CoreFileManager.open(parent.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK))
            if options.contains(.skipsPackageDescendants), PackageRule.isPackage(name, directory: stream.fd) { return }
            stack.append(try Self.frame(stream, path: path, relative: parent.relative.appending(name)))
        } catch .noSuchFileOrDirectory {
            // Gone since it was yielded.
        } catch {
            _ = handle(FileManagerError(error, path: path.string), at: path)
        }
    }

    /// Asks the error handler; false ends the walk.
    private func handle(_ error: FileManagerError, at path: FilePath) -> Bool {
        if errorHandler?(path, error) ?? true { return true }
        finished = true
        return false
    }
}

/// What makes a directory a package on Linux (docs/SEMANTICS.md §1.3): the xattr
/// `user.containerfs.package` = `1`, or a name ending, ASCII case-insensitively, in `.app`,
/// `.bundle`, `.framework`, `.plugin` or `.rtfd`; the xattr `0` overrides the name.
public enum PackageRule {
    public static let extensions: Set<String> = ["app", "bundle", "framework", "plugin", "rtfd"]

    /// Whether the directory named `name`, behind `directory`, is a package.
    static func isPackage(_ name: FilePath.Component, directory: CInt) -> Bool {
        switch AttributeXattr.text(directory, AttributeXattr.package) {
        case "1": return true
        case "0": return false
        default: return hasPackageExtension(name)
        }
    }

    /// Whether the name alone marks a package.
    public static func hasPackageExtension(_ name: FilePath.Component) -> Bool {
        guard let ext = name.extension else { return false }
        return extensions.contains(asciiLowercased(ext))
    }

    private static func asciiLowercased(_ s: String) -> String {
        String(decoding: s.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}
