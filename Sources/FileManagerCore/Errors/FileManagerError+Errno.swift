import SystemPackage

// The single table from core errors to POSIX errno. A switch, never arithmetic: every
// case says which errno it becomes, and a new case fails to compile until it is placed.
extension FileManagerError {
    /// The errno this error becomes through the mount.
    public var errno: Errno {
        switch self {
        case .noSuchItem: return .noSuchFileOrDirectory
        case .itemExists: return .fileExists
        case .directoryNotEmpty: return .directoryNotEmpty
        case .readOnlyVolume: return .readOnlyFileSystem
        case .crossesContainer: return .improperLink
        case .permissionDenied: return .permissionDenied
        case .notADirectory: return .notDirectory
        case .isADirectory: return .isDirectory
        case .nameTooLong: return .fileNameTooLong
        case .invalidArgument: return .invalidArgument
        case .busy: return .resourceBusy
        case .system(let e, _): return e
        }
    }

    /// Wraps a bare errno from a system call into the matching domain case, keeping `path`.
    public init(_ errno: Errno, path: String) {
        switch errno {
        case .noSuchFileOrDirectory: self = .noSuchItem(path)
        case .fileExists: self = .itemExists(path)
        case .directoryNotEmpty: self = .directoryNotEmpty(path)
        case .readOnlyFileSystem: self = .readOnlyVolume(path)
        case .improperLink: self = .crossesContainer(path)
        case .permissionDenied: self = .permissionDenied(path)
        case .notDirectory: self = .notADirectory(path)
        case .isDirectory: self = .isADirectory(path)
        case .fileNameTooLong: self = .nameTooLong(path)
        case .invalidArgument: self = .invalidArgument(path)
        case .resourceBusy: self = .busy(path)
        default: self = .system(errno, path)
        }
    }

    /// The errno of any error: a domain error maps through the table, a bare `Errno` is
    /// itself, anything else is EIO (never ENOSYS: the kernel remembers ENOSYS for good).
    public static func errno(of error: any Error) -> Errno {
        if let e = error as? FileManagerError { return e.errno }
        if let e = error as? Errno { return e }
        return .ioError
    }
}
