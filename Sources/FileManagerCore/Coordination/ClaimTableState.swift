import Dispatch

/// The claim table's data, only ever touched under `ClaimTable.state`.
///
/// Two flat lists rather than an index per key: the daemon has at most a few dozen claims
/// at once (libfuse runs ≤ 10 workers; waiters are deferred requests and explicit claims),
/// so a scan that usually rejects an unrelated claim with one comparison of the deepest
/// chain element (`ClaimTarget.isPrefix`) beats maintaining per-node counts on every grant
/// and release. With no claims at all a request costs one empty-list check.
struct ClaimTableState {
    struct Holder {
        let id: UInt64
        let purpose: Purpose
        let claims: [Claim]
        let lifetime: ClaimLifetime
        /// Purposes let past this claim while its presenters are asked (R8).
        var admitted: [Purpose] = []

        /// Whether a request of purpose `p` is never blocked by this claim.
        @inline(__always)
        func passes(_ p: Purpose) -> Bool {
            purpose == p || (!admitted.isEmpty && admitted.contains(p))
        }
    }

    struct Waiter {
        let id: UInt64
        let purpose: Purpose
        let claims: [Claim]
        let lifetime: ClaimLifetime
        let completion: ClaimTable.Completion
        /// The deadline expiry, cancelled when the waiter leaves earlier.
        var timer: DispatchWorkItem?
    }

    /// A completion to call once the lock is dropped.
    struct Outcome {
        let completion: ClaimTable.Completion
        let result: Result<ClaimGrant, CoordinationError>
    }

    private var nextID: UInt64 = 1
    /// Granted claims, in no particular order.
    var holders: [Holder] = []
    /// Waiting requests, oldest first (FIFO).
    var waiters: [Waiter] = []

    init() {
        holders.reserveCapacity(64)
        waiters.reserveCapacity(16)
    }

    mutating func takeID() -> UInt64 {
        defer { nextID &+= 1 }
        return nextID
    }

    /// Records a grant and returns its id.
    mutating func grant(_ claims: [Claim], purpose: Purpose, lifetime: ClaimLifetime) -> UInt64 {
        let id = takeID()
        holders.append(Holder(id: id, purpose: purpose, claims: claims, lifetime: lifetime))
        return id
    }

    // MARK: - Conflicts

    /// Whether `claims` of `purpose` must wait: a granted claim it does not pass conflicts,
    /// or a waiter among the first `upTo` conflicts and is not itself waiting on `purpose`.
    func isBlocked(_ claims: [Claim], purpose: Purpose, upTo limit: Int) -> Bool {
        for h in holders where !h.passes(purpose) && h.claims.conflicts(with: claims) { return true }
        guard limit > 0 else { return false }
        var dependents: [Bool]? = nil
        for j in 0..<limit {
            let w = waiters[j]
            guard w.purpose != purpose, w.claims.conflicts(with: claims) else { continue }
            if dependents == nil { dependents = waitersDepending(on: purpose, upTo: limit) }
            if !dependents![j] { return true }
        }
        return false
    }

    /// For each of the first `limit` waiters: whether it waits, directly or through earlier
    /// waiters, for a granted claim that `purpose` passes. Such a waiter cannot move before
    /// `purpose` releases, so making `purpose` queue behind it would be a self-deadlock.
    func waitersDepending(on purpose: Purpose, upTo limit: Int) -> [Bool] {
        var depends = [Bool](repeating: false, count: limit)
        for j in 0..<limit {
            let w = waiters[j]
            if w.purpose == purpose { continue }
            for h in holders where h.passes(purpose) && !h.passes(w.purpose) && h.claims.conflicts(with: w.claims) {
                depends[j] = true
                break
            }
            if depends[j] { continue }
            for i in 0..<j where depends[i] && waiters[i].purpose != w.purpose && waiters[i].claims.conflicts(with: w.claims) {
                depends[j] = true
                break
            }
        }
        return depends
    }

    /// Whether any claim, granted or waiting, is explicit: without one there can be no
    /// deadlock (`DeadlockDetector`), and FUSE traffic skips the graph entirely.
    var hasExplicitClaims: Bool {
        holders.contains { $0.lifetime == .explicit } || waiters.contains { $0.lifetime == .explicit }
    }

    // MARK: - Granting

    /// Grants every waiter that can go, in FIFO order, then fails waiters caught in a
    /// deadlock, repeating until nothing changes. Returns the completions to call.
    mutating func settle(table: ClaimTable) -> [Outcome] {
        var outcomes: [Outcome] = []
        while true {
            var granted = false
            var i = 0
            while i < waiters.count {
                if isBlocked(waiters[i].claims, purpose: waiters[i].purpose, upTo: i) {
                    i += 1
                    continue
                }
                let w = waiters.remove(at: i)
                w.timer?.cancel()
                holders.append(Holder(id: w.id, purpose: w.purpose, claims: w.claims, lifetime: w.lifetime))
                outcomes.append(Outcome(completion: w.completion, result: .success(ClaimGrant(id: w.id, table: table))))
                granted = true
                // A grant never unblocks an earlier waiter, except through the self-deadlock
                // exception of `isBlocked`: rescan from the start once this pass is done.
            }
            if granted { continue }
            guard !waiters.isEmpty, hasExplicitClaims, let victim = DeadlockDetector.newestDeadlockedWaiter(self) else { break }
            let w = waiters.remove(at: victim)
            w.timer?.cancel()
            outcomes.append(Outcome(completion: w.completion, result: .failure(.deadlock)))
        }
        return outcomes
    }
}
