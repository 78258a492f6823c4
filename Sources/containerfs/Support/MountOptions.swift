import ArgumentParser
import FUSEBridge
import FileManagerCore
import Glibc

/// `-o` options, split into what libfuse and the kernel get, what the daemon itself uses,
/// and generic mount(8)/fstab options that mean nothing to a FUSE daemon (tolerated and
/// dropped: `defaults`, `nofail`, `auto`, `noauto`, `user`, `users`, `_netdev`, `x-*`,
/// `comment=*`).
struct MountOptions {
    var fuse: [String] = []
    /// Long by default: the store watcher invalidates the kernel's caches on every change
    /// made behind the mount (DESIGN.md, decision 14).
    var timeouts = CacheTimeouts(attributes: 60, entries: 60, negative: 60)
    /// `-o threads=N` (and `idle_threads=N`) serve with libfuse's pool of up to N workers
    /// instead of one reader per CPU (DESIGN.md 33).
    var workerThreads: Int?
    /// Idle workers kept: none are torn down (libfuse's own advice; bursts would otherwise
    /// create and destroy threads).
    var idleThreads: Int?
    var allowOther: Bool?
    /// Coordination deadlines (docs/SEMANTICS.md §3.4): content operations, namespace
    /// operations (which hold the kernel's directory locks while they wait), presenters.
    var claimTimeout: Duration = .seconds(30)
    var namespaceTimeout: Duration = .seconds(5)
    var presenterTimeout: Duration = .seconds(5)
    /// `-o control_timeout=S`: a control connection with nothing in progress and no claim
    /// or presenter is closed after S idle seconds (DESIGN.md 45).
    var controlTimeout: Duration = .seconds(60)
    /// `-o syslog`: the daemon logs to syslog (the journal) too, not only to standard error
    /// (STORE/daemon.log in the background). On by itself under systemd.
    var syslog = false
    var defaultPermissions = true
    /// The kernel's writeback cache (DESIGN.md, decision 22): off by default, `-o writeback`.
    var writeback = false
    /// FUSE passthrough of open files' reads and writes (DESIGN.md, decision 29): off by
    /// default, `-o passthrough`.
    var passthrough = false
    /// FUSE over io_uring (DESIGN.md 31): off by default, `-o uring`; needs the kernel's
    /// `fuse.enable_uring`.
    var uring = false
    /// `-o nocoordination`: kernel requests bypass coordination entirely. For measuring what
    /// coordination costs on the hot path (PERFORMANCE.md); explicit claims then do not
    /// hold back I/O through the mount.
    var coordination = true
    /// `-o watcher=fanotify|none`: how the daemon hears changes made in the store behind
    /// the mount (DESIGN.md 59). fanotify needs kernel 5.17; when it cannot start, or with
    /// `none`, the mount has no watcher and uses short cache timeouts.
    var watcher = WatcherKind.fanotify
    enum WatcherKind: String { case fanotify, none }

    /// What reaches libfuse and the kernel unchanged: the per-mount flags mount(8) and
    /// mount.fuse3 may pass, `ro`, `auto_unmount`, `debug`. Anything else is refused here:
    /// libfuse took options such as `max_read=1` and the session then failed at INIT, after
    /// `mount` had reported the mount live (exit 0, nothing mounted).
    static let passedOn: Set<String> = [
        "ro", "auto_unmount", "debug", "suid", "nosuid", "dev", "nodev", "exec", "noexec",
        "async", "sync", "dirsync", "atime", "noatime",
    ]

    /// Taken and dropped: fstab's generic options, and the finer access-time flags, which
    /// libfuse 3.14 refuses ("unknown option") though an fstab line may well carry them
    /// (`defaults,relatime`); the kernel's default for the mount is relatime.
    static let generic: Set<String> = [
        "defaults", "nofail", "auto", "noauto", "user", "users", "nouser", "_netdev", "owner", "group", "rw",
        "diratime", "nodiratime", "relatime", "norelatime", "strictatime", "nostrictatime", "lazytime", "nolazytime",
        // libfuse 2 refused a non-empty mount point without it; libfuse 3 mounts there
        // anyway (mount warns), and scripts written for the old one still pass it.
        "nonempty",
    ]

    init(_ lists: [String], store: String) throws {
        var fsname: String?
        for list in lists {
            for option in list.split(separator: ",").map(String.init) where !option.isEmpty {
                let (key, value) = Self.split(option)
                switch key {
                case _ where Self.generic.contains(key) || key.hasPrefix("x-") || key == "comment":
                    continue
                case "nocoordination": coordination = false
                case "syslog": syslog = true
                case "writeback": writeback = true
                case "nowriteback", "no_writeback": writeback = false
                case "passthrough": passthrough = true
                case "nopassthrough", "no_passthrough": passthrough = false
                case "watcher":
                    if value == "inotify" {
                        throw ValidationError("-o \(option): the inotify watcher is gone; the watcher is fanotify (the default) or none")
                    }
                    guard let value, let kind = WatcherKind(rawValue: value) else {
                        throw ValidationError("-o \(option): the watcher is fanotify or none")
                    }
                    watcher = kind
                case "uring": uring = true
                case "nouring", "no_uring": uring = false
                case "allow_other": allowOther = true
                case "noallow_other": allowOther = false
                case "default_permissions": defaultPermissions = true
                case "nodefault_permissions": defaultPermissions = false
                case "fsname": fsname = value
                case "subtype":
                    // unmount, coordinate, watch and the trash know a ContainerFS mount by its
                    // type; subtype=containerfs (what mount(8) may pass for -t fuse.containerfs) is taken.
                    guard value == "containerfs" else {
                        throw ValidationError("-o \(option): refused: a ContainerFS mount is known by its type \(MountTable.type) (unmount, coordinate, watch and the trash look for it)")
                    }
                case "attr_timeout": timeouts.attributes = try Self.number(option, value)
                case "entry_timeout": timeouts.entries = try Self.number(option, value)
                case "negative_timeout": timeouts.negative = try Self.number(option, value)
                case "claim_timeout": claimTimeout = Seconds.duration(try Self.number(option, value))
                case "namespace_timeout": namespaceTimeout = Seconds.duration(try Self.number(option, value))
                case "presenter_timeout": presenterTimeout = Seconds.duration(try Self.number(option, value))
                case "control_timeout": controlTimeout = Seconds.duration(try Self.number(option, value))
                case "threads": workerThreads = try Self.count(option, value, 1...Self.maxThreads)
                case "idle_threads": idleThreads = try Self.count(option, value, 0...Self.maxThreads)
                case _ where value == nil && Self.passedOn.contains(key): fuse.append(option)
                default: throw ValidationError("-o \(option): not a ContainerFS mount option (see containerfs help mount)")
                }
            }
        }
        // The kernel refuses passthrough alongside a writeback cache (it would own the pages).
        if passthrough && writeback {
            throw ValidationError("-o passthrough,writeback: choose one (the kernel cannot pass writes through and cache them)")
        }
        if uring { try Self.checkKernelRing() }
        // Without default_permissions nobody checks permissions: the daemon keeps its
        // capabilities across fs-uid switches (DESIGN.md, decision 6) and has no `access`.
        // A root daemon serving other users must not run that way.
        if !defaultPermissions && (allowOther ?? (geteuid() == 0)) && geteuid() == 0 {
            throw CommandFailure("-o nodefault_permissions: refused for a root daemon with allow_other (nobody would check permissions)")
        }
        if defaultPermissions { fuse.append("default_permissions") }
        // Root's mount serves every user (the kernel checks permissions); a user's mount
        // needs user_allow_other in /etc/fuse.conf for that, so it is opt-in there.
        if allowOther ?? (geteuid() == 0) { fuse.append("allow_other") }
        fuse.append("fsname=\(fsname ?? store)")
        fuse.append("subtype=containerfs")
    }

    /// The kernel offers FUSE over io_uring only while its module parameter says so (off by
    /// default: root decides). Refused here, with the remedy, rather than silently served
    /// through /dev/fuse.
    static let ringSwitch = "/sys/module/fuse/parameters/enable_uring"
    private static func checkKernelRing() throws {
        guard let enabled = firstCharacter(of: ringSwitch) else {
            throw CommandFailure("-o uring: this kernel has no FUSE over io_uring (\(ringSwitch) is missing; it needs Linux 6.14 or later built with CONFIG_FUSE_IO_URING)")
        }
        guard enabled == "Y" else {
            throw CommandFailure("-o uring: the kernel's FUSE io_uring transport is off (\(ringSwitch) is N; as root: echo Y > \(ringSwitch))")
        }
        // kernel.io_uring_disabled: 2 refuses io_uring to everyone, 1 to unprivileged users.
        if let level = firstCharacter(of: "/proc/sys/kernel/io_uring_disabled"), level == "2" || (level == "1" && geteuid() != 0) {
            throw CommandFailure("-o uring: io_uring is disabled on this system (/proc/sys/kernel/io_uring_disabled is \(level))")
        }
    }

    /// The first character of a one-line kernel file (a switch's Y/N, a sysctl's digit).
    private static func firstCharacter(of path: String) -> Character? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        let c = fgetc(file)
        return c == EOF ? nil : Character(UnicodeScalar(UInt8(c)))
    }

    private static func split(_ option: String) -> (String, String?) {
        guard let eq = option.firstIndex(of: "=") else { return (option, nil) }
        return (String(option[..<eq]), String(option[option.index(after: eq)...]))
    }

    /// At most 10^9 (seconds: 31 years), so that every conversion to whole milliseconds or
    /// nanoseconds fits; `inf` and `nan`, which `Double` parses, are refused too.
    private static func number(_ option: String, _ value: String?) throws -> Double {
        guard let n = Seconds.parse(value) else { throw ValidationError("-o \(option): \(Seconds.expectation)") }
        return n
    }

    /// libfuse's own limit on its pool (`FUSE_LOOP_MT_MAX_THREADS`).
    static let maxThreads = 100_000

    /// A count of threads: a whole number (`threads=0.5` used to become 0).
    private static func count(_ option: String, _ value: String?, _ range: ClosedRange<Int>) throws -> Int {
        guard let value, let n = Int(value), range.contains(n) else {
            throw ValidationError("-o \(option): expects a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }
}
