import ArgumentParser
import CLinux
import FUSEBridge
import FileManagerCore
import Glibc
import Logging
import Synchronization
import SystemPackage

/// `containerfs mount [STORE] MOUNTPOINT [-o OPTS] [-f]`.
///
/// Without `-f` the command re-executes itself in the foreground mode as a new session
/// (never `fork()` in a process that may already run Swift threads) and returns only when
/// the child reports the mount live, or its failure, through an inherited pipe.
struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a store (default ~/.local/share/containerfs) at MOUNTPOINT.",
        discussion: """
            Options (-o, comma-separated, repeatable): allow_other, default_permissions (on by default), \
            ro, auto_unmount, fsname=NAME, subtype=containerfs (no other: the type is always fuse.containerfs), attr_timeout=S, entry_timeout=S, negative_timeout=S, \
            threads=N, claim_timeout=S, namespace_timeout=S, presenter_timeout=S, control_timeout=S (idle control-socket \
            connections close after S seconds; 60), writeback (the kernel caches \
            writes), passthrough (the kernel passes open files' reads and writes straight to the store; kernel \
            6.9 or later, root daemon; not with writeback), uring (requests come through the kernel's \
            io_uring queues, one per CPU, served on the CPU that made them; Linux 6.14 or later with \
            /sys/module/fuse/parameters/enable_uring set to Y), watcher=fanotify|none (how the daemon hears changes \
            made in the store behind the mount; fanotify, the default, attributes each change to its process and needs \
            Linux 5.17 or later; where it cannot run, and with none, the mount has no watcher and uses short cache \
            timeouts). Generic fstab options (defaults, nofail, noauto, user, \
            _netdev, x-*) and relatime, strictatime, lazytime, diratime and their no- forms are accepted and ignored; mount flags (nosuid, nodev, noexec, noatime, sync, dirsync, ...) \
            and debug go to the kernel and libfuse. Any other option is refused.
            """
    )

    @Argument(help: "[STORE] MOUNTPOINT")
    var paths: [String]

    @Option(name: .customShort("o"), help: "Mount options, comma-separated.")
    var options: [String] = []

    @Flag(name: .customShort("f"), help: "Stay in the foreground.")
    var foreground = false

    @Flag(name: .customShort("d"), help: "The same as -o debug (libfuse logs every request), as in other FUSE tools.")
    var debug = false

    @Option(name: .customLong("ready-fd"), help: .hidden)
    var readyFD: Int32?

    func validate() throws {
        guard (1...2).contains(paths.count) else { throw ValidationError("expected [STORE] MOUNTPOINT") }
        // An empty path would name the working directory.
        guard !paths.contains("") else { throw ValidationError("an empty path names no store or mount point") }
    }

    var storePath: FilePath { paths.count == 2 ? Paths.absolute(paths[0]) : Store.defaultPath }
    var mountPoint: FilePath { Paths.absolute(paths.last!) }

    func run() throws {
        try failing {
            // Options first: a wrong one is a usage error (exit status 2), whatever else is wrong.
            let options = try MountOptions(givenOptions, store: storePath.string)
            try Self.checkMountPoint(mountPoint)
            try StoreLocation.requireStoreOrRoom(storePath)
            try Self.refuseOverlap(store: storePath, mountPoint: mountPoint)
            if readyFD == nil { Self.warnIfHiding(mountPoint) }  // once, not again from the daemon
            if foreground || readyFD != nil {
                try serve(options)
            } else {
                try Daemon.start(store: storePath, arguments: ["mount", storePath.string, mountPoint.string, "-f"] + options_arguments())
            }
        }
    }

    /// The mount must not hide the store. A mount point at or under the store hid it from
    /// the daemon (its root listed `containers` as EIO; mounted on the store itself, every
    /// command then failed with EACCES); a mount point above the store hides the store's
    /// control socket from every command. Compared by device and inode up the kernel's own
    /// `..` chain, so that symbolic links and bind mounts do not get round it.
    static func refuseOverlap(store: FilePath, mountPoint: FilePath) throws {
        let mountChain = Paths.ancestry(of: mountPoint)
        var existing = store
        while existing.components.count > 0, !Paths.isDirectory(existing) { existing.removeLastComponent() }
        let storeChain = Paths.ancestry(of: existing)
        if existing == store, let storeID = storeChain.first, mountChain.contains(storeID) {
            throw CommandFailure("\(mountPoint): the mount point is in the store \(store) (it would hide the store)")
        }
        if let mountID = mountChain.first, storeChain.contains(mountID) {
            throw CommandFailure("\(store): the store is under the mount point \(mountPoint) (the mount would hide it from every command)")
        }
    }

    private func options_arguments() -> [String] { givenOptions.flatMap { ["-o", $0] } }

    /// The `-o` lists, with `-d` as `debug`.
    var givenOptions: [String] { options + (debug ? ["debug"] : []) }

    /// Refuses a mount point that is not a directory, and one whose FUSE daemon died (the
    /// kernel answers ENOTCONN there: `mount` said "not an existing directory").
    static func checkMountPoint(_ mountPoint: FilePath) throws {
        var st = stat()
        if stat(mountPoint.string, &st) != 0 && errno == ENOTCONN {
            let fuse = MountTable.fuseEntry(at: Paths.asMounted(mountPoint.string))
            let remedy = fuse == nil || fuse?.type == MountTable.type ? "containerfs unmount \(mountPoint)" : "fusermount3 -u \(mountPoint)"
            throw CommandFailure("\(mountPoint): the daemon of the mount here is gone (transport endpoint is not connected, ENOTCONN): run \(remedy)")
        }
        guard Paths.isDirectory(mountPoint) else { throw CommandFailure("\(mountPoint): mount point is not an existing directory") }
    }

    /// Warns of a mount point that is not empty or already a live ContainerFS mount: the
    /// new mount hides what is there (mounting goes on, as mount(8) and libfuse 3 do).
    static func warnIfHiding(_ mountPoint: FilePath) {
        if let live = MountTable.entry(at: Paths.asMounted(mountPoint.string)) {
            FileHandleOutput.standardError("containerfs: warning: \(mountPoint): already a live ContainerFS mount (of \(live.source)); the new mount hides it until unmounted\n")
        } else if let dir = opendir(mountPoint.string) {
            defer { closedir(dir) }
            var entries = 0
            while let e = readdir(dir), entries == 0 {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." { entries += 1 }
            }
            if entries > 0 {
                FileHandleOutput.standardError("containerfs: warning: \(mountPoint): not empty; what it holds is hidden while the store is mounted there\n")
            }
        }
    }

    /// The daemon proper: open and lock the store, mount, report readiness, serve.
    private func serve(_ options: MountOptions) throws {
        let ready = ReadinessPipe(fd: readyFD)
        // Nothing the daemon starts may keep the readiness pipe open: `mount` reads it to end
        // of file, and fusermount3, forked by libfuse for auto_unmount, lives as long as the
        // mount (without this, `mount -o auto_unmount` never returned).
        if let readyFD { _ = fcntl(readyFD, F_SETFD, FD_CLOEXEC) }
        var served: CInt = 0
        do {
            umask(0)  // modes come from the caller's request, already masked by the kernel
            Credentials.prepareProcess()
            _ = clinux_raise_nofile_limit()
            let toSyslog = SyslogLogHandler.wanted(option: options.syslog)
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = getenv("CONTAINERFS_DEBUG") != nil ? .debug : .info
                guard toSyslog else { return handler }
                return MultiplexLogHandler([handler, SyslogLogHandler(logLevel: handler.logLevel, label: label)])
            }
            let store = try Store(at: storePath)
            let lock = try store.acquireLock(mountPoint: mountPoint.string)
            store.settleJournal(deferringDeletion: true)
            let debris = store.stagingDebris()
            let nodes = NodeTable()
            let volume = Volume(store: store, keeper: nodes, kernelCachesWrites: options.writeback)
            volume.registry.reconcile()
            volume.registry.purgeTemporaryItems(olderThan: 3 * 24 * 3600)

            let coordination = MountCoordination(volume: volume, contentDeadline: options.claimTimeout,
                                                 namespaceDeadline: options.namespaceTimeout,
                                                 presenterDeadline: options.presenterTimeout)
            let clients = MountClients()
            let watcher = Self.makeWatcher(options.watcher, volume: volume,
                                           listener: UncoordinatedChangeRouter(coordination: coordination, clients: clients))
            let bridge = FUSEBridge(volume: volume, nodes: nodes, timeouts: options.timeouts, watcher: watcher,
                                    coordination: options.coordination ? coordination : nil,
                                    passthrough: options.passthrough)
            let session = FUSESession(bridge: bridge, mountPoint: mountPoint.string)
            let ring = options.uring ? RingTransport() : nil
            let pool = options.workerThreads == nil && options.idleThreads == nil ? nil
                : FUSESession.Pool(workers: options.workerThreads ?? 8, idle: options.idleThreads ?? Int(UInt32.max))
            let sessionOptions = FUSESession.Options(mountOptions: options.fuse, pool: pool, ring: ring)
            // Everything that can fail comes before the mount: a failure after it would leave
            // a dead mount ("transport endpoint is not connected").
            var limits = ControlLimits()
            limits.idleTimeout = options.controlTimeout
            limits.lineTimeout = min(limits.lineTimeout, options.controlTimeout)
            var requests = DaemonRequests(volume: volume, mountPoint: mountPoint, coordination: coordination, clients: clients,
                                          ring: ring, about: DaemonAbout(options: givenOptions, bridge: bridge, watcher: watcher?.kind ?? "none"))
            // Expiry acts for the daemon itself: presenters of every user hear of it.
            let expiry = SnapshotExpiry { [requests] in
                Snapshots(store: volume.store, hooks: requests.changeHooks(Caller(uid: geteuid(), gid: getegid())))
            }
            requests.expiry = expiry
            let control = try ControlServer(path: Paths.controlSocket(store.path), logger: Logger(label: "containerfs.control"), limits: limits,
                                            handler: requests.handle)
            try session.mount(options: sessionOptions)
            // fusermount3's auto_unmount misses a killed daemon whose connection is not yet
            // aborted when it looks (DESIGN.md 31): the daemon's own watcher does not look.
            var unmountWatcher: Int32?
            if options.fuse.contains("auto_unmount") {
                do {
                    unmountWatcher = try Daemon.startUnmountWatcher(mountPoint: mountPoint.string)
                } catch {
                    Logger(label: "containerfs.mount").warning("\(mountPoint): -o auto_unmount: cannot start the unmount watcher (\(error)); a killed daemon's mount may stay")
                }
            }
            let notifier = session.makeNotifier()
            if let notifier { volume.addObserver(notifier) }
            watcher?.start()
            // Said once the mount serves: a mount refused before must print its reason alone.
            Logger(label: "containerfs.watch").info("store watcher: \(watcher?.summary ?? "none (-o watcher=none); short cache timeouts")")
            control.start()
            expiry.start()
            // Live once the kernel has INIT's answer (requests wait for it), not before: libfuse
            // may still refuse it, and the mount is then gone.
            // Without a pipe (-f) the wait goes on for systemd's READY=1 and the log line.
            let hasPipe = readyFD != nil
            session.whenInitAnswered(giveUp: { hasPipe && ready.sent }) { refusal in
                if let refusal {
                    ready.fail("\(mountPoint): the FUSE session failed at INIT (\(refusal)); see \(storePath)/daemon.log")
                } else {
                    ready.succeed()
                    // systemd's Type=notify; only a daemon started in the foreground is the
                    // service's main process (one started by `mount` in the background is not)
                    if !hasPipe { SystemdNotify.ready() }
                    Logger(label: "containerfs.mount").info("\(mountPoint): mounted \(storePath)")
                    // Crash debris, invisible through the mount, goes once the mount serves.
                    if !debris.isEmpty { Threads.start(named: "cfs-debris") { store.removeFromStaging(debris) } }
                }
            }
            served = session.run(options: sessionOptions)
            // Ended before the waiting thread could tell (a refused INIT ends the loop at once).
            let why = served < 0 ? "failed (\(Errno(rawValue: -served)))" : "ended before the kernel's INIT was answered"
            ready.fail("\(mountPoint): the FUSE session \(why); see \(storePath)/daemon.log")
            // Order: no more requests, then no more changes, then no more notifications,
            // and only then may the session go.
            expiry.stop()
            control.stop()
            watcher?.stop()
            notifier?.stop()
            withExtendedLifetime((session, lock, unmountWatcher)) {}
        } catch {
            ready.fail("\(error)")
            throw error
        }
        // Reading /dev/fuse failed (logged by the session): not a clean end.
        if served < 0 { throw ExitCode.failure }
    }
}

extension MountCommand {
    /// The store watcher `-o watcher=` asks for: fanotify when it can start (root, a kernel
    /// with FID reporting, a file system with file handles), else none, saying why once;
    /// without one the bridge uses short cache timeouts.
    static func makeWatcher(_ kind: MountOptions.WatcherKind, volume: Volume,
                            listener: any StoreChangeListener) -> (any StoreWatching)? {
        let logger = Logger(label: "containerfs.watch")
        switch kind {
        case .none:
            return nil
        case .fanotify:
            do throws(Errno) {
                return try FanotifyWatcher(volume: volume, listener: listener, logger: logger)
            } catch {
                logger.warning("store watcher: fanotify cannot watch the store (\(error)); no watcher, the mount uses short cache timeouts")
                return nil
            }
        }
    }
}

/// The daemon's end of the readiness pipe: one line, "ready" or the failure message, the
/// first one sent (from the thread that waits for INIT, or the daemon's own).
final class ReadinessPipe: Sendable {
    private let fd: Mutex<Int32?>

    init(fd: Int32?) { self.fd = Mutex(fd) }

    /// Whether the line was sent (or there is no pipe).
    var sent: Bool { fd.withLock { $0 == nil } }

    func succeed() { send("ready") }

    func fail(_ message: String) { send(message) }

    private func send(_ line: String) {
        fd.withLock { fd in
            guard let open = fd else { return }
            FileHandleOutput.write(open, "\(line)\n")
            close(open)
            fd = nil
        }
    }
}
