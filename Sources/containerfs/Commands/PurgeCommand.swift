import ArgumentParser
import FileManagerCore
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
