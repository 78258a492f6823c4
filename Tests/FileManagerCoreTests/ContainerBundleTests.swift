import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// `container create --bundle` (DESIGN.md 21).
@Suite("Bundles (no mount)")
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
}
