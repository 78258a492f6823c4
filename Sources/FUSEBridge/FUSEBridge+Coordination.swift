import CFuse
import FileManagerCore
import Glibc
import Synchronization
import SystemPackage

// MARK: - Kernel requests as short coordinated accesses (docs/SEMANTICS.md §3.2)
//
// Every handler that reads or changes content or the namespace passes the coordination gate
// first. While nothing is coordinated (no explicit claim, session or presenter) the gate is
// two atomic operations and the request runs at once, on its worker. Otherwise the request
// is parked: its `Reply` moves into a `ParkedRequest`, the claim is asked for without
// blocking, and the operation runs — and answers — in the completion, on whichever thread
// grants it. No worker thread ever sleeps on a claim (docs/SEMANTICS.md §3.4). A FUSE_INTERRUPT
// (the caller got a signal) cancels the wait and answers EINTR; O_NONBLOCK answers EAGAIN at
// once; the deadline answers EBUSY; a cycle EDEADLK.

/// A request waiting for its claim. Holds the reply until the access is decided.
///
/// Sendable note: `reply` is taken exactly once, by the access's completion, which the
/// coordination center runs exactly once.
final class ParkedRequest: @unchecked Sendable {
    private var reply: Reply?
    init(_ reply: consuming Reply) { self.reply = consume reply }
    func take() -> Reply { reply.take()! }
    func observe(_ outcome: Reply.Outcome) { reply = reply.take()!.observing(outcome) }
}

/// What a coordinated operation does once its access is granted; it answers the request.
/// `names` are the request's names, valid for the call (the kernel's on the fast path,
/// copies on the slow path).
typealias CoordinatedOperation = @Sendable (consuming Reply, RequestNames) -> Void

/// Up to two names of a request (rename and link have two), borrowed for one call.
struct RequestNames {
    var first: UnsafePointer<CChar>!
    var second: UnsafePointer<CChar>!

    init(_ first: UnsafePointer<CChar>? = nil, _ second: UnsafePointer<CChar>? = nil) {
        self.first = first
        self.second = second
    }
}

/// The names copied for a parked request (the kernel's buffers die with the callback).
struct CopiedNames: Sendable {
    let first: [CChar]?
    let second: [CChar]?

    init(_ names: RequestNames) {
        first = names.first.map { Array(UnsafeBufferPointer(start: $0, count: strlen($0) + 1)) }
        second = names.second.map { Array(UnsafeBufferPointer(start: $0, count: strlen($0) + 1)) }
    }

    func with<R>(_ body: (RequestNames) -> R) -> R {
        func borrow(_ a: [CChar]?, _ f: (UnsafePointer<CChar>?) -> R) -> R {
            guard let a else { return f(nil) }
            return a.withUnsafeBufferPointer { f($0.baseAddress) }
        }
        return borrow(first) { p1 in borrow(second) { p2 in body(RequestNames(p1, p2)) } }
    }
}

extension FUSEBridge {
    /// How a request is coordinated.
    struct Coordination {
        var claims: [Claim]
        /// Ask presenters before (opens, namespace and metadata changes); reads and writes
        /// on an open handle only take the claim (presenters were asked at open).
        var asksPresenters = true
        var nonBlocking = false
        /// Namespace operations hold the kernel's directory locks while they wait: they get
        /// the shorter deadline.
        var namespace = false
        /// Announced to presenters when the operation succeeds, before the kernel hears of it.
        var event: PresenterEvent?
    }

    /// Runs `operation` now, or parks the request until `coordination()`'s claims are granted.
    /// `coordination` is only evaluated on the slow path (it resolves targets and paths).
    func coordinate(_ reply: consuming Reply, _ names: RequestNames = RequestNames(), free: Bool = false,
                    _ coordination: () -> Coordination, _ operation: @escaping CoordinatedOperation) {
        guard let mount = self.coordination, !free else { return operation(reply, names) }
        if mount.enterFastPath() {
            operation(reply, names)
            mount.leaveFastPath()
            return
        }
        let copies = CopiedNames(names)
        let plan = coordination()
        let caller = reply.caller
        let request = reply.request
        let purpose = mount.purposes.purpose(ofThread: caller.pid)
        let parked = ParkedRequest(reply)
        let key = parkedRequests.register()
        let deadline = ContinuousClock.now + (plan.namespace ? mount.namespaceDeadline : mount.contentDeadline)
        let completion: @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void = { [self] result in
            parkedRequests.finish(key)
            switch result {
            case .failure(let error):
                parked.take().fail(error.errno)
            case .success(let access):
                // The event goes to presenters as the success goes to the kernel, before it:
                // what the caller does next (a write, a close) is announced after it.
                let announcing = plan.event.map { event in Reply.Outcome { mount.center.announce(event, by: purpose) } }
                if let announcing { parked.observe(announcing) }
                withExtendedLifetime(announcing) { copies.with { operation(parked.take(), $0) } }
                access.end()
            }
        }
        let ticket = mount.begin(plan.claims, purpose: purpose, accessorUID: caller.uid, asksPresenters: plan.asksPresenters,
                                 nonBlocking: plan.nonBlocking, deadline: deadline, completion: completion)
        if parkedRequests.park(key, ticket) {
            fuse_req_interrupt_func(request, { req, data in
                let bridge = Unmanaged<FUSEBridge>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
                bridge.interrupt(UInt64(UInt(bitPattern: data)))
            }, UnsafeMutableRawPointer(bitPattern: UInt(key)))
        }
    }

    /// FUSE_INTERRUPT for a parked request: stop waiting; the completion answers EINTR.
    func interrupt(_ key: UInt64) {
        guard let mount = coordination, let ticket = parkedRequests.ticket(key) else { return }
        mount.cancel(ticket)
    }

    /// Reads of items whose content can never change through the mount (`snapshots/`, the
    /// bundle) never wait for a claim (docs/SEMANTICS.md §3.2): the very items whose
    /// mutations are refused before waiting.
    func readsFreely(_ item: Item) -> Bool { refusesBeforeWaiting(item) }

    /// Mutations under `snapshots/` and in the bundle answer EROFS before any waiting.
    func refusesBeforeWaiting(_ item: Item) -> Bool {
        coordination?.isCoordinating == true && volume.zone(of: item).isReadOnly
    }
}

/// Requests parked behind claims, by a key the kernel's interrupt callback can carry.
final class ParkedRequests: Sendable {
    private enum State { case starting, waiting(MountTicket) }
    private let table = Mutex<[UInt64: State]>([:])
    private let next = Atomic<UInt64>(1)

    func register() -> UInt64 {
        let key = next.add(1, ordering: .relaxed).oldValue
        table.withLock { $0[key] = .starting }
        return key
    }

    /// Records the ticket of a request still waiting; false when it was already decided.
    func park(_ key: UInt64, _ ticket: MountTicket) -> Bool {
        table.withLock { t in
            guard t[key] != nil else { return false }
            t[key] = .waiting(ticket)
            return true
        }
    }

    func finish(_ key: UInt64) { table.withLock { $0[key] = nil } }

    func ticket(_ key: UInt64) -> MountTicket? {
        table.withLock { t in
            if case .waiting(let ticket)? = t[key] { return ticket }
            return nil
        }
    }

    var count: Int { table.withLock { $0.count } }
}
