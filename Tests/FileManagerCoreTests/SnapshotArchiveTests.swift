@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// The pax adapter of `snapshot export` (docs/DESIGN.md 53), read back with GNU tar.
@Suite("Snapshot archive")
struct SnapshotArchiveTests {
    typealias Scratch = FileWrapperTests.Scratch

    func export(_ s: Scratch, _ name: String) throws -> [UInt8] {
        let out = open(s.path + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(out) }
        try SnapshotArchive.export(s.fd, "tree", to: out, display: "tree")
        return Array(FileManager.default.contents(atPath: s.path + "/" + name) ?? Data())
    }

    func tar(_ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/tar")
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test func writesMembersInOrderWithHardLinksAndTheSameBytesEveryTime() throws {
        let s = try Scratch()
        mkdir(s.path + "/tree", 0o755)
        mkdir(s.path + "/tree/d", 0o700)
        s.write("tree/b", "bee")
        s.write("tree/a", "ay")
        #expect(link(s.path + "/tree/a", s.path + "/tree/d/a2") == 0)
        #expect(symlink("../b", s.path + "/tree/d/l") == 0)
        #expect(mkfifo(s.path + "/tree/fifo", 0o644) == 0)
        let first = try export(s, "one.tar")
        let second = try export(s, "two.tar")
        #expect(!first.isEmpty && first == second)
        #expect(try tar(["tf", s.path + "/one.tar"]) == "tree/\ntree/a\ntree/b\ntree/d/\ntree/d/a2\ntree/d/l\n")
        let verbose = try tar(["tvf", s.path + "/one.tar", "tree/d/a2", "tree/d/l"])
        #expect(verbose.contains("tree/d/a2 link to tree/a"))
        #expect(verbose.contains("tree/d/l -> ../b"))
    }

    @Test func aMissingTreeIsAnErrorNamingIt() throws {
        let s = try Scratch()
        let out = open(s.path + "/x.tar", O_WRONLY | O_CREAT, 0o644)
        defer { close(out) }
        #expect(throws: FileManagerError.noSuchItem("tree")) { try SnapshotArchive.export(s.fd, "tree", to: out, display: "tree") }
    }
}
