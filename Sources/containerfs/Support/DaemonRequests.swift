import ArgumentParser
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
    /// Removes snapshots at their expiry time while mounted (docs/DESIGN.md 56).
    var expiry: SnapshotExpiry? = nil

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
                announce(.appeared(FilePath("/containers/\(id)")), by: caller)
                return ControlResponse(id: request.id, ok: true, result: ["path": mountPoint.appending("containers/\(id)").string],
                                       warnings: warnings.isEmpty ? nil : warnings)
            case "container.remove":
                let id = try Self.identifier(request.args["id"])
                let (permanently, force) = (request.args["permanently"] == "1", request.args["force"] == "1")
                let from = FilePath("/containers/\(id)")
                let trashed = try withTrash(caller) { can throws(FileManagerError) -> FilePath? in
                    guard permanently else { return try volume.registry.remove(id, permanently: false, force: force, caller: caller, trash: can) }
                    var result: FilePath?
                    do {
                        try changingContainerEntry(id) { result = try volume.registry.remove(id, permanently: true, force: force, caller: caller, trash: can) }
                    } catch let error as FileManagerError { throw error } catch { throw .system(.ioError, from.string) }
                    return result
                }
                if let to = trashed.flatMap(presented) {
                    announce(.moved(from: from, to: to), by: caller)
                } else {
                    announce(.deleted(from), by: caller)
                }
                return ControlResponse(id: request.id, ok: true, result: trashed.map { ["path": $0.string] })
            case "trash.put":
                let path = try self.path(request.args["path"])
                let item = try withTrash(caller) { can throws(FileManagerError) in try can.trash(Self.bytes(path)) }
                // A container's root moved in the store: presenters hear of it here (the mount's
                // own moves announce themselves).
                if path.components.count == 2, let to = presented(item.path) {
                    announce(.moved(from: FilePath("/").pushing(path), to: to), by: caller)
                }
                return ControlResponse(id: request.id, ok: true, result: ["path": item.path.string, "name": Self.text(item.name)])
            case "trash.list":
                let entries = try withTrash(caller) { can throws(FileManagerError) in try can.list() }
                return ControlResponse(id: request.id, ok: true, items: entries.map { TrashListing.dictionary($0, under: mountPoint) })
            case "trash.restore":
                guard let name = request.args["name"].flatMap({ TrashInfo.percentDecoded(Array($0.utf8)[...]) }), !name.isEmpty else {
                    throw FileManagerError.invalidArgument("name: missing or not percent-encoded")
                }
                let destination = try request.args["to"].map { raw throws(FileManagerError) in Self.bytes(try path(raw)) }
                let restored = try withTrash(caller) { can throws(FileManagerError) in try can.restore(name, to: destination) }
                if let to = presented(restored), to.components.count == 2 { announce(.appeared(to), by: caller) }
                return ControlResponse(id: request.id, ok: true, result: ["path": restored.string])
            case "trash.empty":
                var names: [[UInt8]]?
                if let raw = request.args["names"] {
                    names = try raw.split(separator: "/").map { part throws(FileManagerError) in
                        guard let name = TrashInfo.percentDecoded(Array(part.utf8)[...]) else { throw .invalidArgument("names: \(part): not percent-encoded") }
                        return name
                    }
                }
                var olderThan: Int64?
                if let raw = request.args["older-than"] {
                    guard let seconds = Int64(raw), seconds >= 0 else { throw FileManagerError.invalidArgument("older-than: \(raw): seconds, 0 or more") }
                    olderThan = seconds
                }
                let done = try withTrash(caller) { can throws(FileManagerError) in try can.empty(names, olderThan: olderThan) }
                return ControlResponse(id: request.id, ok: true, result: ["items": "\(done.removed.count)", "bytes": "\(done.bytes)"],
                                       warnings: done.failures.isEmpty ? nil : done.failures.map(\.description))
            case "snapshot.publish":
                let source = try path(request.args["path"])
                var expires: Int64?
                if let raw = request.args["expires"] {
                    guard let seconds = Int64(raw), seconds >= 0 else { throw FileManagerError.invalidArgument("expires: \(raw): seconds, 0 or more") }
                    expires = seconds
                }
                // Under a coordinated read of the whole source (docs/DESIGN.md 57): its presenters
                // save first, and its writers wait only while the publish runs.
                let pushes = ProgressPushes(request, connection, path: source.string)
                let done = try coordination.coordinatingSubtreeRead(source, caller: caller) {
                    try Snapshots(store: volume.store, hooks: changeHooks(caller))
                        .publish(source.string, name: request.args["name"], expiresAfter: expires, caller: caller, top: mountPoint,
                                 progress: pushes.callAsFunction)
                }
                if expires != nil { expiry?.rearm() }
                let published = mountPoint.appending("snapshots").appending(done.record.name)
                return ControlResponse(id: request.id, ok: true, result: ["path": published.string, "name": done.record.name],
                                       warnings: done.warnings.isEmpty ? nil : done.warnings)
            case "snapshot.list":
                let snapshots = Snapshots(store: volume.store, hooks: changeHooks(caller))
                let records = snapshots.list()
                return ControlResponse(id: request.id, ok: true, items: records.map {
                    SnapshotListing.dictionary($0, under: mountPoint, damaged: snapshots.isDamaged($0.name))
                })
            case "snapshot.import":
                // The archive is opened as the caller: nobody imports what they cannot read.
                guard let file = request.args["file"], file.hasPrefix("/") else {
                    throw FileManagerError.invalidArgument("file: an absolute path is needed")
                }
                let input: CInt
                do {
                    input = try Credentials.withAccessChecks { () throws(Errno) -> CInt in
                        try Credentials.asCaller(caller) { () throws(Errno) -> CInt in
                            // O_NONBLOCK: a FIFO must not hold a daemon thread until someone writes.
                            try FilePath(file).withName { p throws(Errno) in try Syscall.open(p, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) }
                        }
                    }
                } catch {
                    throw FileManagerError(error, path: file)
                }
                defer { Syscall.close(input) }
                guard let st = try? Syscall.fstat(input), st.st_mode & S_IFMT == S_IFREG else {
                    throw FileManagerError.invalidArgument("\(request.args["label"] ?? file): not a regular file (the daemon reads archives from files; the CLI copies standard input into one)")
                }
                let label = request.args["label"] ?? file
                let pushes = ProgressPushes(request, connection, path: label)
                let record = try Snapshots(store: volume.store, hooks: changeHooks(caller))
                    .importArchive(input, label: label, name: request.args["name"], caller: caller, top: mountPoint) { done in
                        pushes(done, Int64(st.st_size))
                    }
                let imported = mountPoint.appending("snapshots").appending(record.name)
                return ControlResponse(id: request.id, ok: true, result: ["path": imported.string, "name": record.name])
            case "snapshot.verify":
                let verdicts = try Snapshots(store: volume.store).verify(request.args["name"])
                return ControlResponse(id: request.id, ok: true, items: verdicts.map(SnapshotListing.verification))
            case "snapshot.remove":
                guard let name = request.args["name"] else { throw FileManagerError.invalidArgument("name: missing") }
                try Snapshots(store: volume.store, hooks: changeHooks(caller)).remove(name, caller: caller)
                expiry?.rearm()
                return ControlResponse(id: request.id, ok: true)
            case "inbox.deliver":
                let id = try Self.identifier(request.args["id"])
                guard let file = request.args["file"], file.hasPrefix("/") else {
                    throw FileManagerError.invalidArgument("file: an absolute path is needed")
                }
                let pushes = ProgressPushes(request, connection, path: file)
                let name = try volume.registry.deliver(FilePath(file), to: id, caller: caller, hooks: changeHooks(caller),
                                                       progress: pushes.callAsFunction)
                let path = mountPoint.appending("containers/\(id)/Documents/Inbox").appending(name)
                return ControlResponse(id: request.id, ok: true, result: ["path": path.string])
            case "purge":
                let ids = try request.args["id"].map { raw throws(FileManagerError) in [try Self.identifier(raw)] }
                var areas: PurgeAreas = []
                if request.args["tmp"] == "1" { areas.insert(.tmp) }
                if request.args["caches"] == "1" { areas.insert(.caches) }
                let report = try volume.registry.purge(ids, areas: areas.isEmpty ? .all : areas, caller: caller,
                                                       hooks: changeHooks(caller))
                return ControlResponse(id: request.id, ok: true,
                                       result: ["items": "\(report.items)", "bytes": "\(report.bytes)", "skipped": "\(report.skipped)"])
            case "container.itemReplacement":
                let id = try Self.identifier(request.args["id"])
                let path = try volume.registry.makeItemReplacementDirectory(in: id, caller: caller, hooks: changeHooks(caller))
                return ControlResponse(id: request.id, ok: true, result: ["path": mountPoint.pushing(path).string])
            case "container.use":
                let id = try Self.identifier(request.args["id"])
                try volume.registry.authorize(caller, id, to: "run programs in it")
                var pid = caller.pid
                if let raw = request.args["pid"] {
                    // Only the client itself or a child of it: nobody marks another's process.
                    guard let child = pid_t(raw), ContainerRegistry.parent(of: child) == caller.pid else {
                        throw FileManagerError.invalidArgument("pid \(raw): not a child of the calling process")
                    }
                    pid = child
                }
                try volume.registry.recordRun(of: id, pid: pid)
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

    /// A bundle identifier given on the command line: an invalid one is a usage error (2).
    static func validateIdentifier(_ raw: String) throws {
        do { _ = try identifier(raw) } catch { throw ValidationError(error.path) }
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

    /// How a core operation's own changes of the store are published (DESIGN.md 39): each a
    /// coordinated write by the caller's process, dropped from the kernel's caches,
    /// announced to presenters; open items are those the kernel holds open handles on.
    func changeHooks(_ caller: Caller) -> StoreChangeHooks {
        let volume = volume, coordination = coordination
        return StoreChangeHooks(
            entry: { change, body in
                try coordination.coordinatingWrite(change.path, options: change.deleting ? .forDeleting : [], caller: caller) {
                    defer { volume.announceEntryChange(parent: change.parent, name: change.name) }
                    try body()
                }
            },
            announce: { path, appeared in
                let absolute = FilePath("/").pushing(path)
                announce(appeared ? .appeared(absolute) : .deleted(absolute), by: caller)
            },
            isOpen: { inode in volume.items.item(inode)?.isOpen ?? false })
    }

    /// Runs `body` with the caller's trash: its moves go through this mount as the caller
    /// (docs/DESIGN.md 48), a container's root in the store, published by `changeHooks`.
    private func withTrash<R>(_ caller: Caller, _ body: (TrashCan) throws(FileManagerError) -> R) throws(FileManagerError) -> R {
        let root = open(mountPoint.string, O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { throw .system(Errno(rawValue: errno), mountPoint.string) }
        defer { close(root) }
        return try body(TrashCan(items: TrashPlace(mountRoot: root, mountPoint: mountPoint), store: volume.store,
                                 hooks: changeHooks(caller), uid: caller.uid, caller: caller))
    }

    /// Tells presenters of a change the daemon made for `caller` (their own hear nothing).
    private func announce(_ event: PresenterEvent, by caller: Caller) {
        coordination.center.announce(event, by: coordination.purposes.purpose(ofThread: caller.pid))
    }

    /// `path`, as a user sees it under this mount, as presenters name it (`/containers/…`).
    private func presented(_ path: FilePath) -> FilePath? {
        var p = path
        guard p.removePrefix(mountPoint) else { return nil }
        p.root = "/"
        return p
    }

    static func bytes(_ path: FilePath) -> [UInt8] { Array(path.string.utf8) }
    static func text(_ bytes: [UInt8]) -> String { String(decoding: TrashInfo.percentEncoded(bytes), as: UTF8.self) }

    /// Runs a change of `containers/ID` made by the daemon itself and tells the kernel of
    /// it, also when it failed half-way (what the kernel cached of the name or the listing
    /// of `containers/` may be wrong either way).
    private func changingContainerEntry(_ id: BundleIdentifier, _ body: () throws -> Void) throws {
        defer { volume.announceEntryChange(parent: volume.containersInode, name: FilePath.Component(id.rawValue)!) }
        try body()
    }
}

/// A trash item as `trash.list` answers it: `name` shown (bytes that are not UTF-8 as
/// `\xHH`), `encoded` (percent-encoded, what `trash.restore` and `trash.empty` take).
enum TrashListing {
    static func dictionary(_ e: TrashEntry, under top: FilePath) -> [String: String] {
        var d = ["name": Bytes.display(e.name), "encoded": DaemonRequests.text(e.name), "size": "\(e.size)",
                 "type": e.isDirectory ? "directory" : "file"]
        if let info = e.info {
            d["originalPath"] = "\(top.string)/\(Bytes.display(info.path))"
            d["deletionDate"] = TrashInfo.formatDate(info.deletionDate)
        }
        if let problem = e.problem { d["problem"] = problem }
        return d
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

/// `progress` pushes for a request that asked for them (`progress` 1): the last, and at most
/// one per 1% before it, so that a slow terminal never slows the work.
final class ProgressPushes {
    private let connection: ControlConnection
    private let path: String
    private let wanted: Bool
    private var last = Int64(-1)

    init(_ request: ControlRequest, _ connection: ControlConnection, path: String) {
        self.connection = connection
        self.path = path
        wanted = request.args["progress"] == "1"
    }

    func callAsFunction(_ done: Int64, _ total: Int64) {
        guard wanted, done == total || done - last >= max(total / 100, 1) else { return }
        last = done
        connection.send(ControlPush(event: "progress", path: path, done: done, total: total))
    }
}
