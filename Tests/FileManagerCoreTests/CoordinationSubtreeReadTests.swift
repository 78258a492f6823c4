import SystemPackage
import Testing
@testable import FileManagerCore

extension CoordinationTests {
    /// The subtree read a snapshot's publish takes (docs/DESIGN.md 57): the directory and
    /// everything inside it as one item for writers, shared with every reader.
    @Suite("Subtree read")
    struct SubtreeReadTests {
        let p = Purpose.unique(), q = Purpose.unique()

        static func subtreeRead(_ path: String, directory: Bool = true, packages: [String] = []) -> Claim {
            Claim(target: Fixture.target(path, directory: directory, packages: packages), readingSubtree: [], path: FilePath(path))
        }

        @Test("Its mode: a subtree read on a directory, a plain read on a file or inside a package")
        func mode() {
            #expect(Self.subtreeRead("/t/d").mode == .subtreeRead)
            #expect(Self.subtreeRead("/t/f", directory: false).mode == .read)
            #expect(Self.subtreeRead("/t/X.pkg/d", packages: ["/t/X.pkg"]).mode == .read)
        }

        @Test("Writers inside wait for it, readers anywhere do not; it waits for running writers inside")
        func excludesWritersInside() throws {
            let table = ClaimTable()
            let freeze = try #require(table.grantIfFree([Self.subtreeRead("/t/d")], purpose: p))
            #expect(table.grantIfFree([Fixture.write("/t/d/sub/f")], purpose: q) == nil)
            #expect(table.grantIfFree([Fixture.write("/t/d", directory: true)], purpose: q) == nil)
            #expect(table.grantIfFree([Fixture.write("/t", .forMoving, directory: true)], purpose: q) == nil)
            try #require(table.grantIfFree([Fixture.read("/t/d/sub/f")], purpose: q)).release()
            try #require(table.grantIfFree([Self.subtreeRead("/t/d/sub")], purpose: q)).release()
            // Outside it, and a plain write of an enclosing directory, nothing waits.
            try #require(table.grantIfFree([Fixture.write("/t/e")], purpose: q)).release()
            try #require(table.grantIfFree([Fixture.write("/t", directory: true)], purpose: q)).release()
            // Its own purpose writes inside freely (a presenter's save is admitted that way too).
            try #require(table.grantIfFree([Fixture.write("/t/d/f")], purpose: p)).release()
            let writer = GrantBox()
            table.request([Fixture.write("/t/d/f")], purpose: q, completion: writer.completion)
            #expect(writer.count == 0)
            freeze.release()
            let running = try #require(writer.granted())
            let second = GrantBox()
            table.request([Self.subtreeRead("/t/d")], purpose: p, completion: second.completion)
            #expect(second.count == 0)
            running.release()
            try #require(second.granted()).release()
            #expect(table.counts == (0, 0))
        }

        @Test("Presenters inside it are asked to save and relinquish to the reader")
        func asksPresentersInside() {
            let claim = Self.subtreeRead("/t/d")
            var subitem: FilePath?
            let inside = PresenterRegistry.steps(for: claim, presenterChain: Fixture.chain("/t/d/sub/f"),
                                                 includingContents: false, subitemPath: &subitem)
            #expect(inside == [.save, .relinquishToReader])
            let outside = PresenterRegistry.steps(for: claim, presenterChain: Fixture.chain("/t/e"),
                                                  includingContents: false, subitemPath: &subitem)
            #expect(outside.isEmpty)
            let plain = PresenterRegistry.steps(for: Fixture.read("/t/d", directory: true), presenterChain: Fixture.chain("/t/d/sub/f"),
                                                includingContents: false, subitemPath: &subitem)
            #expect(plain.isEmpty)
        }
    }
}
