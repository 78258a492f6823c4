import FileManagerCore
import Foundation
import Glibc
import Synchronization

/// Work that may block for long, run in order per key, so that work for one key never
/// waits long behind another key's.
///
/// Made for the kernel notifier (DESIGN.md 35): an entry invalidation takes the kernel's
/// lock of the directory, which a namespace request parked on a claim holds for up to
/// `namespace_timeout`, and an inode invalidation locks the file's pages, which a read
/// parked on a claim holds for up to `claim_timeout`. One thread for all of them made every
/// open that waited for *its* invalidation wait for the blocked one.
///
/// A key's work runs on one thread at a time, in the order it was added. One thread works
/// through the ready keys while it keeps moving: a burst of thousands of keys (a rescan
/// invalidating every item) runs on it alone, as on a single queue, with nobody contending
/// for the lock. Only when every awake thread has been on its key for `stuckAfter` while
/// keys wait does a watchdog wake or start another, up to `maxWorkers`; beyond that, ready
/// keys wait for a thread to come free. Threads stay once started (an idle one waits on a
/// semaphore, costing nothing): as many exist as keys were ever blocked at once, plus one.
///
/// Sendable note: all state is behind `state`; the semaphores and group are thread-safe.
final class KeyedLanes<Key: Hashable & Sendable>: @unchecked Sendable {
    typealias Work = @Sendable () -> Void

    struct State {
        /// Work not started yet, per key.
        var pending: [Key: [Work]] = [:]
        /// Keys with pending work and no thread on them, oldest first. A key is here
        /// exactly when it has pending work and is not `busy`.
        var ready = FIFO<Key>()
        /// Keys a thread is working on, and since when (`now()`).
        var busy: [Key: UInt64] = [:]
        /// Run once a key has no pending or running work (`after`).
        var waiting: [Key: [Work]] = [:]
        var idle = 0
        var workers = 0
        /// The watchdog is looking (it was signalled and has not found the lanes moving).
        var watching = false
        var watchdogStarted = false
        var stopping = false

        /// Threads neither idle nor on a key will look at `ready` before they sleep.
        var someoneWillLook: Bool { workers - idle > busy.count }
    }

    private enum Wake { case none, idle, new(Int), watchdog(start: Bool) }
    private enum Next { case run(Key, [Work]), wait, exit }
    private enum Verdict { case moving, helped(Wake), atLimit, done }

    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let watchdogWakeup = DispatchSemaphore(value: 0)
    private let exited = DispatchGroup()
    private let maxWorkers: Int
    private let stuckAfter: UInt64
    private let name: String

    /// `name`: the threads' prefix (their names are cut to the kernel's 15 bytes).
    /// `stuckAfter`: nanoseconds on one key after which a thread counts as blocked.
    init(name: String, maxWorkers: Int = 8, stuckAfter: UInt64 = 1_000_000) {
        precondition(maxWorkers > 0)
        self.name = name
        self.maxWorkers = maxWorkers
        self.stuckAfter = stuckAfter
    }

    /// Queues `work` behind the key's earlier work. Dropped once `stop` began.
    func add(_ key: Key, _ work: @escaping Work) {
        let wake = state.withLock { s -> Wake in
            guard !s.stopping else { return .none }
            let becomesReady = s.pending[key] == nil && s.busy[key] == nil
            s.pending[key, default: []].append(work)
            guard becomesReady else { return .none }  // a thread has it, or will
            s.ready.append(key)
            if s.someoneWillLook { return .none }
            if s.busy.isEmpty { return wakeOrStart(&s) }
            return alertWatchdog(&s)
        }
        act(wake)
    }

    /// Every awake thread is on a key while keys wait: perhaps only for a moment. The
    /// watchdog adds a thread if they are still there after `stuckAfter`.
    private func alertWatchdog(_ s: inout State) -> Wake {
        guard !s.watching else { return .none }
        s.watching = true
        let first = !s.watchdogStarted
        if first {
            s.watchdogStarted = true
            exited.enter()  // here, under the lock: `stop` cannot miss it
        }
        return .watchdog(start: first)
    }

    /// Threads started so far (the watchdog not counted): for tests.
    var workerCount: Int { state.withLock { $0.workers } }

    /// Whether the key has work queued or running.
    func hasWork(_ key: Key) -> Bool {
        state.withLock { $0.pending[key] != nil || $0.busy[key] != nil }
    }

    /// Runs `body` right after the key's work queued so far (and any added meanwhile) has
    /// run, and returns true; false when the key has none, or once `stop` began (the caller
    /// runs `body` itself). Never runs `body` before returning.
    func after(_ key: Key, _ body: @escaping Work) -> Bool {
        state.withLock { s in
            guard !s.stopping, s.pending[key] != nil || s.busy[key] != nil else { return false }
            s.waiting[key, default: []].append(body)
            return true
        }
    }

    /// Lets the threads finish the work queued (adding more is refused from now on) and
    /// waits for them; then runs what still waits (`after`).
    func stop() {
        let idle = state.withLock { s -> Int in
            s.stopping = true
            defer { s.idle = 0 }
            return s.idle
        }
        for _ in 0..<idle { wakeup.signal() }
        watchdogWakeup.signal()
        exited.wait()
        for body in state.withLock({ s in defer { s.waiting.removeAll() }; return Array(s.waiting.values.joined()) }) {
            body()
        }
    }

    /// Wakes an idle thread or starts one (counted in `exited` here, under the lock, so
    /// that `stop` cannot miss it); `.none` at the limit.
    private func wakeOrStart(_ s: inout State) -> Wake {
        if s.idle > 0 {
            s.idle -= 1
            return .idle
        }
        guard s.workers < maxWorkers else { return .none }
        s.workers += 1
        exited.enter()
        return .new(s.workers)
    }

    private func act(_ wake: Wake) {
        switch wake {
        case .none: break
        case .idle: wakeup.signal()
        case .new(let number): start("\(name)-\(number)") { [self] in work() }
        case .watchdog(let first):
            if first { start("\(name)-dog") { [self] in watch() } }
            watchdogWakeup.signal()
        }
    }

    private func start(_ threadName: String, _ body: @escaping @Sendable () -> Void) {
        Threads.start(named: threadName) { [self] in
            body()
            exited.leave()
        }
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private func work() {
        while true {
            let (next, wake) = state.withLock { s -> (Next, Wake) in
                if let key = s.ready.popFirst() {
                    s.busy[key] = Self.now()
                    let batch = s.pending.removeValue(forKey: key) ?? []
                    // Keys left waiting, and this thread may be about to block on its own.
                    let wake = s.ready.isEmpty || s.someoneWillLook ? Wake.none : alertWatchdog(&s)
                    return (.run(key, batch), wake)
                }
                if s.stopping { return (.exit, .none) }
                s.idle += 1
                return (.wait, .none)
            }
            act(wake)
            switch next {
            case .exit:
                return
            case .wait:
                wakeup.wait()
            case .run(let key, let batch):
                for item in batch { item() }
                let done = state.withLock { s -> [Work] in
                    s.busy[key] = nil
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

    /// While keys are ready and every awake thread is on a key, checks every `stuckAfter`
    /// (longer, up to 64 times that, while nothing can be done) whether they have all been
    /// there that long, and if so wakes or starts another thread.
    private func watch() {
        var pause = stuckAfter
        while true {
            watchdogWakeup.wait()
            while true {
                // A signal (only `stop` sends one while the watchdog looks) cuts it short.
                _ = watchdogWakeup.wait(timeout: .now() + .nanoseconds(Int(min(pause, 1_000_000_000))))
                let verdict = state.withLock { s -> Verdict in
                    if s.stopping || s.ready.isEmpty || s.someoneWillLook {
                        s.watching = false
                        return .done
                    }
                    let now = Self.now()
                    guard s.busy.values.allSatisfy({ now &- $0 >= stuckAfter }) else { return .moving }
                    let wake = wakeOrStart(&s)
                    if case .none = wake { return .atLimit }
                    return .helped(wake)
                }
                switch verdict {
                case .done: break
                case .moving: pause = stuckAfter
                case .helped(let wake):
                    act(wake)
                    pause = stuckAfter
                case .atLimit: pause = min(pause * 2, stuckAfter * 64)
                }
                if case .done = verdict { break }
            }
            if state.withLock({ $0.stopping }) { return }
        }
    }
}

/// A first-in first-out queue with O(1) removal at the front (an array and a head index,
/// compacted once half of it is spent).
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        head += 1
        if head >= 64 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}
