import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// A store in a fresh temporary directory, removed when dropped.
final class TemporaryStore {
    let path: FilePath
    let store: Store

    init() throws {
        var template = Array("/tmp/containerfs-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = FilePath(String(cString: dir!))
        store = try Store(at: path)
    }

    deinit {
        _ = try? FileManager.default.removeItem(atPath: path.string)
    }

    func storePath(_ relative: String) -> String { path.appending(relative).string }
}

/// Runs `body` with `name` as a C string (tests pass Swift strings to the byte API).
func withName<R>(_ name: String, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
    try name.withCString(body)
}

/// The errno a call failed with (a bare `Errno`, or a core error's mapping), or nil.
func errnoOf(_ body: () throws -> Void) -> Errno? {
    do { try body(); return nil } catch { return FileManagerError.errno(of: error) }
}
