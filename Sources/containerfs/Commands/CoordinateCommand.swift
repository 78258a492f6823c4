import ArgumentParser
import CLinux
import FileManagerCore
import Foundation
import Glibc
import Synchronization
import SystemPackage

/// `containerfs coordinate (--read [--without-changes] | --write [--for KIND]) PATH -- CMD…`
///
/// Holds a coordinated claim on PATH (through the live mount's daemon) while CMD runs. CMD
/// and all its descendants share the claim's purpose, so they are never blocked by it; this
/// process makes itself a child subreaper so that orphaned grandchildren stay below it.
/// Exits with CMD's status; 1 with a message when the claim cannot be had (EBUSY at the
/// deadline, EDEADLK, EINTR) or is lost while CMD runs (the daemon went away).
struct CoordinateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinate",
        abstract: "Run a command holding a coordinated read or write claim on a path.")

    enum WriteKind: String, ExpressibleByArgument, CaseIterable {
        case deleting, moving, replacing, merging, metadata
    }

    @Flag(help: "A coordinated read (presenters save first unless --without-changes).") var read = false
    @Flag(help: "A coordinated write.") var write = false
    @Option(name: .customLong("for"), help: "The kind of write: deleting, moving, replacing, merging, metadata.")
    var kind: WriteKind?
    @Flag(name: .customLong("without-changes"), help: "Read without asking presenters to save.") var withoutChanges = false
    @Option(help: "Seconds to wait for the claim (default: the mount's deadline).") var timeout: Double?

    @Argument(help: "A path under a ContainerFS mount.") var path: String
    @Argument(parsing: .captureForPassthrough, help: "The command to run (after --).") var command: [String] = []

    func validate() throws {
        guard read != write else { throw ValidationError("give exactly one of --read and --write") }
        if kind != nil && !write { throw ValidationError("--for goes with --write") }
        if withoutChanges && !read { throw ValidationError("--without-changes goes with --read") }
        guard !commandLine.isEmpty else { throw ValidationError("missing the command to run after --") }
        if let timeout, !Seconds.range.contains(timeout) { throw ValidationError("--timeout \(timeout): \(Seconds.expectation)") }
    }

    var commandLine: [String] { command.first == "--" ? Array(command.dropFirst()) : command }

    func run() throws {
        let lost = LostFlag()
        let status: Int32 = try failing {
            let target = try MountPath(path)
            let client = try target.connect()
            _ = clinux_become_subreaper()
            var args = ["path": target.relative.string, "mode": read ? "read" : "write"]
            if let kind { args["for"] = kind.rawValue }
            if withoutChanges { args["without-changes"] = "1" }
            if let timeout { args["timeout"] = "\(timeout)" }
            _ = try client.call("claim", args).checked()

            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = commandLine
            try process.run()
            // The connection stays open while CMD runs; if it closes, the claim is gone.
            let watcher = Thread {
                while client.nextPush() != nil {}
                lost.set()
            }
            watcher.start()
            process.waitUntilExit()
            if lost.isSet { throw CommandFailure("\(target.absolute): the claim was lost while the command ran (daemon gone)") }
            switch process.terminationReason {
            case .exit: return process.terminationStatus
            case .uncaughtSignal: return 128 + process.terminationStatus
            @unknown default: return 1
            }
        }
        throw ExitCode(status)
    }
}

/// Set by the connection's reader thread when the daemon goes away.
final class LostFlag: Sendable {
    private let flag = Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}
