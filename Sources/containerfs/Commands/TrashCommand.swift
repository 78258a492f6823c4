import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs trash PATH...`, `trash list`, `trash restore`, `trash empty`: the
/// FreeDesktop.org trash of the volume (docs/SEMANTICS.md, trash). Paths under a live
/// mount go to its daemon; a store's own paths (no mount) are worked on directly, under
/// the store lock. Commands that take no path use `--store`, else `CONTAINERFS_STORE`,
/// else the default store.
struct TrashCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash",
        abstract: "Move items to the trash, list, restore and empty it.",
        discussion: "`containerfs trash PATH...` prints where each item went (its name may change to stay unique). Interoperates with trash-put, trash-list, trash-restore, trash-empty and gio trash.",
        subcommands: [Put.self, List.self, Restore.self, Empty.self],
        defaultSubcommand: Put.self
    )

    /// How a trash command acts on a `StoreTarget`: the caller's trash there.
    typealias Target = StoreTarget

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "put",
            abstract: "Move items to the trash; print where each went.",
            discussion: "The bundle and snapshots/ cannot be trashed (read-only), nor the standard directories; `container remove` trashes a whole container.")
        @Argument(help: "Items under a ContainerFS mount (or in a store's containers/ when none is live).") var paths: [String]

        func validate() throws {
            guard !paths.isEmpty else { throw ValidationError("missing the items to move to the trash") }
        }

        func run() throws {
            var failed = false
            for raw in paths {
                do {
                    try failing {
                        let (target, relative) = try Target.of(path: raw)
                        switch target {
                        case .daemon(let client, _):
                            let r = try client.call("trash.put", ["path": relative.string]).checked()
                            FileHandleOutput.standardOutput("\(r.result?["path"] ?? "")\n")
                        case .direct(let store, let lock):
                            let item = try Target.trashCan(store).trash(Array(relative.string.utf8))
                            withExtendedLifetime(lock) {}
                            FileHandleOutput.standardOutput("\(item.path)\n")
                        }
                    }
                } catch let code as ExitCode where code.rawValue == 1 {
                    failed = true  // told already; the other items still go
                }
            }
            if failed { throw ExitCode(1) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List your trash: name, deletion date, size, original path.",
            discussion: "Text: one item a line, tab-separated NAME, DELETION-DATE, SIZE (bytes), ORIGINAL-PATH. Unusable entries (an info file without its item, or the reverse, or a forged one) are listed with the reason.")
        @OptionGroup var store: StoreOption
        @Flag(help: "One JSON array.") var json = false

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let items = try Target.of(store.path, exclusive: false).trashList()
                if json {
                    try JSONListing.print(items, numbers: ["size"])
                    return
                }
                for row in items {
                    var line = "\(row["name"] ?? "")\t\(row["deletionDate"] ?? "-")\t\(row["size"] ?? "0")\t\(row["originalPath"] ?? "-")"
                    if let problem = row["problem"] { line += "\t(\(problem))" }
                    FileHandleOutput.standardOutput(line + "\n")
                }
            }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put trashed items back where they were (or at --to); never overwrites.",
            discussion: "Missing directories on the way back are made again inside the original container; a trashed container comes back as a container.")
        @OptionGroup var store: StoreOption
        @Argument(help: "Names in the trash, as `trash list` shows them.") var names: [String]
        @Option(help: "Where to put the item instead (an existing directory receives it under its name).") var to: String?

        func validate() throws {
            guard !names.isEmpty else { throw ValidationError("missing the names of the items to restore") }
            if to != nil && names.count > 1 { throw ValidationError("--to goes with one item") }
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let target = try Target.of(store.path)
                for shown in names {
                    let encoded = try target.encodedName(shown)
                    let destination = try to.map { try target.relative($0) }
                    switch target {
                    case .daemon(let client, _):
                        var args = ["name": encoded]
                        if let destination { args["to"] = destination.string }
                        let r = try client.call("trash.restore", args).checked()
                        FileHandleOutput.standardOutput("\(r.result?["path"] ?? "")\n")
                    case .direct(let store, _):
                        let can = Target.trashCan(store)
                        let name = TrashInfo.percentDecoded(Array(encoded.utf8)[...]) ?? Array(shown.utf8)
                        let path = try can.restore(name, to: destination.map { Array($0.string.utf8) })
                        FileHandleOutput.standardOutput("\(path)\n")
                    }
                }
            }
        }
    }

    struct Empty: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete trashed items for good (all, the NAMEs given, or those older than --older-than).")
        @OptionGroup var store: StoreOption
        @Argument(help: "Names in the trash (default: every item).") var names: [String] = []
        @Option(name: .customLong("older-than"), help: "Only items trashed at least this long ago: N, Ns, Nm, Nh or Nd.")
        var olderThan: String?

        func validate() throws {
            if let olderThan, Self.seconds(olderThan) == nil {
                throw ValidationError("--older-than \(olderThan): a duration such as 3600, 90m, 12h or 30d")
            }
        }

        static func seconds(_ text: String) -> Int64? {
            let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
            var digits = Substring(text), unit: Int64 = 1
            if let last = text.last, let u = units[last] { digits = digits.dropLast(); unit = u }
            guard let n = Int64(digits), n >= 0, n <= Int64.max / unit else { return nil }
            return n * unit
        }

        func run() throws {
            try failing {
                store.sayWhichStoreIfAmbiguous()
                let target = try Target.of(store.path)
                let encoded = try names.map { try target.encodedName($0) }
                let age = olderThan.flatMap(Self.seconds)
                var removed = 0, bytes: Int64 = 0, problems: [String] = []
                switch target {
                case .daemon(let client, _):
                    var args: [String: String] = [:]
                    if !encoded.isEmpty { args["names"] = encoded.joined(separator: "/") }
                    if let age { args["older-than"] = "\(age)" }
                    let r = try client.call("trash.empty", args).checked()
                    removed = Int(r.result?["items"] ?? "") ?? 0
                    bytes = Int64(r.result?["bytes"] ?? "") ?? 0
                    problems = r.warnings ?? []
                case .direct(let store, _):
                    let can = Target.trashCan(store)
                    let names = encoded.isEmpty ? nil : encoded.map { TrashInfo.percentDecoded(Array($0.utf8)[...]) ?? Array($0.utf8) }
                    let done = try can.empty(names, olderThan: age)
                    (removed, bytes, problems) = (done.removed.count, done.bytes, done.failures.map(\.description))
                }
                FileHandleOutput.standardOutput("removed \(removed) item\(removed == 1 ? "" : "s"), \(bytes) bytes\n")
                for problem in problems { FileHandleOutput.standardError("containerfs: \(problem)\n") }
                if !problems.isEmpty { throw ExitCode(1) }
            }
        }
    }
}

extension StoreTarget {
    /// The caller's trash in the store (no live mount).
    static func trashCan(_ store: Store) -> TrashCan {
        TrashCan(items: TrashPlace(store: store), store: store, uid: getuid())
    }

    /// Every item of the caller's trash.
    func trashList() throws -> [[String: String]] {
        switch self {
        case .daemon(let client, _): return try client.call("trash.list").checked().items ?? []
        case .direct(let store, _): return try Self.trashCan(store).list().map { TrashListing.dictionary($0, under: store.path) }
        }
    }

    /// The encoded name of the item a user named (as `list` shows it, or encoded).
    func encodedName(_ shown: String) throws -> String {
        let items = try trashList()
        if let item = items.first(where: { $0["name"] == shown }) ?? items.first(where: { $0["encoded"] == shown }) {
            return item["encoded"] ?? shown
        }
        throw CommandFailure("\(shown): no such item in the trash (`containerfs trash list` shows the names)")
    }

    /// `relative` (under the mount root), as this target's operations take it.
    func relative(_ raw: String) throws -> FilePath {
        switch self {
        case .daemon(_, let top):
            let mounted = try MountPath(raw)
            guard mounted.mountPoint == top else { throw CommandFailure("\(raw): not under \(top)") }
            return mounted.relative
        case .direct(let store, _):
            let top = store.path
            var p = Paths.absolute(raw)
            guard p.removePrefix(top) else { throw CommandFailure("\(raw): not in the store \(top)") }
            return p
        }
    }
}
