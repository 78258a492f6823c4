@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// FileWrapper (docs/SEMANTICS.md §4): reading a tree without following links, writing it
/// atomically with hard links kept, and matchesContents' polarity (true = unchanged).
@Suite("FileWrapper")
struct FileWrapperTests {
    final class Scratch {
        let path: String
        let fd: CInt
        init() throws {
            var template = Array("/var/tmp/cfs-wrapper.XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw Errno(rawValue: Glibc.errno) }
            path = String(cString: made)
            fd = open(path, O_PATH | O_DIRECTORY)
        }
        deinit {
            close(fd)
            try? FileManager.default.removeItem(atPath: path)
        }
        func write(_ relative: String, _ text: String) {
            FileManager.default.createFile(atPath: path + "/" + relative, contents: Data(text.utf8))
        }
        func read(_ relative: String) -> String? {
            FileManager.default.contents(atPath: path + "/" + relative).map { String(decoding: $0, as: UTF8.self) }
        }
        func setXattr(_ relative: String, _ name: String, _ value: String) -> Bool {
            let fd = open(path + "/" + relative, O_PATH | O_NOFOLLOW)
            defer { close(fd) }
            return (try? Array(value.utf8).withUnsafeBytes { b in try Syscall.setxattr(pathDescriptor: fd, name, b, 0) }) != nil
        }
        func getXattr(_ relative: String, _ name: String) -> String? {
            let fd = open(path + "/" + relative, O_PATH | O_NOFOLLOW)
            defer { close(fd) }
            return ExtendedAttributes.value(fd, Array(name.utf8CString)).map { String(decoding: $0, as: UTF8.self) }
        }
        func stat(_ relative: String) -> Glibc.stat {
            var st = Glibc.stat()
            lstat(path + "/" + relative, &st)
            return st
        }
    }

    func makeTree(_ s: Scratch) throws {
        mkdir(s.path + "/src", 0o755)
        mkdir(s.path + "/src/sub", 0o750)
        s.write("src/a.txt", "alpha")
        s.write("src/sub/b.bin", String(repeating: "b", count: 100_000))
        #expect(link(s.path + "/src/a.txt", s.path + "/src/sub/a-link") == 0)
        #expect(symlink("../a.txt", s.path + "/src/sub/sym") == 0)
        #expect(symlink("/nonexistent/target", s.path + "/src/dangling") == 0)
        #expect(mkfifo(s.path + "/src/fifo", 0o644) == 0)
        #expect(s.setXattr("src/a.txt", "user.colour", "blue"))
        #expect(chmod(s.path + "/src/a.txt", 0o640) == 0)
    }

    /// `.immediate` reads the data now: the wrapper keeps it after the file is gone.
    @Test func immediateReadingKeepsTheDataInMemory() throws {
        let s = try Scratch()
        try makeTree(s)
        let wrapper = try FileWrapper(directory: s.fd, name: Array("src".utf8), options: FileWrapper.ReadingOptions(immediate: true))
        #expect(unlink(s.path + "/src/a.txt") == 0 && unlink(s.path + "/src/sub/a-link") == 0)
        let a = try #require(wrapper.fileWrappers?["a.txt"])
        #expect(try a.regularFileContents() == Array("alpha".utf8))
    }

    /// With `originalContents`, an unchanged file read from there is hard-linked, not copied;
    /// one whose attributes changed in memory, and in-memory data, are written anew.
    @Test func writeLinksUnchangedFilesFromTheOriginalContents() throws {
        let s = try Scratch()
        try makeTree(s)
        let wrapper = try FileWrapper(directory: s.fd, name: Array("src".utf8))
        let sub = try #require(wrapper.fileWrappers?["sub"])
        try #require(sub.fileWrappers?["b.bin"]).fileAttributes.mode = 0o600
        _ = wrapper.addFileWrapper({ let w = FileWrapper(regularFileWithContents: Array("new".utf8)); w.preferredFilename = "new.txt"; return w }())
        try wrapper.write(to: s.fd, name: Array("saved".utf8), originalContents: (s.fd, Array("src".utf8)))
        #expect(s.stat("saved/a.txt").st_ino == s.stat("src/a.txt").st_ino)
        #expect(s.stat("saved/sub/b.bin").st_ino != s.stat("src/sub/b.bin").st_ino)
        #expect(s.stat("saved/sub/b.bin").st_mode & 0o7777 == 0o600 && s.stat("src/sub/b.bin").st_mode & 0o7777 == 0o644)
        #expect(s.read("saved/new.txt") == "new")
        #expect(wrapper.matchesContents(of: s.fd, name: Array("saved".utf8)))
    }

    /// `serializedRepresentation` is a pax archive; reading it back gives the same tree,
    /// data in memory; bytes that are not an archive are refused with the reason.
    @Test func serializedRepresentationRoundTrips() throws {
        let s = try Scratch()
        try makeTree(s)
        #expect(unlink(s.path + "/src/fifo") == 0)
        #expect(unlink(s.path + "/src/dangling") == 0)  // absolute links are refused on import
        let wrapper = try FileWrapper(directory: s.fd, name: Array("src".utf8))
        let bytes = try wrapper.serializedRepresentation()
        #expect(bytes.count > 100_000 && Array(bytes[257..<262]) == Array("ustar".utf8))
        let back = try FileWrapper(serializedRepresentation: bytes)
        #expect(!back.sameContents(as: wrapper))  // ustar keeps whole seconds of modification times
        func toSeconds(_ w: FileWrapper) {
            w.fileAttributes.modificationNanoseconds = 0
            w.fileWrappers?.values.forEach(toSeconds)
        }
        toSeconds(wrapper)
        toSeconds(back)
        #expect(back.sameContents(as: wrapper))
        #expect(try back.fileWrappers?["sub"]?.fileWrappers?["b.bin"]?.regularFileContents()?.count == 100_000)
        #expect(throws: FileManagerError.self) { try FileWrapper(serializedRepresentation: Array("not an archive".utf8)) }
    }

    @Test func readsATreeWithoutFollowingLinksAndSkipsAFIFO() throws {
        let s = try Scratch()
        try makeTree(s)
        var warnings: [String] = []
        let w = try FileWrapper(directory: s.fd, name: Array("src".utf8),
                                options: FileWrapper.ReadingOptions(warning: { warnings.append($0) }))
        #expect(w.isDirectory)
        #expect(w.filename == "src" && w.preferredFilename == "src")
        #expect(Set(w.fileWrappers!.keys) == ["a.txt", "sub", "dangling"])
        #expect(warnings == ["src/fifo: skipped (a FIFO)"])
        let a = w.fileWrappers!["a.txt"]!
        #expect(a.isRegularFile)
        #expect(try a.regularFileContents() == Array("alpha".utf8))
        #expect(a.fileAttributes.mode == 0o640)
        #expect(a.fileAttributes.extendedAttributes[Array("user.colour".utf8)] == Array("blue".utf8))
        let sub = w.fileWrappers!["sub"]!
        #expect(sub.fileAttributes.mode == 0o750)
        #expect(sub.fileWrappers!["sym"]!.symbolicLinkDestination == Array("../a.txt".utf8))
        #expect(w.fileWrappers!["dangling"]!.isSymbolicLink)
    }

    @Test func writesACopyWithHardLinksAttributesAndTimes() throws {
        let s = try Scratch()
        try makeTree(s)
        let w = try FileWrapper(directory: s.fd, name: Array("src".utf8))
        let totals = try w.write(to: s.fd, name: Array("copy".utf8), replacing: false)
        #expect(totals.files == 3 && totals.directories == 2 && totals.links == 2)
        #expect(totals.bytes == 100_005)
        #expect(s.read("copy/a.txt") == "alpha")
        #expect(s.read("copy/sub/b.bin")?.count == 100_000)
        let a = s.stat("copy/a.txt"), l = s.stat("copy/sub/a-link")
        #expect(a.st_ino == l.st_ino && a.st_nlink == 2)
        #expect(a.st_ino != s.stat("src/a.txt").st_ino)
        #expect(a.st_mode & 0o7777 == 0o640)
        #expect(a.st_mtim.tv_sec == s.stat("src/a.txt").st_mtim.tv_sec && a.st_mtim.tv_nsec == s.stat("src/a.txt").st_mtim.tv_nsec)
        #expect(s.stat("copy/sub").st_mode & 0o7777 == 0o750)
        #expect(s.getXattr("copy/a.txt", "user.colour") == "blue")
        #expect(s.stat("copy/sub/sym").st_mode & S_IFMT == S_IFLNK)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: s.path + "/copy/dangling")) == "/nonexistent/target")
        // Nothing left beside it.
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: s.path)) == ["src", "copy"])
        // The copy is independent of the source.
        s.write("src/a.txt", "changed")
        #expect(s.read("copy/a.txt") == "alpha")
    }

    @Test func matchesContentsIsTrueWhenUnchanged() throws {
        let s = try Scratch()
        try makeTree(s)
        let w = try FileWrapper(directory: s.fd, name: Array("src".utf8))
        #expect(w.matchesContents(of: s.fd, name: Array("src".utf8)))
        // Each kind of change makes it false.
        #expect(chmod(s.path + "/src/sub", 0o700) == 0)
        #expect(!w.matchesContents(of: s.fd, name: Array("src".utf8)))
        #expect(chmod(s.path + "/src/sub", 0o750) == 0)
        #expect(w.matchesContents(of: s.fd, name: Array("src".utf8)))
        s.write("src/new", "")
        #expect(!w.matchesContents(of: s.fd, name: Array("src".utf8)))
        unlink(s.path + "/src/new")
        #expect(s.setXattr("src/a.txt", "user.colour", "red!"))
        #expect(!w.matchesContents(of: s.fd, name: Array("src".utf8)))
        #expect(!w.matchesContents(of: s.fd, name: Array("missing".utf8)))
    }

    @Test func writesInMemoryWrappersAtomicallyOverWhatWasThere() throws {
        let s = try Scratch()
        let file = FileWrapper(regularFileWithContents: Array("hello".utf8), attributes: FileWrapperAttributes(mode: 0o600))
        let link = FileWrapper(symbolicLinkWithDestination: Array("file".utf8))
        let dir = FileWrapper(directoryWithFileWrappers: ["file": file, "link": link])
        let extra = FileWrapper(regularFileWithContents: [])
        extra.preferredFilename = "file"
        #expect(dir.addFileWrapper(extra) == "file.2")
        s.write("out", "old file in the way")
        try dir.write(to: s.fd, name: Array("out".utf8))
        #expect(s.read("out/file") == "hello")
        #expect(s.stat("out/file").st_mode & 0o7777 == 0o600)
        #expect(s.read("out/file.2") == "")
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: s.path)) == ["out"])
        // A directory over a directory, too.
        dir.removeFileWrapper(named: "file.2")
        try dir.write(to: s.fd, name: Array("out".utf8))
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: s.path + "/out")) == ["file", "link"])
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: s.path)) == ["out"])
        #expect(throws: FileManagerError.self) { try dir.write(to: s.fd, name: Array("out".utf8), replacing: false) }
        #expect(dir.matchesContents(of: s.fd, name: Array("out".utf8)))
    }

    @Test func refusesAFIFOAtTheTop() throws {
        let s = try Scratch()
        #expect(mkfifo(s.path + "/p", 0o644) == 0)
        #expect(throws: FileManagerError.self) { try FileWrapper(directory: s.fd, name: Array("p".utf8)) }
    }
}
