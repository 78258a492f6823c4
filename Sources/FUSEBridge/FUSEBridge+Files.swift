import CFuse
import FileManagerCore
import Glibc
import SystemPackage

// MARK: - Open files: open, create, read, write, and the rest of a handle's life

extension FUSEBridge {
    /// OPEN: the handle keeps a retained `OpenFile`; O_DIRECT callers get uncached I/O
    /// (`direct_io`) while the backing descriptor stays buffered.
    func open(_ reply: consuming Reply, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            let file = try volume.open(item, flags: fi.pointee.flags)
            fi.pointee.fh = FUSEBridge.retain(file)
            if file.direct { cfuse_fi_set_direct_io(fi, 1) } else if isCoherent { cfuse_fi_set_keep_cache(fi, 1) }
            reply.open(fi)
        } catch {
            reply.fail(error)
        }
    }

    func create(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t,
                _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            let (item, st, file) = try volume.create(dir, name, mode: mode, flags: fi.pointee.flags, caller: reply.caller)
            fi.pointee.fh = FUSEBridge.retain(file)
            if file.direct { cfuse_fi_set_direct_io(fi, 1) } else if isCoherent { cfuse_fi_set_keep_cache(fi, 1) }
            reply.create(item.inode, st, timeouts: timeouts, fi)
        } catch {
            reply.fail(error)
        }
    }

    func read(_ reply: consuming Reply, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        reply.data(from: file.fd, size: size, offset: offset)
    }

    /// WRITE_BUF: libfuse moves the payload (memory or a spliced pipe) straight to the fd.
    func writeBuffer(_ reply: consuming Reply, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t,
                     _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        let n = cfuse_write_buf_to_fd(buffers, file.fd, offset)
        if n < 0 { return reply.fail(Errno(rawValue: CInt(-n))) }
        reply.written(n)
    }

    /// FLUSH (every close of a descriptor): nothing to do; POSIX locks live in the kernel.
    func flush(_ reply: consuming Reply) { reply.ok() }

    func release(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        if let fi { FUSEBridge.releaseHandle(fi.pointee.fh, as: OpenFile.self) }
        reply.ok()
    }

    func fsync(_ reply: consuming Reply, _ dataOnly: Bool, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        do { try file.sync(dataOnly: dataOnly); reply.ok() } catch { reply.fail(error) }
    }

    func fallocate(_ reply: consuming Reply, _ mode: CInt, _ offset: off_t, _ length: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let file = FUSEBridge.file(fi) else { return reply.fail(Errno.badFileDescriptor) }
        do { try file.allocate(mode: mode, offset: offset, length: length); reply.ok() } catch { reply.fail(error) }
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
        do {
            let n = try source.copyRange(from: inOffset, to: destination, at: outOffset, length: length, flags: UInt32(bitPattern: flags))
            reply.written(n)
        } catch {
            reply.fail(error)
        }
    }

    // MARK: - Directories

    func opendir(_ reply: consuming Reply, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            fi.pointee.fh = FUSEBridge.retain(try volume.openDirectory(item))
            reply.open(fi)
        } catch {
            reply.fail(error)
        }
    }

    func releasedir(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        if let fi { FUSEBridge.releaseHandle(fi.pointee.fh, as: DirectoryHandle.self) }
        reply.ok()
    }

    func fsyncdir(_ reply: consuming Reply, _ dataOnly: Bool, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let dir = FUSEBridge.directory(fi) else { return reply.fail(Errno.badFileDescriptor) }
        do { try dir.sync(dataOnly: dataOnly); reply.ok() } catch { reply.fail(error) }
    }

    /// READDIR / READDIRPLUS: fills at most `size` bytes from the cookie `offset`. With
    /// `plus`, each entry (but `.` and `..`) is looked up, adding a kernel reference, which is
    /// handed back when the entry does not fit; an entry that vanished meanwhile is skipped.
    func readdir(_ reply: consuming Reply, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?, plus: Bool) {
        guard let dir = FUSEBridge.directory(fi) else { return reply.fail(Errno.badFileDescriptor) }
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
                    var looked: UInt64 = 0
                    if entry.isDotOrDotDot {
                        e.attr.st_ino = ino_t(entry.inode)
                        e.attr.st_mode = mode_t(entry.type) << 12
                    } else {
                        guard let (item, st) = try? volume.lookup(dir.item, entry.name) else { return true }
                        looked = item.inode
                        e.ino = fuse_ino_t(item.inode)
                        e.attr = st
                        e.attr_timeout = timeouts.attributes
                        e.entry_timeout = timeouts.entries
                    }
                    entrySize = fuse_add_direntry_plus(request, out, remaining, entry.name, &e, off_t(entry.nextOffset))
                    if entrySize > remaining {
                        if looked != 0 { volume.items.forget(looked, count: 1) }
                        return false
                    }
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
            // Entries already taken with `plus` stay referenced only if we answer them; an
            // error after some were added answers what we have, as the kernel expects.
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

    func setxattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, _ flags: CInt) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do { try volume.setExtendedAttribute(item, name, value, flags: flags); reply.ok() } catch { reply.fail(error) }
    }

    func removexattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do { try volume.removeExtendedAttribute(item, name); reply.ok() } catch { reply.fail(error) }
    }
}
