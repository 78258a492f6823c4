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
        public var workerThreads: Int
        public var idleThreads: Int
        /// FUSE over io_uring (`-o uring`, DESIGN.md 31), or `/dev/fuse` alone.
        public var ring: RingTransport?

        public init(mountOptions: [String], workerThreads: Int = 8, idleThreads: Int = 4, ring: RingTransport? = nil) {
            self.mountOptions = mountOptions
            self.workerThreads = workerThreads
            self.idleThreads = idleThreads
            self.ring = ring
        }
    }

    public let bridge: FUSEBridge
    public let mountPoint: String
    private var session: OpaquePointer?
    var sessionPointer: OpaquePointer? { session }
    private var operations = FUSEOperations.make()

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
            throw Failure(description: "\(mountPoint): cannot mount (is it an existing directory, and is /dev/fuse usable?)")
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
        if let passthrough = bridge.passthrough {
            cfusetap_offer_passthrough(fuse_session_fd(se))
            passthrough.attach(channel: fuse_session_fd(se))
        }
        options.ring?.attach(channel: fuse_session_fd(se))
    }

    /// Serves requests on libfuse's multi-threaded loop until unmount or a signal
    /// (SIGINT, SIGTERM, SIGHUP end the loop; the mount is then removed cleanly).
    @discardableResult
    public func run(options: Options) -> CInt {
        guard let session else { return -1 }
        let rc = withExtendedLifetime(bridge) {
            cfuse_session_loop_mt(session, UInt32(options.idleThreads), UInt32(options.workerThreads))
        }
        // Unmounted (the queues saw ENOTCONN) or stopped by a signal: either way no queue
        // thread may call into the bridge once this returns.
        options.ring?.stop(mountPoint: mountPoint)
        if let passthrough = bridge.passthrough {
            passthrough.detach()
            cfusetap_forget_session(fuse_session_fd(session))
        }
        fuse_session_unmount(session)
        fuse_remove_signal_handlers(session)
        return rc
    }

    /// The `/dev/fuse` descriptor, for the invalidation thread.
    public var fileDescriptor: CInt { session.map { fuse_session_fd($0) } ?? -1 }
}
