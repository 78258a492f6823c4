import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8 (and isDeletable's Linux rule).
@Suite("CoreFileManager: existence and access")
struct CoreFileManagerAccessTests {
    let fm = CoreFileManager()

    @Test("fileExists: `~` is not expanded, a dangling link does not exist, a link to a directory is one (test 15)")
    func fileExists() throws {
        let p = try Playground {
            Directory("dir")
            File("file")
            SymbolicLink("toDir", to: "dir")
            SymbolicLink("dangling", to: "nowhere")
        }
        #expect(!fm.fileExists(atPath: "~/x"))
        #expect(!fm.fileExists(atPath: "~"))
        #expect(!fm.fileExists(atPath: p["dangling"]))
        #expect(!fm.fileExists(atPath: p["missing"]))

        var isDirectory = false
        #expect(fm.fileExists(atPath: p["toDir"], isDirectory: &isDirectory))
        #expect(isDirectory)
        #expect(fm.fileExists(atPath: p["file"], isDirectory: &isDirectory))
        #expect(!isDirectory)
        #expect(fm.fileExists(atPath: p["dir"]))
    }

    @Test("Under a parent with mode 0600 every check answers false (test 16)", .enabled(if: runsAsRoot))
    func unsearchableParent() throws {
        let p = try Playground {
            Directory("closed", mode: 0o600) {
                File("f", "x", mode: 0o777)
            }
        }
        _ = chown(p["closed"].string, 4242, 4242)
        _ = chown(p["closed/f"].string, 4242, 4242)
        let path = p["closed/f"]
        #expect(!fm.fileExists(atPath: path, caller: otherCaller))
        #expect(!fm.isReadableFile(atPath: path, caller: otherCaller))
        #expect(!fm.isWritableFile(atPath: path, caller: otherCaller))
        #expect(!fm.isExecutableFile(atPath: path, caller: otherCaller))
        #expect(!fm.isDeletableFile(atPath: path, caller: otherCaller))
        // Root (the process, checked by the kernel with its real uid) sees through.
        #expect(fm.fileExists(atPath: path))
        #expect(fm.isReadableFile(atPath: path))
    }

    @Test("Access by mode bits for another caller; links are followed")
    func modeBits() throws {
        let p = try Playground {
            File("readOnly", "r", mode: 0o444)
            File("script", "#!/bin/sh", mode: 0o755)
            File("private", "p", mode: 0o600)
            SymbolicLink("toScript", to: "script")
        }
        let caller = runsAsRoot ? otherCaller : Caller(uid: getuid() + 1, gid: getgid() + 1)
        #expect(fm.isReadableFile(atPath: p["readOnly"], caller: caller))
        #expect(!fm.isWritableFile(atPath: p["readOnly"], caller: caller))
        #expect(fm.isExecutableFile(atPath: p["toScript"], caller: caller))
        #expect(!fm.isReadableFile(atPath: p["private"], caller: caller))
        #expect(!fm.isExecutableFile(atPath: p["readOnly"], caller: caller))
        #expect(!fm.isReadableFile(atPath: p["missing"], caller: caller))
        #expect(!fm.isReadableFile(atPath: "relative", caller: caller))
        if runsAsRoot {
            #expect(fm.isWritableFile(atPath: p["readOnly"]))  // root writes anything
            #expect(!fm.isExecutableFile(atPath: p["readOnly"]))  // but executes only what has an x bit
        }
    }

    @Test("isDeletable: the Linux rule, sticky directories, and a directory only if all inside is", .enabled(if: runsAsRoot))
    func deletable() throws {
        let p = try Playground {
            Directory("sticky", mode: 0o1777) {
                File("theirs")
                File("mine")
            }
            Directory("tree") {
                Directory("sub") { File("f") }
            }
            Directory("readOnlyParent", mode: 0o555) { File("f") }
        }
        _ = chmod(p["sticky"].string, 0o1777)
        _ = chown(p["sticky/theirs"].string, 4343, 4343)
        _ = chown(p["sticky/mine"].string, 4242, 4242)
        #expect(!fm.isDeletableFile(atPath: p["sticky/theirs"], caller: otherCaller))
        #expect(fm.isDeletableFile(atPath: p["sticky/mine"], caller: otherCaller))
        #expect(fm.isDeletableFile(atPath: p["sticky/theirs"]))  // root
        #expect(!fm.isDeletableFile(atPath: p["readOnlyParent/f"], caller: otherCaller))

        // tree is the caller's; sub (root's, 0755) holds a file the caller cannot unlink.
        _ = chown(p["tree"].string, 4242, 4242)
        _ = chmod(p.root.string, 0o777)
        #expect(!fm.isDeletableFile(atPath: p["tree"], caller: otherCaller))
        _ = chmod(p["tree/sub"].string, 0o777)
        #expect(fm.isDeletableFile(atPath: p["tree"], caller: otherCaller))
        #expect(!fm.isDeletableFile(atPath: p["missing"], caller: otherCaller))
        #expect(!fm.isDeletableFile(atPath: p["tree/."], caller: otherCaller))
    }

    @Test("isDeletable does not follow a final symlink", .enabled(if: runsAsRoot))
    func deletableLink() throws {
        let p = try Playground {
            Directory("closed", mode: 0o555) { File("f") }
            SymbolicLink("link", to: "closed/f")
        }
        #expect(!fm.isDeletableFile(atPath: p["link"], caller: otherCaller))  // the playground is root's, 0755
        _ = chmod(p.root.string, 0o777)
        #expect(fm.isDeletableFile(atPath: p["link"], caller: otherCaller))
        #expect(!fm.isDeletableFile(atPath: p["closed/f"], caller: otherCaller))
    }
}
