import FileManagerCore
import Glibc
import SystemPackage

/// A temporary directory tree laid out by a result builder, in the manner of
/// swift-foundation's `FilePlayground`:
///
///     let p = try Playground {
///         Directory("docs", mode: 0o700) {
///             File("a.txt", "hello")
///             SymbolicLink("link", to: "a.txt")
///         }
///     }
///     p["docs/a.txt"]  // an absolute FilePath
///
/// Built with plain system calls, independent of the code under test; modes are set
/// explicitly, so the test process's umask does not matter. Removed on deinit.
final class Playground {
    /// The absolute path of the playground's root directory.
    let root: FilePath

    init(in parent: FilePath = "/tmp", @PlaygroundBuilder _ items: () -> [any PlaygroundItem] = { [] }) throws {
        var template = Array(parent.appending("containerfs-test-XXXXXX").string.utf8CString)
        guard mkdtemp(&template) != nil else { throw Errno(rawValue: errno) }
        root = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        _ = chmod(root.string, 0o755)
        for item in items() { try item.create(in: root) }
    }

    deinit {
        // Tests may leave unreadable or foreign-owned items behind; the tests run as root or
        // own everything they made, so this removal goes through.
        _ = try? CoreFileManager().removeItem(at: root)
    }

    /// The absolute path of `relative` inside the playground.
    subscript(_ relative: String) -> FilePath {
        relative.isEmpty ? root : root.pushing(FilePath(relative))
    }
}

/// An item a playground creates.
protocol PlaygroundItem {
    func create(in directory: FilePath) throws
}

@resultBuilder
enum PlaygroundBuilder {
    static func buildExpression(_ item: any PlaygroundItem) -> [any PlaygroundItem] { [item] }
    static func buildBlock(_ items: [any PlaygroundItem]...) -> [any PlaygroundItem] { items.flatMap { $0 } }
    static func buildArray(_ items: [[any PlaygroundItem]]) -> [any PlaygroundItem] { items.flatMap { $0 } }
    static func buildOptional(_ items: [any PlaygroundItem]?) -> [any PlaygroundItem] { items ?? [] }
    static func buildEither(first items: [any PlaygroundItem]) -> [any PlaygroundItem] { items }
    static func buildEither(second items: [any PlaygroundItem]) -> [any PlaygroundItem] { items }
}

/// A regular file with the given bytes.
struct File: PlaygroundItem {
    var name: FilePath.Component
    var contents: [UInt8]
    var mode: mode_t
    var xattrs: [String: String]

    init(_ name: FilePath.Component, _ contents: String = "", mode: mode_t = 0o644, xattrs: [String: String] = [:]) {
        self.init(name, bytes: Array(contents.utf8), mode: mode, xattrs: xattrs)
    }

    init(_ name: FilePath.Component, bytes: [UInt8], mode: mode_t = 0o644, xattrs: [String: String] = [:]) {
        self.name = name
        self.contents = bytes
        self.mode = mode
        self.xattrs = xattrs
    }

    func create(in directory: FilePath) throws {
        let path = directory.appending(name)
        let fd = open(path.string, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        defer { close(fd) }
        let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == contents.count else { throw Errno(rawValue: errno) }
        try setXattrs(xattrs, on: path)
        guard fchmod(fd, mode) == 0 else { throw Errno(rawValue: errno) }
    }
}

/// A directory and what it holds.
struct Directory: PlaygroundItem {
    var name: FilePath.Component
    var mode: mode_t
    var xattrs: [String: String]
    var items: [any PlaygroundItem]

    init(_ name: FilePath.Component, mode: mode_t = 0o755, xattrs: [String: String] = [:],
         @PlaygroundBuilder _ items: () -> [any PlaygroundItem] = { [] }) {
        self.name = name
        self.mode = mode
        self.xattrs = xattrs
        self.items = items()
    }

    func create(in directory: FilePath) throws {
        let path = directory.appending(name)
        guard mkdir(path.string, 0o700) == 0 else { throw Errno(rawValue: errno) }
        for item in items { try item.create(in: path) }
        try setXattrs(xattrs, on: path)
        guard chmod(path.string, mode) == 0 else { throw Errno(rawValue: errno) }
    }
}

/// A symbolic link; its destination is stored as given, never checked.
struct SymbolicLink: PlaygroundItem {
    var name: FilePath.Component
    var destination: String

    init(_ name: FilePath.Component, to destination: String) {
        self.name = name
        self.destination = destination
    }

    func create(in directory: FilePath) throws {
        guard symlink(destination, directory.appending(name).string) == 0 else { throw Errno(rawValue: errno) }
    }
}

/// Sets `user.*` xattrs through the core's syscall seam (Glibc's module lacks <sys/xattr.h>).
func setXattrs(_ xattrs: [String: String], on path: FilePath) throws {
    guard !xattrs.isEmpty else { return }
    let fd = open(path.string, O_PATH | O_NOFOLLOW)
    guard fd >= 0 else { throw Errno(rawValue: errno) }
    defer { close(fd) }
    for (name, value) in xattrs {
        try Array(value.utf8).withUnsafeBytes { b in try Syscall.setxattr(pathDescriptor: fd, name, b, 0) }
    }
}

/// `lstat` of a path, for assertions.
func lstatOf(_ path: FilePath) throws -> stat {
    var st = stat()
    guard lstat(path.string, &st) == 0 else { throw Errno(rawValue: errno) }
    return st
}

/// `stat` (following links) of a path, for assertions.
func statOf(_ path: FilePath) throws -> stat {
    var st = stat()
    guard stat(path.string, &st) == 0 else { throw Errno(rawValue: errno) }
    return st
}

/// The names in a directory, every one of them (`readdir`, `.` and `..` excepted), sorted.
func rawListing(_ path: FilePath) -> [String] {
    guard let dir = opendir(path.string) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
}

/// The file's bytes as text, for assertions.
func text(_ path: FilePath) -> String? {
    CoreFileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
}

/// Whether the tests can act as other users (fs uid switching needs root).
let runsAsRoot = geteuid() == 0

/// A user and a group that exist nowhere else in the tests' trees.
let otherCaller = Caller(uid: 4242, gid: 4242, umask: 0o022)
let thirdCaller = Caller(uid: 4343, gid: 4343, umask: 0o022)
