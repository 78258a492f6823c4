import FileManagerCore
import SystemPackage

/// Which commands may make a store, and what the others say of a path that is not one
/// (DESIGN.md 37). `mount` and `container create` make a store in a missing or empty
/// directory; every other command needs one that exists, and changes nothing when the path
/// it was given is something else: a mistyped `--store` must not become a new store, nor an
/// existing directory (a home) be turned into one.
enum StoreLocation {
    /// For commands that work on an existing store: fails, naming the path, unless it is one.
    static func requireStore(_ path: FilePath) throws {
        switch Store.find(at: path) {
        case .store: return
        case .missing: throw CommandFailure("\(path): not a ContainerFS store (no such directory)")
        case .notADirectory: throw CommandFailure("\(path): not a ContainerFS store (not a directory)")
        case .emptyDirectory, .otherDirectory: throw CommandFailure("\(path): not a ContainerFS store (it has no containerfs.db)")
        case .unreadable(let e): throw CommandFailure("\(path): \(e)")
        }
    }

    /// For the commands that may make a store: a store, or a place for a new one.
    static func requireStoreOrRoom(_ path: FilePath) throws {
        switch Store.find(at: path) {
        case .store, .missing, .emptyDirectory: return
        case .notADirectory: throw CommandFailure("\(path): not a ContainerFS store (not a directory)")
        case .otherDirectory:
            throw CommandFailure("\(path): not a ContainerFS store, and not empty: a new store needs a missing or empty directory")
        case .unreadable(let e): throw CommandFailure("\(path): \(e)")
        }
    }
}
