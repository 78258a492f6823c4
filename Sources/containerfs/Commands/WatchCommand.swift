import ArgumentParser
import FileManagerCore
import Foundation
import SystemPackage

/// `containerfs watch PATH [--json]`: registers as a presenter of PATH (through the live
/// mount's daemon) and prints one line per notification until interrupted. It answers
/// every before-access request at once (it has nothing to save), unless `--refuse ERRNO`.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print the presenter notifications of a path under the mount.")

    @Argument(help: "A path under a ContainerFS mount (it need not exist yet).")
    var path: String

    @Flag(help: "One JSON object per line.")
    var json = false

    @Option(help: "Answer before-access requests with this errno (e.g. 16 for EBUSY) instead of 0.")
    var refuse: Int32 = 0

    func run() throws {
        try failing {
            let target = try MountPath(path)
            let client = try target.connect()
            let registered = try client.call("presenter.register", ["path": target.relative.string]).checked()
            let id = registered.result?["presenter"] ?? "?"
            if !json { FileHandleOutput.standardError("watching \(target.absolute) (presenter \(id))\n") }
            while let push = client.nextPush() {
                if let request = push.request {
                    client.post("presenter.answer", ["presenter": "\(push.presenter ?? -1)", "request": "\(request)", "errno": "\(refuse)"])
                    print(push, json: json, mount: target.mountPoint)
                } else {
                    print(push, json: json, mount: target.mountPoint)
                }
            }
            throw CommandFailure("\(target.absolute): the daemon went away (unmounted?)")
        }
    }

    private func print(_ push: ControlPush, json: Bool, mount: FilePath) {
        if json {
            var object: [String: Any] = [:]
            if let e = push.event { object["event"] = e }
            if let r = push.request { object["request"] = r; object["steps"] = push.steps ?? [] }
            if let p = push.path { object["path"] = mount.appending(p).string }
            if let t = push.to { object["to"] = mount.appending(t).string }
            object["uncoordinated"] = push.uncoordinated ?? false
            object["time"] = push.time ?? ContainerListing.iso8601(Date().timeIntervalSince1970)
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) {
                FileHandleOutput.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
            }
        } else {
            let what = push.event ?? "request \((push.steps ?? []).joined(separator: "+"))"
            let where_ = push.path.map { mount.appending($0).string } ?? ""
            let to = push.to.map { " -> \(mount.appending($0).string)" } ?? ""
            let flag = push.uncoordinated == true ? " (uncoordinated)" : ""
            FileHandleOutput.standardOutput("\(what) \(where_)\(to)\(flag)\n")
        }
    }
}

/// A path under a live ContainerFS mount: the mount, the path relative to it, and the way
/// to its daemon.
struct MountPath {
    let absolute: FilePath
    let mountPoint: FilePath
    let relative: FilePath
    let store: FilePath

    init(_ raw: String) throws {
        let absolute = Paths.absolute(raw)
        self.absolute = absolute
        guard let mount = MountTable.entries()
            .filter({ absolute.starts(with: FilePath($0.mountPoint)) })
            .max(by: { $0.mountPoint.count < $1.mountPoint.count }) else {
            throw CommandFailure("\(absolute): not under a ContainerFS mount")
        }
        mountPoint = FilePath(mount.mountPoint)
        store = FilePath(mount.source)
        var rel = absolute
        _ = rel.removePrefix(mountPoint)
        relative = rel
    }

    func connect() throws -> ControlClient {
        guard let client = ControlClient(path: Paths.controlSocket(store)) else {
            throw CommandFailure("\(mountPoint): the daemon does not answer on \(Paths.controlSocket(store))")
        }
        return client
    }
}
