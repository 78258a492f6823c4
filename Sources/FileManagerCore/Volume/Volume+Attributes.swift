import Glibc
import SystemPackage

/// What a `setattr` changes. Owner and group are applied before the mode (on Linux chown
/// clears setuid), the size next, times last.
public struct AttributeChanges: Sendable {
    public enum Time: Sendable {
        case omit, now, set(timespec)
    }
    public var mode: mode_t?
    public var uid: uid_t?
    public var gid: gid_t?
    public var size: off_t?
    public var accessTime: Time = .omit
    public var modificationTime: Time = .omit
    /// Who asks: a size change clears set-ID bits as this caller's truncation would.
    public var caller: Caller?

    public init() {}

    var changesTimes: Bool {
        if case .omit = accessTime, case .omit = modificationTime { return false }
        return true
    }
}

extension Volume {
    /// `setattr`: every change is a modification (EROFS in the bundle and snapshots, EACCES
    /// in Inbox and on the virtual directories). With an open handle, the size is set on it.
    public func setAttributes(_ item: Item, _ changes: AttributeChanges, handle: OpenFile?) throws(Errno) -> stat {
        if item.isVirtual { throw .permissionDenied }
        try zone(of: item).checkModify()
        return presented(try item.changing { () throws(Errno) in try apply(changes, to: item, handle: handle) }, of: item)
    }

    private func apply(_ changes: AttributeChanges, to item: Item, handle: OpenFile?) throws(Errno) -> stat {
        if changes.uid != nil || changes.gid != nil {
            try Syscall.fchown(pathDescriptor: item.fd, changes.uid ?? uid_t.max, changes.gid ?? gid_t.max)
        }
        if let mode = changes.mode {
            if item.isSymlink { throw .notSupported }
            try Syscall.fchmod(pathDescriptor: item.fd, mode & 0o7777)
        }
        // Data and modification time are what a snapshot shares (counted on
        // `changesUnderWay` by `setAttributes`).
        if changes.size != nil || changes.changesTimes { try keepSnapshotsFrozen(item) }
        if let size = changes.size {
            try Credentials.clearingSetID(for: changes.caller, on: handle?.fd ?? item.fd) { () throws(Errno) in
                if let handle {
                    try Syscall.ftruncate(handle.fd, size)
                } else {
                    try Syscall.truncate(pathDescriptor: item.fd, size)
                }
            }
        }
        if changes.changesTimes {
            var times = (changes.accessTime.timespec, changes.modificationTime.timespec)
            try withUnsafePointer(to: &times) { p throws(Errno) in
                try Syscall.utimens(pathDescriptor: item.fd, isSymlink: item.isSymlink,
                                    UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self))
            }
        }
        return try Syscall.fstat(item.fd)
    }

}

extension AttributeChanges.Time {
    /// The `utimensat` form: UTIME_OMIT and UTIME_NOW travel in `tv_nsec`.
    var timespec: Glibc.timespec {
        switch self {
        case .omit: return Glibc.timespec(tv_sec: 0, tv_nsec: UTIME_OMIT)
        case .now: return Glibc.timespec(tv_sec: 0, tv_nsec: UTIME_NOW)
        case .set(let ts): return ts
        }
    }
}
