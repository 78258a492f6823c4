import FileManagerCore
import Glibc
import SystemPackage

enum Paths {
    /// `path` made absolute against the current directory, lexically normalised.
    static func absolute(_ path: String) -> FilePath {
        let p = FilePath(path)
        if p.isAbsolute { return p.lexicallyNormalized() }
        let cwd = getcwd(nil, 0).map { s -> String in defer { free(s) }; return String(cString: s) } ?? "/"
        return FilePath(cwd).pushing(p).lexicallyNormalized()
    }

    /// A mount point as the kernel records it in mountinfo: made absolute, symbolic links in
    /// its parent resolved. The last component is not looked at (that would ask the mount
    /// itself, which may be dead).
    static func asMounted(_ path: String) -> String {
        let absolute = Self.absolute(path)
        let parent = absolute.removingLastComponent().string
        return realpath(parent.isEmpty ? "/" : parent, nil).map { p in
            defer { free(p) }
            return FilePath(String(cString: p)).appending(absolute.lastComponent.map { [$0] } ?? []).string
        } ?? absolute.string
    }

    /// The control socket of a store.
    static func controlSocket(_ store: FilePath) -> String { store.appending("control.sock").string }

    /// The directory at `path` and every directory above it up to `/`, as the kernel walks
    /// them (`FileIdentity.ancestry`); empty if `path` is not a directory that can be opened.
    static func ancestry(of path: FilePath) -> [FileIdentity] {
        let fd = open(path.string, O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        return FileIdentity.ancestry(of: fd)
    }

    static func isDirectory(_ path: FilePath) -> Bool {
        var st = stat()
        return stat(path.string, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }
}
