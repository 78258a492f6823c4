@testable import FUSEBridge
import Dispatch
import Foundation
import Synchronization
import Testing

/// The kernel notifier's lanes (DESIGN.md 35): work in order per key, a blocked key holds
/// up no other, and answers wait for their own key's work only.
@Suite("Keyed lanes")
struct KeyedLanesTests {
    /// A gate a piece of work blocks on until the test opens it.
    final class Gate: Sendable {
        private let entered = DispatchSemaphore(value: 0)
        private let opened = DispatchSemaphore(value: 0)
        func block() {
            entered.signal()
            opened.wait()
        }
        /// Waits until the work is blocked on the gate.
        func waitBlocked() -> Bool { entered.wait(timeout: .now() + 10) == .success }
        func open() { opened.signal() }
    }

    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func add(_ s: String) { entries.withLock { $0.append(s) } }
        var all: [String] { entries.withLock { $0 } }
    }

    /// Waits up to 10 s for `done` to be signalled `count` times.
    func wait(_ done: DispatchSemaphore, count: Int = 1) -> Bool {
        (0..<count).allSatisfy { _ in done.wait(timeout: .now() + 10) == .success }
    }

    /// Whether `condition` holds within 10 s.
    func eventually(_ condition: () -> Bool) -> Bool {
        let end = DispatchTime.now() + 10
        while !condition() {
            if DispatchTime.now() > end { return false }
            usleep(1000)
        }
        return true
    }

    @Test func oneKeysWorkRunsInOrder() {
        let lanes = KeyedLanes<Int>(name: "test")
        let log = Log()
        let done = DispatchSemaphore(value: 0)
        for i in 0..<100 {
            lanes.add(1) {
                log.add("\(i)")
                done.signal()
            }
        }
        #expect(wait(done, count: 100))
        #expect(log.all == (0..<100).map { "\($0)" })
        lanes.stop()
    }

    @Test func aBlockedKeyHoldsUpNoOtherKey() {
        let lanes = KeyedLanes<Int>(name: "test")
        let gate = Gate()
        let log = Log()
        let done = DispatchSemaphore(value: 0)
        lanes.add(1) { gate.block(); log.add("1a") }
        #expect(gate.waitBlocked())
        lanes.add(1) { log.add("1b"); done.signal() }
        lanes.add(2) { log.add("2"); done.signal() }
        #expect(wait(done))
        #expect(log.all == ["2"])
        #expect(lanes.hasWork(1))
        #expect(eventually { !lanes.hasWork(2) })  // its thread marks it done after the signal
        gate.open()
        #expect(wait(done))
        #expect(log.all == ["2", "1a", "1b"])
        lanes.stop()
    }

    @Test func anAnswerWaitsForItsOwnKeyOnly() {
        let lanes = KeyedLanes<Int>(name: "test")
        let gate1 = Gate()
        let gate2 = Gate()
        let log = Log()
        let done = DispatchSemaphore(value: 0)
        lanes.add(1) { gate1.block(); log.add("work 1") }
        lanes.add(2) { gate2.block(); log.add("work 2") }
        #expect(gate1.waitBlocked() && gate2.waitBlocked())
        #expect(lanes.after(2) { log.add("after 2"); done.signal() })
        lanes.add(2) { log.add("more 2") }  // added after the answer: it waits for this too
        gate2.open()
        #expect(wait(done))
        #expect(log.all == ["work 2", "more 2", "after 2"])
        #expect(!lanes.after(2) { Issue.record("ran although key 2 had no work") })
        gate1.open()
        lanes.stop()
        #expect(log.all.last == "work 1")
    }

    @Test func beyondTheThreadLimitReadyKeysWaitForAFreeThread() {
        let lanes = KeyedLanes<Int>(name: "test", maxWorkers: 1)
        let gate = Gate()
        let log = Log()
        let done = DispatchSemaphore(value: 0)
        lanes.add(1) { gate.block(); log.add("1") }
        #expect(gate.waitBlocked())
        lanes.add(2) { log.add("2"); done.signal() }
        #expect(done.wait(timeout: .now() + 0.2) == .timedOut)
        #expect(log.all.isEmpty)
        gate.open()
        #expect(wait(done))
        #expect(log.all == ["1", "2"])
        lanes.stop()
    }

    @Test func stopFinishesQueuedWorkAndAnswersThenRefusesMore() {
        let lanes = KeyedLanes<Int>(name: "test")
        let gate = Gate()
        let log = Log()
        lanes.add(1) { gate.block(); log.add("1") }
        #expect(gate.waitBlocked())
        lanes.add(1) { log.add("1 queued") }
        #expect(lanes.after(1) { log.add("answer") })
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { gate.open() }
        lanes.stop()
        #expect(log.all == ["1", "1 queued", "answer"])
        lanes.add(3) { log.add("after stop") }
        #expect(!lanes.after(3) { log.add("answer after stop") })
        #expect(!lanes.hasWork(3))
        #expect(log.all == ["1", "1 queued", "answer"])
    }

    /// A rescan invalidates every item held: thousands of keys whose work is quick run on
    /// one thread, as on a single queue, without threads contending for the lock. (Only a
    /// whole second on one key counts as stuck here, so that a thread preempted on a
    /// loaded machine does not.)
    @Test func aBurstOfQuickKeysRunsOnOneThread() {
        let lanes = KeyedLanes<Int>(name: "test", stuckAfter: 1_000_000_000)
        let done = DispatchSemaphore(value: 0)
        for key in 0..<20_000 {
            lanes.add(key) { if key == 19_999 { done.signal() } }
        }
        #expect(wait(done))
        #expect(lanes.workerCount == 1)
        lanes.stop()
    }

    @Test func manyKeysFromManyThreadsAllRun() async {
        let lanes = KeyedLanes<Int>(name: "test", maxWorkers: 3)
        let log = Log()
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    for i in 0..<500 { lanes.add((t * 500 + i) % 37) { log.add("\(t)") } }
                }
            }
        }
        lanes.stop()
        #expect(log.all.count == 4000)
    }
}
