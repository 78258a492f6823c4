import SystemPackage

/// Every failure the core reports. One type, so that the FUSE bridge, the CLI and the
/// Swift API speak the same errors; `errno` (in `FileManagerError+Errno.swift`) is the one
/// mapping to POSIX.
///
/// Cases carry the path or name they concern where one is known, so that a CLI message can
/// name it (docs/SEMANTICS.md §2: "message on stderr names the path and the reason").
public enum FileManagerError: Error, Sendable, Equatable {
    /// Nothing at the path (ENOENT, CocoaError 4).
    case noSuchItem(String)
    /// Something already at the path (EEXIST, CocoaError 516).
    case itemExists(String)
    /// `rmdir` of a directory with entries (ENOTEMPTY).
    case directoryNotEmpty(String)
    /// A mutation in the bundle or under `snapshots/` (EROFS, CocoaError 642).
    case readOnlyVolume(String)
    /// A rename or link between two containers (EXDEV).
    case crossesContainer(String)
    /// Policy or permission refusal: Inbox, layout directories, the virtual root (EACCES).
    case permissionDenied(String)
    /// A component that should be a directory is not (ENOTDIR).
    case notADirectory(String)
    /// A directory where a file was needed (EISDIR).
    case isADirectory(String)
    /// A name longer than 255 bytes (ENAMETOOLONG).
    case nameTooLong(String)
    /// An argument that can never work: a bad bundle id, `.` or `..` (EINVAL).
    case invalidArgument(String)
    /// The store is served by another daemon, or an item is in use (EBUSY).
    case busy(String)
    /// Any other system error, with the path it happened on.
    case system(Errno, String)

    /// The path or name the error is about.
    public var path: String {
        switch self {
        case .noSuchItem(let p), .itemExists(let p), .directoryNotEmpty(let p),
             .readOnlyVolume(let p), .crossesContainer(let p), .permissionDenied(let p),
             .notADirectory(let p), .isADirectory(let p), .nameTooLong(let p),
             .invalidArgument(let p), .busy(let p), .system(_, let p):
            return p
        }
    }
}

extension FileManagerError: CustomStringConvertible {
    /// `PATH: reason`, the form the CLI prints.
    public var description: String {
        let reason: String
        switch self {
        case .noSuchItem: reason = "no such file or directory"
        case .itemExists: reason = "an item with that name already exists"
        case .directoryNotEmpty: reason = "directory not empty"
        case .readOnlyVolume: reason = "read-only (bundle or snapshot)"
        case .crossesContainer: reason = "cannot link or rename between containers"
        case .permissionDenied: reason = "permission denied"
        case .notADirectory: reason = "not a directory"
        case .isADirectory: reason = "is a directory"
        case .nameTooLong: reason = "name too long"
        case .invalidArgument: reason = "invalid argument"
        case .busy: reason = "busy"
        case .system(let e, _): reason = e.description
        }
        return path.isEmpty ? reason : "\(path): \(reason)"
    }
}
