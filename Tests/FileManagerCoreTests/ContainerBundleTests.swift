import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// `container create --bundle` and stray entries of `containers/` (DESIGN.md 21).
@Suite("Bundles and stray container entries (no mount)")
struct ContainerBundleTests {
    /// A host directory beside the store, removed when dropped.
    final class HostDirectory {
        let path: String

        init() {
            var template = Array("/tmp/containerfs-host-XXXXXX".utf8CString)
            path = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!)
        }

        deinit { _ = try? FileManager.default.removeItem(atPath: path) }

        func file(_ relative: String, _ text: String = "x") {
            FileManager.default.createFile(atPath: "\(path)/\(relative)", contents: Data(text.utf8))
        }

        func directory(_ relative: String) throws {
            try FileManager.default.createDirectory(atPath: "\(path)/\(relative)", withIntermediateDirectories: true)
        }

        func link(_ relative: String, to target: String) throws {
            try FileManager.default.createSymbolicLink(atPath: "\(path)/\(relative)", withDestinationPath: target)
        }
    }

    static func type(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0
    }

    @Test func aBundleNamedByALinkIsTheDirectoryItLeadsTo() throws {
        let t = try TemporaryStore(), host = HostDirectory()
        try host.directory("real/Contents")
        host.file("real/Contents/Info.plist", "<plist/>")
        try host.link("real/Contents/inner", to: "Info.plist")
        try host.link("via", to: "real")
        try ContainerRegistry(store: t.store).create(BundleIdentifier("com.example.notes")!, caller: .current,
                                                      bundleSource: FilePath("\(host.path)/via"))
        let app = t.storePath("containers/com.example.notes/Notes.app")
        #expect(Self.type(app) == S_IFDIR)
        #expect(try String(contentsOfFile: app + "/Contents/Info.plist", encoding: .utf8) == "<plist/>")
        #expect(Self.type(app + "/Contents/inner") == S_IFLNK)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: app + "/Contents/inner") == "Info.plist")
    }

    @Test func aBundleThatContainsTheStoreIsRefusedAndLeavesNothing() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        let why = "the bundle contains the store \(t.path) and would be copied into itself"
        for bundle in [t.path.string, t.path.removingLastComponent().string, "/", t.storePath(".staging")] {
            #expect(throws: FileManagerError.invalidArgument("\(bundle): \(why)")) {
                try registry.create(BundleIdentifier("com.example.loop")!, caller: .current, bundleSource: FilePath(bundle))
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath("containers")).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
        #expect(registry.list().isEmpty)
    }

    @Test func specialFilesAreLeftOutWithAWarningNamingEach() throws {
        let t = try TemporaryStore(), host = HostDirectory()
        try host.directory("b/sub")
        host.file("b/data")
        #expect(mkfifo("\(host.path)/b/sub/pipe", 0o644) == 0)
        var warnings: [String] = []
        try ContainerRegistry(store: t.store).create(BundleIdentifier("com.example.pipes")!, caller: .current,
                                                      bundleSource: FilePath("\(host.path)/b")) { warnings.append($0) }
        #expect(warnings == ["\(host.path)/b/sub/pipe: not copied (a FIFO; a bundle holds only files, directories and symbolic links)"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath("containers/com.example.pipes/Pipes.app/sub")).isEmpty)
    }

    @Test func aMissingItemIsNamedItself() throws {
        let t = try TemporaryStore(), host = HostDirectory()
        #expect(throws: FileManagerError.noSuchItem("\(host.path)/gone")) {
            try ContainerRegistry(store: t.store).create(BundleIdentifier("com.example.gone")!, caller: .current,
                                                          bundleSource: FilePath("\(host.path)/gone"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
    }

    @Test func aStrayLinkInContainersIsNoContainerAndCanBeRemoved() throws {
        let t = try TemporaryStore(), host = HostDirectory()
        try host.directory("victim")
        let registry = ContainerRegistry(store: t.store)
        try registry.create(BundleIdentifier("com.example.real")!, caller: .current)
        try FileManager.default.createSymbolicLink(atPath: t.storePath("containers/com.example.swap"), withDestinationPath: "\(host.path)/victim")
        let swap = BundleIdentifier("com.example.swap")!

        // The mount neither finds nor lists it.
        let volume = Volume(store: t.store)
        let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
        #expect(errnoOf { _ = try withName("com.example.swap") { try volume.lookup(containers, $0) } } == .noSuchFileOrDirectory)
        let handle = try volume.openDirectory(containers)
        var listed: [String] = []
        try volume.readDirectory(handle, from: 0) { listed.append(String(cString: $0.name)); return true }
        #expect(listed.sorted() == [".", "..", "com.example.real"])

        // create names it; remove takes the link away, never what it leads to.
        let path = t.path.appending("containers/com.example.swap")
        #expect(throws: FileManagerError.itemExists("\(path): a symbolic link, not a container, holds this id in the store (`containerfs container remove com.example.swap` removes it)")) {
            try registry.create(swap, caller: .current)
        }
        #expect(registry.owner(of: swap) == getuid())
        try registry.remove(swap)
        #expect(Self.type(path.string) == 0)
        #expect(Self.type("\(host.path)/victim") == S_IFDIR)
        #expect(registry.owner(of: swap) == nil)
        try registry.create(swap, caller: .current)
        #expect(registry.list().map(\.id) == ["com.example.real", "com.example.swap"])
    }
}
