import Dispatch
import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import FileManagerCore

extension CoordinationTests {
    /// `CoordinationCenter` as the FUSE bridge uses it: non-blocking accesses whose
    /// completion is the deferred reply, cancelled on FUSE_INTERRUPT (docs/SEMANTICS.md §3.4).
    @Suite("Coordination center")
    struct CenterTests {
        /// Records access completions: how many, which, and on which thread.
        final class Replies: Sendable {
            let results = Mutex<[(Result<CoordinatedAccess, CoordinationError>, UInt)]>([])
            let arrived = DispatchSemaphore(value: 0)
            var completion: @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void {
                { result in
                    self.results.withLock { $0.append((result, UInt(pthread_self()))) }
                    self.arrived.signal()
                }
            }
            var count: Int { results.withLock { $0.count } }
            var access: CoordinatedAccess? {
                results.withLock { r in r.first.flatMap { if case .success(let a) = $0.0 { a } else { nil } } }
            }
            var error: CoordinationError? {
                results.withLock { r in r.first.flatMap { if case .failure(let e) = $0.0 { e } else { nil } } }
            }
            var thread: UInt? { results.withLock { $0.first?.1 } }
        }

        func claim(_ center: CoordinationCenter, _ path: FilePath, writing: Bool) -> Claim {
            let target = center.resolver.target(for: path, resolvingSymlink: false).target
            return writing ? Claim(target: target, writing: [], path: path) : Claim(target: target, reading: [], path: path)
        }

        @Test("Uncontended: the completion runs on the caller's thread before beginAccess returns")
        func fastPath() {
            let center = Fixture.center()
            let replies = Replies()
            center.beginAccess([claim(center, "/c/f", writing: true)], purpose: .process(100), completion: replies.completion)
            #expect(replies.count == 1 && replies.thread == UInt(pthread_self()))
            #expect(center.claims.counts.granted == 1)
            replies.access?.end()
            replies.access?.end()
            #expect(center.claims.counts == (0, 0))
        }

        @Test("Contended: the reply is deferred to the releasing thread; O_NONBLOCK is EAGAIN; deadline EBUSY")
        func deferredReplies() throws {
            let center = Fixture.center()
            let holder = Replies()
            center.beginAccess([claim(center, "/c/f", writing: true)], purpose: .process(1), completion: holder.completion)
            let waiter = Replies()
            center.beginAccess([claim(center, "/c/f", writing: false)], purpose: .process(2), completion: waiter.completion)
            #expect(waiter.count == 0)
            let nonBlocking = Replies()
            center.beginAccess([claim(center, "/c/f", writing: false)], purpose: .process(3), nonBlocking: true,
                               completion: nonBlocking.completion)
            #expect(nonBlocking.error == .wouldBlock)
            let timed = Replies()
            center.beginAccess([claim(center, "/c/f", writing: false)], purpose: .process(4),
                               deadline: .now + .milliseconds(50), completion: timed.completion)
            #expect(timed.arrived.waited())
            #expect(timed.error == .timedOut)
            // The same process never waits for itself.
            let sameProcess = Replies()
            center.beginAccess([claim(center, "/c/f", writing: false)], purpose: .process(1), completion: sameProcess.completion)
            #expect(sameProcess.access != nil)
            sameProcess.access?.end()

            try #require(holder.access).end()
            #expect(waiter.count == 1 && waiter.thread == UInt(pthread_self()))
            waiter.access?.end()
            #expect(center.claims.counts == (0, 0))
        }

        @Test("FUSE_INTERRUPT: cancel gives EINTR exactly once, while waiting for the claim or for presenters")
        func interrupt() throws {
            let center = Fixture.center()
            let holder = Replies()
            center.beginAccess([claim(center, "/c/f", writing: true)], purpose: .process(1), completion: holder.completion)
            let waiter = Replies()
            let ticket = center.beginAccess([claim(center, "/c/f", writing: true)], purpose: .process(2),
                                            completion: waiter.completion)
            center.cancel(ticket)
            center.cancel(ticket)
            #expect(waiter.count == 1 && waiter.error == .cancelled)
            #expect(CoordinationError.cancelled.errno == .interrupted)
            try #require(holder.access).end()
            #expect(waiter.count == 1)
            #expect(center.claims.counts == (0, 0))

            let hold = DispatchSemaphore(value: 0)
            let presenter = TestPresenter("/c/g", .init(holdSave: hold))
            center.presenters.add(presenter)
            let asking = Replies()
            let second = center.beginAccess([claim(center, "/c/g", writing: false)], purpose: .process(5),
                                            completion: asking.completion)
            #expect(presenter.log.wait(for: "save"))
            #expect(asking.count == 0 && center.claims.counts.granted == 1)
            center.cancel(second)
            #expect(asking.count == 1 && asking.error == .cancelled)
            #expect(center.claims.counts == (0, 0))
            hold.signal()
            #expect(presenter.log.wait(for: "reacquire"))
            #expect(asking.count == 1)
        }

        @Test("Presenters of another uid are only told; an accessor's own purpose is never told")
        func uidsAndPurposes() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("f")
            let center = Fixture.center()
            let own = TestPresenter(f), stranger = TestPresenter(f), root = TestPresenter(f)
            center.presenters.add(own, uid: 1000)
            center.presenters.add(stranger, uid: 2000)
            center.presenters.add(root, uid: 0)
            let ownPurpose = center.presenters.purpose(of: own)
            let replies = Replies()
            center.beginAccess([claim(center, FilePath(f), writing: true)], purpose: .process(9), accessorUID: 1000,
                               completion: replies.completion)
            #expect(replies.arrived.waited())
            #expect(own.log.all.first == "relinquishToWriter")
            #expect(root.log.all.first == "relinquishToWriter")
            #expect(stranger.log.all.isEmpty)
            center.announce(.changed(FilePath(f)), by: ownPurpose)
            try #require(replies.access).end()
            #expect(stranger.log.wait(for: "didChange") && root.log.wait(for: "didChange"))
            #expect(own.log.wait(for: "reacquire"))
            #expect(!own.log.all.contains("didChange"))
        }

        @Test("A move made in an async accessor is announced once, as a move")
        func asyncMove() async throws {
            let scratch = CoordinationScratch()
            let dir = scratch.directory("d")
            let a = scratch.file("d/a"), b = scratch.path("d/b")
            let center = Fixture.center()
            let parent = TestPresenter(dir)
            center.presenters.add(parent)
            let c = FileCoordinator(center: center)
            try await c.coordinate(with: [.writingIntent(with: FilePath(a), options: .forMoving),
                                          .writingIntent(with: FilePath(b), options: .forReplacing)]) { urls in
                #expect(rename(urls[0].string, urls[1].string) == 0)
                c.item(at: urls[0], didMoveTo: urls[1])
            }
            // A sentinel behind whatever was announced, so that nothing can still be on its way.
            center.announce(.resync(FilePath(dir)), by: nil)
            #expect(parent.log.wait(for: "resync"))
            #expect(parent.log.all == ["subitemDidMove \(a) \(b)", "resync"])
        }
    }
}
