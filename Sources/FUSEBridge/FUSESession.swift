import CFuse
import CFuseTap
import FileManagerCore
import Glibc
import Logging
import SystemPackage

/// One mounted session: `fuse_session_new` … `fuse_session_destroy`.
///
/// Ownership: the session holds the bridge strongly and gives libfuse an *unretained*
/// pointer to it as userdata; the bridge therefore lives exactly as long as the session,
/// which brackets every callback (`withExtendedLifetime` around the loop). No globals: two
/// sessions can exist in one process.
public final class FUSESession {
    public struct Options: Sendable {
        /// Options for libfuse and the kernel (`-o` list), already free of generic mount
        /// options such as `defaults` or `nofail`.
        public var mountOptions: [String]
        /// libfuse's pool of workers (`-o threads=N`), or nil: one reader per CPU
        /// (DESIGN.md 33). Beside a ring, a pool (this one or the default) serves what still
        /// comes through `/dev/fuse`.
        public var pool: Pool?
        /// FUSE over io_uring (`-o uring`, DESIGN.md 31), or `/dev/fuse` alone.
        public var ring: RingTransport?

        public init(mountOptions: [String], pool: Pool? = nil, ring: RingTransport? = nil) {
            self.mountOptions = mountOptions
            self.pool = pool
            self.ring = ring
        }
    }

    /// libfuse's multi-threaded loop: up to `workers` threads, `idle` of them kept.
    public struct Pool: Sendable {
        public var workers: Int
        public var idle: Int

        public init(workers: Int = 8, idle: Int = Int(UInt32.max)) {
            self.workers = workers
            self.idle = idle
        }
    }

    /// Hands a request, laid out as a read of `/dev/fuse` gives it, to libfuse (for the
    /// transports that read requests themselves: the ring's queues, the per-CPU readers).
    static let processRequest: cfusetap_ring_process = { context, request, length in
        var buffer = fuse_buf()
        buffer.size = length
        buffer.mem = request
        buffer.fd = -1
        fuse_session_process_buf(OpaquePointer(context), &buffer)
    }

    public let bridge: FUSEBridge
    public let mountPoint: String
    private var session: OpaquePointer?
    var sessionPointer: OpaquePointer? { session }
    private var operations = FUSEOperations.make()
    /// Whether our channel I/O serves the session: only then is it known how INIT was answered.
    private var tapped = false

    public init(bridge: FUSEBridge, mountPoint: String) {
        self.bridge = bridge
        self.mountPoint = mountPoint
    }

    deinit {
        if let session { fuse_session_destroy(session) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Creates the session and mounts it; returns once the mount is live.
    public func mount(options: Options) throws {
        var arguments = ["containerfs"]
        for option in options.mountOptions { arguments += ["-o", option] }
        var cStrings = arguments.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        var args = cfuse_args_init(CInt(cStrings.count), &cStrings)
        defer { fuse_opt_free_args(&args) }

        // Under the writeback cache the kernel holds written data the store has not seen,
        // and it sends LSEEK without writing it back first: SEEK_DATA and SEEK_HOLE answered
        // by the backing file found a hole (or ENXIO past its end) where the kernel held
        // data. Without the operation libfuse answers ENOSYS once, and the kernel seeks by
        // its own size, all of it data: always right, never a hole (DESIGN.md 22).
        if bridge.volume.kernelCachesWrites { operations.lseek = nil }
        let userdata = Unmanaged.passUnretained(bridge).toOpaque()
        guard let se = fuse_session_new(&args, &operations, MemoryLayout<fuse_lowlevel_ops>.size, userdata) else {
            throw Failure(description: "\(mountPoint): cannot start a FUSE session (bad mount options: \(options.mountOptions.joined(separator: ",")))")
        }
        session = se
        guard fuse_set_signal_handlers(se) == 0 else {
            throw Failure(description: "\(mountPoint): cannot install signal handlers")
        }
        // The io_uring queues are made before the mount, so that their failure leaves none; an
        // entry holds the largest request or reply the kernel may send (max_write).
        do {
            try options.ring?.prepare(session: se, payload: FUSEBridge.maxWrite)
        } catch {
            fuse_remove_signal_handlers(se)
            throw error
        }
        guard fuse_session_mount(se, mountPoint) == 0 else {
            options.ring?.discard()
            fuse_remove_signal_handlers(se)
            // libfuse has said why on standard error, the line before this one (in the
            // background, `Daemon.start` quotes it from daemon.log): no guess here.
            throw Failure(description: "\(mountPoint): cannot mount")
        }
        // Our own channel I/O on the same descriptor, before the first request (INIT) is
        // read: it adds FUSE_HANDLE_KILLPRIV_V2 to INIT and passes on its per-request bits.
        var io = fuse_custom_io(writev: cfusetap_writev, read: cfusetap_read,
                                splice_receive: cfusetap_splice_receive, splice_send: cfusetap_splice_send)
        let rc = fuse_session_custom_io(se, &io, fuse_session_fd(se))
        if rc != 0 {
            bridgeLogger.warning("\(mountPoint): custom channel I/O refused (\(rc)); set-ID clearing stays with the kernel")
            if let ring = options.ring {
                ring.discard()
                fuse_session_unmount(se)
                fuse_remove_signal_handlers(se)
                throw Failure(description: "\(mountPoint): -o uring needs the channel tap, which libfuse refused")
            }
            return
        }
        tapped = true
        if let passthrough = bridge.passthrough {
            cfusetap_offer_passthrough(fuse_session_fd(se))
            passthrough.attach(channel: fuse_session_fd(se))
        }
        options.ring?.attach(channel: fuse_session_fd(se))
    }

    /// Calls `body` on a thread of its own once the kernel's INIT has been answered: with
    /// nil when it was accepted, with the errno libfuse refused it with otherwise (it did,
    /// for `-o max_read=1`, after the mount had been reported live). `giveUp` ends the wait
    /// without a call (the session ended first). Without the channel tap nothing tells the
    /// answer: `body(nil)` at once, as before.
    public func whenInitAnswered(giveUp: @escaping @Sendable () -> Bool, _ body: @escaping @Sendable (Errno?) -> Void) {
        guard tapped, let session else { return body(nil) }
        let fd = fuse_session_fd(session)
        Threads.start(named: "cfs-init-wait") {
            while !giveUp() {
                let answer = cfusetap_init_answer(fd)
                if answer != 0 { return body(answer > 0 ? nil : Errno(rawValue: -answer)) }
                usleep(1000)
            }
        }
    }

    /// The errno libfuse refused the kernel's INIT with, if it did.
    private var initRefusal: Errno? {
        guard tapped, let session else { return nil }
        let answer = cfusetap_init_answer(fuse_session_fd(session))
        return answer < 0 ? Errno(rawValue: -answer) : nil
    }

    /// Serves requests (one reader per CPU, libfuse's pool, or the ring beside that pool)
    /// until unmount or a signal (SIGINT, SIGTERM, SIGHUP end the loop; the mount is then
    /// removed cleanly).
    @discardableResult
    public func run(options: Options) -> CInt {
        guard let session else { return -1 }
        let rc = withExtendedLifetime(bridge) {
            if options.ring == nil && options.pool == nil { return serveWithReaders(session) }
            let pool = options.pool ?? Pool()
            return cfuse_session_loop_mt(session, UInt32(clamping: pool.idle), UInt32(clamping: pool.workers))
        }
        // Unmounted (the queues saw ENOTCONN) or stopped by a signal: either way no queue
        // thread may call into the bridge once this returns, and the notifier, which may
        // still be told of changes, sends nothing more (it checks the flag before each
        // message). Neither loop leaves the flag set: the readers never set it, and
        // libfuse's pool clears it (`fuse_session_reset`). The unmount stays here, before
        // the watcher and the notifier stop, as it always was: they may still be in a
        // notification the kernel holds on a lock or a page whose request nobody will
        // serve now, and keeping the mount up for them could only make that worse.
        fuse_session_exit(session)
        options.ring?.stop(mountPoint: mountPoint)
        // A refused INIT ends the loop as an unmount would: not a clean end. Read before
        // the tap forgets the session, where the refusal is kept.
        let refusal = initRefusal
        bridge.passthrough?.detach()
        if let refusal { bridgeLogger.error("\(mountPoint): libfuse refused the kernel's INIT (\(refusal)); see the error above") }
        cfusetap_forget_session(fuse_session_fd(session))
        fuse_session_unmount(session)
        fuse_remove_signal_handlers(session)
        return refusal.map { -$0.rawValue } ?? rc
    }

    /// One reader per CPU (DESIGN.md 33) until unmount or a signal; the log says what they
    /// carried.
    private func serveWithReaders(_ session: OpaquePointer) -> CInt {
        let exited: cfusetap_exited = { context in fuse_session_exited(OpaquePointer(context)) }
        var counts = cfusetap_readers_counts()
        let rc = cfusetap_readers_serve(fuse_session_fd(session), FUSEBridge.maxWrite + Self.requestHeadroom,
                                        Self.processRequest, exited, UnsafeMutableRawPointer(session), &counts)
        bridgeLogger.info("\(mountPoint): \(counts.readers) per-CPU readers served \(counts.requests) requests; \(counts.idle_wakeups) wake-ups found the request taken")
        if rc < 0 { bridgeLogger.error("\(mountPoint): reading /dev/fuse failed: \(String(cString: strerror(-rc)))") }
        return rc
    }

    /// Room for a request's header and first argument beside its largest payload.
    static let requestHeadroom = 4096

    /// The `/dev/fuse` descriptor, for the invalidation thread.
    public var fileDescriptor: CInt { session.map { fuse_session_fd($0) } ?? -1 }
}
