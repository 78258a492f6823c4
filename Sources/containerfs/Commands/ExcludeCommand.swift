import ArgumentParser
import CLinux
import Glibc
import SystemPackage

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
