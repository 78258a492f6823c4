import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs snapshot publish|list|remove`: frozen, read-only copies of a container or of
/// an item inside one under `MNT/snapshots/NAME` (docs/SEMANTICS.md §4, docs/DESIGN.md 52).
/// Through the daemon while the store is mounted, on the store (under its lock) otherwise.
struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Publish, list and remove read-only snapshots of containers.",
        discussion: "Snapshots leave out the bundle, tmp/, Library/Caches/ and items marked with `containerfs exclude`. Everything under snapshots/ is read-only, for root too.",
        subcommands: [Publish.self, List.self, Remove.self, Export.self, Import.self, Diff.self, Verify.self]
    )

    /// Where a snapshot command acts, and where its snapshots are seen.
    /// The snapshots of `target`, as `snapshot.list` answers.
    static func list(_ target: StoreTarget) throws -> [[String: String]] {
        switch target {
        case .daemon(let client, _): return try client.call("snapshot.list").checked().items ?? []
        case .direct(let store, _):
            let snapshots = Snapshots(store: store)
            return snapshots.list().map { SnapshotListing.dictionary($0, under: store.path, damaged: snapshots.isDamaged($0.name)) }
        }
    }

    struct Publish: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Freeze a container (or a directory or file inside one); print the snapshot's path.",
            discussion: "The default name is ID-YYYY-MM-DDTHH-MM-SS (UTC), with .2, .3, … when taken.")
        @Argument(help: "A container, or an item inside one, under a ContainerFS mount (or in a store's containers/).") var path: String
        @Option(help: "The snapshot's name (one path component, not starting with '.').") var name: String?
        @Option(help: "Remove the snapshot by itself after this long: N, Ns, Nm, Nh or Nd.") var expires: String?

        func validate() throws {
            if let expires, TrashCommand.Empty.seconds(expires) == nil {
                throw ValidationError("--expires \(expires): a duration such as 3600, 90m, 12h or 30d")
            }
            if let name {
                do { try Snapshots.validate(name: name) } catch { throw ValidationError("--name \(error.path)") }
            }
        }

        func run() throws {
            try failing {
                let (target, relative) = try StoreTarget.of(path: path)
                let seconds = expires.flatMap(TrashCommand.Empty.seconds)
                let progress = SnapshotProgress(verb: "publishing", enabled: isatty(2) == 1, files: true)
                defer { progress.end() }
                switch target {
                case .daemon(let client, _):
                    var args = ["path": relative.string, "progress": progress.enabled ? "1" : "0"]
                    if let name { args["name"] = name }
                    if let seconds { args["expires"] = "\(seconds)" }
                    let r = try client.call("snapshot.publish", args) { push in
                        if push.event == "progress", let done = push.done { progress.show(done, push.total) }
                    }.checked()
                    progress.end()
                    r.warnings?.forEach(ContainerCommand.Create.warn)
                    FileHandleOutput.standardOutput("\(r.result?["path"] ?? "")\n")
                case .direct(let store, let lock):
                    let done = try Snapshots(store: store).publish(relative.string, name: name, expiresAfter: seconds,
                                                                     caller: .current, top: store.path) { progress.show($0, $1) }
                    progress.end()
                    withExtendedLifetime(lock) {}
                    done.warnings.forEach(ContainerCommand.Create.warn)
                    FileHandleOutput.standardOutput("\(store.path.appending("snapshots").appending(done.record.name))\n")
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List published snapshots.",
            discussion: "Text: one a line, tab-separated NAME, SOURCE, CREATED, EXPIRES (or -), FILES, BYTES, intact or damaged (as `snapshot verify` finds). Expired snapshots are removed first.")
        @OptionGroup var store: StoreOption
        @Flag(help: "One JSON array.") var json = false

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let items = try SnapshotCommand.list(StoreTarget.of(store.path))
                if json {
                    try JSONListing.print(items, numbers: ["files", "bytes"], nulls: ["expires"], booleans: ["damaged"])
                    return
                }
                for row in items {
                    let fields = [row["name"], row["source"], row["created"], row["expires"] ?? "-", row["files"], row["bytes"],
                                  row["damaged"] == "true" ? "damaged" : "intact"]
                    FileHandleOutput.standardOutput(fields.map { $0 ?? "" }.joined(separator: "\t") + "\n")
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove published snapshots (their publisher or root).")
        @OptionGroup var store: StoreOption
        @Argument(help: "Snapshot names, as `snapshot list` shows them.") var names: [String]

        func validate() throws {
            guard !names.isEmpty else { throw ValidationError("missing the names of the snapshots to remove") }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let target = try StoreTarget.of(store.path)
                for name in names {
                    switch target {
                    case .daemon(let client, _): _ = try client.call("snapshot.remove", ["name": name]).checked()
                    case .direct(let opened, _): try Snapshots(store: opened).remove(name, caller: .current)
                    }
                }
            }
        }
    }
}

extension SnapshotCommand {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a snapshot as a POSIX pax archive (GNU tar and bsdtar read it).",
            discussion: "Members start with NAME/; the same snapshot gives the same bytes. Read with your own permissions, through the mount when it is live.")
        @OptionGroup var store: StoreOption
        @Argument(help: "The snapshot's name, as `snapshot list` shows it.") var name: String
        @Option(name: .shortAndLong, help: "The archive to write, or - for standard output.") var output: String

        func validate() throws {
            do { try Snapshots.validate(name: name) } catch { throw ValidationError(error.path) }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let top: FilePath
                var lock: StoreLock?
                var direct: Store?  // read in the store, not through a mount
                let target = try StoreTarget.of(store.path, exclusive: false)
                switch target {
                case .daemon(_, let mounted): top = mounted
                case .direct(let opened, let held): (top, lock, direct) = (opened.path, held, opened)
                }
                let snapshots = top.appending("snapshots")
                let dir = open(snapshots.string, O_PATH | O_DIRECTORY | O_CLOEXEC)
                guard dir >= 0 else { throw CommandFailure("\(snapshots): \(String(cString: strerror(errno)))") }
                defer { close(dir) }
                let shown = snapshots.appending(name).string
                guard (try? Syscall.fstatat(dir, name)).map({ $0.st_mode & S_IFMT == S_IFDIR }) == true else {
                    throw CommandFailure("\(shown): no such snapshot (`containerfs snapshot list` shows the names)")
                }
                let toStandardOutput = output == "-"
                let fd = toStandardOutput ? 1 : open(Paths.absolute(output).string, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw CommandFailure("\(Paths.absolute(output)): \(String(cString: strerror(errno)))") }
                // Progress against the bytes the snapshot was published with (on a terminal only).
                let progress = SnapshotProgress(verb: "exporting", enabled: isatty(2) == 1)
                let total = progress.enabled ? (try? SnapshotCommand.list(target))?.first { $0["name"] == name }.flatMap { Int64($0["bytes"] ?? "") } : nil
                defer { progress.end() }
                do {
                    try SnapshotArchive.export(dir, name, to: fd, display: shown, store: direct) { done in progress.show(done, total) }
                } catch {
                    if !toStandardOutput {
                        close(fd)
                        unlink(Paths.absolute(output).string)
                    }
                    throw error
                }
                if !toStandardOutput { close(fd) }
                withExtendedLifetime(lock) {}
            }
        }
    }
}

/// A snapshot as `snapshot.list` answers it.
enum SnapshotListing {
    static func dictionary(_ r: SnapshotRecord, under top: FilePath, damaged: Bool = false) -> [String: String] {
        var d = ["name": r.name, "source": r.source, "created": ContainerListing.iso8601(r.created),
                 "files": "\(r.files)", "bytes": "\(r.bytes)", "path": top.appending("snapshots").appending(r.name).string,
                 "damaged": damaged ? "true" : "false"]
        if let expires = r.expires { d["expires"] = ContainerListing.iso8601(expires) }
        return d
    }
}
