import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// What the daemon does for CLI commands arriving on its control socket: the same core
/// calls the CLI makes on a store without a daemon, plus telling the kernel what changed.
struct DaemonRequests: Sendable {
    let volume: Volume
    let mountPoint: FilePath

    func handle(_ request: ControlRequest, _ connection: ControlConnection) -> ControlResponse {
        let caller = connection.caller
        do {
            switch request.op {
            case "status":
                return ControlResponse(id: request.id, ok: true, result: [
                    "mountPoint": mountPoint.string, "store": volume.store.path.string, "pid": "\(getpid())",
                ])
            case "container.list":
                let items = volume.registry.list().map(ContainerListing.dictionary)
                return ControlResponse(id: request.id, ok: true, items: items)
            case "container.create":
                let id = try Self.identifier(request.args["id"])
                let bundle = request.args["bundle"].map { FilePath($0) }
                try Credentials.withAccessChecks {
                    try volume.registry.create(id, caller: caller, bundleSource: bundle)
                }
                announce(id)
                return ControlResponse(id: request.id, ok: true, result: ["path": mountPoint.appending("containers/\(id)").string])
            case "container.remove":
                let id = try Self.identifier(request.args["id"])
                guard let record = volume.registry.record(id) else { throw FileManagerError.noSuchItem("containers/\(id)") }
                guard caller.isRoot || caller.uid == record.ownerUID else { throw FileManagerError.permissionDenied("containers/\(id)") }
                try volume.registry.remove(id)
                announce(id)
                return ControlResponse(id: request.id, ok: true)
            default:
                return ControlResponse(id: request.id, ok: false, errno: EINVAL, error: "unknown operation \(request.op)")
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

    private func announce(_ id: BundleIdentifier) {
        volume.announceEntryChange(parent: volume.containersInode, name: FilePath.Component(id.rawValue)!)
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
