import ArgumentParser
import FileManagerCore
import CLinux
import Glibc
import SystemPackage

/// `containerfs purge [ID] [--tmp] [--caches]` (reference containers-and-wrappers §1.6).
struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Empty tmp/ and Library/Caches/ (no flag: both; no ID: every container of yours, all for root).",
        discussion: "Files open through the mount, and the directories holding them, stay. Prints what was freed.")
    @OptionGroup var store: StoreOption
    @Argument(help: "Bundle identifier (default: every container).") var id: String?
    @Flag(help: "Purge tmp/.") var tmp = false
    @Flag(help: "Purge Library/Caches/.") var caches = false

    func validate() throws {
        if let id { try DaemonRequests.validateIdentifier(id) }
    }

    func run() throws {
        try failing {
            let id = try id.map { raw throws(FileManagerError) in try DaemonRequests.identifier(raw) }
            var areas: PurgeAreas = []
            if tmp { areas.insert(.tmp) }
            if caches { areas.insert(.caches) }
            var report = PurgeReport()
            switch try store.access() {
            case .daemon(let client):
                var args: [String: String] = [:]
                if let id { args["id"] = id.rawValue }
                if tmp { args["tmp"] = "1" }
                if caches { args["caches"] = "1" }
                let r = try client.call("purge", args).checked().result ?? [:]
                report.items = Int(r["items"] ?? "") ?? 0
                report.bytes = Int64(r["bytes"] ?? "") ?? 0
                report.skipped = Int(r["skipped"] ?? "") ?? 0
            case .direct(let opened, let lock):
                report = try ContainerRegistry(store: opened).purge(id.map { [$0] }, areas: areas.isEmpty ? .all : areas,
                                                                     caller: .current)
                withExtendedLifetime(lock) {}
            }
            FileHandleOutput.standardOutput(Self.summary(report) + "\n")
        }
    }

    static func summary(_ r: PurgeReport) -> String {
        var text = "freed \(r.items) item\(r.items == 1 ? "" : "s"), \(r.bytes) bytes"
        if r.skipped > 0 { text += "; kept \(r.skipped) in use (open through the mount)" }
        return text
    }
}

/// `containerfs exclude PATH [--off]`: marks an item excluded from snapshots (SPEC §4), the
/// NSURLIsExcludedFromBackupKey analogue. A plain setxattr: through the mount the daemon
/// applies its rules (Inbox EACCES, bundle EROFS) as for `setfattr`.
struct ExcludeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exclude",
        abstract: "Mark an item excluded from snapshots (user.containerfs.exclude-from-backup), or clear the mark.")
    @Argument(help: "The item (a link is followed).") var path: String
    @Flag(help: "Clear the mark.") var off = false

    static let attribute = "user.containerfs.exclude-from-backup"

    func run() throws {
        try failing {
            let target = Paths.absolute(path).string
            if off {
                guard clinux_removexattr(target, Self.attribute) == 0 || errno == ENODATA else {
                    throw CommandFailure("\(target): \(Errno(rawValue: errno))")
                }
            } else {
                guard clinux_setxattr(target, Self.attribute, "1", 1, 0) == 0 else {
                    throw CommandFailure("\(target): \(Errno(rawValue: errno))")
                }
            }
        }
    }
}
