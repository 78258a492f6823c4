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

    /// The control socket of a store.
    static func controlSocket(_ store: FilePath) -> String { store.appending("control.sock").string }

    static func isDirectory(_ path: FilePath) -> Bool {
        var st = stat()
        return stat(path.string, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }
}
