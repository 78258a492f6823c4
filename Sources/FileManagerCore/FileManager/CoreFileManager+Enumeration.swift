import Glibc
import SystemPackage

extension CoreFileManager {
    /// `contentsOfDirectoryAtPath:` (docs/SEMANTICS.md §8.3): the names in the directory,
    /// shallow, in no particular order. Never `.`, `..` or `._*` (resource forks); other
    /// dot-files unless `.skipsHiddenFiles`, the only option honoured . Symlinks
    /// inside are listed, not followed; `path` itself may be a link to a directory, as
    /// `opendir` allows. Names are bytes: non-UTF-8 names come back as they are.
    public func contentsOfDirectory(atPath path: FilePath, options: DirectoryEnumerationOptions = [],
                                    caller: Caller = .current) throws(FileManagerError) -> [FilePath.Component] {
        let names = try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.attempt(path) { () throws(Errno) in
                    try DirectoryStream(fd: Self.open(dir, name, O_RDONLY | O_DIRECTORY | O_NONBLOCK)).allNames()
                }
            }
        }
        let skipsHidden = options.contains(.skipsHiddenFiles)
        return names.filter { name in
            name.withPlatformString { p in p[0] != 0x2E || (!skipsHidden && p[1] != 0x5F) }
        }
    }

    /// `enumeratorAtURL:includingPropertiesForKeys:options:errorHandler:` (docs/SEMANTICS.md §8.3):
    /// a deep walk below `path`; see `DirectoryEnumerator` for its rules. `path` must be
    /// the directory itself: a symlink (or a file) yields nothing. `errorHandler` gets the
    /// path and error of each item that fails; true goes on, false stops; nil means true.
    public func enumerator(at path: FilePath, options: DirectoryEnumerationOptions = [],
                           caller: Caller = .current,
                           errorHandler: ((FilePath, FileManagerError) -> Bool)? = nil) -> DirectoryEnumerator {
        DirectoryEnumerator(root: path, followsRootSymlink: false, hidesResourceForks: true, options: options,
                            caller: caller, errorHandler: errorHandler)
    }

    /// `subpathsOfDirectoryAtPath:` (docs/SEMANTICS.md §8.3): every path below `path`, relative to it,
    /// packages' contents and every name included (only `.` and `..` are skipped). A `path`
    /// that is a symlink is followed . The first error ends the walk and is thrown.
    public func subpathsOfDirectory(atPath path: FilePath, caller: Caller = .current) throws(FileManagerError) -> [FilePath] {
        var failure: FileManagerError?
        let walk = DirectoryEnumerator(root: path, followsRootSymlink: true, hidesResourceForks: false, options: [],
                                       caller: caller) { _, error in
            failure = error
            return false
        }
        var result: [FilePath] = []
        while walk.next() != nil { result.append(walk.relativePath) }
        if let failure { throw failure }
        // A file (not a directory) at `path` has no subpaths to give: an error, not [].
        if result.isEmpty, !fileExistsAsDirectory(path, caller: caller) { throw .notADirectory(path.string) }
        return result
    }

    private func fileExistsAsDirectory(_ path: FilePath, caller: Caller) -> Bool {
        var isDirectory = false
        return fileExists(atPath: path, isDirectory: &isDirectory, caller: caller) && isDirectory
    }
}
