import CLinux
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// Starting the mount daemon in the background by re-executing this binary (`-f
/// --ready-fd 3`), in a new session, its stderr appended to `STORE/daemon.log`.
enum Daemon {
    static func start(store: FilePath, arguments: [String]) throws {
        // A quick, clear refusal before spawning anything.
        let opened = try Store(at: store)
        if let holder = opened.lockHolder(), Store.holderStillMounted(holder) {
            throw CommandFailure("\(store): store is already in use (\(holder))")
        }
        // Never through a link, and as the store's owner (`Store.asOwner`): root once
        // appended its log to whatever file a user linked there.
        let logFD: CInt
        do { logFD = try opened.openOwnFile("daemon.log", O_WRONLY | O_CREAT | O_APPEND) } catch {
            throw CommandFailure("\(store)/daemon.log: \(error)")
        }
        defer { close(logFD) }

        var pipeFDs: [Int32] = [0, 0]
        // Neither end may leak into the daemon except as its descriptor 3 (dup2 clears this).
        guard clinux_pipe_cloexec(&pipeFDs) == 0 else { throw CommandFailure("pipe: \(Errno(rawValue: errno))") }
        let (readEnd, writeEnd) = (pipeFDs[0], pipeFDs[1])

        let logStart = lseek(logFD, 0, SEEK_END)
        let pid = spawnSelf(arguments + ["--ready-fd", "3"], stderr: logFD, fd3: writeEnd)
        close(writeEnd)
        defer { close(readEnd) }
        guard pid > 0 else { throw CommandFailure("cannot start the daemon: \(Errno(rawValue: -pid))") }

        var answer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .newlines)
        if text == "ready" { return }
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        let reasons = libfuseReasons(opened, from: logStart)
        let because = reasons.isEmpty ? "" : " (\(reasons.joined(separator: "; ")))"
        throw CommandFailure(text.isEmpty ? "the daemon exited before the mount was live\(because) (see \(store)/daemon.log)" : text + because)
    }

    /// What libfuse and fusermount3 wrote to the daemon's log since `offset` (their lines
    /// start `fuse:` or `fusermount3:`): the reason a mount failed, which they print on
    /// standard error only, and which the daemon's own message cannot know.
    private static func libfuseReasons(_ store: Store, from offset: off_t) -> [String] {
        guard offset >= 0, let fd = try? store.openOwnFile("daemon.log", O_RDONLY) else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
        guard n > 0 else { return [] }
        return String(decoding: bytes[0..<n], as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("fuse: ") || $0.hasPrefix("fusermount3: ") }.map(String.init)
    }

    /// In the daemon, once mounted with `-o uring,auto_unmount`: starts
    /// `_unmount-when-gone` (which see) beside it, its descriptor 3 the read end of a pipe
    /// whose write end this process keeps, unseen by anything it starts later, until it
    /// exits. Throws (nothing started) if the pipe or the spawn fails.
    static func startUnmountWatcher(mountPoint: String) throws -> Int32 {
        var pipeFDs: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&pipeFDs) == 0 else { throw CommandFailure("pipe: \(Errno(rawValue: errno))") }
        let pid = spawnSelf(["_unmount-when-gone", mountPoint], stderr: 2, fd3: pipeFDs[0])
        close(pipeFDs[0])
        guard pid > 0 else {
            close(pipeFDs[1])
            throw CommandFailure("spawn: \(Errno(rawValue: -pid))")
        }
        return pipeFDs[1]
    }

    /// This binary again, in a new session: stdin and stdout /dev/null, `stderr` as its
    /// descriptor 2 and `fd3` as its 3. Its pid, or -errno.
    private static func spawnSelf(_ arguments: [String], stderr: Int32, fd3: Int32) -> pid_t {
        let executable = "/proc/self/exe"
        // argv[0] names the real binary, so `ps` and `pgrep containerfs` find it.
        let name = (try? FileManager.default.destinationOfSymbolicLink(atPath: executable)) ?? "containerfs"
        let argv = ([name] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        return argv.withUnsafeBufferPointer { av in
            clinux_spawn_daemon(executable, av.baseAddress!, environ, stderr, fd3)
        }
    }
}
