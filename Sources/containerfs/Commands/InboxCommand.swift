import ArgumentParser
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs inbox deliver ID FILE...`: the only way into `Documents/Inbox/` (SPEC §1).
struct InboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inbox",
        abstract: "Hand files to an app through its Inbox.",
        subcommands: [Deliver.self]
    )

    struct Deliver: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy files into a container's Documents/Inbox (never overwriting); print each resulting path.")
        @OptionGroup var store: StoreOption
        @Argument(help: "Bundle identifier.") var id: String
        @Argument(help: "Files to deliver (read with your permissions).") var files: [String] = []

        func validate() throws {
            try DaemonRequests.validateIdentifier(id)
            guard !files.isEmpty else { throw ValidationError("missing the files to deliver") }
        }

        /// Files from this size on show their progress (on a terminal only).
        static let progressFrom: Int64 = 16 << 20

        func run() throws {
            try failing {
                let id = try DaemonRequests.identifier(id)
                let progress = Progress(enabled: isatty(2) == 1)
                var failed = false
                switch try store.access() {
                case .daemon(let client):
                    for file in files {
                        let path = Paths.absolute(file)
                        do {
                            let r = try client.call("inbox.deliver", ["id": id.rawValue, "file": path.string, "progress": progress.enabled ? "1" : "0"]) { push in
                                if push.event == "progress", let done = push.done, let total = push.total { progress.show(file, done, total) }
                            }.checked()
                            progress.end()
                            FileHandleOutput.standardOutput("\(r.result?["path"] ?? "")\n")
                        } catch {
                            progress.end()
                            FileHandleOutput.standardError("containerfs: \(error)\n")
                            failed = true
                        }
                    }
                case .direct(let opened, let lock):
                    let registry = ContainerRegistry(store: opened)
                    for file in files {
                        do {
                            let name = try registry.deliver(Paths.absolute(file), to: id, caller: .current) { done, total in
                                progress.show(file, done, total)
                            }
                            progress.end()
                            FileHandleOutput.standardOutput("\(opened.path.appending("containers/\(id)/Documents/Inbox").appending(name))\n")
                        } catch {
                            progress.end()
                            FileHandleOutput.standardError("containerfs: \(error)\n")
                            failed = true
                        }
                    }
                    withExtendedLifetime(lock) {}
                }
                if failed { throw ExitCode.failure }
            }
        }
    }

    /// One line on stderr, rewritten in place, for files of `progressFrom` bytes or more.
    final class Progress {
        let enabled: Bool
        private var shown = false
        private var lastPercent = -1

        init(enabled: Bool) { self.enabled = enabled }

        func show(_ name: String, _ done: Int64, _ total: Int64) {
            guard enabled, total >= Deliver.progressFrom else { return }
            let percent = Int(done * 100 / max(total, 1))
            guard percent != lastPercent else { return }
            lastPercent = percent
            shown = true
            FileHandleOutput.standardError("\r\(name): \(percent)% (\(done >> 20) of \(total >> 20) MiB)")
        }

        func end() {
            if shown { FileHandleOutput.standardError("\n") }
            shown = false
            lastPercent = -1
        }
    }
}
