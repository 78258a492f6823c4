import FUSEBridge
import FileManagerCore
import Foundation
import Glibc

/// What the daemon's `status` reports about itself beyond the mount and store: when it
/// started, the options it was given, versions, and how much it is holding.
struct DaemonAbout: Sendable {
    let started = Date()
    /// The `-o` options as given (`-d` shown as `debug`).
    let options: [String]
    let bridge: FUSEBridge
    /// The store watcher in use (`fanotify`), or `none` (`-o watcher=none`, or fanotify
    /// could not start).
    var watcher = "none"

    func status(volume: Volume, clients: MountClients) -> [String: String] {
        var result = [
            "version": ContainerFSCommand.version,
            "libfuse": FUSEBridge.libfuseVersion,
            "options": options.joined(separator: ","),
            "started": ContainerListing.iso8601(started.timeIntervalSince1970),
            "uptime": String(format: "%.0f", Date().timeIntervalSince(started)),
            "containers": "\(volume.registry.list().count)",
            "presenters": "\(clients.presenterCount)",
            "claims": "\(clients.claimCount)",
            "watcher": watcher,
        ]
        if let proto = bridge.kernelProtocol { result["fuseProtocol"] = proto }
        return result
    }
}

/// The versions the CLI reports without a daemon.
enum FUSEBridgeVersions {
    static var libfuse: String { FUSEBridge.libfuseVersion }
}
