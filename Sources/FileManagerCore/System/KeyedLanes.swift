import Foundation
import Synchronization

/// Work that may block for long, run in order per key, so that work for one key never
/// waits behind another key's.
///
/// Made for the kernel notifier (DESIGN.md 35): an entry invalidation takes the kernel's
/// lock of the directory, which a namespace request parked on a claim holds for up to
/// `namespace_timeout`, and an inode invalidation locks the file's pages, which a read
/// parked on a claim holds for up to `claim_timeout`. One thread for all of them made every
/// open that waited for *its* invalidation wait for the blocked one.
///
/// A key's work runs on one thread at a time, in the order it was added. A thread is
/// started when a key becomes ready and every thread is busy, up to `maxWorkers`; beyond
/// that ready keys wait for a thread to come free. Threads stay once started (an idle one
/// waits on a semaphore, costing nothing): only as many exist as keys were ever blocked
/// at once, usually one.
///
/// Sendable note: all state is behind `state`; the semaphore and group are thread-safe.
public final class KeyedLanes<Key: Hashable & Sendable>: @unchecked Sendable {
    public typealias Work = @Sendable () -> Void

    struct State {
        /// Work not started yet, per key.
        var pending: [Key: [Work]] = [:]
        /// Keys with pending work and no thread on them, oldest first. A key is here
        /// exactly when it has pending work and is not `busy`.
        var ready: [Key] = []
        var busy: Set<Key> = []
        /// Run once a key has no pending or running work (`after`).
        var waiting: [Key: [Work]] = [:]
        var idle = 0
        var workers = 0
        var stopping = false
    }

    private enum Wake { case none, idle, new(Int) }
    private enum Next { case run(Key, [Work]), wait, exit }

    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let exited = DispatchGroup()
    private let maxWorkers: Int
    private let name: String

    public init(name: String, maxWorkers: Int = 8) {
        precondition(maxWorkers > 0)
        self.name = name
        self.maxWorkers = maxWorkers
    }

    /// Queues `work` behind the key's earlier work. Dropped once `stop` began.
    public func add(_ key: Key, _ work: @escaping Work) {
        let wake = state.withLock { s -> Wake in
            guard !s.stopping else { return .none }
            let becomesReady = s.pending[key] == nil && !s.busy.contains(key)
            s.pending[key, default: []].append(work)
            guard becomesReady else { return .none }  // a thread has it, or will
            s.ready.append(key)
            if s.idle > 0 {
                s.idle -= 1
                return .idle
            }
            guard s.workers < maxWorkers else { return .none }  // the first free thread takes it
            s.workers += 1
            return .new(s.workers)
        }
        switch wake {
        case .none: break
        case .idle: wakeup.signal()
        case .new(let number): start(number)
        }
    }

    /// Whether the key has work queued or running.
    public func hasWork(_ key: Key) -> Bool {
        state.withLock { $0.pending[key] != nil || $0.busy.contains(key) }
    }

    /// Runs `body` right after the key's work queued so far (and any added meanwhile) has
    /// run, and returns true; false when the key has none, or once `stop` began (the caller
    /// runs `body` itself). Never runs `body` before returning.
    public func after(_ key: Key, _ body: @escaping Work) -> Bool {
        state.withLock { s in
            guard !s.stopping, s.pending[key] != nil || s.busy.contains(key) else { return false }
            s.waiting[key, default: []].append(body)
            return true
        }
    }

    /// Lets the threads finish the work queued (adding more is refused from now on) and
    /// waits for them; then runs what still waits (`after`).
    public func stop() {
        let idle = state.withLock { s -> Int in
            s.stopping = true
            defer { s.idle = 0 }
            return s.idle
        }
        for _ in 0..<idle { wakeup.signal() }
        exited.wait()
        for body in state.withLock({ s in defer { s.waiting.removeAll() }; return Array(s.waiting.values.joined()) }) {
            body()
        }
    }

    private func start(_ number: Int) {
        exited.enter()
        let thread = Thread { [self] in
            work()
            exited.leave()
        }
        thread.name = "\(name)-\(number)"
        thread.start()
    }

    private func work() {
        while true {
            let next = state.withLock { s -> Next in
                if !s.ready.isEmpty {
                    let key = s.ready.removeFirst()
                    s.busy.insert(key)
                    return .run(key, s.pending.removeValue(forKey: key) ?? [])
                }
                if s.stopping { return .exit }
                s.idle += 1
                return .wait
            }
            switch next {
            case .exit:
                return
            case .wait:
                wakeup.wait()
            case .run(let key, let batch):
                for item in batch { item() }
                let done = state.withLock { s -> [Work] in
                    s.busy.remove(key)
                    if s.pending[key] != nil {  // more came meanwhile: the key goes to the back
                        s.ready.append(key)
                        return []
                    }
                    return s.waiting.removeValue(forKey: key) ?? []
                }
                for body in done { body() }
            }
        }
    }
}
