import ArgumentParser
import FileManagerCore
import Glibc
import SystemPackage

/// `containerfs _unmount-when-gone MOUNTPOINT` (hidden): what makes `auto_unmount` sure.
///
/// fusermount3 unmounts a killed daemon's mount only if opening it fails with ENOTCONN.
/// It looks as soon as its socket to the daemon closes, which the dying process may close
/// before its `/dev/fuse` descriptors (and with io_uring the kernel aborts the connection
/// only once the dead daemon's rings are torn down): its open then waits for the abort,
/// gets ECONNABORTED, and the dead mount stays (DESIGN.md 31). The daemon therefore starts
/// this watcher beside it, holding the read end of a pipe whose write end only the daemon
/// has (descriptor 3). End of file there means the daemon is gone; if its mount (same
/// connection) is still there, the watcher detaches it as fusermount3 would have.
struct UnmountWhenGoneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_unmount-when-gone", shouldDisplay: false)

    @Argument var mountPoint: String

    func run() throws {
        try failing(watch)
    }

    private func watch() throws {
        var st = stat()
        guard fstat(3, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO else {
            throw CommandFailure("\(mountPoint): _unmount-when-gone is started by the daemon, with its pipe as descriptor 3")
        }
        let canonical = Paths.asMounted(mountPoint)
        guard let mounted = MountTable.fuseEntry(at: canonical) else {
            throw CommandFailure("\(canonical): no FUSE mount there to watch")
        }
        var byte: UInt8 = 0
        while true {   // nothing is ever written: end of file when the daemon is gone
            let n = read(3, &byte, 1)
            if n == 0 { break }
            if n < 0 && errno != EINTR { throw CommandFailure("\(canonical): reading the daemon's pipe: \(Errno(rawValue: errno))") }
        }
        guard let still = MountTable.fuseEntry(at: canonical), still.device == mounted.device else { return }
        let status = (try? Subprocess.run(["fusermount3", "-u", "-z", canonical])) ?? -1
        if status != 0 && umount2(canonical, Int32(MNT_DETACH)) != 0 {
            throw CommandFailure("\(canonical): the daemon is gone and its mount could not be detached: \(Errno(rawValue: errno))")
        }
        FileHandleOutput.standardError("containerfs: \(canonical): the daemon is gone; its mount was detached (auto_unmount)\n")
    }
}
