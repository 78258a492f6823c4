import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8.3: listings and enumerators.
@Suite("CoreFileManager: listing and enumeration")
struct CoreFileManagerEnumerationTests {
    let fm = CoreFileManager()

    private func tree() throws -> Playground {
        try Playground {
            Directory("root") {
                File("a")
                File(".dot")
                File("._fork")
                SymbolicLink("toSub", to: "sub")
                Directory("sub") {
                    File("b")
                    Directory("deeper") { File("c") }
                }
                Directory(".hiddenDir") { File("h") }
                Directory("Viewer.APP") { File("inside") }
                Directory("Plain", xattrs: ["user.containerfs.package": "1"]) { File("inside") }
                Directory("Not.app", xattrs: ["user.containerfs.package": "0"]) { File("inside") }
            }
            File("file")
            SymbolicLink("rootLink", to: "root")
        }
    }

    /// Every path an enumerator yields, relative to `base`, with its level.
    private func walk(_ e: DirectoryEnumerator, skipping: Set<String> = []) -> [String: Int] {
        var seen: [String: Int] = [:]
        while let path = e.next() {
            let relative = e.relativePath.string
            seen[relative] = e.level
            if skipping.contains(relative) { e.skipDescendants() }
            _ = path
        }
        return seen
    }

    @Test("contentsOfDirectory hides ., .. and ._*, shows dot-files unless skipsHiddenFiles, lists links")
    func contentsOfDirectory() throws {
        let p = try tree()
        let names = try fm.contentsOfDirectory(atPath: p["root"]).map(\.string).sorted()
        #expect(names == [".dot", ".hiddenDir", "Not.app", "Plain", "Viewer.APP", "a", "sub", "toSub"])
        let visible = try fm.contentsOfDirectory(atPath: p["root"], options: .skipsHiddenFiles).map(\.string).sorted()
        #expect(visible == ["Not.app", "Plain", "Viewer.APP", "a", "sub", "toSub"])
        #expect(try fm.contentsOfDirectory(atPath: p["root/sub/deeper/c"].removingLastComponent()).map(\.string) == ["c"])
        #expect(throws: FileManagerError.notADirectory(p["file"].string)) { try fm.contentsOfDirectory(atPath: p["file"]) }
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.contentsOfDirectory(atPath: p["missing"]) }
    }

    @Test("The enumerator: the root is level 0, links are listed not followed, ._* never shown")
    func enumerator() throws {
        let p = try tree()
        let seen = walk(fm.enumerator(at: p["root"]))
        #expect(seen["a"] == 1)
        #expect(seen["sub"] == 1)
        #expect(seen["sub/b"] == 2)
        #expect(seen["sub/deeper/c"] == 3)
        #expect(seen["toSub"] == 1)
        #expect(seen["toSub/b"] == nil)
        #expect(seen["._fork"] == nil)
        #expect(seen[".dot"] == 1 && seen[".hiddenDir/h"] == 2)
        #expect(seen["Viewer.APP/inside"] == 2)
        #expect(seen.count == 15)
    }

    @Test("skipDescendants, skipsSubdirectoryDescendants and skipsHiddenFiles prune")
    func pruning() throws {
        let p = try tree()
        let skipped = walk(fm.enumerator(at: p["root"]), skipping: ["sub"])
        #expect(skipped["sub"] == 1 && skipped["sub/b"] == nil)

        let shallow = walk(fm.enumerator(at: p["root"], options: .skipsSubdirectoryDescendants))
        #expect(Set(shallow.keys) == [".dot", ".hiddenDir", "Not.app", "Plain", "Viewer.APP", "a", "sub", "toSub"])

        let visible = walk(fm.enumerator(at: p["root"], options: .skipsHiddenFiles))
        #expect(visible[".dot"] == nil && visible[".hiddenDir"] == nil && visible[".hiddenDir/h"] == nil)
        #expect(visible["sub/b"] == 2)
    }

    @Test("skipsPackageDescendants: suffixes case-insensitively, the xattr 1 marks, 0 overrides")
    func packages() throws {
        let p = try tree()
        let seen = walk(fm.enumerator(at: p["root"], options: .skipsPackageDescendants))
        #expect(seen["Viewer.APP"] == 1 && seen["Viewer.APP/inside"] == nil)
        #expect(seen["Plain"] == 1 && seen["Plain/inside"] == nil)
        #expect(seen["Not.app/inside"] == 2)
    }

    @Test("A file or a symlink as the root yields nothing; a missing root goes to the error handler")
    func roots() throws {
        let p = try tree()
        #expect(fm.enumerator(at: p["file"]).next() == nil)
        #expect(fm.enumerator(at: p["rootLink"]).next() == nil)
        var errors: [(FilePath, FileManagerError)] = []
        let e = fm.enumerator(at: p["missing"]) { path, error in
            errors.append((path, error))
            return true
        }
        #expect(e.next() == nil)
        #expect(errors.count == 1)
        #expect(errors.first?.1 == .noSuchItem(p["missing"].string))
    }

    @Test("The error handler: true goes on, false stops", .enabled(if: runsAsRoot))
    func errorHandler() throws {
        let p = try Playground {
            Directory("root") {
                Directory("closed", mode: 0o700) { File("secret") }
                Directory("open") { File("x") }
            }
        }
        var errors: [FileManagerError] = []
        let goesOn = fm.enumerator(at: p["root"], caller: otherCaller) { _, error in
            errors.append(error)
            return true
        }
        let seen = walk(goesOn)
        #expect(errors == [.permissionDenied(p["root/closed"].string)])
        #expect(seen["closed"] == 1 && seen["open/x"] == 2)

        var stops = 0
        let stopper = fm.enumerator(at: p["root"], caller: otherCaller) { _, _ in
            stops += 1
            return false
        }
        var count = 0
        while stopper.next() != nil { count += 1 }
        #expect(stops == 1)
        #expect(count <= 3)
        #expect(stopper.next() == nil)
    }

    @Test("subpathsOfDirectory follows a linked root and includes package contents and every name")
    func subpaths() throws {
        let p = try tree()
        let subpaths = try fm.subpathsOfDirectory(atPath: p["rootLink"]).map(\.string)
        #expect(subpaths.contains("Viewer.APP/inside"))
        #expect(subpaths.contains("._fork"))
        #expect(subpaths.contains("sub/deeper/c"))
        #expect(!subpaths.contains("toSub/b"))
        #expect(subpaths.count == 16)
        #expect(throws: FileManagerError.notADirectory(p["file"].string)) { try fm.subpathsOfDirectory(atPath: p["file"]) }
    }
}
