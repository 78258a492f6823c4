import ArgumentParser
import FileManagerCore
import Glibc

/// `containerfs`: mounts a store and manages what lives in it (docs/SEMANTICS.md §2).
///
/// With no subcommand, the arguments are those of `mount`, which is how mount(8) and
/// fstab call a FUSE file system (`mount.fuse3` runs `containerfs STORE MNT -o OPTS`).
@main
struct ContainerFSCommand: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "containerfs",
        abstract: "App containers, a trash and published snapshots as one mounted file system.",
        discussion: "Exit status: 0 success, 1 the operation failed (stderr names the path and the reason), 2 usage error.",
        version: version,
        subcommands: [
            MountCommand.self, UnmountCommand.self, StatusCommand.self, ContainerCommand.self, TrashCommand.self,
            SnapshotCommand.self,
            InboxCommand.self, PurgeCommand.self, ExcludeCommand.self, RunCommand.self,
            CoordinateCommand.self, WatchCommand.self, UnmountWhenGoneCommand.self,
        ],
        defaultSubcommand: MountCommand.self
    )

    /// docs/SEMANTICS.md §2's exit codes: 0 success, 1 failure, **2 usage error** (swift-argument-parser
    /// answers usage errors with 64, EX_USAGE).
    static func main() {
        refuseInvalidUTF8()
        if Array(CommandLine.arguments.dropFirst()) == ["--version"] {  // with the live mounts' protocol
            FileHandleOutput.standardOutput(StatusCommand.versionText())
            Glibc.exit(0)
        }
        do {
            try refuseMistypedSubcommand(Array(CommandLine.arguments.dropFirst()))
            try refuseHelpOfNoSubcommand(Array(CommandLine.arguments.dropFirst()))
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

    /// Swift hands arguments over as Strings, an invalid UTF-8 sequence replaced by U+FFFD:
    /// `mount $'s\xff/' MNT` made and mounted a new store `s\u{FFFD}` and left the
    /// directory given alone. Any such argument is refused (exit 1), shown with its bytes
    /// escaped, before anything is parsed (DESIGN.md 13).
    static func refuseInvalidUTF8() {
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw)))
            FileHandleOutput.standardError("containerfs: \(Bytes.display(bytes)): not valid UTF-8 (ContainerFS takes paths and names in UTF-8 only: use a name that is)\n")
            Glibc.exit(1)
        }
    }

    /// `help WORD…` names subcommands: swift-argument-parser prints the nearest one's help
    /// and succeeds for a word that names none (`help nosuch` exited 0). Such a word is a
    /// usage error, as a mistyped subcommand is.
    static func refuseHelpOfNoSubcommand(_ arguments: [String]) throws {
        guard arguments.first == "help" else { return }
        var command: any ParsableCommand.Type = ContainerFSCommand.self
        for word in arguments.dropFirst() where !word.hasPrefix("-") {
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty { return }  // the rest are the command's own words
            guard let sub = subcommands.first(where: { $0._commandName == word }) else {
                let names = subcommands.filter { $0.configuration.shouldDisplay }.map { $0._commandName }
                throw ValidationError("'\(word)' is not a subcommand of \(command._commandName) (\(names.joined(separator: ", ")))")
            }
            command = sub
        }
    }

    /// Without a subcommand the arguments are `mount`'s, and a store that does not exist is
    /// made: `containerfs stauts /mnt` would quietly make a store named `stauts` in the
    /// working directory and mount it. A first argument that is a bare word (no `/`), names
    /// no subcommand and no existing directory is taken for a mistyped subcommand instead
    /// (DESIGN.md 32); `containerfs mount WORD MNT` still makes such a store.
    static func refuseMistypedSubcommand(_ arguments: [String]) throws {
        var positional: [String] = []
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--" { positional += rest; break }
            if argument == "-o" || argument == "--ready-fd" || argument == "--generate-completion-script" { _ = rest.popFirst() }
            else if !argument.hasPrefix("-") { positional.append(argument) }
        }
        // One bare word alone would be taken for a mount point: a stray word, a usage error too.
        guard let first = positional.first, positional.count <= 2, !first.contains("/") else { return }
        let all = configuration.subcommands.map { ($0.configuration.commandName, $0.configuration.shouldDisplay) }
        guard first != "help", !all.contains(where: { $0.0 == first }) else { return }
        // Last: a stat of the working directory's entry, which may be on a hung mount.
        guard !Paths.isDirectory(Paths.absolute(first)) else { return }
        let names = all.filter(\.1).compactMap(\.0) + ["help"]
        guard positional.count == 2 else {
            throw ValidationError("'\(first)' is not a subcommand (\(names.joined(separator: ", "))), nor an existing mount point directory")
        }
        throw ValidationError("'\(first)' is not a subcommand (\(names.joined(separator: ", "))), nor an existing store directory; to make a new store named \(first) here: containerfs mount \(first) \(positional[1])")
    }
}
