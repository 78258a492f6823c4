import ArgumentParser
import CLinux
import FileManagerCore
import Foundation
import Glibc
import SystemPackage

/// `containerfs run [--sandbox [--no-network]] ID [--] CMD...` (reference
/// containers-and-wrappers §1.7): CMD runs with its home, temporary and XDG directories in
/// its container under the live mount, the container marked in use while it lives
/// (`ContainerRegistry.runningPrograms`). `--sandbox` confines it with bubblewrap.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a program with HOME, TMPDIR and XDG_* directories in its container.",
        discussion: "Exits with the program's status (128 + the signal that killed it); SIGINT, SIGTERM and SIGHUP are passed on.")
    @OptionGroup var store: StoreOption
    @Flag(help: "Confine the program with bubblewrap: its container is all it sees of the mount, and the only place it can write.")
    var sandbox = false
    @Flag(name: .customLong("no-network"), help: "With --sandbox: no network (a network namespace of its own).")
    var noNetwork = false
    @Argument(help: "Bundle identifier.") var id: String
    @Argument(parsing: .captureForPassthrough, help: "The command to run (after an optional --).") var command: [String] = []

    var commandLine: [String] { command.first == "--" ? Array(command.dropFirst()) : command }

    func validate() throws {
        try DaemonRequests.validateIdentifier(id)
        guard !commandLine.isEmpty else { throw ValidationError("missing the command to run") }
        // Everything after ID is the command's: `run ID --sandbox -- CMD` would run `--sandbox`.
        if let dash = command.firstIndex(of: "--"), dash > 0 {
            throw ValidationError("run's options go before ID (\(command[..<dash].joined(separator: " ")) comes after it; a command with a -- of its own goes after ID --)")
        }
        if noNetwork && !sandbox { throw ValidationError("--no-network goes with --sandbox") }
    }

    func run() throws {
        let status: Int32 = try failing {
            let id = try DaemonRequests.identifier(id)
            guard case .daemon(let client) = try store.access(exclusive: false) else {
                throw CommandFailure("\(store.path): no live mount of this store (run puts the program's home under the mount)")
            }
            let mountPoint = FilePath(try client.call("status").checked().result?["mountPoint"] ?? "/")
            // Marks the container in use (this process first, so no moment of CMD's is unmarked).
            _ = try client.call("container.use", ["id": id.rawValue]).checked()
            let home = mountPoint.appending("containers/\(id)")
            var environment = ProcessInfo.processInfo.environment
            for (name, relative) in Self.directories {
                environment[name] = relative.isEmpty ? home.string : home.appending(relative).string
            }
            var arguments = commandLine
            if sandbox { arguments = try Self.bubblewrap(home: home, network: !noNetwork) + ["--"] + arguments }
            _ = clinux_forward_signals(0)
            let child = try Self.spawn(arguments, environment: environment)
            _ = clinux_forward_signals(child)
            _ = try? client.call("container.use", ["id": id.rawValue, "pid": "\(child)"])
            return clinux_wait_status(child)
        }
        throw ExitCode(status)
    }

    /// Where each variable points, relative to the container.
    static let directories: [(String, String)] = [
        ("HOME", ""), ("TMPDIR", "tmp"), ("XDG_DATA_HOME", "Library/Application Support"),
        ("XDG_STATE_HOME", "Library/Application Support"), ("XDG_CONFIG_HOME", "Library/Preferences"),
        ("XDG_CACHE_HOME", "Library/Caches"),
    ]

    /// bwrap's arguments (DESIGN.md 43): no capabilities (root too), new namespaces but the
    /// network's, a new root of its own, read-only, holding /usr, /etc
    /// and the merged-/usr links read-only, a fresh /proc and /dev, and the container bound
    /// read-write at its own path under the mount, which nothing else of the mount reaches.
    static func bubblewrap(home: FilePath, network: Bool) throws -> [String] {
        guard let bwrap = ["/usr/bin/bwrap", "/bin/bwrap"].first(where: { (path: String) in Glibc.access(path, X_OK) == 0 }) else {
            throw CommandFailure("bwrap: not found (--sandbox needs bubblewrap: apt-get install bubblewrap)")
        }
        var args = [bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        if network { args.append("--share-net") }
        for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            var st = stat()
            guard lstat(top, &st) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFLNK, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: top) {
                args += ["--symlink", target, top]
            } else if (st.st_mode & S_IFMT) == S_IFDIR {
                args += ["--ro-bind", top, top]
            }
        }
        args += ["--proc", "/proc", "--dev", "/dev", "--bind", home.string, home.string, "--remount-ro", "/", "--chdir", home.string]
        return args
    }

    /// Starts `arguments` (found on PATH) with `environment`.
    static func spawn(_ arguments: [String], environment: [String: String]) throws -> pid_t {
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, arguments[0], nil, nil, argv, envp)
        guard rc == 0 else { throw CommandFailure("\(arguments[0]): \(Errno(rawValue: rc))") }
        return pid
    }
}
