/*
 * Linux calls the core needs that Swift cannot import as they are: variadic (syscall,
 * prctl, ioctl), macro-shaped, or absent from Glibc's Swift overlay.
 */
#ifndef CLINUX_H
#define CLINUX_H

#define _GNU_SOURCE 1
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <sys/statvfs.h>
#include <sys/resource.h>
#include <linux/securebits.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <dirent.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>

/* Flags glibc hides behind _GNU_SOURCE, which Swift's Glibc module does not see. */
static const int clinux_O_PATH = O_PATH;
static const int clinux_O_DIRECT = O_DIRECT;
static const int clinux_O_NOATIME = O_NOATIME;
static const int clinux_AT_EMPTY_PATH = AT_EMPTY_PATH;
static const unsigned int clinux_RENAME_NOREPLACE = RENAME_NOREPLACE;
static const unsigned int clinux_RENAME_EXCHANGE = RENAME_EXCHANGE;
static const unsigned int clinux_RENAME_WHITEOUT = RENAME_WHITEOUT;

/*
 * Raw syscalls: they change only the calling thread's fs credentials, which is what a
 * request handler running on one worker thread wants.
 */
static inline long clinux_setfsuid(uid_t uid) { return syscall(SYS_setfsuid, uid); }
static inline long clinux_setfsgid(gid_t gid) { return syscall(SYS_setfsgid, gid); }

/*
 * Keep capabilities when the fs uid changes (SECBIT_NO_SETUID_FIXUP). Without it, moving a
 * root thread's fsuid to a user drops CAP_DAC_OVERRIDE and the backing file system would
 * re-check permission without the caller's supplementary groups; the kernel has already
 * checked the caller. Per-thread: call it on every thread that switches.
 */
static inline int clinux_keep_caps_on_fsuid_change(void)
{
    return prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0);
}

/* getdents64 without glibc's DIR buffering; offsets are the file system's own cookies. */
struct clinux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};
static inline long clinux_getdents64(int fd, void *buf, size_t len) { return syscall(SYS_getdents64, fd, buf, len); }

/* The inode generation (FS_IOC_GETVERSION); 0 where the file system has none. */
static inline int clinux_inode_generation(int fd, uint32_t *out)
{
    int v = 0;
    int rc = ioctl(fd, FS_IOC_GETVERSION, &v);
    *out = (uint32_t)v;
    return rc;
}

static inline int clinux_fcntl_int(int fd, int cmd, int arg) { return fcntl(fd, cmd, arg); }
static inline int clinux_openat(int dirfd, const char *path, int flags, mode_t mode) { return openat(dirfd, path, flags, mode); }
static inline int clinux_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }

/* MARK: calls glibc declares only under _GNU_SOURCE */
static inline int clinux_renameat2(int olddir, const char *old, int newdir, const char *new_, unsigned int flags)
{ return (int)syscall(SYS_renameat2, olddir, old, newdir, new_, flags); }
static inline int clinux_fallocate(int fd, int mode, off_t offset, off_t len)
{ return (int)syscall(SYS_fallocate, fd, mode, offset, len); }
static inline ssize_t clinux_copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t len, unsigned int flags)
{ return syscall(SYS_copy_file_range, in, inoff, out, outoff, len, flags); }
static inline ssize_t clinux_getxattr(const char *path, const char *name, void *value, size_t size)
{ return syscall(SYS_getxattr, path, name, value, size); }
static inline ssize_t clinux_listxattr(const char *path, char *list, size_t size)
{ return syscall(SYS_listxattr, path, list, size); }
static inline int clinux_setxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{ return (int)syscall(SYS_setxattr, path, name, value, size, flags); }
static inline int clinux_removexattr(const char *path, const char *name)
{ return (int)syscall(SYS_removexattr, path, name); }
static const long clinux_UTIME_NOW = UTIME_NOW;
static const long clinux_UTIME_OMIT = UTIME_OMIT;

#endif
