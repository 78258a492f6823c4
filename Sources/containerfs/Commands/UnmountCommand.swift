import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs unmount MOUNTPOINT`: a clean unmount; returns once the daemon has let go
/// of the store, so that the store can be mounted again at once.
struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unmount", abstract: "Unmount a ContainerFS mount.")

    @Argument(help: "The mount point.")
    var mountPoint: String

    @Flag(help: "Detach the mount now even if it is busy; it goes once nothing uses it (fusermount3 -u -z).")
    var lazy = false

    func run() throws {
        try failing {
            // As mountinfo records it, so that a mount point reached through a symbolic link
            // is found.
            let path = Paths.asMounted(mountPoint)
            guard let mount = MountTable.entry(at: path) else {
                if let top = MountTable.topmost(at: path), MountTable.entries().contains(where: { $0.mountPoint == path }) {
                    throw CommandFailure("\(path): the topmost mount here is \(top.type), not ContainerFS (unmount it first)")
                }
                throw CommandFailure("\(path): not a containerfs mount")
            }
            var (status, errors) = try Subprocess.runCapturingErrors(["fusermount3", "-u"] + (lazy ? ["-z"] : []) + [path])
            if status != 0, !lazy, errors.contains("busy"), Self.abortIfDaemonDied(mount) {
                (status, errors) = try Subprocess.runCapturingErrors(["fusermount3", "-u", path])
            }
            guard status == 0 else {
                let busy = errors.contains("busy") && !lazy ? " (in use: close what uses it, or containerfs unmount --lazy)" : ""
                throw CommandFailure("\(path): unmount failed: \(errors.isEmpty ? "fusermount3 exited with status \(status)" : errors)\(busy)")
            }
            // The daemon exits once its loop sees the unmount; wait for the store lock
            // (a lazy unmount's daemon stays while the mount is still used).
            if !lazy, let store = try? Store(at: FilePath(mount.source), create: false) {
                for _ in 0..<200 where store.lockHolder() != nil { usleep(50_000) }
            }
        }
    }

    /// A daemon killed while one of its threads waited on its own mount (a trash move,
    /// DESIGN.md 48) cannot finish dying: that request waits for an answer only the dead
    /// daemon could give, and keeps the mount busy and the store locked. When the holder
    /// of the store lock is gone or a zombie, the connection is aborted (fusectl, root
    /// only), which ends the wait; true when it was.
    static func abortIfDaemonDied(_ mount: MountTable.Entry) -> Bool {
        guard geteuid() == 0, let store = try? Store(at: FilePath(mount.source), create: false),
              let holder = store.lockHolder(), holder.hasPrefix("pid "),
              let pid = Int32(holder.dropFirst(4).prefix(while: \.isNumber)) else { return false }
        let state = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("State:") }
        guard state == nil || state!.contains("(zombie)") || state!.contains("(dead)") else { return false }
        guard let minor = mount.device.split(separator: ":").last,
              let fd = Optional(open("/sys/fs/fuse/connections/\(minor)/abort", O_WRONLY | O_CLOEXEC)), fd >= 0 else { return false }
        defer { close(fd) }
        guard write(fd, "1", 1) == 1 else { return false }
        for _ in 0..<200 where store.lockHolder() != nil { usleep(50_000) }
        return true
    }
}
