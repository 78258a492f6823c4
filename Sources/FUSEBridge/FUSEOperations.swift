import CFuse
import CFuseTap
import Glibc

/// The `fuse_lowlevel_ops` table: one `@convention(c)` thunk per opcode. Thunks capture
/// nothing; each recovers its bridge from the request's userdata (libfuse's `lo_data(req)`)
/// and hands the request, wrapped in a `Reply`, to the matching Swift method. They run on
/// the transport's threads (per-CPU readers, ring queues, libfuse's workers), so none of
/// this may be actor-isolated.
///
/// Opcodes left out on purpose: `access` (the mount uses default_permissions, so the kernel
/// checks), `getlk`/`setlk`/`flock` (without them the kernel keeps POSIX and BSD locks
/// itself, correctly for every process using the mount), `write` (superseded by
/// `write_buf`), `bmap`, `ioctl`, `poll`.
enum FUSEOperations {
    @inline(__always)
    static func bridge(_ req: fuse_req_t?) -> FUSEBridge {
        Unmanaged<FUSEBridge>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    }

    static func make() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            Unmanaged<FUSEBridge>.fromOpaque(userdata!).takeUnretainedValue().initialize(conn!)
        }
        ops.destroy = { userdata in
            Unmanaged<FUSEBridge>.fromOpaque(userdata!).takeUnretainedValue().destroy()
        }
        ops.lookup = { req, parent, name in FUSEOperations.bridge(req).lookup(Reply(req!), parent, name!) }
        ops.forget = { req, ino, n in FUSEOperations.bridge(req).forget(Reply(req!), ino, n) }
        ops.forget_multi = { req, count, list in FUSEOperations.bridge(req).forgetMany(Reply(req!), count, list) }
        ops.getattr = { req, ino, _ in FUSEOperations.bridge(req).getattr(Reply(req!), ino) }
        ops.setattr = { req, ino, attr, toSet, fi in
            FUSEOperations.bridge(req).setattr(Reply(req!), ino, attr!.pointee, toSet, fi, clearsSetID: cfusetap_request_clears_setid() != 0)
        }
        ops.readlink = { req, ino in FUSEOperations.bridge(req).readlink(Reply(req!), ino) }
        ops.mknod = { req, parent, name, mode, rdev in FUSEOperations.bridge(req).mknod(Reply(req!), parent, name!, mode, rdev) }
        ops.mkdir = { req, parent, name, mode in FUSEOperations.bridge(req).mkdir(Reply(req!), parent, name!, mode) }
        ops.unlink = { req, parent, name in FUSEOperations.bridge(req).unlink(Reply(req!), parent, name!) }
        ops.rmdir = { req, parent, name in FUSEOperations.bridge(req).rmdir(Reply(req!), parent, name!) }
        ops.symlink = { req, target, parent, name in FUSEOperations.bridge(req).symlink(Reply(req!), target!, parent, name!) }
        ops.rename = { req, parent, name, newParent, newName, flags in
            FUSEOperations.bridge(req).rename(Reply(req!), parent, name!, newParent, newName!, UInt32(flags))
        }
        ops.link = { req, ino, newParent, newName in FUSEOperations.bridge(req).link(Reply(req!), ino, newParent, newName!) }
        ops.open = { req, ino, fi in
            FUSEOperations.bridge(req).open(Reply(req!), ino, fi!, clearsSetID: cfusetap_request_clears_setid() != 0)
        }
        ops.read = { req, _, size, off, fi in FUSEOperations.bridge(req).read(Reply(req!), size, off, fi) }
        ops.write_buf = { req, _, bufv, off, fi in
            FUSEOperations.bridge(req).writeBuffer(Reply(req!), bufv!, off, fi, clearsSetID: cfusetap_request_clears_setid() != 0)
        }
        ops.flush = { req, _, _ in FUSEOperations.bridge(req).flush(Reply(req!)) }
        ops.release = { req, _, fi in FUSEOperations.bridge(req).release(Reply(req!), fi) }
        ops.fsync = { req, _, datasync, fi in FUSEOperations.bridge(req).fsync(Reply(req!), datasync != 0, fi) }
        ops.opendir = { req, ino, fi in FUSEOperations.bridge(req).opendir(Reply(req!), ino, fi!) }
        ops.readdir = { req, _, size, off, fi in FUSEOperations.bridge(req).readdir(Reply(req!), size, off, fi, plus: false) }
        ops.readdirplus = { req, _, size, off, fi in FUSEOperations.bridge(req).readdir(Reply(req!), size, off, fi, plus: true) }
        ops.releasedir = { req, _, fi in FUSEOperations.bridge(req).releasedir(Reply(req!), fi) }
        ops.fsyncdir = { req, _, datasync, fi in FUSEOperations.bridge(req).fsyncdir(Reply(req!), datasync != 0, fi) }
        ops.statfs = { req, _ in FUSEOperations.bridge(req).statfs(Reply(req!)) }
        ops.setxattr = { req, ino, name, value, size, flags in
            FUSEOperations.bridge(req).setxattr(Reply(req!), ino, name!, UnsafeRawBufferPointer(start: value, count: size), flags)
        }
        ops.getxattr = { req, ino, name, size in FUSEOperations.bridge(req).getxattr(Reply(req!), ino, name!, size) }
        ops.listxattr = { req, ino, size in FUSEOperations.bridge(req).listxattr(Reply(req!), ino, size) }
        ops.removexattr = { req, ino, name in FUSEOperations.bridge(req).removexattr(Reply(req!), ino, name!) }
        ops.create = { req, parent, name, mode, fi in FUSEOperations.bridge(req).create(Reply(req!), parent, name!, mode, fi!) }
        ops.fallocate = { req, _, mode, off, len, fi in FUSEOperations.bridge(req).fallocate(Reply(req!), mode, off, len, fi) }
        ops.lseek = { req, _, off, whence, fi in FUSEOperations.bridge(req).lseek(Reply(req!), off, whence, fi) }
        ops.copy_file_range = { req, _, offIn, fiIn, _, offOut, fiOut, len, flags in
            FUSEOperations.bridge(req).copyFileRange(Reply(req!), fiIn, offIn, fiOut, offOut, len, flags)
        }
        return ops
    }
}
