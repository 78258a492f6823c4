import ArgumentParser
import Glibc

/// `containerfs`: mounts a store and manages what lives in it (SPEC §2).
///
/// With no subcommand, the arguments are those of `mount`, which is how mount(8) and
/// fstab call a FUSE file system (`mount.fuse3` runs `containerfs STORE MNT -o OPTS`).
@main
struct ContainerFSCommand: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "containerfs",
        abstract: "App containers, a trash and published snapshots as one mounted file system.",
        version: version,
        subcommands: [
            MountCommand.self, UnmountCommand.self, ContainerCommand.self,
            CoordinateCommand.self, WatchCommand.self,
        ],
        defaultSubcommand: MountCommand.self
    )

    /// SPEC §2's exit codes: 0 success, 1 failure, **2 usage error** (swift-argument-parser
    /// answers usage errors with 64, EX_USAGE).
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if !message.isEmpty {
                FileHandleOutput.write(code == .success ? 1 : 2, message + "\n")
            }
            Glibc.exit(code == .validationFailure ? 2 : code.rawValue)
        }
        Glibc.exit(0)
    }
}
