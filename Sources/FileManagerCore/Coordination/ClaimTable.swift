import Dispatch
import Synchronization

/// The arbiter of coordinated access (docs/SEMANTICS.md §3.1): which claims are
/// granted, who waits for whom, and how waiting ends.
///
/// Rules:
/// - the conflict matrix of docs/SEMANTICS.md §3.1 between claims of **different purposes**; claims of one
///   purpose never conflict (R5, R6);
/// - FIFO: a request also waits for earlier *waiting* requests it conflicts with, so
///   writers do not starve and, once a subtree write is queued, later accesses inside it
///   wait behind it . Exception, to keep a purpose from deadlocking on itself: a
///   waiter that is (transitively) waiting for a claim the requester's purpose holds is
///   not waited for;
/// - a request for several items is granted all at once or not at all, so no request ever
///   holds one item while waiting for another (docs/SEMANTICS.md §3.1);
/// - a request whose wait would close a cycle in the wait-for graph between purposes fails
///   with `.deadlock` (EDEADLK); the graph is checked on every enqueue and after every
///   grant (`DeadlockDetector`).
///
/// Never blocking: `request` returns at once. Its completion runs exactly once —
/// immediately on the caller's thread when the request is granted or refused at once, else
/// later on the thread that released the conflicting claim (or cancelled or timed out a
/// waiter ahead of it), on `cancel`'s thread, or on the table's timer thread at the
/// deadline. Completions should be short or hop to a queue of their own: a release runs the
/// completions of everything it unblocks.
///
/// Lock order: `state` is a leaf. While it is held nothing else is locked and nothing is
/// called out — completions run after it is dropped, so a completion may call the table
/// again. Scheduling a deadline timer (`asyncAfter`) under it is allowed: that runs nothing.
public final class ClaimTable: Sendable {
    public typealias Completion = @Sendable (Result<ClaimGrant, CoordinationError>) -> Void

    /// Protected by itself; see the lock order above.
    let state: Mutex<ClaimTableState>
    /// Runs deadline expiries.
    let timerQueue = DispatchQueue(label: "containerfs.coordination.claim-deadlines")

    public init() {
        state = Mutex(ClaimTableState())
    }

    // MARK: - Requests

    /// The fast path: grants `claims` at once if nothing conflicts, else returns nil and
    /// queues nothing. One lock, no allocation beyond the caller's arrays (the granted list
    /// keeps spare capacity). The daemon calls this first for every short claim and falls
    /// back to `request` only when it returns nil.
    public func grantIfFree(_ claims: [Claim], purpose: Purpose, lifetime: ClaimLifetime = .callback) -> ClaimGrant? {
        let id: UInt64? = state.withLock { s in
            guard !s.isBlocked(claims, purpose: purpose, upTo: s.waiters.count) else { return nil }
            return s.grant(claims, purpose: purpose, lifetime: lifetime)
        }
        return id.map { ClaimGrant(id: $0, table: self) }
    }

    /// Asks for `claims` (one access: all granted together) for `purpose`.
    ///
    /// - `nonBlocking`: a conflict completes with `.wouldBlock` at once (`O_NONBLOCK`).
    /// - `deadline`: a waiter still waiting then completes with `.timedOut` (EBUSY); nil
    ///   waits until granted, cancelled or found deadlocked.
    /// - `completion`: exactly once, see the type's documentation for the thread.
    @discardableResult
    public func request(
        _ claims: [Claim], purpose: Purpose, lifetime: ClaimLifetime = .callback,
        nonBlocking: Bool = false, deadline: ContinuousClock.Instant? = nil,
        completion: @escaping Completion
    ) -> ClaimTicket {
        enum Immediate { case granted, refused(CoordinationError), waiting }
        let ordered = claims.count > 1 ? claims.sorted { $0.target < $1.target } : claims
        let (id, immediate): (UInt64, Immediate) = state.withLock { s in
            if !s.isBlocked(ordered, purpose: purpose, upTo: s.waiters.count) {
                return (s.grant(ordered, purpose: purpose, lifetime: lifetime), .granted)
            }
            let id = s.takeID()
            if nonBlocking { return (id, .refused(.wouldBlock)) }
            if let deadline, deadline <= .now { return (id, .refused(.timedOut)) }
            s.waiters.append(ClaimTableState.Waiter(
                id: id, purpose: purpose, claims: ordered, lifetime: lifetime, completion: completion, timer: nil))
            if s.hasExplicitClaims, DeadlockDetector.closesCycle(s, waiterAt: s.waiters.count - 1) {
                s.waiters.removeLast()
                return (id, .refused(.deadlock))
            }
            if let deadline {
                s.waiters[s.waiters.count - 1].timer = scheduleDeadline(id, at: deadline)
            }
            return (id, .waiting)
        }
        switch immediate {
        case .granted: completion(.success(ClaimGrant(id: id, table: self)))
        case .refused(let error): completion(.failure(error))
        case .waiting: break
        }
        return ClaimTicket(id: id)
    }

    /// `request` for several targets in one mode (e.g. a rename's two parents).
    @discardableResult
    public func request(
        targets: [ClaimTarget], purpose: Purpose, mode: ClaimMode, lifetime: ClaimLifetime = .callback,
        nonBlocking: Bool = false, deadline: ContinuousClock.Instant? = nil,
        completion: @escaping Completion
    ) -> ClaimTicket {
        request(targets.map { Claim(target: $0, mode: mode) }, purpose: purpose, lifetime: lifetime,
                nonBlocking: nonBlocking, deadline: deadline, completion: completion)
    }

    /// Blocks the calling thread until the claims are granted or refused. For the Swift
    /// API and the CLI only: never call it on a FUSE worker or a cooperative-pool thread.
    public func acquire(
        _ claims: [Claim], purpose: Purpose, lifetime: ClaimLifetime = .explicit,
        deadline: ContinuousClock.Instant? = nil
    ) throws(CoordinationError) -> ClaimGrant {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<ClaimGrant, CoordinationError>?>(nil)
        request(claims, purpose: purpose, lifetime: lifetime, deadline: deadline) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// Stops a waiting request: its completion runs with `.cancelled` on this thread and
    /// `true` is returned. A request already granted or refused is left alone (`false`):
    /// its completion has run or is running, and the caller must release what it got.
    @discardableResult
    public func cancel(_ ticket: ClaimTicket) -> Bool {
        finishWaiter(ticket.id, with: .cancelled)
    }

    // MARK: - Holders

    /// Releases a granted claim (idempotent) and grants what it unblocks.
    func release(_ id: UInt64) {
        let outcomes: [ClaimTableState.Outcome] = state.withLock { s in
            guard let i = s.holders.firstIndex(where: { $0.id == id }) else { return [] }
            s.holders.swapAt(i, s.holders.count - 1)
            s.holders.removeLast()
            return s.waiters.isEmpty ? [] : s.settle(table: self)
        }
        run(outcomes)
    }

    /// Lets the granted claim `grant` admit `purposes` while its presenters are being asked
    /// (R8): a presenter's save write goes ahead of the waiting read it was asked for.
    func admit(_ purposes: [Purpose], past grant: ClaimGrant) {
        let outcomes: [ClaimTableState.Outcome] = state.withLock { s in
            guard let i = s.holders.firstIndex(where: { $0.id == grant.id }) else { return [] }
            s.holders[i].admitted = purposes
            return s.waiters.isEmpty ? [] : s.settle(table: self)
        }
        run(outcomes)
    }

    /// Ends an admission made by `admit`. Only makes the claim stricter: grants nothing.
    func endAdmission(past grant: ClaimGrant) {
        state.withLock { s in
            guard let i = s.holders.firstIndex(where: { $0.id == grant.id }) else { return }
            s.holders[i].admitted = []
        }
    }

    /// How many claims are granted and how many requests wait: for tests and statistics.
    public var counts: (granted: Int, waiting: Int) {
        state.withLock { ($0.holders.count, $0.waiters.count) }
    }

    // MARK: - Waiters ending without a grant

    private func scheduleDeadline(_ id: UInt64, at deadline: ContinuousClock.Instant) -> DispatchWorkItem {
        let remaining = ContinuousClock.now.duration(to: deadline)
        let (seconds, attoseconds) = remaining.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
        let item = DispatchWorkItem { [weak self] in _ = self?.finishWaiter(id, with: .timedOut) }
        timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanos)), execute: item)
        return item
    }

    /// Removes waiter `id` with `error` (cancel, deadline) and grants what its leaving
    /// unblocks (FIFO: it may have been ahead of others).
    private func finishWaiter(_ id: UInt64, with error: CoordinationError) -> Bool {
        let outcomes: [ClaimTableState.Outcome]? = state.withLock { s in
            guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = s.waiters.remove(at: i)
            waiter.timer?.cancel()
            var outcomes = [ClaimTableState.Outcome(completion: waiter.completion, result: .failure(error))]
            if !s.waiters.isEmpty { outcomes += s.settle(table: self) }
            return outcomes
        }
        guard let outcomes else { return false }
        run(outcomes)
        return true
    }

    /// Calls completions; never under `state`.
    private func run(_ outcomes: [ClaimTableState.Outcome]) {
        for o in outcomes { o.completion(o.result) }
    }
}
