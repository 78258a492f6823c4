import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs snapshot import|diff|verify` (docs/DESIGN.md 54, 55).
extension SnapshotCommand {
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish a tar or pax archive as a snapshot.",
            discussion: """
                The name is --name, else the archive's one top directory (as `snapshot export` writes it). \
                Refused whole, with nothing left behind: absolute paths, '..', symbolic links leading outside the \
                snapshot, paths through links, devices, FIFOs, sockets, duplicate members, hard links to unknown \
                members, damaged or truncated archives. Only root keeps the archive's owners.
                """)
        @OptionGroup var store: StoreOption
        @Argument(help: "The archive, or - for standard input.") var file: String
        @Option(help: "The snapshot's name (one path component, not starting with '.').") var name: String?

        func validate() throws {
            if let name {
                do { try Snapshots.validate(name: name) } catch { throw ValidationError("--name \(error.path)") }
            }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let fromStandardInput = file == "-"
                let label = fromStandardInput ? "standard input" : Paths.absolute(file).string
                let progress = SnapshotProgress(verb: "importing", enabled: isatty(2) == 1)
                defer { progress.end() }
                switch try StoreTarget.of(store.path) {
                case .daemon(let client, let top):
                    // The daemon opens the archive as the caller; standard input is first
                    // copied into an unnamed file it opens through /proc (nothing to clean up
                    // if this process is killed).
                    var spool: CInt = -1
                    defer { if spool >= 0 { close(spool) } }
                    var path = label
                    if fromStandardInput {
                        spool = try Self.spool()
                        path = "/proc/\(getpid())/fd/\(spool)"
                    }
                    var args = ["file": path, "label": fromStandardInput ? "-" : label, "progress": progress.enabled ? "1" : "0"]
                    if let name { args["name"] = name }
                    let r = try client.call("snapshot.import", args) { push in
                        if push.event == "progress", let done = push.done { progress.show(done, push.total) }
                    }.checked()
                    progress.end()
                    FileHandleOutput.standardOutput("\(r.result?["path"] ?? top.appending("snapshots").string)\n")
                case .direct(let opened, let lock):
                    var fd: CInt = 0
                    if !fromStandardInput {
                        fd = open(label, O_RDONLY | O_CLOEXEC | O_NOCTTY)
                        // Worded as the daemon words it: one message either way.
                        guard fd >= 0 else { throw FileManagerError(Errno(rawValue: errno), path: label) }
                    }
                    defer { if fd > 0 { close(fd) } }
                    var st = stat()
                    let total: Int64? = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG ? Int64(st.st_size) : nil
                    let record = try Snapshots(store: opened).importArchive(fd, label: fromStandardInput ? "-" : label, name: name,
                                                                            caller: .current, top: opened.path) { done in
                        progress.show(done, total)
                    }
                    withExtendedLifetime(lock) {}
                    progress.end()
                    FileHandleOutput.standardOutput("\(opened.path.appending("snapshots").appending(record.name))\n")
                }
            }
        }

        /// Standard input, copied into an unnamed temporary file (O_TMPFILE).
        static func spool() throws -> CInt {
            let dir = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
            let fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CommandFailure("\(dir): cannot hold a copy of standard input: \(String(cString: strerror(errno)))") }
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
            defer { buffer.deallocate() }
            while true {
                let n = read(0, buffer, 1 << 20)
                if n == 0 { break }
                if n < 0 {
                    if errno == EINTR { continue }
                    let message = String(cString: strerror(errno))
                    close(fd)
                    throw CommandFailure("standard input: \(message)")
                }
                var done = 0
                while done < n {
                    let w = write(fd, buffer + done, n - done)
                    if w < 0 {
                        if errno == EINTR { continue }
                        let message = String(cString: strerror(errno))
                        close(fd)
                        throw CommandFailure("\(dir): cannot hold a copy of standard input: \(message)")
                    }
                    done += w
                }
            }
            return fd
        }
    }

    struct Diff: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare a snapshot (or an item in it) with its live source.",
            discussion: """
                Text: one line per difference, tab-separated: added, removed or changed; the path below the compared \
                item (. for itself); for changed, what changed: type, size, mode, owner, mtime, xattrs, content. \
                Items publish leaves out are not compared. Exit status 0 whether or not there are differences.
                """)
        @OptionGroup var store: StoreOption
        @Argument(help: "The snapshot's name, as `snapshot list` shows it.") var name: String
        @Argument(help: "An item inside the snapshot (relative to it).") var path: String?
        @Flag(help: "One JSON array.") var json = false

        func validate() throws {
            do { try Snapshots.validate(name: name) } catch { throw ValidationError(error.path) }
            if let path {
                let parts = path.split(separator: "/")
                guard !path.hasPrefix("/"), !parts.contains("..") else {
                    throw ValidationError("\(path): a path inside the snapshot (relative, without '..')")
                }
            }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let target = try StoreTarget.of(store.path, exclusive: false)
                let top: FilePath
                var direct: Store?  // read in the store, not through a mount
                switch target {
                case .daemon(_, let mounted): top = mounted
                case .direct(let opened, _): (top, direct) = (opened.path, opened)
                }
                let records = try SnapshotCommand.list(target)
                guard let record = records.first(where: { $0["name"] == name }), let source = record["source"] else {
                    throw CommandFailure("\(top.appending("snapshots").appending(name)): no such snapshot (`containerfs snapshot list` shows the names)")
                }
                guard source.hasPrefix("containers/") else {
                    throw CommandFailure("\(name): imported (\(source)), it has no live source to compare with")
                }
                let inner = (path ?? "").split(separator: "/").filter { $0 != "." }.joined(separator: "/")
                var frozen = top.appending("snapshots").appending(name)
                var live = top.appending(source)
                if !inner.isEmpty {
                    frozen = frozen.appending(inner)
                    live = live.appending(inner)
                }
                let (frozenDir, frozenName) = try Self.parent(frozen)
                defer { close(frozenDir) }
                let (liveDir, liveName) = try Self.parent(live)
                defer { close(liveDir) }
                let differences = try Snapshots.diff(snapshot: frozenDir, frozenName, live: liveDir, liveName,
                                                     source: inner.isEmpty ? source : source + "/" + inner,
                                                     display: frozen.string, liveDisplay: live.string,
                                                     store: direct, snapshot: name)
                withExtendedLifetime(target) {}
                if json {
                    let rows: [[String: Any]] = differences.map { ["path": $0.path, "change": $0.change.rawValue, "what": $0.what] }
                    let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys])
                    FileHandleOutput.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
                    return
                }
                for d in differences {
                    var line = d.change.rawValue + "\t" + d.path
                    if !d.what.isEmpty { line += "\t" + d.what.joined(separator: ",") }
                    FileHandleOutput.standardOutput(line + "\n")
                }
            }
        }

        /// An `O_PATH` descriptor of `path`'s directory, and its last name.
        static func parent(_ path: FilePath) throws -> (CInt, [UInt8]) {
            var dir = path
            dir.removeLastComponent()
            let fd = open(dir.string, O_PATH | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw CommandFailure("\(dir): \(String(cString: strerror(errno)))") }
            return (fd, Array((path.lastComponent?.string ?? "").utf8))
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Name the snapshots changed in the store since they were published.",
            discussion: """
                Compares each snapshot (or NAME) with what its files were when it was published or imported: size, \
                mode, owner, times, inode numbers. Text: NAME: intact, damaged or unverifiable (no record: published \
                by an older version), then one line per changed path. Exit status 1 when one is damaged.
                """)
        @OptionGroup var store: StoreOption
        @Argument(help: "A snapshot's name (default: all).") var name: String?
        @Flag(help: "One JSON array.") var json = false

        func validate() throws {
            if let name {
                do { try Snapshots.validate(name: name) } catch { throw ValidationError(error.path) }
            }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                var items: [[String: String]]
                switch try StoreTarget.of(store.path, exclusive: false) {
                case .daemon(let client, _):
                    var args: [String: String] = [:]
                    if let name { args["name"] = name }
                    items = try client.call("snapshot.verify", args).checked().items ?? []
                case .direct(let opened, let lock):
                    items = try Snapshots(store: opened).verify(name).map(SnapshotListing.verification)
                    withExtendedLifetime(lock) {}
                }
                if json {
                    let rows: [[String: Any]] = items.map { item in
                        let changes = (item["changes"] ?? "").split(separator: "\n").map(String.init)
                        return ["name": item["name"] ?? "", "state": item["state"] ?? "", "damaged": item["state"] == "damaged",
                                "changes": changes]
                    }
                    let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys])
                    FileHandleOutput.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
                } else {
                    for item in items {
                        FileHandleOutput.standardOutput("\(item["name"] ?? ""): \(item["state"] ?? "")\n")
                        for change in (item["changes"] ?? "").split(separator: "\n") {
                            FileHandleOutput.standardOutput("  \(change)\n")
                        }
                    }
                }
                if items.contains(where: { $0["state"] == "damaged" }) { throw ExitCode.failure }
            }
        }
    }
}

extension SnapshotListing {
    /// A verdict as `snapshot.verify` answers it (changes one a line).
    static func verification(_ v: Snapshots.Verification) -> [String: String] {
        ["name": v.name, "state": v.state.rawValue, "changes": v.changes.joined(separator: "\n")]
    }
}

/// One line on stderr, rewritten in place, for long imports and exports; nothing when
/// stderr is not a terminal. At most ten updates a second: a slow terminal must not slow
/// the work.
final class SnapshotProgress {
    let verb: String
    let enabled: Bool
    /// Counts files rather than bytes.
    let files: Bool
    private var shown = false
    private var last: Double = 0

    init(verb: String, enabled: Bool, files: Bool = false) {
        self.verb = verb
        self.enabled = enabled
        self.files = files
    }

    /// `done` bytes or files (of `total`, when known).
    func show(_ done: Int64, _ total: Int64?) {
        guard enabled else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let t = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        guard t - last >= 0.1 || (total != nil && done == total) else { return }
        last = t
        var line: String
        if files {
            line = "\(verb): \(done) files"
            if let total, total > 0 { line += " of \(total) (\(Int(done * 100 / total))%)" }
        } else {
            line = "\(verb): " + String(format: "%.1f MiB", Double(done) / 1_048_576)
            if let total, total > 0 { line += " of " + String(format: "%.1f MiB (%d%%)", Double(total) / 1_048_576, Int(done * 100 / total)) }
        }
        FileHandleOutput.standardError("\r\u{1B}[K" + line)
        shown = true
    }

    func end() {
        guard shown else { return }
        FileHandleOutput.standardError("\r\u{1B}[K")
        shown = false
    }
}
