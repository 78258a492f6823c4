import Dispatch
import Synchronization

/// The before-access protocol for one access (docs/SEMANTICS.md §3.6, §3.4): every
/// selected presenter is sent its one request at once, on its own queue; the access may
/// run when all have answered. The first refusal fails it; at the deadline the presenters
/// still silent are skipped (recorded as misses: `resync` later, unregistered after too
/// many) and the access goes ahead.
///
/// Reacquirers handed back by relinquishing presenters run on their queues when the
/// access ends (`end()`), also for presenters that answered after the deadline or after
/// the access already failed.
///
/// Lock order: `state` is a leaf; presenter code and completions run outside it.
final class PresenterPreparation: Sendable {
    typealias Completion = @Sendable (Result<Void, CoordinationError>) -> Void

    private struct State {
        var answered: [Bool]
        var outstanding: Int
        /// The outcome is decided (all answered, a refusal, the deadline, or cancelled).
        var finished = false
        /// The deadline decided it: answers from now on are late.
        var expired = false
        /// The access is over: reacquirers run as soon as they arrive.
        var ended = false
        var reacquirers: [(index: Int, reacquire: @Sendable () -> Void)] = []
        var completion: Completion?
        var timer: DispatchWorkItem?
    }

    let asks: [PresenterRegistry.Ask]
    private let registry: PresenterRegistry
    private let state: Mutex<State>

    init(asks: [PresenterRegistry.Ask], registry: PresenterRegistry, completion: @escaping Completion) {
        self.asks = asks
        self.registry = registry
        state = Mutex(State(answered: Array(repeating: false, count: asks.count), outstanding: asks.count,
                            completion: completion))
    }

    /// What each presenter was asked, by registration id: nested accesses of the same
    /// coordinator do not ask again.
    var askedSteps: [UInt64: PresenterSteps] {
        var result: [UInt64: PresenterSteps] = [:]
        for ask in asks { result[ask.entry.id, default: []].formUnion(ask.request.steps) }
        return result
    }

    /// Sends every request and arms the deadline.
    func start(timeout: Duration, timerQueue: DispatchQueue) {
        let (seconds, attoseconds) = timeout.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
        state.withLock { s in
            // Scheduled under the lock (which runs nothing) so the item never leaves it.
            let timer = DispatchWorkItem { [weak self] in self?.expire() }
            s.timer = timer
            timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanos)), execute: timer)
        }
        for (index, ask) in asks.enumerated() {
            let presenter = ask.entry.presenter, request = ask.request
            ask.entry.queue.async {
                presenter.handle(request) { [self] reply in self.answer(index, reply) }
            }
        }
    }

    /// The access is over (or will not happen): run the reacquirers. Idempotent.
    func end() {
        let reacquirers = state.withLock { s -> [(index: Int, reacquire: @Sendable () -> Void)] in
            s.ended = true
            s.finished = true
            s.completion = nil
            s.timer?.cancel()
            defer { s.reacquirers = [] }
            return s.reacquirers
        }
        for r in reacquirers { asks[r.index].entry.queue.async(execute: r.reacquire) }
    }

    private func answer(_ index: Int, _ reply: PresenterReply) {
        enum Effect { case none, complete(Completion, Result<Void, CoordinationError>) }
        var reacquireNow: (@Sendable () -> Void)? = nil
        let (effect, onTime): (Effect, Bool?) = state.withLock { s in
            guard !s.answered[index] else { return (.none, nil) }
            s.answered[index] = true
            let onTime: Bool? = s.expired ? nil : true
            switch reply {
            case .accepted(let reacquirer):
                if let reacquirer {
                    if s.ended { reacquireNow = reacquirer } else { s.reacquirers.append((index, reacquirer)) }
                }
                s.outstanding -= 1
                guard !s.finished, s.outstanding == 0, let c = s.completion else { return (.none, onTime) }
                s.finished = true
                s.completion = nil
                s.timer?.cancel()
                return (.complete(c, .success(())), onTime)
            case .refused(let error):
                guard !s.finished, let c = s.completion else { return (.none, onTime) }
                s.finished = true
                s.completion = nil
                s.timer?.cancel()
                return (.complete(c, .failure(.presenterFailed(CoordinationError.presenterErrno(error)))), onTime)
            }
        }
        if let reacquireNow { asks[index].entry.queue.async(execute: reacquireNow) }
        if onTime == true { registry.recordAnswer(of: asks[index].entry, onTime: true) }
        if case .complete(let completion, let result) = effect { completion(result) }
    }

    private func expire() {
        let (completion, missed): (Completion?, [Int]) = state.withLock { s in
            guard !s.finished else { return (nil, []) }
            s.finished = true
            s.expired = true
            defer { s.completion = nil }
            return (s.completion, s.answered.indices.filter { !s.answered[$0] })
        }
        for index in missed { registry.recordAnswer(of: asks[index].entry, onTime: false) }
        completion?(.success(()))
    }
}
