import FUSEBridge
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// What the daemon does for CLI commands arriving on its control socket: the same core
/// calls the CLI makes on a store without a daemon, plus telling the kernel what changed.
struct DaemonRequests: Sendable {
    let volume: Volume
    let mountPoint: FilePath
    let coordination: MountCoordination
    let clients: MountClients
    /// `-o uring`: how many requests came through the kernel's io_uring queues.
    let ring: RingTransport?
    /// For `status`: start time, options, versions, counts.
    let about: DaemonAbout

    func handle(_ request: ControlRequest, _ connection: ControlConnection) -> ControlResponse {
        let caller = connection.caller
        do {
            switch request.op {
            case "status":
                var result = ["mountPoint": mountPoint.string, "store": volume.store.path.string, "pid": "\(getpid())",
                              "transport": ring?.isServing == true ? "io_uring" : "/dev/fuse"]
                if let ring { result["ringRequests"] = "\(ring.requests)" }
                result.merge(about.status(volume: volume, clients: clients)) { own, _ in own }
                return ControlResponse(id: request.id, ok: true, result: result)
            case "container.list":
                let items = volume.registry.list().map(ContainerListing.dictionary)
                return ControlResponse(id: request.id, ok: true, items: items)
            case "container.create":
                let id = try Self.identifier(request.args["id"])
                let bundle = request.args["bundle"].map { FilePath($0) }
                var warnings: [String] = []
                try changingContainerEntry(id) {
                    try volume.registry.create(id, caller: caller, bundleSource: bundle) { warnings.append($0) }
                }
                coordination.center.announce(.appeared(FilePath("/containers/\(id)")), by: coordination.purposes.purpose(ofThread: caller.pid))
                return ControlResponse(id: request.id, ok: true, result: ["path": mountPoint.appending("containers/\(id)").string],
                                       warnings: warnings.isEmpty ? nil : warnings)
            case "container.remove":
                let id = try Self.identifier(request.args["id"])
                guard let owner = volume.registry.owner(of: id) else { throw FileManagerError.noSuchItem("containers/\(id)") }
                guard caller.isRoot || caller.uid == owner else { throw FileManagerError.permissionDenied("containers/\(id)") }
                try changingContainerEntry(id) { try volume.registry.remove(id) }
                coordination.center.announce(.deleted(FilePath("/containers/\(id)")), by: coordination.purposes.purpose(ofThread: caller.pid))
                return ControlResponse(id: request.id, ok: true)
            case "presenter.register":
                let path = try path(request.args["path"])
                let id = try coordination.registerPresenter(path: path, connection: connection, clients: clients)
                return ControlResponse(id: request.id, ok: true, result: ["presenter": "\(id)"])
            case "presenter.unregister":
                if let id = Int(request.args["presenter"] ?? "") { coordination.unregisterPresenter(id, clients: clients) }
                return ControlResponse(id: request.id, ok: true)
            case "presenter.list":
                return ControlResponse(id: request.id, ok: true, items: coordination.listPresenters(for: caller, clients: clients))
            case "presenter.answer":
                coordination.answerPresenterRequest(presenter: Int(request.args["presenter"] ?? "") ?? -1,
                                                    request: Int(request.args["request"] ?? "") ?? -1,
                                                    errno: Int32(request.args["errno"] ?? "0") ?? 0, caller: caller, clients: clients)
                return ControlResponse(id: request.id, ok: true)
            case "claim":
                let path = try path(request.args["path"])
                let kinds: [String: CoordinatedWritingOptions] = [
                    "deleting": .forDeleting, "moving": .forMoving, "replacing": .forReplacing,
                    "merging": .forMerging, "metadata": .contentIndependentMetadataOnly,
                ]
                var timeout: Duration?
                if let text = request.args["timeout"] {
                    guard let seconds = Seconds.parse(text) else {
                        throw FileManagerError.invalidArgument("timeout \(text): \(Seconds.expectation)")
                    }
                    timeout = Seconds.duration(seconds)
                }
                let id: Int
                if request.args["mode"] == "read" {
                    id = try coordination.claim(path: path, reading: request.args["without-changes"] == "1" ? .withoutChanges : [],
                                                writing: nil, timeout: timeout, connection: connection, clients: clients)
                } else if request.args["mode"] == "write" {
                    var options: CoordinatedWritingOptions = []
                    if let kind = request.args["for"] {
                        guard let o = kinds[kind] else { throw FileManagerError.invalidArgument("for: '\(kind)' (deleting, moving, replacing, merging or metadata)") }
                        options = o
                    }
                    id = try coordination.claim(path: path, reading: nil, writing: options, timeout: timeout,
                                                connection: connection, clients: clients)
                } else {
                    throw FileManagerError.invalidArgument("mode: \(request.args["mode"].map { "'\($0)'" } ?? "missing") (read or write)")
                }
                return ControlResponse(id: request.id, ok: true, result: ["claim": "\(id)"])
            case "release":
                if let id = Int(request.args["claim"] ?? "") { coordination.release(id, clients: clients) }
                return ControlResponse(id: request.id, ok: true)
            default:
                return ControlResponse(id: request.id, ok: false, errno: EINVAL, error: "op: unknown operation '\(request.op)' (docs/CONTROL-PROTOCOL.md)")
            }
        } catch let error as FileManagerError {
            return .failure(request.id, error)
        } catch {
            return ControlResponse(id: request.id, ok: false, errno: EIO, error: "\(error)")
        }
    }

    static func identifier(_ raw: String?) throws(FileManagerError) -> BundleIdentifier {
        guard let raw, let id = BundleIdentifier(raw) else {
            throw .invalidArgument("\(raw ?? ""): not a valid bundle identifier (reverse-DNS: letters, digits, '-', at least two labels)")
        }
        return id
    }

    /// A mount-relative path, or an absolute one under this mount.
    func path(_ raw: String?) throws(FileManagerError) -> FilePath {
        guard let raw, !raw.isEmpty else { throw .invalidArgument("path: missing") }
        var p = FilePath(raw)
        if p.isAbsolute {
            guard p.removePrefix(mountPoint) else { throw .invalidArgument("path: \(raw): not under \(mountPoint)") }
        }
        // `..` could name something outside the mount (`../../etc/passwd`): refused, not resolved.
        guard !p.components.contains(where: { $0.kind == .parentDirectory }) else {
            throw .invalidArgument("path: \(raw): '..' leads outside the mount")
        }
        return p
    }

    /// Runs a change of `containers/ID` made by the daemon itself, so that its echo from the
    /// store watcher is not reported again as an outside change, and tells the kernel of it,
    /// also when it failed half-way (what the kernel cached of the name or the listing of
    /// `containers/` may be wrong either way).
    private func changingContainerEntry(_ id: BundleIdentifier, _ body: () throws -> Void) throws {
        defer { volume.announceEntryChange(parent: volume.containersInode, name: FilePath.Component(id.rawValue)!) }
        try id.rawValue.withCString { name in
            try volume.expectingOwnEntry(parent: volume.containersInode, name) { try body() }
        }
    }
}

enum ContainerListing {
    static func dictionary(_ r: ContainerRecord) -> [String: String] {
        ["id": r.id, "displayName": r.displayName, "ownerUID": "\(r.ownerUID)", "created": iso8601(r.created)]
    }

    static func iso8601(_ seconds: Double) -> String {
        let f = ISO8601DateFormatter()
        return f.string(from: Date(timeIntervalSince1970: seconds))
    }
}
