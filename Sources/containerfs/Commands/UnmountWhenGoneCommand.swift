import ArgumentParser
import FileManagerCore
import Glibc

/// `containerfs _unmount-when-gone MOUNTPOINT` (hidden): `auto_unmount` for `-o uring`.
///
/// fusermount3 unmounts a killed daemon's mount only if opening it fails with ENOTCONN.
/// With io_uring the kernel aborts the connection only once the dead daemon's rings are torn
/// down, a few milliseconds after fusermount3 has looked: its open waits for the abort,
/// gets ECONNABORTED, and the dead mount stays (DESIGN.md 31). The daemon therefore starts
/// this watcher beside it, holding the read end of a pipe whose write end only the daemon
/// has (descriptor 3). End of file there means the daemon is gone; if its mount (same
/// connection) is still there, the watcher detaches it as fusermount3 would have.
struct UnmountWhenGoneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_unmount-when-gone", shouldDisplay: false)

    @Argument var mountPoint: String

    func run() throws {
        guard let mounted = MountTable.entry(at: mountPoint) else { return }
        var byte: UInt8 = 0
        while true {   // nothing is ever written: end of file when the daemon is gone
            let n = read(3, &byte, 1)
            if n == 0 || (n < 0 && errno != EINTR) { break }
        }
        guard let still = MountTable.entry(at: mountPoint), still.device == mounted.device else { return }
        let status = (try? Subprocess.run(["fusermount3", "-u", "-z", mountPoint])) ?? -1
        if status != 0 && umount2(mountPoint, Int32(MNT_DETACH)) != 0 {
            FileHandleOutput.write(2, "containerfs: \(mountPoint): the daemon is gone and its mount could not be detached: \(String(cString: strerror(errno)))\n")
            throw ExitCode.failure
        }
        FileHandleOutput.write(2, "containerfs: \(mountPoint): the daemon is gone; its mount was detached (auto_unmount)\n")
    }
}
