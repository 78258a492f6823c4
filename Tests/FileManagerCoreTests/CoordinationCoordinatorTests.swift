import Dispatch
import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import FileManagerCore

extension CoordinationTests {
    /// `FileCoordinator`, the Swift API: purposes, nesting, cancel, compound calls, the
    /// async forms and intents (docs/SEMANTICS.md §3.5).
    @Suite("FileCoordinator")
    struct FileCoordinatorTests {
        @Test("A write waits for another coordinator's read block, then runs")
        func writeWaitsForRead() throws {
            let center = Fixture.center()
            let log = EventLog()
            let gate = DispatchSemaphore(value: 0), started = DispatchSemaphore(value: 0)
            let reader = spawn {
                try? FileCoordinator(center: center).coordinate(readingItemAt: "/t/f") { _ in
                    log.append("read begins")
                    started.signal()
                    gate.wait()
                    log.append("read ends")
                }
            }
            #expect(started.waited())
            let writer = spawn {
                try? FileCoordinator(center: center).coordinate(writingItemAt: "/t/f") { _ in log.append("write") }
            }
            #expect(eventually { center.claims.counts.waiting == 1 })
            #expect(!log.all.contains("write"))
            gate.signal()
            #expect(reader.waited() && writer.waited())
            #expect(log.all == ["read begins", "read ends", "write"])
        }

        @Test("One coordinator, or one purpose identifier, never blocks itself; other coordinators do")
        func purposes() throws {
            let center = Fixture.center()
            let one = FileCoordinator(center: center)
            var ran = false
            try one.coordinate(writingItemAt: "/t/a", writingItemAt: "/t/b") { a, _ in
                try one.coordinate(writingItemAt: a) { _ in ran = true }
            }
            #expect(ran)

            let first = FileCoordinator(center: center), second = FileCoordinator(center: center)
            try first.setPurposeIdentifier("com.example.subsystem")
            try second.setPurposeIdentifier("com.example.subsystem")
            #expect(first.purpose == second.purpose && first.purposeIdentifier == "com.example.subsystem")
            let inner = Atomic<Bool>(false)
            try first.coordinate(writingItemAt: "/t/f") { _ in
                // Another thread, another coordinator, same purpose: no waiting.
                let done = spawn {
                    try? second.coordinate(writingItemAt: "/t/f") { _ in inner.store(true, ordering: .relaxed) }
                }
                #expect(done.waited(5))
            }
            let innerValue = inner.load(ordering: .relaxed)
            #expect(innerValue)

            let third = FileCoordinator(center: center)
            third.claimTimeout = .milliseconds(100)
            #expect(throws: CoordinationError.timedOut) {
                try first.coordinate(writingItemAt: "/t/g") { _ in
                    try third.coordinate(readingItemAt: "/t/g") { _ in }
                }
            }
            #expect(throws: CoordinationError.invalidPurpose) { try third.setPurposeIdentifier("") }
            #expect(throws: CoordinationError.invalidPurpose) { try third.setPurposeIdentifier(nil) }
            #expect(FileCoordinator(center: center).purposeIdentifier != third.purposeIdentifier)
        }

        @Test("Coordinators made with the same presenter share its purpose")
        func presenterPurpose() {
            let center = Fixture.center()
            let presenter = TestPresenter("/t/doc")
            let a = FileCoordinator(filePresenter: presenter, center: center)
            let b = FileCoordinator(filePresenter: presenter, center: center)
            #expect(a.purpose == b.purpose)
            #expect(a.purpose == center.presenters.purpose(of: presenter))
            #expect(FileCoordinator(center: center).purpose != a.purpose)
        }

        @Test("Nesting: forbidden calls throw, the allowed ones run")
        func nesting() throws {
            let c = FileCoordinator(center: Fixture.center())
            try c.coordinate(readingItemAt: "/t/f") { f in
                #expect(throws: CoordinationError.nestingNotAllowed) { try c.coordinate(readingItemAt: f) { _ in } }
                #expect(throws: CoordinationError.nestingNotAllowed) { try c.coordinate(writingItemAt: f) { _ in } }
                #expect(throws: CoordinationError.nestingNotAllowed) {
                    try c.prepare(forReadingItemsAt: [f], writingItemsAt: []) { $0() }
                }
            }
            try c.coordinate(writingItemAt: "/t/f") { f in
                var reread = false
                try c.coordinate(readingItemAt: f) { _ in reread = true }
                #expect(reread)
                #expect(throws: CoordinationError.nestingNotAllowed) { try c.coordinate(readingItemAt: "/t/other") { _ in } }
                #expect(throws: CoordinationError.nestingNotAllowed) { try c.coordinate(writingItemAt: f) { _ in } }
            }
            var count = 0
            try c.coordinate(readingItemAt: "/t/a", writingItemAt: "/t/b") { a, b in
                try c.coordinate(writingItemAt: b) { _ in count += 1 }
                try c.coordinate(readingItemAt: a) { _ in count += 1 }
                #expect(throws: CoordinationError.nestingNotAllowed) {
                    try c.coordinate(writingItemAt: a, writingItemAt: b) { _, _ in }
                }
            }
            try c.prepare(forReadingItemsAt: ["/t/a"], writingItemsAt: ["/t/b"]) { done in
                try c.coordinate(readingItemAt: "/t/a") { _ in count += 1 }
                try c.coordinate(writingItemAt: "/t/b", writingItemAt: "/t/c") { _, _ in count += 1 }
                #expect(throws: CoordinationError.nestingNotAllowed) {
                    try c.prepare(forReadingItemsAt: [], writingItemsAt: ["/t/b"]) { $0() }
                }
                done()
            }
            #expect(count == 4)
            // After a thrown nesting error the coordinator is usable again.
            try c.coordinate(readingItemAt: "/t/f") { _ in count += 1 }
            #expect(count == 5)
        }

        @Test("cancel() while waiting for a claim: the block never runs, EINTR; while running: returns after")
        func cancel() throws {
            let center = Fixture.center()
            let holder = FileCoordinator(center: center), waiter = FileCoordinator(center: center)
            let ran = Atomic<Bool>(false)
            let outcome = Mutex<(any Error)?>(nil)
            try holder.coordinate(writingItemAt: "/t/f") { _ in
                let done = spawn {
                    do {
                        try waiter.coordinate(readingItemAt: "/t/f") { _ in ran.store(true, ordering: .relaxed) }
                    } catch {
                        outcome.withLock { $0 = error }
                    }
                }
                #expect(eventually { center.claims.counts.waiting == 1 })
                waiter.cancel()
                #expect(done.waited())
            }
            let ranValue = ran.load(ordering: .relaxed)
            #expect(!ranValue)
            #expect(outcome.withLock { $0 as? CoordinationError } == .cancelled)
            #expect(center.claims.counts == (0, 0))

            // Cancel while the block runs: the call returns only after the block.
            let log = EventLog()
            let inBlock = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let running = FileCoordinator(center: center)
            let done = spawn {
                try? running.coordinate(writingItemAt: "/t/g") { _ in
                    inBlock.signal()
                    release.wait()
                    log.append("block ends")
                }
                log.append("call returns")
            }
            #expect(inBlock.waited())
            running.cancel()
            release.signal()
            #expect(done.waited())
            #expect(log.all == ["block ends", "call returns"])
        }

        @Test("Compound calls in opposite orders, 1000 times in parallel, never deadlock")
        func compoundStress() throws {
            let center = Fixture.center()
            let errors = Atomic<Int>(0), runs = Atomic<Int>(0)
            func client(_ body: @escaping @Sendable (FileCoordinator) throws -> Void) -> DispatchSemaphore {
                spawn {
                    let c = FileCoordinator(center: center)
                    for _ in 0..<1000 {
                        do { try body(c) } catch { errors.add(1, ordering: .relaxed) }
                    }
                }
            }
            let done = [
                client { try $0.coordinate(writingItemAt: "/t/A", writingItemAt: "/t/B") { _, _ in _ = runs.add(1, ordering: .relaxed) } },
                client { try $0.coordinate(writingItemAt: "/t/B", writingItemAt: "/t/A") { _, _ in _ = runs.add(1, ordering: .relaxed) } },
                client { try $0.coordinate(readingItemAt: "/t/A", writingItemAt: "/t/B") { _, _ in _ = runs.add(1, ordering: .relaxed) } },
                client { try $0.coordinate(readingItemAt: "/t/B", writingItemAt: "/t/A") { _, _ in _ = runs.add(1, ordering: .relaxed) } },
            ]
            for d in done { #expect(d.waited(120)) }
            let errorsValue = errors.load(ordering: .relaxed)
            #expect(errorsValue == 0)
            let runsValue = runs.load(ordering: .relaxed)
            #expect(runsValue == 4000)
            #expect(center.claims.counts == (0, 0))
        }

        @Test("Two coordinators each holding one item and then asking for the other's: exactly one gets EDEADLK")
        func deadlock() throws {
            let center = Fixture.center()
            let bothHold = DispatchSemaphore(value: 0)
            let holding = Atomic<Int>(0)
            let results = Mutex<[String]>([])
            func client(_ mine: FilePath, _ spare: FilePath, _ theirs: FilePath, _ name: String) -> DispatchSemaphore {
                spawn {
                    let c = FileCoordinator(center: center)
                    do {
                        try c.coordinate(writingItemAt: mine, writingItemAt: spare) { _, _ in
                            if holding.add(1, ordering: .relaxed).newValue == 2 { bothHold.signal(); bothHold.signal() }
                            bothHold.wait()
                            try c.coordinate(writingItemAt: theirs) { _ in }
                        }
                        results.withLock { $0.append("\(name) ok") }
                    } catch {
                        results.withLock { $0.append("\(name) \(CoordinationError.errno(of: error))") }
                    }
                }
            }
            let a = client("/t/f1", "/t/x1", "/t/f2", "a")
            let b = client("/t/f2", "/t/x2", "/t/f1", "b")
            #expect(a.waited(30) && b.waited(30))
            let all = results.withLock { $0 }
            #expect(all.filter { $0.hasSuffix(" ok") }.count == 1)
            #expect(all.filter { $0.hasSuffix("\(Errno.deadlock)") }.count == 1)
        }

        @Test("ImmediatelyAvailableMetadataOnly never waits; forUploading hands over a copy and no claim (docs/SEMANTICS.md §3.2)")
        func readingOptions() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("doc.txt", "hello")
            let center = Fixture.center()
            let writer = FileCoordinator(center: center), reader = FileCoordinator(center: center)
            // A metadata read that waited for the write claim, held until the read is
            // over, could only end at this deadline, with `.timedOut` and its block not run.
            reader.claimTimeout = .seconds(2)
            var sawMetadata = false
            try writer.coordinate(writingItemAt: FilePath(f)) { _ in
                let ran = Atomic<Bool>(false)
                let failure = Mutex<(any Error)?>(nil)
                let done = spawn {
                    do {
                        try reader.coordinate(readingItemAt: FilePath(f), options: .immediatelyAvailableMetadataOnly) { _ in
                            ran.store(true, ordering: .relaxed)
                        }
                    } catch {
                        failure.withLock { $0 = error }
                    }
                }
                sawMetadata = done.waited() && ran.load(ordering: .relaxed) && failure.withLock { $0 == nil }
                #expect(center.claims.counts == (1, 0))  // the write claim was held all along
            }
            #expect(sawMetadata)

            var copyPath: FilePath?
            try reader.coordinate(readingItemAt: FilePath(f), options: .forUploading) { copy in
                copyPath = copy
                #expect(copy != FilePath(f))
                #expect(scratch.read(copy.string) == "hello")
                // The claim on the original is already given up.
                let other = FileCoordinator(center: center)
                other.claimTimeout = .milliseconds(200)
                try other.coordinate(writingItemAt: FilePath(f)) { _ in }
            }
            #expect(!scratch.exists(try #require(copyPath).string))
        }

        @Test("ResolvesSymbolicLink coordinates and hands over the link's target")
        func resolvesSymbolicLink() throws {
            let scratch = CoordinationScratch()
            let target = scratch.file("target.txt", "t")
            let link = scratch.path("link")
            symlink(target, link)
            let c = FileCoordinator(center: Fixture.center())
            var seen: [FilePath] = []
            try c.coordinate(readingItemAt: FilePath(link), options: .resolvesSymbolicLink) { seen.append($0) }
            try c.coordinate(readingItemAt: FilePath(link)) { seen.append($0) }
            #expect(seen == [FilePath(target).coordinationNormalized, FilePath(link)])
        }

        @Test("Async waits suspend tasks, never threads; task cancellation gives EINTR")
        func asyncForms() async throws {
            let center = Fixture.center()
            let grant = try center.claims.acquire([Claim(target: center.resolver.target(for: "/t/f", resolvingSymlink: false).target,
                                                         writing: [])], purpose: .unique())
            let tasks = (0..<20).map { _ in
                Task {
                    try await FileCoordinator(center: center).coordinate(readingItemAt: "/t/f") { _ in 1 }
                }
            }
            // Twenty waiters and the cooperative pool still runs this task.
            #expect(await eventuallyAsync { center.claims.counts.waiting == 20 })
            #expect(center.claims.counts.waiting == 20)
            grant.release()
            var finished = 0
            for t in tasks { finished += try await t.value }
            #expect(finished == 20)

            let blocker = try center.claims.acquire([Claim(target: center.resolver.target(for: "/t/g", resolvingSymlink: false).target,
                                                           writing: [])], purpose: .unique())
            let waiting = Task {
                try await FileCoordinator(center: center).coordinate(writingItemAt: "/t/g") { _ in }
            }
            #expect(await eventuallyAsync { center.claims.counts.waiting == 1 })
            waiting.cancel()
            await #expect(throws: CoordinationError.cancelled) { try await waiting.value }
            blocker.release()
            #expect(center.claims.counts == (0, 0))
        }

        @Test("Intents: the accessor runs on the queue; an error skips it; the claim ends with it")
        func intents() throws {
            let center = Fixture.center()
            let queue = DispatchQueue(label: "intent-queue")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 7)
            let done = DispatchSemaphore(value: 0)
            let onQueue = Atomic<Bool>(false)
            let c = FileCoordinator(center: center)
            let intent = FileAccessIntent.writingIntent(with: "/t/f")
            c.coordinate(with: [intent], queue: queue) { error in
                onQueue.store(error == nil && DispatchQueue.getSpecific(key: key) == 7, ordering: .relaxed)
                #expect(center.claims.counts.granted == 1)
                done.signal()
            }
            #expect(done.waited())
            let onQueueValue = onQueue.load(ordering: .relaxed)
            #expect(onQueueValue)
            // The accessor signalled from inside the queue's block, which ends the access
            // after it returns: once that block is over, the claim must be gone.
            queue.sync {}
            #expect(center.claims.counts == (0, 0))

            let grant = try center.claims.acquire([Claim(target: center.resolver.target(for: "/t/f", resolvingSymlink: false).target,
                                                         writing: [])], purpose: .unique())
            let failing = FileCoordinator(center: center)
            failing.claimTimeout = .milliseconds(50)
            let failed = Mutex<(any Error)?>(nil)
            failing.coordinate(with: [.readingIntent(with: "/t/f")], queue: queue) { error in
                failed.withLock { $0 = error }
                done.signal()
            }
            #expect(done.waited())
            #expect(failed.withLock { $0 as? CoordinationError } == .timedOut)
            grant.release()
        }

        @Test("An intent's URL follows a move made while it waited")
        func intentFollowsMove() throws {
            let center = Fixture.center()
            let mover = FileCoordinator(center: center)
            let intent = FileAccessIntent.writingIntent(with: "/t/old")
            let seen = Mutex<FilePath?>(nil)
            let done = DispatchSemaphore(value: 0)
            let queue = DispatchQueue(label: "q")
            try mover.coordinate(writingItemAt: "/t/old", options: .forMoving, writingItemAt: "/t/new", options: .forReplacing) { old, new in
                FileCoordinator(center: center).coordinate(with: [intent], queue: queue) { error in
                    seen.withLock { $0 = error == nil ? intent.url : nil }
                    done.signal()
                }
                #expect(eventually { center.claims.counts.waiting == 1 })
                mover.item(at: old, didMoveTo: new)
            }
            #expect(done.waited())
            #expect(seen.withLock { $0 } == FilePath("/t/new"))
            // `done` is signalled inside the accessor; the access ends when the queue's
            // block returns, so wait for that block before looking at the claims.
            queue.sync {}
            #expect(center.claims.counts == (0, 0))
        }

        @Test("Concurrent intent calls in opposite orders end in EDEADLK or the deadline, never a hang")
        func oppositeOrderIntentCalls() throws {
            let center = Fixture.center(claimTimeout: .seconds(3))
            let outcomes = Mutex<[String]>([])
            let allDone = DispatchSemaphore(value: 0)
            /// A client that, once its first access runs, needs its second one to finish too
            /// before it lets the first go: two concurrent calls where one would do .
            final class Client: Sendable {
                let coordinator: FileCoordinator
                let secondEnded = DispatchSemaphore(value: 0)
                let firstRuns = DispatchSemaphore(value: 0)
                init(_ center: CoordinationCenter) { coordinator = FileCoordinator(center: center) }
            }
            @Sendable func run(_ client: Client, _ first: FilePath, _ second: FilePath, _ name: String, goSecond: DispatchSemaphore) {
                client.coordinator.coordinate(with: [.writingIntent(with: first)], queue: DispatchQueue(label: "\(name)1")) { error in
                    outcomes.withLock { $0.append("\(name) first \(error.map { "\(CoordinationError.errno(of: $0))" } ?? "ok")") }
                    client.firstRuns.signal()
                    if error == nil { _ = client.secondEnded.wait(timeout: .now() + 30) }
                    allDone.signal()
                }
                _ = client.firstRuns.wait(timeout: .now() + 5)
                client.firstRuns.signal()
                goSecond.wait()
                client.coordinator.coordinate(with: [.writingIntent(with: second)], queue: DispatchQueue(label: "\(name)2")) { error in
                    outcomes.withLock { $0.append("\(name) second \(error.map { "\(CoordinationError.errno(of: $0))" } ?? "ok")") }
                    client.secondEnded.signal()
                    allDone.signal()
                }
            }
            let p = Client(center), q = Client(center)
            let goP = DispatchSemaphore(value: 0), goQ = DispatchSemaphore(value: 0)
            spawn { run(p, "/t/A", "/t/B", "p", goSecond: goP) }
            spawn { run(q, "/t/B", "/t/A", "q", goSecond: goQ) }
            #expect(eventually { center.claims.counts.granted == 2 })
            goP.signal()
            #expect(eventually { center.claims.counts.waiting == 1 })
            goQ.signal()
            for _ in 0..<4 { #expect(allDone.waited(15)) }
            let all = outcomes.withLock { $0 }
            #expect(all.count == 4)
            #expect(all.contains { $0.hasSuffix("\(Errno.deadlock)") || $0.hasSuffix("\(Errno.resourceBusy)") })
            #expect(eventually { center.claims.counts == (0, 0) })
        }
    }
}
