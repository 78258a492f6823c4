import CFuseTap
import FileManagerCore
import Glibc
import Synchronization
import SystemPackage

/// FUSE passthrough (`-o passthrough`, DESIGN.md 29): reads, writes and mmaps of an open
/// regular file go from the kernel straight to the backing file, as on the store's own file
/// system, without a request, a copy or a second page cache. The daemon still sees every
/// open, fsync, setattr and release.
///
/// The kernel passes a handle's I/O to a *backing file* registered on the session's
/// `/dev/fuse` descriptor. It insists that every handle of an inode open at one time is of
/// one kind — all passed through, to the same registration, or all through the daemon —
/// and fails an open that breaks the rule with EIO. So each node keeps
/// (`NodeTable.Node.passthrough`) its registration, made at its first passed-through open
/// (the item's `O_PATH` descriptor is enough: the kernel opens its own file from that path
/// with each caller's open flags and the daemon's credentials less CAP_FSETID) and given
/// back when the kernel forgets the node (with its last open handle), and the
/// number of handles of each kind it has open; a new handle takes the kind already open.
/// Our counts drop at RELEASE, after the kernel's, so they never claim less than it holds.
///
/// Under FUSE_HANDLE_KILLPRIV_V2 (DESIGN.md 24) the kernel leaves clearing set-ID bits on
/// write to the file system, and a passed-through write never reaches it. Registrations are
/// therefore made without CAP_FSETID: a bit given to a file while a handle is passed through,
/// by a `chmod` through the mount or in the store, goes at that handle's next write, as on
/// ext4 for an unprivileged writer. A file with a set-ID bit is served through the daemon
/// when nothing is open, so that root's writes keep the bits as they do on ext4.
final class Passthrough: Sendable {
    /// The session's `/dev/fuse` descriptor while it is mounted; -1 before and after. Held
    /// across each ioctl, so that `detach` (before the descriptor closes) waits for it.
    private let channel = Mutex<CInt>(-1)
    /// Cleared when the kernel refuses registrations as such (passthrough not negotiated: a
    /// kernel before 6.9, a daemon without CAP_SYS_ADMIN; a store itself on a stacking file
    /// system): opens are then served the usual way.
    private let available = Atomic<Bool>(true)

    func attach(channel fd: CInt) { channel.withLock { $0 = fd } }

    /// After the session ends: registrations die with the connection, and the descriptor
    /// number may be reused.
    func detach() { channel.withLock { $0 = -1 } }

    /// The backing id to answer the new handle `file` with (nil: serve it through the
    /// daemon), counted as open until the handle goes.
    ///
    /// O_DIRECT handles are passed through like any other (the kernel fails even a
    /// `direct_io` open of an inode with passed-through handles): the caller's own buffers
    /// then meet the store's file system, with its alignment rules, as they would without
    /// the mount.
    func backingID(for file: OpenFile, of nodes: NodeTable) -> CInt? {
        let item = file.item
        guard item.isRegularFile, !file.throughDaemonOnly, let node = nodes.node(item.inode) else { return nil }
        let (kinds, backing) = node.passthrough.withLock { slot -> (Kinds, CInt?) in
            let kinds: Kinds
            if let existing = slot { kinds = existing } else { kinds = Kinds(); slot = kinds }
            return (kinds, kinds.choose(self, item, file.fd))
        }
        file.attachment.withLock { $0 = Handle(kinds: kinds, passedThrough: backing != nil) }
        return backing
    }

    /// Whether a mode grants privilege on execution (set-user-ID, or set-group-ID with
    /// group execute: the bits a write by another user must clear).
    static func grantsPrivilege(_ mode: mode_t) -> Bool {
        mode & S_ISUID != 0 || mode & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP
    }

    /// Registers the item's descriptor as a backing file; nil when refused.
    fileprivate func register(_ item: Item) -> CInt? {
        guard available.load(ordering: .relaxed) else { return nil }
        // The registration keeps the credentials of the thread that makes it, and every
        // passed-through read and write runs with them: without CAP_FSETID, so that a write
        // clears set-ID bits even where one was set in the store behind an open handle. Never
        // inside `Credentials.asCaller`: one caller's fs ids would serve every later handle.
        let id = Credentials.withoutFSetID { _ in
            channel.withLock { devfd -> CInt in
                guard devfd >= 0 else { return -EBADFD }
                var id = cfusetap_backing_open(devfd, item.fd)
                // Kernels 6.9-6.11 without the O_PATH fix take only a real descriptor.
                if id == -EBADF, let fd = try? Syscall.reopen(item.fd, O_RDONLY | O_NONBLOCK) {
                    id = cfusetap_backing_open(devfd, fd)
                    Syscall.close(fd)  // the registration holds its own reference
                }
                return id
            }
        }
        if id > 0 { return id }
        switch -id {
        case EBADFD:
            break  // not mounted (yet, or any more)
        case EPERM, ENOTTY, EOPNOTSUPP, ENOSYS, EINVAL, ELOOP, EBADF:
            if available.exchange(false, ordering: .relaxed) {
                bridgeLogger.warning("FUSE passthrough refused by the kernel (\(String(cString: strerror(-id)))); files are served through the daemon")
            }
        default:
            bridgeLogger.debug("passthrough registration of inode \(item.inode): \(String(cString: strerror(-id)))")
        }
        return nil
    }

    fileprivate func close(_ id: CInt) {
        channel.withLock { devfd in
            if devfd >= 0 { _ = cfusetap_backing_close(devfd, id) }
        }
    }

    /// Per node: its registration and its open handles of each kind. Guarded by the node's
    /// `passthrough` lock (`choose`) and its own (`handleClosed`, from a handle's last release).
    final class Kinds: @unchecked Sendable {
        private var backing: CInt = 0
        private let open = Mutex<(passedThrough: Int, throughDaemon: Int)>((0, 0))
        private weak var passthrough: Passthrough?

        func choose(_ passthrough: Passthrough, _ item: Item, _ fd: CInt) -> CInt? {
            open.withLock { open -> CInt? in
                var through: Bool
                if open.passedThrough > 0 { through = true }
                else if open.throughDaemon > 0 { through = false }
                else { through = !Kinds.grantsPrivilege(fd) }
                if through && backing == 0, let id = passthrough.register(item) {
                    backing = id
                    self.passthrough = passthrough
                }
                if backing == 0 { through = false }
                if through { open.passedThrough += 1 } else { open.throughDaemon += 1 }
                return through ? backing : nil
            }
        }

        func handleClosed(passedThrough: Bool) {
            open.withLock { open in
                if passedThrough { open.passedThrough -= 1 } else { open.throughDaemon -= 1 }
            }
        }

        private static func grantsPrivilege(_ fd: CInt) -> Bool {
            guard let st = try? Syscall.fstat(fd) else { return true }
            return Passthrough.grantsPrivilege(st.st_mode)
        }

        deinit { if backing > 0 { passthrough?.close(backing) } }
    }

    /// Per handle: which kind it was counted as, until it goes.
    private final class Handle: Sendable {
        let kinds: Kinds
        let passedThrough: Bool
        init(kinds: Kinds, passedThrough: Bool) {
            self.kinds = kinds
            self.passedThrough = passedThrough
        }
        deinit { kinds.handleClosed(passedThrough: passedThrough) }
    }
}
