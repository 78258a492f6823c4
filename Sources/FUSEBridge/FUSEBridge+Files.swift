import CFuse
import FileManagerCore
import Glibc
import SystemPackage

// MARK: - Open files: open, create, read, write, and the rest of a handle's life

extension FUSEBridge {
    /// OPEN: a short coordinated read, or write (for merging with O_RDWR or O_APPEND: the
    /// writer builds on what is there), asking presenters once per handle. O_NONBLOCK meets
    /// a conflicting claim with EAGAIN. The handle keeps a retained `OpenFile`; O_DIRECT
    /// callers get uncached I/O (`direct_io`) while the backing descriptor stays buffered.
    /// `clearsSetID`: the kernel's FUSE_OPEN_KILL_SUIDGID, read off the wire by `CFuseTap`.
    func open(_ reply: consuming Reply, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>, clearsSetID: Bool) {
        guard let node = nodes.view(UInt64(ino)) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        // The kernel's fuse_file_info lives until the handler returns; a later answer uses a copy.
        let info = fi.pointee
        let caller = reply.caller(clearingSetID: clearsSetID)
        // Pages are kept only if the watcher saw every change both before this open caught
        // up and at its answer: one that became complete meanwhile may still have the item's
        // invalidation queued behind this open.
        let coherent = isCoherent
        // A truncating open needs no news of the old content and must not wait for page
        // invalidation (under writeback the kernel holds off writeback while it waits, and
        // invalidation may wait for writeback); a name replaced meanwhile still counts.
        if info.flags & O_TRUNC != 0 {
            watcher?.readQueue()
            return open(reply, node, info, caller, keepsPages: coherent)
        }
        afterStoreNews(reply, node.item.inode) { [self] reply in open(reply, node, info, caller, keepsPages: coherent) }
    }

    private func open(_ reply: consuming Reply, _ node: NodeTable.View, _ info: fuse_file_info, _ caller: Caller, keepsPages: Bool) {
        let item = node.item
        let flags = info.flags
        // A name replaced in the store while the kernel still had it cached: the kernel
        // retries the open with a fresh lookup (ESTALE), and opens the new file. Without a
        // watcher that hears every change, the kernel's entries live for the short
        // timeouts, and every open looks at its name.
        let answered = staleOpens.take(caller.pid)
        if volume.wasReplacedInStore(item, everyTime: !isCoherent) || nodes.mayBeReachedThroughOldName(item.inode),
           let (parent, name) = item.placement, answered?.isRetry(of: item, parent, name) != true {
            staleOpens.answered(caller.pid, item: item, parent: parent, name: name)
            return reply.fail(Errno.staleNFSFileHandle)
        }
        let writing = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0
        if writing && refusesBeforeWaiting(item) { return reply.fail(Errno.readOnlyFileSystem) }
        let free = !writing && readsFreely(item)
        coordinate(reply, RequestNames(), free: free, {
            let target = coordination!.target(of: item)
            let merging = (flags & O_ACCMODE) == O_RDWR || (flags & O_APPEND) != 0
            let claim = writing ? Claim(target: target, writing: (flags & O_TRUNC) == 0 && merging ? .forMerging : [])
                                : Claim(target: target, reading: [])
            return Coordination(claims: [claim], nonBlocking: flags & O_NONBLOCK != 0,
                                event: (flags & O_TRUNC) != 0 ? volume.mountPath(of: item).map { .changed($0) } : nil)
        }) { [self, info] reply, _ in
            var info = info
            do {
                let file = try volume.open(item, flags: flags, caller: caller, uncached: kernelMayHoldOldState(node))
                info.fh = FUSEBridge.retain(file)
                let backing = handleMode(&info, file, keepsPages: keepsPages)
                // An open that found the content moved (this one, or another just before it)
                // is telling the kernel that its size and times of the file are old: a read
                // that began before that news and ended short would not cut the size (the
                // news moved the attribute version), and would read zeros to the old end.
                guard flags & O_TRUNC == 0, volume.observersHavePendingChanges(for: item.inode) else {
                    return answerOpen(reply, info, backing)
                }
                let parked = ParkedRequest(reply), opened = info
                if !volume.afterObserversCaughtUp(with: item.inode, { [self] in answerOpen(parked.take(), opened, backing) }) {
                    answerOpen(parked.take(), opened, backing)
                }
            } catch {
                reply.fail(error)
            }
        }
    }

    private func answerOpen(_ reply: consuming Reply, _ info: fuse_file_info, _ backing: CInt?) {
        var info = info
        if !reply.open(&info, passthrough: backing) { FUSEBridge.releaseHandle(info.fh, as: OpenFile.self) }
    }

    /// How the kernel treats a new handle's data: passed through to the backing file (the
    /// backing id is returned), uncached for an O_DIRECT caller, or cached and kept across
    /// opens while the store watcher invalidates what changes behind the mount. No handle
    /// asks for FLUSH: the daemon has nothing to do at close(2) (POSIX locks live in the
    /// kernel, presenters hear at RELEASE), and each FLUSH is a round trip close(2) waits for
    /// (DESIGN.md 30). Under `-o writeback` the kernel sends FLUSH regardless. Lock handlers
    /// (`getlk`/`setlk`) would need FLUSH back: it is the only release of a remote lock.
    private func handleMode(_ info: inout fuse_file_info, _ file: OpenFile, keepsPages: Bool = true) -> CInt? {
        cfuse_fi_set_noflush(&info, 1)
        if let backing = passthrough?.backingID(for: file, of: nodes) { return backing }
        if file.direct || file.uncached { cfuse_fi_set_direct_io(&info, 1) }
        else if keepsPages && isCoherent { cfuse_fi_set_keep_cache(&info, 1) }
        return nil
    }

    /// Runs `body` once the store watcher has caught up with every change made to the
    /// store before this request, as far as the item `inode` is concerned (DESIGN.md 27):
    /// at once when nothing is on its way (the usual case), else later, with the reply
    /// moved to the thread that brought the news.
    private func afterStoreNews(_ reply: consuming Reply, _ inode: UInt64, _ body: @escaping @Sendable (consuming Reply) -> Void) {
        guard let watcher, !watcher.isCaughtUp(with: inode) else { return body(reply) }
        let parked = ParkedRequest(reply)
        watcher.whenCaughtUp(with: inode) { body(parked.take()) }
    }

    func create(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t,
                _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        let caller = reply.caller
        let info = fi.pointee
        coordinate(reply, RequestNames(name), { creating(name, in: dir) }) { [self, info] reply, names in
            var info = info
            do {
                let (item, st, file) = try volume.create(dir, names.first, mode: mode, flags: info.flags, caller: caller)
                info.fh = FUSEBridge.retain(file)
                let backing = handleMode(&info, file)
                if !reply.create(item.inode, st, timeouts: timeouts, &info, passthrough: backing) {
                    // The caller is gone (interrupted): no RELEASE or FORGET will come.
                    FUSEBridge.releaseHandle(info.fh, as: OpenFile.self)
                    nodes.release(item.inode, count: 1)
                }
            } catch {
                reply.fail(error)
            }
        }
    }

    /// READ that reached the daemon (page-cache misses): a short read claim, no presenters.
    func read(_ reply: consuming Reply, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        coordinate(reply, RequestNames(), free: !file.writable && readsFreely(file.item), {
            Coordination(claims: [Claim(target: coordination!.target(of: file.item), reading: .withoutChanges)], asksPresenters: false)
        }) { reply, _ in
            reply.data(from: file.fd, size: size, offset: offset)
        }
    }

    /// WRITE_BUF: a short write claim (presenters were asked at open); libfuse moves the
    /// payload (memory or a spliced pipe) straight to the fd. A parked write copies the
    /// payload first: the kernel's buffer dies with the callback. `clearsSetID` is the
    /// kernel's FUSE_WRITE_KILL_SUIDGID (an unprivileged writer: set-ID bits go).
    func writeBuffer(_ reply: consuming Reply, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t,
                     _ fi: UnsafeMutablePointer<fuse_file_info>?, clearsSetID: Bool) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        // Page-cache writeback (pid 0) carries no writer and must never wait: a write failing
        // at its deadline would lose acknowledged data. Its writer was coordinated at open.
        if volume.kernelCachesWrites && reply.caller.pid == 0 {
            let n = cfuse_write_buf_to_fd(buffers, file.fd, offset)
            if n < 0 { return reply.fail(Errno(rawValue: CInt(-n))) }
            return reply.written(n)
        }
        // Only a write that must clear set-ID bits needs its caller.
        let writer = clearsSetID ? reply.caller(clearingSetID: true) : nil
        if let mount = coordination, !mount.enterFastPath() {
            file.coordinatedWriter.store(mount.purposes.purpose(ofThread: reply.caller.pid).rawValue, ordering: .relaxed)
            return parkWrite(reply, buffers, offset, file, mount, caller: writer)
        }
        let n = Credentials.clearingSetID(for: writer, on: file.fd) { cfuse_write_buf_to_fd(buffers, file.fd, offset) }
        coordination?.leaveFastPath()
        if n < 0 { return reply.fail(Errno(rawValue: CInt(-n))) }
        reply.written(n)
    }

    private func parkWrite(_ reply: consuming Reply, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t,
                           _ file: OpenFile, _ mount: MountCoordination, caller: Caller?) {
        let size = fuse_buf_size(buffers)
        var payload = [UInt8](repeating: 0, count: size)
        let copied = payload.withUnsafeMutableBytes { raw -> Int in
            var out = fuse_bufvec(count: 1, idx: 0, off: 0,
                                  buf: (fuse_buf(size: size, flags: fuse_buf_flags(rawValue: 0), mem: raw.baseAddress, fd: -1, pos: 0)))
            return fuse_buf_copy(&out, buffers, fuse_buf_copy_flags(rawValue: 0))
        }
        if copied < 0 { return reply.fail(Errno(rawValue: CInt(-copied))) }
        let bytes = payload
        coordinate(reply, RequestNames(), {
            Coordination(claims: [Claim(target: mount.target(of: file.item), writing: [])], asksPresenters: false)
        }) { reply, _ in
            do {
                let n = try bytes.withUnsafeBytes { b in
                    try Credentials.clearingSetID(for: caller, on: file.fd) { () throws(Errno) in
                        try Syscall.pwrite(file.fd, UnsafeRawBufferPointer(rebasing: b[0..<copied]), offset)
                    }
                }
                reply.written(n)
            } catch {
                reply.fail(error)
            }
        }
    }

    /// FLUSH: nothing to do; POSIX locks live in the kernel. Handles are opened with
    /// `noflush`, so only `-o writeback` mounts (where the kernel ignores it) still send it.
    func flush(_ reply: consuming Reply) { reply.ok() }

    /// RELEASE: a handle that wrote under coordination tells presenters `didChange`.
    func release(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        if let file = FUSEBridge.file(fi), let mount = coordination, file.writable, !mount.center.presenters.isEmpty,
           let path = volume.mountPath(of: file.item) {
            let writer = file.coordinatedWriter.load(ordering: .relaxed)
            mount.center.announce(.changed(path), by: writer == 0 ? nil : Purpose(rawValue: writer))
        }
        if let fi {
            let item = FUSEBridge.file(fi)?.item
            FUSEBridge.releaseHandle(fi.pointee.fh, as: OpenFile.self)
            if let item { handleReleased(item) }
        }
        reply.ok()
    }

    func fsync(_ reply: consuming Reply, _ dataOnly: Bool, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        do { try file.sync(dataOnly: dataOnly); reply.ok() } catch { reply.fail(error) }
    }

    func fallocate(_ reply: consuming Reply, _ mode: CInt, _ offset: off_t, _ length: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        coordinate(reply, RequestNames(), {
            Coordination(claims: [Claim(target: coordination!.target(of: file.item), writing: [])], asksPresenters: false)
        }) { reply, _ in
            do {
                try Credentials.clearingSetID(for: reply.caller.clearingSetIDUnlessRoot, on: file.fd) { () throws(Errno) in
                    try file.allocate(mode: mode, offset: offset, length: length)
                }
                reply.ok()
            } catch {
                reply.fail(error)
            }
        }
    }

    /// LSEEK: SEEK_DATA and SEEK_HOLE answered by the backing file.
    func lseek(_ reply: consuming Reply, _ offset: off_t, _ whence: CInt, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        do { reply.offset(try file.seek(offset, whence: whence)) } catch { reply.fail(error) }
    }

    func copyFileRange(_ reply: consuming Reply, _ inFI: UnsafeMutablePointer<fuse_file_info>?, _ inOffset: off_t,
                       _ outFI: UnsafeMutablePointer<fuse_file_info>?, _ outOffset: off_t, _ length: Int, _ flags: CInt) {
        guard let source = FUSEBridge.file(inFI), let destination = FUSEBridge.file(outFI) else {
            return reply.fail(Errno.badFileDescriptor)
        }
        coordinate(reply, RequestNames(), {
            Coordination(claims: [Claim(target: coordination!.target(of: source.item), reading: .withoutChanges),
                                  Claim(target: coordination!.target(of: destination.item), writing: [])], asksPresenters: false)
        }) { reply, _ in
            do {
                let n = try Credentials.clearingSetID(for: reply.caller.clearingSetIDUnlessRoot, on: destination.fd) { () throws(Errno) in
                    try source.copyRange(from: inOffset, to: destination, at: outOffset, length: length, flags: UInt32(bitPattern: flags))
                }
                reply.written(n)
            } catch {
                reply.fail(error)
            }
        }
    }

    // MARK: - Directories

    /// OPENDIR: a short read without changes on the directory (a listing gives presenters
    /// nothing to save); it waits only for writes of the directory itself or a subtree write.
    /// Like an OPEN it first catches up with the store watcher (DESIGN.md 27): the kernel
    /// caches what it lists (`cache_readdir`) and may list again from that cache
    /// (`keep_cache`) while the daemon can vouch for it (`ListingCache`, DESIGN.md 34).
    func opendir(_ reply: consuming Reply, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        let info = fi.pointee
        // As for pages (`open`): coherent both when it caught up and at its answer.
        let coherent = isCoherent
        afterStoreNews(reply, item.inode) { [self] reply in
            coordinate(reply, RequestNames(), free: readsFreely(item), {
                Coordination(claims: [Claim(target: coordination!.target(of: item), reading: .withoutChanges)], asksPresenters: false)
            }) { [self, info] reply, _ in
                var info = info
                do {
                    // Counted before the core takes the root's entries (`Volume.openDirectory`):
                    // a change counted after makes this handle a stale feeder, and one counted
                    // before is in them. Only a directory is counted: nothing may fail after.
                    guard item.isDirectory else { throw Errno.notDirectory }
                    let listed = coherent && isCoherent ? nodes.node(item.inode) : nil
                    let listing = listed.map { nodes.openedListing($0, maxAge: FUSEBridge.nanoseconds(timeouts.attributes)) }
                    let directory = OpenDirectory(try volume.openDirectory(item), node: listed, listing: listing)
                    if directory.cachesListing {
                        cfuse_fi_set_cache_readdir(&info, 1)
                        cfuse_fi_set_keep_cache(&info, 1)
                    }
                    info.fh = FUSEBridge.retain(directory)
                    let answer: @Sendable (consuming Reply) -> Void = { [info] reply in
                        var info = info
                        if !reply.open(&info) { FUSEBridge.releaseHandle(info.fh, as: OpenDirectory.self) }
                    }
                    guard directory.startsListingAfresh else { return answer(reply) }
                    // Its pages go with the directory's invalidation.
                    let parked = ParkedRequest(reply)
                    volume.afterInvalidating(item) {
                        listed?.listing.withLock { $0.dropped() }
                        answer(parked.take())
                    }
                } catch {
                    reply.fail(error)
                }
            }
        }
    }

    /// Seconds as nanoseconds, saturating: never traps, whatever a timeout holds.
    static func nanoseconds(_ seconds: Double) -> UInt64 {
        seconds.isNaN || seconds <= 0 ? 0 : seconds >= 1.8e10 ? .max : UInt64(seconds * 1e9)
    }

    func releasedir(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        if let fi { FUSEBridge.releaseHandle(fi.pointee.fh, as: OpenDirectory.self) }
        reply.ok()
    }

    func fsyncdir(_ reply: consuming Reply, _ dataOnly: Bool, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let dir = FUSEBridge.directory(fi)?.handle else { return reply.fail(Errno.badFileDescriptor) }
        do { try volume.syncDirectory(dir, dataOnly: dataOnly); reply.ok() } catch { reply.fail(error) }
    }

    /// READDIR / READDIRPLUS: fills at most `size` bytes from the cookie `offset`. With
    /// `plus`, each entry (but `.` and `..`) is looked up, which counts a kernel reference
    /// given back if the entry does not fit; an entry that vanished meanwhile is skipped.
    func readdir(_ reply: consuming Reply, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?, plus: Bool) {
        guard let dir = FUSEBridge.directory(fi)?.handle else { return reply.fail(Errno.badFileDescriptor) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 8)
        defer { buffer.deallocate() }
        var used = 0
        let request = reply.request
        do {
            try volume.readDirectory(dir, from: Int64(offset)) { entry in
                let remaining = size - used
                let out = (buffer + used).assumingMemoryBound(to: CChar.self)
                var entrySize: Int
                if plus {
                    var e = fuse_entry_param()
                    var looked: Item?
                    if entry.isDotOrDotDot {
                        e.attr.st_ino = ino_t(entry.inode)
                        e.attr.st_mode = mode_t(entry.type) << 12
                    } else {
                        do {
                            let (item, st) = try volume.lookup(dir.item, entry.name)
                            looked = item
                            e.ino = fuse_ino_t(item.inode)
                            e.attr = st
                            e.attr_timeout = timeouts.attributes
                            e.entry_timeout = timeouts.entries
                        } catch .noSuchFileOrDirectory {
                            return true  // removed since the directory was read: not listed
                        } catch {
                            // Listed without attributes (node id 0: the kernel caches nothing
                            // and looks it up later): never silently dropped.
                            e.attr.st_ino = ino_t(entry.inode)
                            e.attr.st_mode = mode_t(entry.type) << 12
                        }
                    }
                    entrySize = fuse_add_direntry_plus(request, out, remaining, entry.name, &e, off_t(entry.nextOffset))
                    if entrySize > remaining {
                        if let looked { nodes.release(looked.inode, count: 1) }  // not answered: no reference
                        return false
                    }
                    if let looked { gaveName(entry.name, in: dir.item, to: looked) }
                } else {
                    var st = stat()
                    st.st_ino = ino_t(entry.inode)
                    st.st_mode = mode_t(entry.type) << 12
                    entrySize = fuse_add_direntry(request, out, remaining, entry.name, &st, off_t(entry.nextOffset))
                    if entrySize > remaining { return false }
                }
                used += entrySize
                return true
            }
            reply.buffer(UnsafeRawBufferPointer(start: buffer, count: used))
        } catch {
            // Entries looked up with `plus` are referenced only if answered: an error after
            // some were added answers what we have, as the kernel expects.
            if used > 0 { reply.buffer(UnsafeRawBufferPointer(start: buffer, count: used)) } else { reply.fail(error) }
        }
    }

    // MARK: - File system and extended attributes

    func statfs(_ reply: consuming Reply) {
        do { reply.fileSystem(try volume.fileSystemAttributes()) } catch { reply.fail(error) }
    }

    func getxattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>, _ size: Int) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            if size == 0 {
                reply.xattrSize(try volume.extendedAttribute(item, name, into: UnsafeMutableRawBufferPointer(start: nil, count: 0)))
            } else {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
                defer { buffer.deallocate() }
                let n = try volume.extendedAttribute(item, name, into: buffer)
                reply.buffer(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
        } catch {
            reply.fail(error)
        }
    }

    func listxattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ size: Int) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            if size == 0 {
                reply.xattrSize(try volume.extendedAttributeNames(item, into: UnsafeMutableRawBufferPointer(start: nil, count: 0)))
            } else {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
                defer { buffer.deallocate() }
                let n = try volume.extendedAttributeNames(item, into: buffer)
                reply.buffer(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
        } catch {
            reply.fail(error)
        }
    }

    /// A metadata-only write (docs/SEMANTICS.md §3.2): the plan of xattr changes.
    func changingMetadata(of item: Item) -> Coordination {
        Coordination(claims: [Claim(target: coordination!.target(of: item), writing: .contentIndependentMetadataOnly)],
                     event: volume.mountPath(of: item).map { .changed($0) })
    }

    func setxattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, _ flags: CInt) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(item) { return reply.fail(Errno.readOnlyFileSystem) }
        let bytes = Array(value)  // small; the kernel's buffer dies with the callback
        coordinate(reply, RequestNames(name), { changingMetadata(of: item) }) { [self] reply, names in
            do {
                try bytes.withUnsafeBytes { b in try volume.setExtendedAttribute(item, names.first, b, flags: flags) }
                reply.ok()
            } catch {
                reply.fail(error)
            }
        }
    }

    func removexattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(item) { return reply.fail(Errno.readOnlyFileSystem) }
        coordinate(reply, RequestNames(name), { changingMetadata(of: item) }) { [self] reply, names in
            do { try volume.removeExtendedAttribute(item, names.first); reply.ok() } catch { reply.fail(error) }
        }
    }
}
