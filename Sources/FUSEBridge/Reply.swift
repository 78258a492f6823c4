import CFuse
import CFuseTap
import FileManagerCore
import Glibc
import SystemPackage

/// The answer to one kernel request, owed exactly once.
///
/// Non-copyable: every answering method is `consuming`, so the compiler rejects a second
/// answer, and a `Reply` that goes out of scope unanswered answers EIO from `deinit` (and
/// logs), so a forgotten path never leaves a caller hanging (fuser's `Drop for ReplyRaw`).
///
/// A `Reply` may be moved to another thread and answered later (a request parked behind a
/// coordinated claim): libfuse allows a reply from any thread once the handler returned.
///
/// Sendable note: `fuse_req_t` is an opaque pointer libfuse lets any thread answer.
public struct Reply: ~Copyable, @unchecked Sendable {
    let request: fuse_req_t
    /// Told of a success just before the answer goes out (a coordinated operation announces
    /// only what it committed, and before the caller can act on it). Nil on the fast path.
    /// Unmanaged because `discard self` needs trivially destroyed fields; the observer keeps
    /// the `Outcome` alive while the reply lives.
    private var outcome: Unmanaged<Outcome>?

    init(_ request: fuse_req_t) {
        self.request = request
        self.outcome = nil
    }

    /// What to do when the request is answered with success, before the kernel has the
    /// answer: whatever the caller does next (a write, a close) comes after it.
    final class Outcome: @unchecked Sendable {
        let onSuccess: () -> Void
        init(_ onSuccess: @escaping () -> Void) { self.onSuccess = onSuccess }
    }

    consuming func observing(_ outcome: Outcome) -> Reply {
        self.outcome = Unmanaged.passUnretained(outcome)
        return self
    }

    @inline(__always)
    private func succeeded() { outcome?.takeUnretainedValue().onSuccess() }

    deinit {
        bridgeLogger.error("request left unanswered; replying EIO")
        fuse_reply_err(request, EIO)
    }

    /// The kernel's caller: uid, gid, pid and umask of the process that made the syscall.
    public var caller: Caller {
        let ctx = fuse_req_ctx(request)!.pointee
        return Caller(uid: ctx.uid, gid: ctx.gid, pid: ctx.pid, umask: ctx.umask)
    }

    /// The caller, with the kernel's verdict on clearing set-ID bits (`CFuseTap`).
    func caller(clearingSetID: Bool) -> Caller {
        var caller = self.caller
        caller.clearsSetID = clearingSetID
        return caller
    }

    // MARK: - Errors (the one funnel from Swift errors to the kernel)

    /// The daemon running out of descriptors is a shortage outside the caller, whose own
    /// table is fine (the kernel checked it): ENFILE, never EMFILE, which programs answer by
    /// closing descriptors of their own (DESIGN.md 28).
    consuming func fail(_ errno: Errno) {
        fuse_reply_err(request, errno == .tooManyOpenFiles ? ENFILE : errno.rawValue)
        discard self
    }

    /// Any error: a core error maps through its table, a bare `Errno` is itself, anything else
    /// is logged and answered EIO, never ENOSYS (which the kernel would remember for good).
    consuming func fail(_ error: any Error) {
        if !(error is FileManagerError || error is Errno) {
            bridgeLogger.error("unexpected error \(error); replying EIO")
        }
        fail(FileManagerError.errno(of: error))
    }

    /// Success without data (unlink, rmdir, rename, release, fsync, setxattr, ...).
    consuming func ok() {
        succeeded()
        fuse_reply_err(request, 0)
        discard self
    }

    /// forget / forget_multi: no answer travels back, but libfuse must be told.
    consuming func none() {
        fuse_reply_none(request)
        discard self
    }

    // MARK: - Entries and attributes

    /// An entry (lookup, mknod, mkdir, symlink, link). The kernel's lookup count of the item
    /// grows by one, counted in the node table when the core handed the item out. False
    /// when the kernel no longer waits: it counted nothing, and no FORGET will come.
    @discardableResult
    consuming func entry(_ inode: UInt64, _ attributes: stat, timeouts: CacheTimeouts) -> Bool {
        succeeded()
        var e = fuse_entry_param()
        e.ino = fuse_ino_t(inode)
        e.generation = 0
        e.attr = attributes
        e.attr_timeout = timeouts.attributes
        e.entry_timeout = timeouts.entries
        let rc = fuse_reply_entry(request, &e)
        discard self
        return rc != -ENOENT
    }

    /// A cached "no such entry" (node id 0): the kernel remembers the miss for the entry
    /// timeout, sparing the next lookup of the same name.
    consuming func negativeEntry(timeouts: CacheTimeouts) {
        succeeded()
        var e = fuse_entry_param()
        e.ino = 0
        e.entry_timeout = timeouts.negative
        fuse_reply_entry(request, &e)
        discard self
    }

    consuming func attributes(_ attributes: stat, timeout: Double) {
        succeeded()
        var st = attributes
        fuse_reply_attr(request, &st, timeout)
        discard self
    }

    // MARK: - Handles

    /// False when the kernel no longer waits (the caller was interrupted): then no RELEASE
    /// will come for this handle, and the caller must drop it (fuse_lowlevel.h).
    /// `passthrough`: the backing id the kernel passes the handle's I/O to (DESIGN.md 29).
    @discardableResult
    consuming func open(_ info: UnsafeMutablePointer<fuse_file_info>, passthrough: CInt? = nil) -> Bool {
        succeeded()
        let rc = Reply.passingThrough(passthrough) { fuse_reply_open(request, info) }
        discard self
        return rc != -ENOENT
    }

    /// False when the kernel no longer waits: no RELEASE nor FORGET will come.
    @discardableResult
    consuming func create(_ inode: UInt64, _ attributes: stat, timeouts: CacheTimeouts, _ info: UnsafeMutablePointer<fuse_file_info>,
                          passthrough: CInt? = nil) -> Bool {
        succeeded()
        var e = fuse_entry_param()
        e.ino = fuse_ino_t(inode)
        e.attr = attributes
        e.attr_timeout = timeouts.attributes
        e.entry_timeout = timeouts.entries
        let rc = Reply.passingThrough(passthrough) { fuse_reply_create(request, &e, info) }
        discard self
        return rc != -ENOENT
    }

    /// libfuse 3.14 cannot say FOPEN_PASSTHROUGH: the channel tap adds it, with the backing
    /// id, to the OPEN/CREATE reply written on this thread while `send` runs.
    private static func passingThrough(_ backing: CInt?, _ send: () -> CInt) -> CInt {
        guard let backing else { return send() }
        cfusetap_reply_passthrough(backing)
        defer { cfusetap_reply_passthrough(0) }
        return send()
    }

    // MARK: - Data

    /// READ from a descriptor: spliced by libfuse when it can, never copied through Swift.
    consuming func data(from fd: CInt, size: Int, offset: off_t) {
        succeeded()
        let rc = cfuse_reply_fd_data(request, fd, size, offset)
        if rc != 0 { bridgeLogger.debug("reply data: \(rc)") }
        discard self
    }

    consuming func buffer(_ bytes: UnsafeRawBufferPointer) {
        succeeded()
        fuse_reply_buf(request, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        discard self
    }

    consuming func written(_ count: Int) {
        succeeded()
        fuse_reply_write(request, count)
        discard self
    }

    consuming func xattrSize(_ size: Int) {
        succeeded()
        fuse_reply_xattr(request, size)
        discard self
    }

    consuming func link(_ target: [UInt8]) {
        succeeded()
        var bytes = target
        bytes.append(0)
        bytes.withUnsafeBufferPointer { b in
            _ = fuse_reply_readlink(request, UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self))
        }
        discard self
    }

    consuming func fileSystem(_ figures: statvfs) {
        succeeded()
        var sv = figures
        fuse_reply_statfs(request, &sv)
        discard self
    }

    consuming func offset(_ offset: off_t) {
        succeeded()
        fuse_reply_lseek(request, offset)
        discard self
    }
}

/// How long the kernel may trust what it was told. Long timeouts are safe only because the
/// daemon invalidates the kernel's caches when the store changes behind the mount.
public struct CacheTimeouts: Sendable {
    public var attributes: Double
    public var entries: Double
    /// For negative entries (names that do not exist); 0 disables them.
    public var negative: Double

    public init(attributes: Double = 1, entries: Double = 1, negative: Double = 1) {
        self.attributes = attributes
        self.entries = entries
        self.negative = negative
    }
}
