/*
 * Linux calls the core needs that Swift cannot import as they are: variadic (syscall,
 * prctl, ioctl), or declared by glibc only under _GNU_SOURCE.
 *
 * This header must not define _GNU_SOURCE itself: Swift's Glibc module is built without
 * it, and a second, different view of the same system headers in one program is a module
 * conflict. The GNU-only parts live in CLinux.c, behind these plain declarations.
 */
#ifndef CLINUX_H
#define CLINUX_H

#include <sys/types.h>
#include <stdint.h>
#include <stddef.h>

/* MARK: flags glibc hides behind _GNU_SOURCE */
extern const int clinux_O_PATH;
extern const int clinux_O_DIRECT;
extern const int clinux_O_NOATIME;
extern const int clinux_O_TMPFILE;
extern const int clinux_AT_EMPTY_PATH;
extern const unsigned int clinux_RENAME_NOREPLACE;
extern const unsigned int clinux_RENAME_EXCHANGE;
extern const unsigned int clinux_RENAME_WHITEOUT;
extern const long clinux_UTIME_NOW;
extern const long clinux_UTIME_OMIT;

/* MARK: per-thread credentials (raw syscalls: only the calling thread changes) */
long clinux_setfsuid(uid_t uid);
long clinux_setfsgid(gid_t gid);

/*
 * Keep capabilities when the fs uid changes (SECBIT_NO_SETUID_FIXUP). Without it, moving a
 * root thread's fsuid to a user drops CAP_DAC_OVERRIDE and the backing file system would
 * re-check permission without the caller's supplementary groups; the kernel has already
 * checked the caller. Per-thread; threads created afterwards inherit it.
 */
int clinux_keep_caps_on_fsuid_change(void);
int clinux_clear_securebits(void);
/* This thread's securebits (PR_GET_SECUREBITS), -1 on error; and setting them back. */
int clinux_securebits(void);
int clinux_set_securebits(int bits);

/*
 * Raise or lower CAP_FSETID in this thread's effective set (capget/capset on the calling
 * thread only). Lowered around a write or truncate the kernel says an unprivileged caller
 * made, so the backing file system clears set-user-ID and set-group-ID bits exactly as it
 * would for that caller. Returns whether it was raised before (0 or 1), or -1 with errno.
 */
int clinux_set_fsetid_capability(int effective);

/* MARK: directory reading: getdents64 without glibc's DIR buffering */
struct clinux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};
long clinux_getdents64(int fd, void *buf, size_t len);

/* MARK: calls glibc declares only under _GNU_SOURCE */
int clinux_openat(int dirfd, const char *path, int flags, mode_t mode);
int clinux_open(const char *path, int flags, mode_t mode);
int clinux_renameat2(int olddir, const char *old, int newdir, const char *new_, unsigned int flags);
int clinux_fallocate(int fd, int mode, off_t offset, off_t len);
ssize_t clinux_copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t len, unsigned int flags);
ssize_t clinux_getxattr(const char *path, const char *name, void *value, size_t size);
ssize_t clinux_listxattr(const char *path, char *list, size_t size);
int clinux_setxattr(const char *path, const char *name, const void *value, size_t size, int flags);
int clinux_removexattr(const char *path, const char *name);
/* On descriptors opened for reading (archives read and write many small files: no /proc path). */
ssize_t clinux_flistxattr(int fd, char *list, size_t size);
ssize_t clinux_fgetxattr(int fd, const char *name, void *value, size_t size);
ssize_t clinux_listxattrat(int dir, const char *name, char *list, size_t size);
ssize_t clinux_getxattrat(int dir, const char *name, const char *attribute, void *value, size_t size);
int clinux_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
int clinux_utimensat_empty_path(int fd, const void *times);
int clinux_fchownat_empty_path(int fd, uid_t uid, gid_t gid);

/* MARK: statx */
/* The birth time (statx STATX_BTIME) of `path` relative to `dirfd` (flags: AT_* as for
   statx, e.g. AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW). Returns 1 and fills sec/nsec when the
   file system records one, 0 when it does not, -1 with errno on failure. */
int clinux_birth_time(int dirfd, const char *path, int flags, int64_t *sec, uint32_t *nsec);

/* MARK: fanotify (FileManagerCore/Watching/FanotifyWatcher.swift) */
/* fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME |
   FAN_REPORT_TARGET_FID [| FAN_UNLIMITED_MARKS: root only], O_RDONLY | O_LARGEFILE); -1 with errno
   when refused. */
int clinux_fanotify_init(int unlimited_marks);
/* Marks the whole file system holding `dirfd` for the watcher's events (entries made,
   removed and moved (FAN_RENAME: both names in one event), attribute changes, every write (truncate(2) and a writer that keeps
   the file open tell nothing else) and writes at close, on directories too). 0 or -1. */
int clinux_fanotify_mark_filesystem(int fan, int dirfd);
/* Marks the directory `dirfd` for the same events, of itself and of its entries
   (FAN_EVENT_ON_CHILD). 0 or -1. */
int clinux_fanotify_mark_directory(int fan, int dirfd);
/* Marks the file at `path` for attribute changes (its link count too) and writes, evictable
   (the mark keeps no inode in memory; kernel 5.19). 0 or -1. */
int clinux_fanotify_mark_file(int fan, const char *path);
/* Removes that mark. 0 or -1. */
int clinux_fanotify_unmark_file(int fan, const char *path);
/* The watcher's event bits, and the overflow bit. */
extern const uint64_t clinux_FAN_CREATE, clinux_FAN_DELETE, clinux_FAN_MOVED_FROM, clinux_FAN_MOVED_TO,
    clinux_FAN_ATTRIB, clinux_FAN_CLOSE_WRITE, clinux_FAN_MODIFY, clinux_FAN_RENAME, clinux_FAN_ONDIR, clinux_FAN_Q_OVERFLOW, clinux_FAN_DELETE_SELF;
/* One event of a read buffer, with its info records picked out. */
struct clinux_fan_event {
    uint64_t mask;
    int32_t pid;
    const void *dir;      /* struct file_handle of the directory (DFID_NAME, DFID), or NULL */
    const char *name;     /* the entry's name (NUL-terminated, in the buffer), or NULL */
    const void *object;   /* struct file_handle of the object itself (FID), or NULL */
    const void *old_dir;  /* FAN_RENAME: where the entry was (OLD_DFID_NAME), or NULL */
    const char *old_name;
    const void *new_dir;  /* FAN_RENAME: where it went (NEW_DFID_NAME), or NULL */
    const char *new_name;
};
/* Parses the event at `offset` of `buf` (`len` bytes read); returns its length, 0 when
   there is none left (or it is malformed). */
long clinux_fanotify_parse(const void *buf, long len, long offset, struct clinux_fan_event *out);
/* fstatfs(fd).f_type, or 0 on failure. */
long clinux_fs_type(int fd);
/* open_by_handle_at(mount_fd, handle, O_PATH | O_CLOEXEC); -1 with errno. */
int clinux_open_handle(int mount_fd, const void *handle);

/* MARK: eventfd (non-blocking, close-on-exec, for waking poll) */
int clinux_eventfd(void);
/* Waits at most `microseconds` for `fd` to become readable (ppoll: finer than poll's ms);
   >0 when it did. */
int clinux_wait_readable(int fd, unsigned microseconds);
/* Bytes waiting to be read (FIONREAD; fanotify counts each event's metadata length); 0 on error. */
long clinux_bytes_queued(int fd);

/* MARK: sockets */
int clinux_accept_cloexec(int fd);
int clinux_peer_credentials(int fd, uid_t *uid, gid_t *gid, pid_t *pid);

/* MARK: processes */
/* posix_spawn of `path` with `argv`/`envp`, in a new session, with fd 0 and 1 on /dev/null,
   2 on `log_fd`, `ready_fd` as descriptor 3, and no other descriptor. Returns the pid or
   -errno. */
pid_t clinux_spawn_daemon(const char *path, char *const argv[], char *const envp[], int log_fd, int ready_fd);
/* pipe2(O_CLOEXEC): both ends close-on-exec from the start (no window in which another
 * thread's spawn could inherit them). 0 or -1 with errno. */
int clinux_pipe_cloexec(int fds[2]);
int clinux_raise_nofile_limit(void);
/* Orphaned descendants are re-parented to this process (PR_SET_CHILD_SUBREAPER). */
int clinux_become_subreaper(void);
/* Names the calling thread (its first 15 bytes: the kernel's limit). */
void clinux_name_this_thread(const char *name);

/* `containerfs run`: SIGINT, SIGTERM and SIGHUP sent to this process with kill(2) are
   sent on to `child`; those the terminal sends already reach it (same process group). */
int clinux_forward_signals(int child);
/* Waits for `child` (retrying EINTR); its exit status, or 128 + the signal that killed it. */
int clinux_wait_status(int child);
/* MARK: epoll, with the (packed on x86-64) struct epoll_event kept on the C side.
   `events`: EPOLLIN etc.; `key`: what clinux_epoll_wait hands back for the descriptor. */
extern const uint32_t clinux_EPOLLIN, clinux_EPOLLRDHUP, clinux_EPOLLHUP, clinux_EPOLLERR;
int clinux_epoll_create(void);
int clinux_epoll_add(int epfd, int fd, uint32_t events, uint64_t key);
int clinux_epoll_modify(int epfd, int fd, uint32_t events, uint64_t key);
int clinux_epoll_remove(int epfd, int fd);
/* Waits up to `timeout_ms`; fills keys[i] and events[i]; returns the count, or -1 (errno). */
int clinux_epoll_wait(int epfd, uint64_t *keys, uint32_t *events, int max, int timeout_ms);
/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC. */
int clinux_accept_nonblocking(int fd);

/* ioctl(dst, FICLONE, src): share src's extents (XFS reflink, btrfs); -1 and errno otherwise. */
int clinux_ficlone(int dst, int src);
/// dup3(2): `newfd` atomically made a duplicate of `oldfd` (what glibc hides without _GNU_SOURCE).
int clinux_dup3(int oldfd, int newfd, int flags);

#endif
