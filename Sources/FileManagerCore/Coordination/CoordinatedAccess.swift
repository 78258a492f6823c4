import Synchronization

/// A granted, prepared access: the claims are held and the presenters have answered. The
/// caller performs the operation, announces what it committed
/// (`CoordinationCenter.announce`, while still holding the access), then calls `end()`.
public struct CoordinatedAccess: Sendable {
    /// The claims; nil only for a batch preparation, which holds none.
    public let grant: ClaimGrant?
    let preparation: PresenterPreparation?

    /// Releases the claims and gives relinquishing presenters back their items
    /// (reacquirers, on their queues). Idempotent.
    public func end() {
        grant?.release()
        preparation?.end()
    }

    /// What presenters were asked, by registration id.
    var askedSteps: [UInt64: PresenterSteps] { preparation?.askedSteps ?? [:] }
}

/// Identifies an access that may still be waiting, for `CoordinationCenter.cancel(_:)`
/// (FUSE_INTERRUPT, `FileCoordinator.cancel()`, task cancellation). Empty when the access
/// was decided at once.
public struct AccessTicket: Sendable {
    let pending: PendingAccess?
}

/// An access between its request and its completion: waiting for the claim, then for
/// presenters. Ensures the completion runs exactly once whatever races between a grant, a
/// presenter's answer, a deadline and a cancel.
///
/// Lock order: `state` is a leaf; the claim table, presenters and the completion are only
/// called after it is dropped.
final class PendingAccess: Sendable {
    typealias Completion = @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void

    private enum Phase {
        /// Waiting for the claim; the ticket once `request` returned.
        case waiting(ClaimTicket?)
        case preparing(ClaimGrant?, PresenterPreparation)
        case finished
    }

    private struct State {
        var phase: Phase = .waiting(nil)
        var cancelRequested = false
        var completion: Completion?
    }

    private let center: CoordinationCenter
    private let claims: [Claim]
    private let purpose: Purpose
    private let accessorUID: UInt32?
    private let includingContents: Bool
    private let alreadyAsked: [UInt64: PresenterSteps]
    private let state: Mutex<State>

    init(center: CoordinationCenter, claims: [Claim], purpose: Purpose, accessorUID: UInt32?,
         includingContents: Bool, alreadyAsked: [UInt64: PresenterSteps], completion: @escaping Completion) {
        self.center = center
        self.claims = claims
        self.purpose = purpose
        self.accessorUID = accessorUID
        self.includingContents = includingContents
        self.alreadyAsked = alreadyAsked
        self.state = Mutex(State(completion: completion))
    }

    /// Records the claim ticket once `request` returned (its completion may already have run).
    func claimRequested(_ ticket: ClaimTicket) {
        let cancelNow = state.withLock { s -> Bool in
            guard case .waiting(nil) = s.phase else { return false }
            s.phase = .waiting(ticket)
            return s.cancelRequested
        }
        if cancelNow { center.claims.cancel(ticket) }
    }

    /// The claim table's answer.
    func claimResolved(_ result: Result<ClaimGrant, CoordinationError>) {
        switch result {
        case .failure(let error):
            finish(.failure(error))
        case .success(let grant):
            if state.withLock({ $0.cancelRequested }) {
                grant.release()
                finish(.failure(.cancelled))
            } else {
                prepare(grant: grant)
            }
        }
    }

    /// Asks the presenters concerned; with none, the access is ready at once.
    func prepare(grant: ClaimGrant?) {
        let asks = center.presenters.asks(for: claims, purpose: purpose, accessorUID: accessorUID,
                                          includingContents: includingContents, alreadyDone: alreadyAsked)
        if asks.isEmpty {
            if state.withLock({ $0.cancelRequested }) {
                grant?.release()
                finish(.failure(.cancelled))
            } else if !finish(.success(CoordinatedAccess(grant: grant, preparation: nil))) {
                grant?.release()
            }
            return
        }
        let preparation = PresenterPreparation(asks: asks, registry: center.presenters) { [self] result in
            prepared(result)
        }
        let proceed = state.withLock { s -> Bool in
            guard !s.cancelRequested, s.completion != nil else { return false }
            s.phase = .preparing(grant, preparation)
            return true
        }
        guard proceed else {
            grant?.release()
            finish(.failure(.cancelled))
            return
        }
        // R8: a presenter's own save write must not wait for the access that asked for it.
        if let grant { center.claims.admit(asks.map(\.entry.purpose), past: grant) }
        preparation.start(timeout: center.configuration.presenterTimeout, timerQueue: center.timerQueue)
    }

    private func prepared(_ result: Result<Void, CoordinationError>) {
        let taken = state.withLock { s -> (ClaimGrant?, PresenterPreparation, Completion)? in
            guard case .preparing(let grant, let preparation) = s.phase, let completion = s.completion else { return nil }
            s.phase = .finished
            s.completion = nil
            return (grant, preparation, completion)
        }
        guard let (grant, preparation, completion) = taken else { return }
        switch result {
        case .success:
            if let grant { center.claims.endAdmission(past: grant) }
            completion(.success(CoordinatedAccess(grant: grant, preparation: preparation)))
        case .failure(let error):
            grant?.release()
            preparation.end()
            completion(.failure(error))
        }
    }

    func cancel() {
        enum Action { case none, cancelClaim(ClaimTicket), abandon(ClaimGrant?, PresenterPreparation, Completion) }
        let action = state.withLock { s -> Action in
            switch s.phase {
            case .waiting(let ticket):
                s.cancelRequested = true
                return ticket.map { .cancelClaim($0) } ?? .none
            case .preparing(let grant, let preparation):
                guard let completion = s.completion else { return .none }
                s.phase = .finished
                s.completion = nil
                return .abandon(grant, preparation, completion)
            case .finished:
                return .none
            }
        }
        switch action {
        case .none: break
        case .cancelClaim(let ticket): center.claims.cancel(ticket)
        case .abandon(let grant, let preparation, let completion):
            preparation.end()
            grant?.release()
            completion(.failure(.cancelled))
        }
    }

    /// Runs the completion if nobody did yet; false if it had already run.
    @discardableResult
    private func finish(_ result: Result<CoordinatedAccess, CoordinationError>) -> Bool {
        let completion = state.withLock { s -> Completion? in
            defer {
                s.completion = nil
                s.phase = .finished
            }
            return s.completion
        }
        completion?(result)
        return completion != nil
    }
}
