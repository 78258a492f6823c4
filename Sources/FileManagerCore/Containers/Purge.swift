import Glibc
import SystemPackage

/// The purgeable directories of a container (reference containers-and-wrappers §1.6).
public struct PurgeAreas: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let tmp = PurgeAreas(rawValue: 1)
    public static let caches = PurgeAreas(rawValue: 2)
    public static let all: PurgeAreas = [.tmp, .caches]

    var relativePaths: [String] {
        (contains(.tmp) ? ["tmp"] : []) + (contains(.caches) ? ["Library/Caches"] : [])
    }
}

/// What a purge freed.
public struct PurgeReport: Sendable, Equatable {
    /// Items removed, each file, link and directory counted.
    public var items = 0
    /// The sizes of the files removed.
    public var bytes: Int64 = 0
    /// Items left because they are open through the mount (or a directory holds one).
    public var skipped = 0
    public init() {}
}

extension ContainerRegistry {
    /// Empties `tmp/` and/or `Library/Caches/` of the containers `ids` (nil: every container
    /// `caller` owns, every container for root); the directories themselves stay. Items
    /// open through the mount (`hooks.isOpen`) stay, and so does every directory above one:
    /// an open file is the sign that its app runs (§1.6). Each removed entry leaves in one
    /// step, renamed into `.staging/` (`hooks.entry`) and deleted there. `olderThan`:
    /// only entries not modified for that many seconds (the purge at mount, SPEC §1).
    public func purge(_ ids: [BundleIdentifier]?, areas: PurgeAreas, caller: Caller, olderThan age: Double? = nil,
                      hooks: StoreChangeHooks = .direct) throws(FileManagerError) -> PurgeReport {
        var targets: [BundleIdentifier] = []
        if let ids {
            for id in ids { try authorize(caller, id, to: "purge it") }
            targets = ids
        } else {
            targets = list().filter { caller.isRoot || $0.ownerUID == caller.uid }.compactMap { BundleIdentifier($0.id) }
        }
        let cutoff = age.map { Double(time(nil)) - $0 }
        var report = PurgeReport()
        for id in targets {
            for relative in areas.relativePaths {
                // A container being removed meanwhile, or a directory missing from the
                // store (re-created at the next mount), has nothing to purge.
                guard let dir = try? openContainerDirectory(id, relative) else { continue }
                defer { Syscall.close(dir) }
                purgeContents(of: dir, at: FilePath("containers/\(id)/\(relative)"), cutoff: cutoff, hooks: hooks, &report)
            }
        }
        return report
    }

    private func purgeContents(of dir: CInt, at path: FilePath, cutoff: Double?, hooks: StoreChangeHooks,
                               _ report: inout PurgeReport) {
        guard let stream = try? DirectoryStream.open(dir), let names = try? stream.allNames() else { return }
        for name in names {
            guard let st = try? name.withName({ p throws(Errno) in try Syscall.fstatat(dir, p) }) else { continue }
            if let cutoff, Double(st.st_mtim.tv_sec) >= cutoff { continue }
            let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            let (open, tally) = Self.survey(dir, name, st, hooks)
            if !open {
                if remove(dir, name, at: path.appending(name), hooks: hooks) {
                    report.items += tally.items
                    report.bytes += tally.bytes
                }
            } else if isDirectory, let sub = try? name.withName({ p throws(Errno) in
                try Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            }) {
                // Only what is open stays: the rest of the directory goes, entry by entry.
                purgeContents(of: sub, at: path.appending(name), cutoff: nil, hooks: hooks, &report)
                Syscall.close(sub)
                report.skipped += 1
            } else {
                report.skipped += 1
            }
        }
    }

    /// Whether the entry holds an item open through the mount, and what removing it frees.
    static func survey(_ dir: CInt, _ name: FilePath.Component, _ st: stat,
                       _ hooks: StoreChangeHooks) -> (open: Bool, tally: (items: Int, bytes: Int64)) {
        var tally = (items: 1, bytes: (st.st_mode & S_IFMT) == S_IFREG ? Int64(st.st_size) : 0)
        var open = hooks.isOpen(UInt64(st.st_ino))
        guard (st.st_mode & S_IFMT) == S_IFDIR,
              let fd = try? name.withName({ p throws(Errno) in try Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) })
        else { return (open, tally) }
        defer { Syscall.close(fd) }
        guard let stream = try? DirectoryStream.open(fd), let names = try? stream.allNames() else { return (open, tally) }
        for child in names {
            guard let cst = try? child.withName({ p throws(Errno) in try Syscall.fstatat(fd, p) }) else { continue }
            let (childOpen, childTally) = survey(fd, child, cst, hooks)
            open = open || childOpen
            tally.items += childTally.items
            tally.bytes += childTally.bytes
        }
        return (open, tally)
    }

    /// Renames the entry into `.staging/` (one visible change) and deletes it there.
    private func remove(_ dir: CInt, _ name: FilePath.Component, at path: FilePath, hooks: StoreChangeHooks) -> Bool {
        let doomed = stagingName("purged")
        do {
            try hooks.changing(dir, name, at: path, deleting: true) { () throws(Errno) in
                try name.withName { s throws(Errno) in
                    try doomed.withName { d throws(Errno) in try Syscall.renameat2(dir, s, store.stagingFD, d, RENAME_NOREPLACE) }
                }
            }
        } catch {
            return false
        }
        hooks.announce(path, false)
        _ = try? doomed.withName { p throws(Errno) in try TreeRemoval.remove(store.stagingFD, p) }
        return true
    }
}
