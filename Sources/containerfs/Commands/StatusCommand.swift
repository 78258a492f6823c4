import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs status [--json] [MOUNTPOINT]`: every live ContainerFS mount (or the one
/// named), as its daemon describes itself over the store's control socket.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show live ContainerFS mounts: store, daemon pid, options, uptime, counts.",
        discussion: """
            For each mount: its store, the daemon's pid, the -o options it was given, how long \
            it has run, the kernel's FUSE protocol version, and how many containers, presenters \
            and claims it holds. A mount whose daemon has died is shown as such (remedy: \
            containerfs unmount MOUNTPOINT). Exit status 1 when MOUNTPOINT is not a live \
            ContainerFS mount.
            """
    )

    @Flag(help: "One JSON array of objects, numbers as numbers.")
    var json = false

    @Argument(help: "Only this mount point.")
    var mountPoint: String?

    func run() throws {
        try failing {
            var mounts = MountTable.entries().filter { $0.type == MountTable.type }
            if let mountPoint {
                let path = Paths.asMounted(mountPoint)
                guard let mount = MountTable.entry(at: path) else { throw CommandFailure("\(path): not a containerfs mount") }
                mounts = [mount]
            }
            let described = mounts.map(Self.describe)
            if json {
                let data = try JSONSerialization.data(withJSONObject: described, options: [.prettyPrinted, .sortedKeys])
                FileHandleOutput.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
            } else if described.isEmpty {
                FileHandleOutput.standardOutput("no live ContainerFS mount\n")
            } else {
                FileHandleOutput.standardOutput(described.map(Self.text).joined(separator: "\n"))
            }
            if mountPoint != nil, described.first?["alive"] as? Bool == false {
                throw CommandFailure("\(described[0]["mountPoint"]!): the daemon is gone (run containerfs unmount \(described[0]["mountPoint"]!))")
            }
        }
    }

    /// What the mount's daemon says of itself; `alive` false when it does not answer.
    static func describe(_ mount: MountTable.Entry) -> [String: Any] {
        var d: [String: Any] = ["mountPoint": mount.mountPoint, "store": mount.source, "alive": false]
        guard let client = ControlClient(path: Paths.controlSocket(FilePath(mount.source))),
              let response = try? client.call("status"), response.ok, let r = response.result,
              r["mountPoint"] == mount.mountPoint
        else { return d }
        d["alive"] = true
        for (key, value) in r {
            switch key {
            case "pid", "uptime", "containers", "presenters", "claims", "ringRequests": d[key] = Int(value) ?? value
            case "options": d[key] = value.isEmpty ? [String]() : value.split(separator: ",").map(String.init)
            default: d[key] = value
            }
        }
        return d
    }

    static func text(_ d: [String: Any]) -> String {
        let mnt = d["mountPoint"] as? String ?? "?"
        guard d["alive"] as? Bool == true else {
            return "\(mnt)\n  store:      \(d["store"] ?? "?")\n  daemon:     not responding (run containerfs unmount \(mnt))\n"
        }
        let options = (d["options"] as? [String]).map { $0.isEmpty ? "(defaults)" : $0.joined(separator: ",") } ?? "?"
        var lines = [
            mnt,
            "  store:      \(d["store"] ?? "?")",
            "  daemon:     pid \(d["pid"] ?? "?"), up \(duration(d["uptime"] as? Int ?? 0)) (since \(d["started"] ?? "?")), containerfs \(d["version"] ?? "?")",
            "  options:    \(options)",
            "  transport:  \(d["transport"] ?? "?"), kernel FUSE protocol \(d["fuseProtocol"] ?? "?"), libfuse \(d["libfuse"] ?? "?")",
            "  containers: \(d["containers"] ?? "?"), presenters: \(d["presenters"] ?? "?"), claims: \(d["claims"] ?? "?")",
        ]
        lines.append("")
        return lines.joined(separator: "\n")
    }

    static func duration(_ seconds: Int) -> String {
        let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        return h > 0 ? "\(h)h \(m)m \(s)s" : m > 0 ? "\(m)m \(s)s" : "\(s)s"
    }

    /// `containerfs --version`: the program and the libfuse it runs with, and for each live
    /// mount the FUSE protocol version its kernel announced (only a mount knows it).
    static func versionText() -> String {
        var lines = ["containerfs \(ContainerFSCommand.version)", "libfuse \(FUSEBridgeVersions.libfuse)"]
        let live = MountTable.entries().filter { $0.type == MountTable.type }.map(describe).filter { $0["alive"] as? Bool == true }
        if live.isEmpty {
            lines.append("kernel FUSE protocol: known once mounted (no live ContainerFS mount)")
        }
        for d in live {
            lines.append("kernel FUSE protocol \(d["fuseProtocol"] ?? "?") (mount \(d["mountPoint"] ?? "?"))")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
