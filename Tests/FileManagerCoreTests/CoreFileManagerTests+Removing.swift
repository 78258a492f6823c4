import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8: removing.
@Suite("CoreFileManager: removing")
struct CoreFileManagerRemovingTests {
    let fm = CoreFileManager()

    @Test("removeItem deletes a tree with dot-files and ._* files (test 5)")
    func removesHiddenFiles() throws {
        let p = try Playground {
            Directory("tree") {
                File(".hidden")
                File("._resource")
                Directory("sub", mode: 0o500) {
                    File("._only")
                }
                Directory("forks") { File("._x") }
            }
            Directory("onlyFork") { File("._x") }
        }
        #expect(try fm.removeItem(at: p["tree"]))
        #expect(try fm.removeItem(at: p["onlyFork"]))
        #expect(rawListing(p.root) == [])
    }

    @Test("removeItem removes a link, never what it points to")
    func removesLinksNotTargets() throws {
        let p = try Playground {
            Directory("target") { File("keep", "data") }
            Directory("tree") { SymbolicLink("toTarget", to: "../target") }
            SymbolicLink("topLink", to: "target")
        }
        try fm.removeItem(at: p["tree"])
        try fm.removeItem(at: p["topLink"])
        #expect(text(p["target/keep"]) == "data")
        #expect(rawListing(p.root) == ["target"])
    }

    @Test("removeItem refuses `.`, `..`, the root and relative paths; a missing item is noSuchItem")
    func removeRefusals() throws {
        let p = try Playground { Directory("d") }
        for path in [p["d/."], p["d/.."], FilePath("/")] {
            #expect(throws: FileManagerError.invalidArgument(path.string)) { try fm.removeItem(at: path) }
        }
        #expect(throws: FileManagerError.invalidArgument("d")) { try fm.removeItem(at: "d") }
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.removeItem(at: p["missing"]) }
        #expect(rawListing(p.root) == ["d"])
    }

    // MARK: - 6. Delegate

    @Test("The delegate is asked once per item; a declined file gives true, a declined directory false (test 6)")
    func removeDelegate() throws {
        let p = try Playground {
            Directory("tree") {
                File("a")
                File("._a")
                Directory("sub") { File("b") }
            }
            File("lone")
        }
        let all = ["tree", "tree/a", "tree/._a", "tree/sub", "tree/sub/b"].map { p[$0] }

        let spy = SpyDelegate(declining: [p["tree/sub/b"]])
        let manager = CoreFileManager(delegate: spy)
        #expect(try manager.removeItem(at: p["tree"]))
        #expect(Set(spy.log.removals) == Set(all))
        #expect(spy.log.removals.count == all.count)
        #expect(rawListing(p["tree"]) == ["sub"])
        #expect(rawListing(p["tree/sub"]) == ["b"])
        #expect(spy.log.errors.isEmpty)  // a decline is not an error

        let declinesFile = SpyDelegate(declining: [p["lone"]])
        #expect(try CoreFileManager(delegate: declinesFile).removeItem(at: p["lone"]))
        #expect(fm.fileExists(atPath: p["lone"]))

        let declinesTop = SpyDelegate(declining: [p["tree"]])
        #expect(try !CoreFileManager(delegate: declinesTop).removeItem(at: p["tree"]))
        #expect(declinesTop.log.removals == [p["tree"]])
        #expect(fm.fileExists(atPath: p["tree/sub/b"]))

        let declinesSub = SpyDelegate(declining: [p["tree/sub"]])
        #expect(try !CoreFileManager(delegate: declinesSub).removeItem(at: p["tree"]))
        #expect(Set(declinesSub.log.removals) == [p["tree"], p["tree/sub"]])
    }

    @Test("A failure asks shouldProceedAfterError: true goes on, false throws", .enabled(if: runsAsRoot))
    func removeErrors() throws {
        let p = try Playground {
            Directory("tree") {
                Directory("locked", mode: 0o555) { File("stuck") }
                File("free")
            }
        }
        _ = chown(p["tree"].string, 4242, 4242)
        _ = chown(p["tree/free"].string, 4242, 4242)

        let stops = SpyDelegate()
        #expect(throws: FileManagerError.permissionDenied(p["tree/locked/stuck"].string)) {
            try CoreFileManager(delegate: stops).removeItem(at: p["tree"], caller: otherCaller)
        }
        #expect(stops.log.errors == [.permissionDenied(p["tree/locked/stuck"].string)])

        let proceeds = SpyDelegate(proceedAfterError: true)
        #expect(try CoreFileManager(delegate: proceeds).removeItem(at: p["tree"], caller: otherCaller))
        #expect(rawListing(p["tree"]) == ["locked"])
        #expect(proceeds.log.errors == [.permissionDenied(p["tree/locked/stuck"].string)])

        // Without a delegate the first error is thrown.
        #expect(throws: FileManagerError.permissionDenied(p["tree/locked/stuck"].string)) {
            try fm.removeItem(at: p["tree"], caller: otherCaller)
        }
    }

    @Test("A released delegate behaves as no delegate")
    func weakDelegate() throws {
        let p = try Playground { File("f") }
        var spy: SpyDelegate? = SpyDelegate(declining: [p["f"]])
        let manager = CoreFileManager(delegate: spy!)
        spy = nil
        #expect(manager.delegate == nil)
        try manager.removeItem(at: p["f"])
        #expect(!fm.fileExists(atPath: p["f"]))
    }
}
