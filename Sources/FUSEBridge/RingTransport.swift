import CFuse
import CFuseTap
import Glibc
import Synchronization

/// FUSE over io_uring (kernel 6.14, DESIGN.md 31), through the channel tap: requests come
/// through one queue per CPU, each served by a thread pinned to that CPU, instead of
/// `/dev/fuse` reads by whichever worker the kernel wakes. A caller's request is then
/// handled on the CPU the caller just left to wait, with no other processor woken — the
/// wake-up that costs most of a round trip on a small virtual machine.
///
/// libfuse 3.14 knows nothing of it: the tap offers `FUSE_OVER_IO_URING` in the INIT reply,
/// the queues' threads hand each request to `fuse_session_process_buf` laid out as a read
/// of `/dev/fuse` would give it, and the tap's writev/splice commit each reply to the ring
/// entry it answers. FORGET and INTERRUPT still come through `/dev/fuse` (the kernel sends
/// them there), so libfuse's own loop keeps running beside the queues.
///
/// Created before the mount (the control socket reports it), prepared and attached by the
/// session, stopped when its loop ends.
public final class RingTransport: Sendable {
    /// Entries each queue starts with; a queue grows while parked requests hold its entries
    /// (ring.c).
    static let depth: UInt32 = 16

    private struct State: @unchecked Sendable { var ring: OpaquePointer? }
    private let state = Mutex(State())

    public init() {}

    /// Before the mount (nothing to undo if it fails): the queues' threads start and wait.
    func prepare(session: OpaquePointer, payload: Int) throws(FUSESession.Failure) {
        var error: CInt = 0
        guard let ring = cfusetap_ring_new(Self.depth, payload, FUSESession.processRequest, UnsafeMutableRawPointer(session), &error) else {
            throw FUSESession.Failure(description: "-o uring: cannot set up the io_uring queues (\(String(cString: strerror(error))))")
        }
        state.withLock { $0.ring = ring }
    }

    /// The mounted session's /dev/fuse descriptor, before its INIT is read.
    func attach(channel: CInt) {
        state.withLock { s in if let ring = s.ring { cfusetap_ring_attach(ring, channel) } }
    }

    /// The ring, no longer reachable from here (for stopping it).
    private func take() -> OpaquePointer? {
        state.withLock { s in defer { s.ring = nil }; return s.ring }
    }

    /// A mount that failed after `prepare`: the waiting threads end.
    func discard() {
        if let ring = take() { cfusetap_ring_stop(ring) }
    }

    /// After the session loop: the queues' threads end; nothing of the ring is left. The
    /// log says what the ring carried.
    func stop(mountPoint: String) {
        guard let ring = take() else { return }
        if cfusetap_ring_serving(ring) != 0 {
            bridgeLogger.info("\(mountPoint): io_uring served \(cfusetap_ring_requests(ring)) requests; \(cfusetap_ring_strays(ring)) others came through /dev/fuse after it started; \(cfusetap_ring_redelivered(ring)) interrupts delivered again after their request")
        } else if cfusetap_ring_taken(ring) == 0 {
            bridgeLogger.warning("\(mountPoint): -o uring: the kernel did not take io_uring (it did not offer it, or a queue could not register); every request came through /dev/fuse")
        } else if cfusetap_ring_unringed(ring) == 0 {
            bridgeLogger.info("\(mountPoint): -o uring: no request was made while mounted")
        } else {
            bridgeLogger.warning("\(mountPoint): -o uring: io_uring carried no request; \(cfusetap_ring_unringed(ring)) came through /dev/fuse")
        }
        cfusetap_ring_stop(ring)
    }

    /// Whether requests have come through the ring; false before and after.
    public var isServing: Bool { state.withLock { $0.ring.map { cfusetap_ring_serving($0) != 0 } ?? false } }

    /// Requests served through the ring so far.
    public var requests: UInt64 { state.withLock { $0.ring.map { cfusetap_ring_requests($0) } ?? 0 } }
}
