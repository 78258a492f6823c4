import Dispatch
import Synchronization
import SystemPackage

/// One arbiter of coordinated access: a claim table, a presenter registry and the
/// before-access protocol that joins them (docs/SEMANTICS.md §3). The daemon
/// makes one per mount with its inode resolver; the in-process Swift API uses `shared`.
///
/// An access goes: claim queued and granted (`ClaimTable`) → presenters asked in parallel
/// (`PresenterPreparation`), with their own purposes let past the claim meanwhile (R8) →
/// the caller runs the operation, announces what it committed, and ends the access (which
/// releases the claim and sends reacquirers).
public final class CoordinationCenter: Sendable {
    /// Deadlines (docs/SEMANTICS.md §3.4: claim wait 30 s, presenter answer 5 s).
    public struct Configuration: Sendable {
        /// How long a Swift-API access waits for its claim before `.timedOut`; nil waits
        /// for ever (Apple's behaviour). The daemon passes its own deadline per request.
        public var claimTimeout: Duration?
        /// How long presenters have to answer a before-access request.
        public var presenterTimeout: Duration
        /// How long a batch (`prepare(forReadingItemsAt:…)`) stays open when its completion
        /// handler is never called.
        public var batchTimeout: Duration
        /// Missed presenter deadlines in a row after which a presenter is unregistered.
        public var maximumPresenterMisses: Int

        public init(claimTimeout: Duration? = .seconds(30), presenterTimeout: Duration = .seconds(5),
                    batchTimeout: Duration = .seconds(30), maximumPresenterMisses: Int = 3) {
            self.claimTimeout = claimTimeout
            self.presenterTimeout = presenterTimeout
            self.batchTimeout = batchTimeout
            self.maximumPresenterMisses = maximumPresenterMisses
        }
    }

    /// The process-wide center of the in-process Swift API (path identities).
    public static let shared = CoordinationCenter()

    public let claims: ClaimTable
    public let presenters: PresenterRegistry
    public let resolver: any ClaimTargetResolver
    public let configuration: Configuration
    let timerQueue = DispatchQueue(label: "containerfs.coordination.presenter-deadlines")
    /// Intents of accesses waiting or running, rewritten by announced moves. A leaf lock.
    private let intents = Mutex<[ObjectIdentifier: FileAccessIntent]>([:])

    public init(resolver: any ClaimTargetResolver = PathClaimResolver(), configuration: Configuration = Configuration()) {
        self.resolver = resolver
        self.configuration = configuration
        self.claims = ClaimTable()
        self.presenters = PresenterRegistry(resolver: resolver, maximumMisses: configuration.maximumPresenterMisses)
    }

    // MARK: - Accesses

    /// Starts a coordinated access to `claims` for `purpose` and never blocks.
    ///
    /// `completion` runs exactly once: with a `CoordinatedAccess` when the claims are granted
    /// and every presenter asked has answered (or missed its deadline), or with the reason
    /// the access cannot happen. It runs on the caller's thread when that is decided at
    /// once (always so on the fast path: no conflicting claim and no presenter concerned —
    /// one lock and no allocation of the center's), else on the thread that released a
    /// conflicting claim, a presenter's answering thread, a timer thread or `cancel`'s.
    ///
    /// - `accessorUID`: the caller's uid through the mount; presenters of other uids (except
    ///   root's) are not asked and cannot refuse (docs/SEMANTICS.md §3). Nil: everyone is asked.
    /// - `lifetime`: `.callback` for a FUSE operation's short claim, `.explicit` otherwise.
    /// - `nonBlocking`, `deadline`: see `ClaimTable.request`. The deadline covers the wait
    ///   for the claim; presenters have `configuration.presenterTimeout` on top.
    @discardableResult
    public func beginAccess(
        _ claims: [Claim], purpose: Purpose, accessorUID: UInt32? = nil, lifetime: ClaimLifetime = .callback,
        nonBlocking: Bool = false, deadline: ContinuousClock.Instant? = nil,
        completion: @escaping @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void
    ) -> AccessTicket {
        beginAccess(claims, purpose: purpose, accessorUID: accessorUID, lifetime: lifetime, nonBlocking: nonBlocking,
                    deadline: deadline, includingContents: false, alreadyAsked: [:], completion: completion)
    }

    func beginAccess(
        _ claims: [Claim], purpose: Purpose, accessorUID: UInt32?, lifetime: ClaimLifetime,
        nonBlocking: Bool, deadline: ContinuousClock.Instant?, includingContents: Bool,
        alreadyAsked: [UInt64: PresenterSteps],
        completion: @escaping @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void
    ) -> AccessTicket {
        if presenters.isEmpty, let grant = self.claims.grantIfFree(claims, purpose: purpose, lifetime: lifetime) {
            completion(.success(CoordinatedAccess(grant: grant, preparation: nil)))
            return AccessTicket(pending: nil)
        }
        let pending = PendingAccess(center: self, claims: claims, purpose: purpose, accessorUID: accessorUID,
                                    includingContents: includingContents, alreadyAsked: alreadyAsked,
                                    completion: completion)
        let ticket = self.claims.request(claims, purpose: purpose, lifetime: lifetime, nonBlocking: nonBlocking,
                                         deadline: deadline) { result in pending.claimResolved(result) }
        pending.claimRequested(ticket)
        return AccessTicket(pending: pending)
    }

    /// Asks presenters as an access of `claims` would, but takes no claim: the batch
    /// preparation of `prepare(forReadingItemsAt:…)` (docs/SEMANTICS.md §3.5), which reaches everything
    /// inside the items.
    func preparePresenters(
        for claims: [Claim], purpose: Purpose, accessorUID: UInt32?,
        completion: @escaping @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void
    ) -> AccessTicket {
        let pending = PendingAccess(center: self, claims: claims, purpose: purpose, accessorUID: accessorUID,
                                    includingContents: true, alreadyAsked: [:], completion: completion)
        pending.prepare(grant: nil)
        return AccessTicket(pending: pending)
    }

    /// Stops an access that has not started: waiting for its claim or for presenters. Its
    /// completion runs with `.cancelled` (EINTR), on this thread; a claim it already got is
    /// released and relinquished presenters get their reacquirers. An access already handed
    /// to its completion is not affected. Returns at once.
    public func cancel(_ ticket: AccessTicket) {
        ticket.pending?.cancel()
    }

    // MARK: - After the access

    /// Announces a committed change to presenters (`PresenterRegistry.announce`) and moves
    /// the intents of waiting and running accesses along with a moved item.
    public func announce(_ event: PresenterEvent, by purpose: Purpose?) {
        if case .moved(let from, let to) = event {
            let (from, to) = (from.coordinationNormalized, to.coordinationNormalized)
            for intent in intents.withLock({ Array($0.values) }) { intent.follow(from: from, to: to) }
        }
        presenters.announce(event, by: purpose)
    }

    func track(_ list: [FileAccessIntent]) {
        intents.withLock { table in for i in list { table[ObjectIdentifier(i)] = i } }
    }

    func untrack(_ list: [FileAccessIntent]) {
        intents.withLock { table in for i in list { table[ObjectIdentifier(i)] = nil } }
    }
}
