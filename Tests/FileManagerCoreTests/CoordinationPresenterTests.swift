import Dispatch
import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import FileManagerCore

extension CoordinationTests {
    /// Presenters: what they are asked before an access, what they are told after it, and
    /// how deadlines, errors, purposes and moves affect that (docs/SEMANTICS.md §3.6,
    /// docs/SEMANTICS.md §3.6).
    @Suite("Presenters")
    struct PresenterTests {
        @Test("A read asks save then relinquishToReader; WithoutChanges asks no save; reacquire at the end")
        func readRequests() throws {
            let center = Fixture.center()
            let presenter = TestPresenter("/p/f")
            center.presenters.add(presenter)
            let c = FileCoordinator(center: center)
            try c.coordinate(readingItemAt: "/p/f") { _ in
                #expect(presenter.log.all == ["save", "relinquishToReader"])
            }
            #expect(presenter.log.wait(for: "reacquire"))
            try c.coordinate(readingItemAt: "/p/f", options: .withoutChanges) { _ in }
            #expect(presenter.log.wait { $0.count == 5 })
            #expect(presenter.log.all == ["save", "relinquishToReader", "reacquire", "relinquishToReader", "reacquire"])
            // A read of an ordinary directory does not reach presenters inside it.
            try c.coordinate(readingItemAt: "/p") { _ in }
            #expect(presenter.log.all.count == 5)
        }

        @Test("All presenters are asked at once and all must answer before the access runs")
        func waitsForEveryPresenter() throws {
            let center = Fixture.center()
            let hold1 = DispatchSemaphore(value: 0), hold2 = DispatchSemaphore(value: 0)
            let first = TestPresenter("/p/f", .init(holdSave: hold1))
            let second = TestPresenter("/p/f", .init(holdSave: hold2))
            center.presenters.add(first)
            center.presenters.add(second)
            let ran = Atomic<Bool>(false)
            let done = spawn {
                try? FileCoordinator(center: center).coordinate(readingItemAt: "/p/f") { _ in ran.store(true, ordering: .relaxed) }
            }
            // Both asked while neither has answered: the requests went out in parallel.
            #expect(first.log.wait(for: "save") && second.log.wait(for: "save"))
            hold2.signal()
            #expect(second.log.wait(for: "relinquishToReader"))
            let early = ran.load(ordering: .relaxed)
            #expect(!early)
            hold1.signal()
            #expect(done.waited())
            let ranValue = ran.load(ordering: .relaxed)
            #expect(ranValue)
        }

        @Test("A presenter's error fails the access with its errno; another uid's presenter is not asked")
        func presenterErrors() throws {
            let center = Fixture.center()
            let refusing = TestPresenter("/p/f", .init(saveError: Errno.permissionDenied))
            center.presenters.add(refusing)
            let c = FileCoordinator(center: center)
            var ran = false
            #expect(throws: CoordinationError.presenterFailed(.permissionDenied)) {
                try c.coordinate(readingItemAt: "/p/f") { _ in ran = true }
            }
            #expect(!ran)
            #expect(center.claims.counts == (0, 0))
            refusing.behavior.withLock { $0.saveError = FileManagerError.noSuchItem("x") }
            #expect(throws: CoordinationError.presenterFailed(.resourceBusy)) {
                try c.coordinate(writingItemAt: "/p/f", options: .forMerging) { _ in ran = true }
            }
            #expect(!ran)
            center.presenters.remove(refusing)

            let stranger = TestPresenter("/p/f", .init(saveError: Errno.permissionDenied))
            center.presenters.add(stranger, uid: getuid() &+ 4242)
            try c.coordinate(readingItemAt: "/p/f") { _ in ran = true }
            #expect(ran)
            #expect(stranger.log.all.isEmpty)
        }

        @Test("A stalled presenter is skipped at its deadline and later resynced; removed ones delay nothing")
        func stalledPresenter() throws {
            let center = Fixture.center(presenterTimeout: .milliseconds(150))
            let hold = DispatchSemaphore(value: 0)
            let stopped = TestPresenter("/p/f", .init(holdSave: hold))
            center.presenters.add(stopped)
            let c = FileCoordinator(center: center)
            let start = ContinuousClock.now
            var ran = false
            try c.coordinate(readingItemAt: "/p/f") { _ in ran = true }
            #expect(ran && ContinuousClock.now - start >= .milliseconds(140))
            #expect(!stopped.log.all.contains("resync"))
            hold.signal()  // "SIGCONT"
            #expect(stopped.log.wait(for: "resync"))

            center.presenters.remove(stopped)  // "SIGKILL": the registration goes away
            stopped.behavior.withLock { $0.holdSave = DispatchSemaphore(value: 0) }  // asked, it would stall again
            let saves = stopped.log.count("save")
            try c.coordinate(readingItemAt: "/p/f") { _ in }
            #expect(stopped.log.count("save") == saves)  // not asked
            // Nothing delays the access: it is decided at once, before `beginAccess` returns,
            // rather than at the 150 ms deadline a stalled presenter costs (a wall-clock bound
            // under that deadline is what a loaded machine misses).
            let immediate = Mutex<CoordinatedAccess?>(nil)
            center.beginAccess([Claim(target: center.resolver.target(for: "/p/f", resolvingSymlink: false).target,
                                      reading: [], path: "/p/f")],
                               purpose: .unique()) { result in immediate.withLock { $0 = try? result.get() } }
            let access = immediate.withLock { $0 }
            #expect(access != nil)
            access?.end()
            #expect(stopped.log.count("save") == saves)
        }

        @Test("Three missed deadlines in a row unregister a presenter")
        func repeatedMissesUnregister() throws {
            let center = Fixture.center(presenterTimeout: .milliseconds(30))
            let silent = TestPresenter("/p/f", .init(neverAnswers: true))
            center.presenters.add(silent)
            let c = FileCoordinator(center: center)
            for _ in 0..<3 { try c.coordinate(writingItemAt: "/p/f") { _ in } }
            #expect(center.presenters.presenters.isEmpty)
            // Each request reaches the presenter on its own queue, which on a loaded machine
            // may run after the 30 ms deadline already let the access go: wait for all three.
            #expect(silent.log.wait { $0.filter { $0 == "ignored" }.count >= 3 })
            #expect(silent.log.count("ignored") == 3)
        }

        @Test("A presenter hears nothing of its own accesses; others' accesses reach it")
        func selfExclusion() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("f", "1")
            let center = Fixture.center()
            let presenter = TestPresenter(f)
            center.presenters.add(presenter)
            try FileCoordinator(filePresenter: presenter, center: center).coordinate(writingItemAt: FilePath(f)) { url in
                scratch.write(url.string, "2")
            }
            try FileCoordinator(center: center).coordinate(writingItemAt: FilePath(f)) { url in
                scratch.write(url.string, "3")
            }
            #expect(presenter.log.wait { $0.contains("didChange") && $0.contains("reacquire") })
            #expect(presenter.log.all == ["relinquishToWriter", "reacquire", "didChange"]
                || presenter.log.all == ["relinquishToWriter", "didChange", "reacquire"])
        }

        @Test("A presenter's save write goes ahead of the read that asked for it (R8)")
        func saveDuringRead() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("doc", "old")
            let center = Fixture.center()
            let editor = TestPresenter(f)
            let third = Mutex<DispatchSemaphore?>(nil)
            editor.behavior.withLock {
                $0.onSave = {
                    // A writer that queues behind the read meanwhile must not hold the save back.
                    third.withLock { $0 = spawn {
                        try? FileCoordinator(center: center).coordinate(writingItemAt: FilePath(f)) { url in
                            scratch.write(url.string, "third")
                        }
                    } }
                    _ = eventually { center.claims.counts.waiting == 1 }
                    try? FileCoordinator(filePresenter: editor, center: center).coordinate(writingItemAt: FilePath(f)) { url in
                        scratch.write(url.string, "saved")
                    }
                }
            }
            center.presenters.add(editor)
            let read = try FileCoordinator(center: center).coordinate(readingItemAt: FilePath(f)) { url in
                scratch.read(url.string)
            }
            #expect(read == "saved")
            #expect(editor.log.all.prefix(2) == ["save", "relinquishToReader"])
            #expect(try #require(third.withLock { $0 }).waited())
            #expect(scratch.read(f) == "third")
            editor.behavior.withLock { $0.onSave = nil }  // breaks the editor ↔ closure cycle
        }

        @Test("ForDeleting: accommodate deletion; inside a package the package presenter hears of the subitem; a directory reaches everyone inside")
        func deletion() throws {
            let scratch = CoordinationScratch()
            let file = scratch.file("f")
            let pkg = scratch.directory("Doc.rtfd")
            let inPkg = scratch.file("Doc.rtfd/TXT.rtf")
            let dir = scratch.directory("d")
            scratch.directory("d/sub")
            let deepFile = scratch.file("d/sub/x")
            let center = Fixture.center()
            let presenters = [file, pkg, dir, deepFile].map { TestPresenter($0) }
            presenters.forEach { center.presenters.add($0) }
            let (filePresenter, packagePresenter, dirPresenter, deepPresenter) =
                (presenters[0], presenters[1], presenters[2], presenters[3])
            let c = FileCoordinator(center: center)

            try c.coordinate(writingItemAt: FilePath(file), options: .forDeleting) { _ in }
            #expect(filePresenter.log.all.prefix(2) == ["accommodateDeletion", "relinquishToWriter"])

            try c.coordinate(writingItemAt: FilePath(inPkg), options: .forDeleting) { _ in }
            #expect(packagePresenter.log.all.prefix(2) == ["accommodateSubitemDeletion \(inPkg)", "relinquishToWriter"])

            try c.coordinate(writingItemAt: FilePath(dir), options: .forDeleting) { _ in }
            #expect(dirPresenter.log.all.prefix(2) == ["accommodateDeletion", "relinquishToWriter"])
            #expect(deepPresenter.log.all.prefix(2) == ["accommodateDeletion", "relinquishToWriter"])
        }

        @Test("ForMerging asks a save, a plain write does not; a subtree write reaches every presenter inside")
        func mergingAndSubtree() throws {
            let scratch = CoordinationScratch()
            let dir = scratch.directory("d")
            let f = scratch.file("d/f")
            let center = Fixture.center()
            let filePresenter = TestPresenter(f)
            center.presenters.add(filePresenter)
            let c = FileCoordinator(center: center)
            /// Only the before-access requests, not the (asynchronous) notifications.
            func requests() -> [String] {
                filePresenter.log.all.filter { ["save", "relinquishToWriter", "relinquishToReader", "accommodateDeletion"].contains($0) }
            }
            try c.coordinate(writingItemAt: FilePath(f)) { _ in }
            #expect(requests() == ["relinquishToWriter"])
            try c.coordinate(writingItemAt: FilePath(f), options: .forMerging) { _ in }
            #expect(requests() == ["relinquishToWriter", "save", "relinquishToWriter"])
            try c.coordinate(writingItemAt: FilePath(dir)) { _ in }
            #expect(requests().count == 3)  // a plain directory write: not asked
            try c.coordinate(writingItemAt: FilePath(dir), options: .forMoving) { _ in }
            #expect(requests().count == 4 && requests().last == "relinquishToWriter")
            try c.coordinate(writingItemAt: FilePath(dir), options: .forReplacing) { _ in }
            #expect(requests().suffix(2) == ["accommodateDeletion", "relinquishToWriter"])
        }

        @Test("Nested packages: an access deep inside reaches every package presenter")
        func nestedPackages() throws {
            let center = Fixture.center()
            let outer = TestPresenter("/p/A.bundle"), inner = TestPresenter("/p/A.bundle/B.bundle")
            let unrelated = TestPresenter("/p/A.bundle/other")
            [outer, inner, unrelated].forEach { center.presenters.add($0) }
            try FileCoordinator(center: center).coordinate(writingItemAt: "/p/A.bundle/B.bundle/z") { _ in }
            #expect(outer.log.all.first == "relinquishToWriter")
            #expect(inner.log.all.first == "relinquishToWriter")
            #expect(unrelated.log.all.isEmpty)
        }

        @Test("A move: didMove to the item, subitemDidMove to its directory, rewritten paths inside, later events at the new path")
        func moves() throws {
            let scratch = CoordinationScratch()
            let d = scratch.directory("d")
            let a = scratch.directory("d/a")
            let inside = scratch.file("d/a/x")
            let b = scratch.path("d/b")
            let center = Fixture.center()
            let moved = TestPresenter(a), parent = TestPresenter(d), child = TestPresenter(inside)
            [moved, parent, child].forEach { center.presenters.add($0) }
            let c = FileCoordinator(center: center)
            try c.coordinate(writingItemAt: FilePath(a), options: .forMoving, writingItemAt: FilePath(b), options: .forReplacing) { from, to in
                #expect(rename(from.string, to.string) == 0)
                c.item(at: from, didMoveTo: to)
            }
            #expect(moved.log.wait(for: "didMove \(b)"))
            #expect(child.log.wait(for: "didMove \(b)/x"))
            #expect(parent.log.wait(for: "subitemDidMove \(a) \(b)"))
            #expect(center.presenters.presentedPath(of: child) == FilePath("\(b)/x"))
            // Nothing else was announced for the move (no appear or delete on top); the
            // sentinel comes after anything that could still be on its way.
            center.announce(.resync(FilePath(d)), by: nil)
            #expect(parent.log.wait(for: "resync"))
            #expect(parent.log.all.filter { $0.hasPrefix("subitem") } == ["subitemDidMove \(a) \(b)"])

            try FileCoordinator(center: center).coordinate(writingItemAt: FilePath("\(b)/x")) { url in
                scratch.write(url.string, "new")
            }
            #expect(child.log.wait(for: "didChange"))
            #expect(child.log.all.contains("relinquishToWriter"))
        }

        @Test("Trash, restore, trash, empty: didMove, didMove, didMove, accommodate deletion, didDelete")
        func trashRoundTrip() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("note.txt", "x")
            scratch.directory("Trash")
            let trashed = scratch.path("Trash/note.txt")
            let center = Fixture.center()
            let presenter = TestPresenter(f)
            center.presenters.add(presenter)
            let c = FileCoordinator(center: center)
            func move(_ from: String, _ to: String) throws {
                try c.coordinate(writingItemAt: FilePath(from), options: .forMoving, writingItemAt: FilePath(to), options: .forReplacing) { a, b in
                    #expect(rename(a.string, b.string) == 0)
                    c.item(at: a, didMoveTo: b)
                }
            }
            try move(f, trashed)
            try move(trashed, f)
            try move(f, trashed)
            try c.coordinate(writingItemAt: FilePath(trashed), options: .forDeleting) { url in
                #expect(unlink(url.string) == 0)
            }
            #expect(presenter.log.wait(for: "didDelete"))
            let events = presenter.log.all.filter { $0.hasPrefix("did") || $0.hasPrefix("accommodate") }
            #expect(events == ["didMove \(trashed)", "didMove \(f)", "didMove \(trashed)", "accommodateDeletion", "didDelete"])
            #expect(center.presenters.presentedPath(of: presenter) == FilePath(trashed))
        }

        @Test("Registered inside a coordinated read, a presenter hears the next write; removing an unknown one is harmless")
        func registrationInsideRead() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("f", "1")
            let center = Fixture.center()
            let presenter = TestPresenter(f)
            center.presenters.remove(presenter)  // not registered: nothing happens
            try FileCoordinator(center: center).coordinate(readingItemAt: FilePath(f)) { _ in
                center.presenters.add(presenter)
            }
            try FileCoordinator(center: center).coordinate(writingItemAt: FilePath(f)) { url in scratch.write(url.string, "2") }
            #expect(presenter.log.wait(for: "didChange"))
            #expect(presenter.log.all.first == "relinquishToWriter")

            // The process-wide registry of the shared center behaves the same.
            let shared = TestPresenter(scratch.path("shared"))
            FileCoordinator.removeFilePresenter(shared)
            FileCoordinator.addFilePresenter(shared)
            #expect(FileCoordinator.filePresenters.contains { $0 === shared })
            FileCoordinator.removeFilePresenter(shared)
            #expect(!FileCoordinator.filePresenters.contains { $0 === shared })
        }

        @Test("A presenter of a path that does not exist yet is bound when the item is created; a nil URL is bound by its own write")
        func bindingOnCreation() throws {
            let scratch = CoordinationScratch()
            let dir = scratch.directory("d")
            let new = scratch.path("d/new")
            let center = Fixture.center()
            let waiting = TestPresenter(new), parent = TestPresenter(dir)
            center.presenters.add(waiting)
            center.presenters.add(parent)
            try FileCoordinator(center: center).coordinate(writingItemAt: FilePath(new)) { url in scratch.write(url.string, "1") }
            #expect(waiting.log.wait(for: "didChange"))
            #expect(parent.log.wait(for: "subitemDidAppear \(new)"))
            try FileCoordinator(center: center).coordinate(writingItemAt: FilePath(new)) { url in scratch.write(url.string, "2") }
            #expect(waiting.log.wait { $0.filter { $0 == "didChange" }.count == 2 })

            let untitled = TestPresenter(nil)
            center.presenters.add(untitled)
            let saved = scratch.path("d/untitled")
            try FileCoordinator(filePresenter: untitled, center: center).coordinate(writingItemAt: FilePath(saved)) { url in
                scratch.write(url.string, "doc")
            }
            #expect(center.presenters.presentedPath(of: untitled) == FilePath(saved))
            #expect(untitled.log.all.isEmpty)
        }

        @Test("One presenter's events arrive in commit order, also from concurrent announcers")
        func commitOrder() throws {
            let center = Fixture.center()
            let dir = TestPresenter("/p/d")
            center.presenters.add(dir)
            let order = Mutex<Int>(0)
            let done = (0..<4).map { _ in
                spawn {
                    for _ in 0..<50 {
                        // The test's lock defines the commit order.
                        order.withLock { n in
                            center.announce(.changed(FilePath("/p/d/\(n)")), by: nil)
                            n += 1
                        }
                    }
                }
            }
            for d in done { #expect(d.waited()) }
            #expect(dir.log.wait { $0.count == 200 })
            #expect(dir.log.all == (0..<200).map { "subitemDidChange /p/d/\($0)" })

            let file = TestPresenter("/p/e")
            center.presenters.add(file)
            center.announce(.changed("/p/e"), by: nil)
            center.announce(.moved(from: "/p/e", to: "/p/g"), by: nil)
            center.announce(.changed("/p/g"), by: nil)
            center.announce(.deleted("/p/g"), by: nil)
            #expect(file.log.wait { $0.count == 4 })
            #expect(file.log.all == ["didChange", "didMove /p/g", "didChange", "didDelete"])
        }

        @Test("cancel() while presenters are being asked: the block never runs, EINTR, cancel returns at once")
        func cancelWhileAskingPresenters() throws {
            let center = Fixture.center()
            let hold = DispatchSemaphore(value: 0)
            let slow = TestPresenter("/p/f", .init(holdSave: hold))
            center.presenters.add(slow)
            let c = FileCoordinator(center: center)
            let outcome = Mutex<(any Error)?>(nil)
            let ran = Atomic<Bool>(false)
            let done = spawn {
                do {
                    try c.coordinate(readingItemAt: "/p/f") { _ in ran.store(true, ordering: .relaxed) }
                } catch {
                    outcome.withLock { $0 = error }
                }
            }
            #expect(slow.log.wait(for: "save"))
            let start = ContinuousClock.now
            c.cancel()
            // At once: it returned while the presenter is still stopped in its save (it waited
            // neither for the answer nor for the presenter deadline, 10 s in this center).
            #expect(slow.log.all == ["save"])
            #expect(ContinuousClock.now - start < .seconds(5))
            #expect(done.waited())
            let ranValue = ran.load(ordering: .relaxed)
            #expect(!ranValue)
            #expect(outcome.withLock { $0 as? CoordinationError } == .cancelled)
            #expect(center.claims.counts == (0, 0))
            hold.signal()
            // The late relinquish still gets its reacquirer.
            #expect(slow.log.wait(for: "reacquire"))
        }

        @Test("A batch asks each presenter inside once; nested calls add nothing; the completion ends it")
        func batch() throws {
            let scratch = CoordinationScratch()
            let dir = scratch.directory("d")
            let x = scratch.file("d/x"), y = scratch.file("d/y")
            let center = Fixture.center()
            let px = TestPresenter(x), py = TestPresenter(y)
            center.presenters.add(px)
            center.presenters.add(py)
            let c = FileCoordinator(center: center)
            let completion = Mutex<(@Sendable () -> Void)?>(nil)
            try c.prepare(forReadingItemsAt: [FilePath(dir)], writingItemsAt: []) { done in
                try c.coordinate(readingItemAt: FilePath(x), options: .withoutChanges) { _ in }
                try c.coordinate(readingItemAt: FilePath(y)) { _ in }
                completion.withLock { $0 = done }
            }
            for p in [px, py] {
                #expect(p.log.all == ["save", "relinquishToReader"])
            }
            // The batch is still open: ending it from another thread gives the items back.
            let end = try #require(completion.withLock { $0 })
            spawn { end() }
            #expect(px.log.wait(for: "reacquire") && py.log.wait(for: "reacquire"))
            #expect(px.log.count("save") == 1)
        }

        @Test("A batch whose completion is never called ends at the deadline")
        func batchDeadline() throws {
            let scratch = CoordinationScratch()
            let f = scratch.file("f")
            let center = Fixture.center(batchTimeout: .milliseconds(300))
            let presenter = TestPresenter(f)
            center.presenters.add(presenter)
            let start = ContinuousClock.now
            try FileCoordinator(center: center).prepare(forReadingItemsAt: [], writingItemsAt: [FilePath(f)]) { _ in }
            #expect(presenter.log.all.first == "relinquishToWriter")
            #expect(presenter.log.wait(for: "reacquire"))
            #expect(presenter.log.all == ["relinquishToWriter", "reacquire"])
            // The batch outlived its accessor: given back at the deadline, not when the block
            // returned (judged by when the reacquirer ran, not by when the test looked).
            let reacquired = try #require(presenter.log.time(of: "reacquire"))
            #expect(reacquired - start >= .milliseconds(300))
        }
    }
}
