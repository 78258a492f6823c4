import CLinux
import Glibc

/// Who asked: the FUSE request's context, or a CLI / Swift-API client's peer credentials.
/// Every core entry point that creates or checks takes one (docs/SEMANTICS.md §8.1):
/// the daemon's own uid, umask and cwd never leak into a result.
public struct Caller: Sendable, Equatable {
    public var uid: uid_t
    public var gid: gid_t
    /// The calling thread's id as the kernel reports it (0 when the kernel itself asks).
    public var pid: pid_t
    public var umask: mode_t
    /// The kernel says this caller lacks CAP_FSETID, so a truncation it makes (O_TRUNC, or
    /// a size change) must clear set-user-ID and set-group-ID bits as on a local file system
    /// (FUSE_HANDLE_KILLPRIV_V2; DESIGN.md, decision 24).
    public var clearsSetID: Bool

    public init(uid: uid_t, gid: gid_t, pid: pid_t = 0, umask: mode_t = 0o022, clearsSetID: Bool = false) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.umask = umask
        self.clearsSetID = clearsSetID
    }

    /// The process running this code (the CLI working on a store without a daemon).
    public static var current: Caller {
        let mask = Glibc.umask(0)
        _ = Glibc.umask(mask)
        return Caller(uid: getuid(), gid: getgid(), pid: getpid(), umask: mask)
    }

    public var isRoot: Bool { uid == 0 }

    /// For a change the kernel sends without a verdict on set-ID bits (fallocate and
    /// copy_file_range leave it to the file system under KILLPRIV_V2): a caller other than
    /// root is taken to lack CAP_FSETID, as it almost always does.
    public var clearingSetIDUnlessRoot: Caller {
        var caller = self
        caller.clearsSetID = uid != 0
        return caller
    }
}

/// Runs creating system calls with the caller's fs uid and gid, so that new items belong to
/// the caller (and setgid directories work as the kernel defines), not to the daemon.
///
/// Only a root daemon can switch; a daemon run by a user creates everything as that user,
/// which is then also the only user who can reach the mount without allow_other.
public enum Credentials {
    /// Whether this process can switch fs credentials (it runs as root).
    public static let canSwitch: Bool = geteuid() == 0

    /// Called once on the main thread before any worker exists: threads inherit the
    /// securebit, so every libfuse worker keeps its capabilities across fsuid switches.
    /// It also drops the daemon's supplementary groups: root needs none (its capabilities
    /// decide), and where the kernel judges a caller by fs ids (`withAccessChecks`,
    /// `clearingSetID`) root's groups would otherwise count as the caller's.
    public static func prepareProcess() {
        guard canSwitch else { return }
        _ = clinux_keep_caps_on_fsuid_change()
        _ = setgroups(0, nil)
    }

    @inline(__always)
    public static func asCaller<R, E: Error>(_ caller: Caller, _ body: () throws(E) -> R) throws(E) -> R {
        guard canSwitch, caller.uid != 0 || caller.gid != 0 else { return try body() }
        _ = clinux_setfsgid(caller.gid)
        _ = clinux_setfsuid(caller.uid)
        defer {
            _ = clinux_setfsuid(0)
            _ = clinux_setfsgid(0)
        }
        return try body()
    }

    /// Runs a write or truncation of `fd` for `caller`. When the kernel says the caller
    /// lacks CAP_FSETID (`clearsSetID`) and the file has a set-ID bit, `body` runs without
    /// CAP_FSETID and with the caller's fs gid, so the backing file system clears the bits
    /// exactly as for that caller: suid always, sgid when group-executable or when the
    /// caller is not in the file's group (judged by its primary group: FUSE does not pass
    /// supplementary groups). File capabilities go on any write, privileged or not, so the
    /// usual case costs one `fstat`. A daemon that is not root has no CAP_FSETID to lower.
    @inline(__always)
    public static func clearingSetID<R, E: Error>(for caller: Caller?, on fd: CInt, _ body: () throws(E) -> R) throws(E) -> R {
        guard let caller, caller.clearsSetID, canSwitch, hasSetIDBit(fd) else { return try body() }
        // Whatever this thread was (it may be inside `asCaller`), it is exactly that again after.
        let group = gid_t(truncatingIfNeeded: clinux_setfsgid(caller.gid))
        defer { _ = clinux_setfsgid(group) }
        return try withoutFSetID { lowered throws(E) -> R in
            // Lowering the capability cannot fail for a root daemon; if it ever did, the
            // bits go by hand with the plain rule (suid always, sgid if group-executable).
            defer {
                if !lowered, let st = try? Syscall.fstat(fd) {
                    let mode = st.st_mode & 0o7777
                    let cleared = mode & ~(S_ISUID | (mode & S_IXGRP != 0 ? S_ISGID : 0))
                    if cleared != mode { try? Syscall.fchmod(pathDescriptor: fd, cleared) }
                }
            }
            return try body()
        }
    }

    /// Runs `body` on this thread without CAP_FSETID among its effective capabilities, the
    /// one that lets a write keep a file's set-ID bits; `lowered` says whether the thread
    /// now lacks it (false only if the kernel refused the change). Restored after.
    @inline(__always)
    public static func withoutFSetID<R, E: Error>(_ body: (_ lowered: Bool) throws(E) -> R) throws(E) -> R {
        let was = clinux_set_fsetid_capability(0)
        defer { if was == 1 { _ = clinux_set_fsetid_capability(1) } }
        return try body(was >= 0)
    }

    private static func hasSetIDBit(_ fd: CInt) -> Bool {
        guard let st = try? Syscall.fstat(fd) else { return true }
        return st.st_mode & (S_ISUID | S_ISGID) != 0
    }
}

extension Credentials {
    /// Runs `body` on this thread with fs-uid switches that *do* drop capabilities, so that
    /// `asCaller` inside it makes the kernel check the caller's permissions (reading a
    /// host file a client names, e.g. a bundle to install). Request handlers of the mount
    /// never need this: the kernel checked their callers already.
    public static func withAccessChecks<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        guard canSwitch else { return try body() }
        // Back to what the thread had, not to what a daemon's threads have: a thread of a
        // process that never called `prepareProcess` (the CLI, the unit tests) must not be
        // left keeping its capabilities across fsuid switches.
        let before = clinux_securebits()
        _ = clinux_clear_securebits()
        defer { if before > 0 { _ = clinux_set_securebits(before) } }
        return try body()
    }
}
