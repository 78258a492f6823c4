import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// Opening a store without `create` makes and changes nothing (DESIGN.md 37).
struct StoreTests {
    @Test func openingWithoutCreateMakesNothing() throws {
        let t = try TemporaryStore()
        let missing = t.path.appending("typo/store")
        #expect(Store.find(at: missing) == .missing)
        #expect(throws: FileManagerError.self) { _ = try Store(at: missing, create: false) }
        #expect(!FileManager.default.fileExists(atPath: t.storePath("typo")))

        let home = t.path.appending("home")
        mkdir(home.string, 0o755)
        FileManager.default.createFile(atPath: home.appending("notes").string, contents: Data())
        #expect(Store.find(at: home) == .otherDirectory)
        #expect(throws: FileManagerError.self) { _ = try Store(at: home, create: false) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.string) == ["notes"])
        var st = stat()
        lstat(home.string, &st)
        #expect(st.st_mode & 0o7777 == 0o755)

        #expect(Store.find(at: home.appending("notes")) == .notADirectory)
        let empty = t.path.appending("empty")
        mkdir(empty.string, 0o755)
        #expect(Store.find(at: empty) == .emptyDirectory)
        #expect(Store.find(at: t.path) == .store)
        _ = try Store(at: t.path, create: false)
    }
}
