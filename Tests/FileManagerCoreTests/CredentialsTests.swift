import FileManagerCore
import Foundation
import Glibc
import Testing

@Suite("Credentials (fs uid switches)")
struct CredentialsTests {
    /// `withAccessChecks` used to leave `SECBIT_NO_SETUID_FIXUP` set on its way out, as a
    /// daemon's threads have it: a thread of a process that never asked for it (the CLI, the
    /// unit tests) then kept root's capabilities across every later `asCaller`, and checks
    /// meant to fail as another user passed.
    @Test("withAccessChecks leaves the thread's securebits as they were", .enabled(if: runsAsRoot))
    func accessChecksRestoreTheThread() throws {
        let t = try TemporaryStore()
        let secret = t.storePath("secret")
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("x".utf8), attributes: [.posixPermissions: 0o600]))
        func opensAsOther() -> Bool {
            Credentials.asCaller(otherCaller) { () -> Bool in
                let fd = open(secret, O_RDONLY)
                if fd >= 0 { close(fd) }
                return fd >= 0
            }
        }
        #expect(!opensAsOther())
        Credentials.withAccessChecks { #expect(!opensAsOther()) }
        #expect(!opensAsOther())
    }
}
