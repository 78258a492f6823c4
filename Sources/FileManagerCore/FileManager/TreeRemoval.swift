import CLinux
import Glibc
import SystemPackage

/// Depth-first removal relative to directory descriptors: never follows a symlink (links
/// are unlinked, not entered), never leaves the directory it was given, lists unfiltered
/// (`._*` and dot-files included, or `rmdir` would find the directory not empty).
enum TreeRemoval {
    /// What a walk left behind.
    struct Outcome {
        /// Something was kept: declined by the hooks, or failed and skipped.
        var keptItems = false
        /// A directory was declined: `removeItem` then returns false (docs/SEMANTICS.md §8.5).
        var declinedDirectory = false
    }

    /// Removes the entry `name` of `dir`, recursively if it is a directory.
    static func remove(_ dir: CInt, _ name: UnsafePointer<CChar>) throws(Errno) {
        guard let component = FilePath.Component(platformString: name) else { throw .invalidArgument }
        _ = try Syscall.fstatat(dir, name)  // a missing item is an error here, as it always was
        var outcome = Outcome()
        do throws(FileManagerError) {
            try remove(dir, component, at: FilePath(root: nil, [component]), hooks: TreeHooks(), outcome: &outcome)
        } catch {
            throw error.errno
        }
    }

    /// Empties the directory behind `dir` (an `O_PATH` descriptor is fine).
    static func removeContents(of dir: CInt) throws(Errno) {
        let stream = try DirectoryStream.open(dir)
        for name in try stream.allNames() {
            try name.withName { p throws(Errno) in try remove(stream.fd, p) }
        }
    }

    /// Removes the entry `name` of `dir`, known to the user as `path`, asking `hooks` before
    /// each item (a directory before its contents).
    ///
    /// A kept item (declined, or failed and skipped) keeps its ancestors too, silently: their
    /// `rmdir` is not even tried, since a deliberate decline is not an error. An item that
    /// vanishes meanwhile counts as removed. Returns whether the item is gone.
    @discardableResult
    static func remove(_ dir: CInt, _ name: FilePath.Component, at path: FilePath,
                       hooks: TreeHooks, outcome: inout Outcome) throws(FileManagerError) -> Bool {
        func keep(_ errno: Errno) throws(FileManagerError) -> Bool {
            try hooks.failed(errno, at: path, source: path, destination: nil)
            outcome.keptItems = true
            return false
        }
        let st: stat
        do { st = try name.withName { p throws(Errno) in try Syscall.fstatat(dir, p) } } catch .noSuchFileOrDirectory {
            return true
        } catch { return try keep(error) }

        let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        guard hooks.shouldProcess(path, nil) else {
            outcome.keptItems = true
            if isDirectory { outcome.declinedDirectory = true }
            return false
        }
        if isDirectory {
            let stream: DirectoryStream
            do {
                stream = DirectoryStream(fd: try name.withName { p throws(Errno) in
                    try Syscall.openat(dir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)
                })
            } catch .noSuchFileOrDirectory {
                return true
            } catch let openError {
                // An unreadable directory may still be empty: rmdir decides, as rm does; if
                // it is not empty, the reason is that it could not be read.
                do { try name.withName { p throws(Errno) in try Syscall.unlinkat(dir, p, AT_REMOVEDIR) } } catch .noSuchFileOrDirectory {
                } catch { return try keep(error == .directoryNotEmpty ? openError : error) }
                return true
            }
            let names: [FilePath.Component]
            do { names = try stream.allNames() } catch { return try keep(error) }
            var allGone = true
            for child in names {
                if try !remove(stream.fd, child, at: path.appending(child), hooks: hooks, outcome: &outcome) { allGone = false }
            }
            guard allGone else { return false }
        }
        do {
            try name.withName { p throws(Errno) in try Syscall.unlinkat(dir, p, isDirectory ? AT_REMOVEDIR : 0) }
        } catch .noSuchFileOrDirectory {
        } catch { return try keep(error) }
        return true
    }
}
