import Dispatch
import Synchronization
import SystemPackage
import Testing
@testable import FileManagerCore

extension CoordinationTests {
    /// The claim table on its own: the conflict matrix, FIFO, deadlines, cancel, deadlock
    /// detection (docs/SEMANTICS.md §3.1).
    @Suite("Claim table")
    struct ClaimTableTests {
        let p = Purpose.unique(), q = Purpose.unique(), r = Purpose.unique()

        @Test("R + R share; R then W waits; W then R waits; W + W serialize")
        func readsShareWritesExclude() throws {
            let table = ClaimTable()
            let f = "/t/f"
            let r1 = try #require(table.grantIfFree([Fixture.read(f)], purpose: p))
            let r2 = try #require(table.grantIfFree([Fixture.read(f)], purpose: q))
            let w = GrantBox()
            table.request([Fixture.write(f)], purpose: r, completion: w.completion)
            #expect(w.count == 0)
            r1.release()
            #expect(w.count == 0)
            r2.release()
            let writer = try #require(w.granted())

            let readAfterWrite = GrantBox()
            table.request([Fixture.read(f)], purpose: p, completion: readAfterWrite.completion)
            let secondWriter = GrantBox()
            table.request([Fixture.write(f)], purpose: q, completion: secondWriter.completion)
            #expect(readAfterWrite.count == 0 && secondWriter.count == 0)
            writer.release()
            let reader = try #require(readAfterWrite.granted())
            #expect(secondWriter.count == 0)
            reader.release()
            try #require(secondWriter.granted()).release()
            #expect(table.counts == (0, 0))
        }

        @Test("A directory and its contents do not block each other")
        func directoryAndContentsAreIndependent() throws {
            let table = ClaimTable()
            let dirWrite = try #require(table.grantIfFree([Fixture.write("/t/d", directory: true)], purpose: p))
            let childRead = try #require(table.grantIfFree([Fixture.read("/t/d/x")], purpose: q))
            let childWrite = try #require(table.grantIfFree([Fixture.write("/t/d/y")], purpose: r))
            dirWrite.release()
            let dirRead = try #require(table.grantIfFree([Fixture.read("/t/d", directory: true)], purpose: p))
            [childRead, childWrite, dirRead].forEach { $0.release() }
        }

        @Test("A subtree write waits for running accesses inside; later ones wait for it",
              arguments: [CoordinatedWritingOptions.forMoving, .forDeleting, .forReplacing])
        func subtreeWriteDrainsAndHolds(option: CoordinatedWritingOptions) throws {
            let table = ClaimTable()
            let running = try #require(table.grantIfFree([Fixture.read("/t/d/x")], purpose: p))
            let move = GrantBox()
            table.request([Fixture.write("/t/d", option, directory: true)], purpose: q, completion: move.completion)
            #expect(move.count == 0)
            let later = GrantBox()
            table.request([Fixture.read("/t/d/sub/y")], purpose: r, completion: later.completion)
            #expect(later.count == 0)
            // Unrelated items and the directory's parent are not held up.
            try #require(table.grantIfFree([Fixture.read("/t", directory: true)], purpose: r)).release()
            try #require(table.grantIfFree([Fixture.write("/t/e")], purpose: r)).release()
            running.release()
            let mover = try #require(move.granted())
            #expect(later.count == 0)
            mover.release()
            try #require(later.granted()).release()
        }

        @Test("ForMoving on a file is a plain write")
        func forMovingOnAFileIsPlain() throws {
            let claim = Fixture.write("/t/f", .forMoving, directory: false)
            #expect(claim.mode == .write)
            #expect(Fixture.write("/t/d", .forMoving, directory: true).mode == .subtreeWrite)
            let table = ClaimTable()
            let move = try #require(table.grantIfFree([claim], purpose: p))
            try #require(table.grantIfFree([Fixture.read("/t", directory: true)], purpose: q)).release()
            #expect(table.grantIfFree([Fixture.read("/t/f")], purpose: q) == nil)
            move.release()
        }

        @Test("Everything inside a package is the package, nested packages included")
        func packagesAreOneItem() throws {
            let table = ClaimTable()
            let pkg = "/t/X.pkg"
            let a = try #require(table.grantIfFree([Fixture.read("\(pkg)/a", packages: [pkg])], purpose: p))
            #expect(table.grantIfFree([Fixture.write("\(pkg)/b", packages: [pkg])], purpose: q) == nil)
            #expect(table.grantIfFree([Fixture.write(pkg, directory: true, packages: [pkg])], purpose: q) == nil)
            let deep = Fixture.write("\(pkg)/Y.pkg/z", packages: [pkg, "\(pkg)/Y.pkg"])
            #expect(table.grantIfFree([deep], purpose: q) == nil)
            try #require(table.grantIfFree([Fixture.read("\(pkg)/c", packages: [pkg])], purpose: q)).release()
            // A subtree option inside a package is a plain write on the package (R2).
            #expect(Fixture.write("\(pkg)/dir", .forDeleting, directory: true, packages: [pkg]).mode == .write)
            a.release()
            try #require(table.grantIfFree([deep], purpose: q)).release()
        }

        @Test("The same purpose never waits for itself, even behind a queued writer")
        func samePurposeNeverConflicts() throws {
            let table = ClaimTable()
            let held = try #require(table.grantIfFree([Fixture.write("/t/f")], purpose: p))
            let again = try #require(table.grantIfFree([Fixture.write("/t/f")], purpose: p))
            #expect(table.grantIfFree([Fixture.read("/t/f")], purpose: q) == nil)
            let queued = GrantBox()
            table.request([Fixture.write("/t/f")], purpose: q, completion: queued.completion)
            // q waits for p: p queueing behind q would deadlock p with itself.
            let third = try #require(table.grantIfFree([Fixture.read("/t/f")], purpose: p))
            #expect(queued.count == 0)
            [held, again, third].forEach { $0.release() }
            try #require(queued.granted()).release()
        }

        @Test("Writers do not starve: a read queues behind a waiting writer (FIFO)")
        func writersDoNotStarve() throws {
            let table = ClaimTable()
            let reader = try #require(table.grantIfFree([Fixture.read("/t/f")], purpose: p))
            let writer = GrantBox()
            table.request([Fixture.write("/t/f")], purpose: q, completion: writer.completion)
            let lateReader = GrantBox()
            table.request([Fixture.read("/t/f")], purpose: r, completion: lateReader.completion)
            #expect(writer.count == 0 && lateReader.count == 0)
            reader.release()
            let w = try #require(writer.granted())
            #expect(lateReader.count == 0)
            w.release()
            try #require(lateReader.granted()).release()
        }

        @Test("A two-item claim is granted whole or not at all")
        func multiItemClaimsAreAtomic() throws {
            let table = ClaimTable()
            let b = try #require(table.grantIfFree([Fixture.write("/t/b")], purpose: p))
            let both = GrantBox()
            table.request([Fixture.write("/t/b"), Fixture.write("/t/a")], purpose: q, completion: both.completion)
            #expect(table.counts == (1, 1))
            b.release()
            let grant = try #require(both.granted())
            #expect(table.grantIfFree([Fixture.read("/t/a")], purpose: r) == nil)
            #expect(table.grantIfFree([Fixture.read("/t/b")], purpose: r) == nil)
            grant.release()
            #expect(table.counts == (0, 0))
        }

        @Test("O_NONBLOCK: a conflict is EAGAIN at once; deadline: EBUSY; cancel: EINTR once")
        func waitingEnds() throws {
            let table = ClaimTable()
            let held = try #require(table.grantIfFree([Fixture.write("/t/f")], purpose: p))

            let nonBlocking = GrantBox()
            table.request([Fixture.read("/t/f")], purpose: q, nonBlocking: true, completion: nonBlocking.completion)
            #expect(nonBlocking.error == .wouldBlock)
            #expect(CoordinationError.wouldBlock.errno == .resourceTemporarilyUnavailable)

            let timed = GrantBox()
            table.request([Fixture.read("/t/f")], purpose: q, deadline: .now + .milliseconds(50), completion: timed.completion)
            _ = timed.wait()
            #expect(timed.error == .timedOut)
            #expect(CoordinationError.timedOut.errno == .resourceBusy)

            let cancelled = GrantBox()
            let ticket = table.request([Fixture.read("/t/f")], purpose: q, completion: cancelled.completion)
            #expect(table.cancel(ticket))
            #expect(!table.cancel(ticket))
            #expect(cancelled.all.count == 1 && cancelled.error == .cancelled)
            #expect(CoordinationError.cancelled.errno == .interrupted)
            #expect(table.counts == (1, 0))

            held.release()
            held.release()  // idempotent: must not release anybody else's claim
            let other = try #require(table.grantIfFree([Fixture.write("/t/f")], purpose: q))
            held.release()
            #expect(table.grantIfFree([Fixture.read("/t/f")], purpose: r) == nil)
            other.release()
            #expect(timed.all.count == 1)
        }

        @Test("A completion may call the table again (completions run outside its lock)")
        func completionsRunOutsideTheLock() throws {
            let table = ClaimTable()
            let held = try #require(table.grantIfFree([Fixture.write("/t/f")], purpose: p))
            let inner = GrantBox()
            let q = self.q, r = self.r
            let outer = GrantBox()
            table.request([Fixture.write("/t/f")], purpose: q) { result in
                outer.completion(result)
                if case .success(let g) = result {
                    table.request([Fixture.read("/t/g")], purpose: r, completion: inner.completion)
                    g.release()
                }
            }
            held.release()
            #expect(outer.wait() != nil)
            try #require(inner.granted()).release()
            #expect(table.counts == (0, 0))
        }

        @Test("Two explicit holders each waiting for the other: exactly one gets EDEADLK")
        func deadlockBetweenTwoPurposes() throws {
            let table = ClaimTable()
            let first = try table.acquire([Fixture.write("/t/f1")], purpose: p)
            let second = try table.acquire([Fixture.write("/t/f2")], purpose: q)
            let pWaits = GrantBox()
            table.request([Fixture.write("/t/f2")], purpose: p, lifetime: .explicit, completion: pWaits.completion)
            #expect(pWaits.count == 0)
            let qWaits = GrantBox()
            table.request([Fixture.write("/t/f1")], purpose: q, lifetime: .explicit, completion: qWaits.completion)
            #expect(qWaits.error == .deadlock)
            #expect(pWaits.count == 0)
            #expect(CoordinationError.deadlock.errno == .deadlock)
            second.release()
            try #require(pWaits.granted()).release()
            first.release()
            #expect(table.counts == (0, 0))
        }

        @Test("A cycle through queued requests fails the newest waiter; the others proceed")
        func deadlockThroughQueuedRequests() throws {
            let table = ClaimTable()
            let blocker = try table.acquire([Fixture.write("/t/a"), Fixture.write("/t/b")], purpose: r)
            let pA = GrantBox(), qB = GrantBox()
            table.request([Fixture.write("/t/a")], purpose: p, lifetime: .explicit, completion: pA.completion)
            table.request([Fixture.write("/t/b")], purpose: q, lifetime: .explicit, completion: qB.completion)
            // Each will, once granted, also wait for the other's item.
            let pB = GrantBox(), qA = GrantBox()
            table.request([Fixture.write("/t/b")], purpose: p, lifetime: .explicit, completion: pB.completion)
            table.request([Fixture.write("/t/a")], purpose: q, lifetime: .explicit, completion: qA.completion)
            blocker.release()
            // p gets a, q gets b, then each would wait for the other: q's second request,
            // the newest, failed as soon as it closed the cycle.
            let a = try #require(pA.granted())
            let b = try #require(qB.granted())
            _ = qA.wait()
            #expect(qA.error == .deadlock)
            #expect(pB.count == 0)
            b.release()
            try #require(pB.granted()).release()
            a.release()
            #expect(table.counts == (0, 0))
        }

        @Test("Short (callback) claims never count as the held half of a deadlock")
        func callbackClaimsAreNotDeadlocks() throws {
            let table = ClaimTable()
            let first = try #require(table.grantIfFree([Fixture.write("/t/f1")], purpose: p, lifetime: .callback))
            let second = try #require(table.grantIfFree([Fixture.write("/t/f2")], purpose: q, lifetime: .callback))
            let a = GrantBox(), b = GrantBox()
            table.request([Fixture.write("/t/f2")], purpose: p, completion: a.completion)
            table.request([Fixture.write("/t/f1")], purpose: q, completion: b.completion)
            #expect(a.count == 0 && b.count == 0)
            first.release()
            second.release()
            try #require(a.granted()).release()
            try #require(b.granted()).release()
        }

        @Test("Short claims queued in opposite orders are not a deadlock: FIFO alone never reports one")
        func queuedCallbackClaimsAreNotDeadlocks() throws {
            let table = ClaimTable()
            let blocker = try table.acquire([Fixture.write("/t/a"), Fixture.write("/t/b")], purpose: r)
            let pA = GrantBox(), qB = GrantBox(), pB = GrantBox(), qA = GrantBox()
            table.request([Fixture.write("/t/a")], purpose: p, completion: pA.completion)
            table.request([Fixture.write("/t/b")], purpose: q, completion: qB.completion)
            table.request([Fixture.write("/t/b")], purpose: p, completion: pB.completion)
            table.request([Fixture.write("/t/a")], purpose: q, completion: qA.completion)
            #expect([pA, qB, pB, qA].allSatisfy { $0.count == 0 })
            blocker.release()
            try #require(pA.granted()).release()
            try #require(qB.granted()).release()
            try #require(pB.granted()).release()
            try #require(qA.granted()).release()
            #expect(table.counts == (0, 0))
        }

        @Test("1000 opposite-order two-item claims in parallel finish without deadlock")
        func oppositeOrderStress() throws {
            let table = ClaimTable()
            let failures = Atomic<Int>(0)
            func client(_ purpose: Purpose, _ claims: [Claim]) -> DispatchSemaphore {
                spawn {
                    for _ in 0..<1000 {
                        do {
                            let g = try table.acquire(claims, purpose: purpose, deadline: .now + .seconds(10))
                            g.release()
                        } catch {
                            failures.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
            let a = "/t/A", b = "/t/B"
            let done = [
                client(p, [Fixture.write(a), Fixture.write(b)]),
                client(q, [Fixture.write(b), Fixture.write(a)]),
                client(r, [Fixture.read(a), Fixture.write(b)]),
                client(.unique(), [Fixture.read(b), Fixture.write(a)]),
            ]
            for d in done { #expect(d.waited(60)) }
            let failuresValue = failures.load(ordering: .relaxed)
            #expect(failuresValue == 0)
            #expect(table.counts == (0, 0))
        }

        @Test("Purposes: process ids, unique, named; empty identifiers are refused")
        func purposes() throws {
            #expect(Purpose.process(42) == Purpose.process(42))
            #expect(Purpose.process(42) != Purpose.process(43))
            #expect(Purpose.unique() != Purpose.unique())
            #expect(try Purpose(identifier: "com.example.a") == Purpose(identifier: "com.example.a"))
            #expect(try Purpose(identifier: "com.example.a") != Purpose(identifier: "com.example.b"))
            #expect(throws: CoordinationError.invalidPurpose) { try Purpose(identifier: "") }
            #expect(CoordinationError.errno(of: CoordinationError.presenterFailed(.permissionDenied)) == .permissionDenied)
            #expect(CoordinationError.errno(of: FileManagerError.busy("x")) == .resourceBusy)
            #expect(CoordinationError.presenterErrno(Errno.noSuchFileOrDirectory) == .resourceBusy)
            #expect(FileManagerError(CoordinationError.timedOut, path: "/f") == .busy("/f"))
        }

        @Test("Path identities: ancestors are prefixes; package extensions are found")
        func pathResolver() {
            let resolver = PathClaimResolver(checksPackageAttribute: false)
            let child = resolver.identityChain(for: "/a/b/c")
            let parent = resolver.identityChain(for: "/a/b/")
            #expect(child.count == 4 && Array(child.prefix(3)) == parent)
            #expect(resolver.identityChain(for: "/a/./b/../b/c") == child)
            let inside = resolver.target(for: "/nonexistent-coordination/Doc.pages/Data/x", resolvingSymlink: false)
            #expect(inside.target.outermostPackageIndex == 2)
            #expect(inside.target.isInsidePackage)
            let package = resolver.target(for: "/nonexistent-coordination/New.rtfd", resolvingSymlink: false)
            #expect(package.target.isPackage && package.target.isDirectory)
            for (raw, normal) in [("/a//b/./c/../d/", "/a/b/d"), ("/../a", "/a"), ("/", "/"), ("//", "/"), ("/a/..", "/")] {
                #expect(FilePath(raw).coordinationNormalized == FilePath(normal))
                var lexical = FilePath(raw)
                lexical.lexicallyNormalize()
                #expect(PathClaimResolver.chain(of: FilePath(raw)) == PathClaimResolver.chain(of: lexical))
            }
            #expect(FilePath("/a/b").isInside(FilePath("/a")) && FilePath("/a/b").isInside(FilePath("/")))
            #expect(!FilePath("/ab").isSameOrInside(FilePath("/a")) && FilePath("/a").isSameOrInside(FilePath("/a")))
            #expect(FilePath("/a/b/c").replacingPrefix(FilePath("/a/b"), with: FilePath("/x")) == FilePath("/x/c"))
        }
    }
}
