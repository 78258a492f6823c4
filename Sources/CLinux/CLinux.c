/* The GNU-only half of CLinux.h: compiled on its own, with _GNU_SOURCE. */
#define _GNU_SOURCE 1
#include "CLinux.h"

#include <errno.h>
#include <stdint.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/fanotify.h>
#include <sys/vfs.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <string.h>

const int clinux_O_PATH = O_PATH;
const int clinux_O_DIRECT = O_DIRECT;
const int clinux_O_NOATIME = O_NOATIME;
const int clinux_O_TMPFILE = O_TMPFILE;
const int clinux_AT_EMPTY_PATH = AT_EMPTY_PATH;
const unsigned int clinux_RENAME_NOREPLACE = RENAME_NOREPLACE;
const unsigned int clinux_RENAME_EXCHANGE = RENAME_EXCHANGE;
const unsigned int clinux_RENAME_WHITEOUT = RENAME_WHITEOUT;
const long clinux_UTIME_NOW = UTIME_NOW;
const long clinux_UTIME_OMIT = UTIME_OMIT;

long clinux_setfsuid(uid_t uid) { return syscall(SYS_setfsuid, uid); }
long clinux_setfsgid(gid_t gid) { return syscall(SYS_setfsgid, gid); }

int clinux_keep_caps_on_fsuid_change(void)
{
    return prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0);
}

int clinux_clear_securebits(void) { return prctl(PR_SET_SECUREBITS, 0, 0, 0, 0); }

int clinux_securebits(void) { return prctl(PR_GET_SECUREBITS, 0, 0, 0, 0); }

int clinux_set_securebits(int bits) { return prctl(PR_SET_SECUREBITS, (unsigned long)bits, 0, 0, 0); }

int clinux_set_fsetid_capability(int effective)
{
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    int was = (data[0].effective >> CAP_FSETID) & 1;
    if (effective) data[0].effective |= 1u << CAP_FSETID;
    else data[0].effective &= ~(1u << CAP_FSETID);
    if (syscall(SYS_capset, &header, data) != 0) return -1;
    return was;
}

long clinux_getdents64(int fd, void *buf, size_t len) { return syscall(SYS_getdents64, fd, buf, len); }

int clinux_openat(int dirfd, const char *path, int flags, mode_t mode) { return openat(dirfd, path, flags, mode); }
int clinux_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }
int clinux_renameat2(int olddir, const char *old, int newdir, const char *new_, unsigned int flags)
{ return renameat2(olddir, old, newdir, new_, flags); }
int clinux_fallocate(int fd, int mode, off_t offset, off_t len) { return fallocate(fd, mode, offset, len); }
ssize_t clinux_copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t len, unsigned int flags)
{ return copy_file_range(in, inoff, out, outoff, len, flags); }
ssize_t clinux_getxattr(const char *path, const char *name, void *value, size_t size) { return getxattr(path, name, value, size); }
ssize_t clinux_listxattr(const char *path, char *list, size_t size) { return listxattr(path, list, size); }
int clinux_setxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{ return setxattr(path, name, value, size, flags); }
int clinux_removexattr(const char *path, const char *name) { return removexattr(path, name); }
ssize_t clinux_flistxattr(int fd, char *list, size_t size) { return flistxattr(fd, list, size); }
ssize_t clinux_fgetxattr(int fd, const char *name, void *value, size_t size) { return fgetxattr(fd, name, value, size); }

// listxattrat(2) and getxattrat(2), Linux 6.13: the attributes of `name` in `dir`, never
// following a link, without opening it. -1 with ENOSYS on older kernels.
#ifndef SYS_getxattrat
#define SYS_getxattrat 464
#endif
#ifndef SYS_listxattrat
#define SYS_listxattrat 465
#endif
struct clinux_xattr_args { uint64_t value; uint32_t size; uint32_t flags; };
ssize_t clinux_listxattrat(int dir, const char *name, char *list, size_t size) {
    return syscall(SYS_listxattrat, dir, name, AT_SYMLINK_NOFOLLOW, list, size);
}
ssize_t clinux_getxattrat(int dir, const char *name, const char *attribute, void *value, size_t size) {
    struct clinux_xattr_args args = { (uint64_t)(uintptr_t)value, (uint32_t)size, 0 };
    return syscall(SYS_getxattrat, dir, name, AT_SYMLINK_NOFOLLOW, attribute, &args, sizeof args);
}
int clinux_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{ return fsetxattr(fd, name, value, size, flags); }
int clinux_utimensat_empty_path(int fd, const void *times) { return utimensat(fd, "", (const struct timespec *)times, AT_EMPTY_PATH); }
int clinux_fchownat_empty_path(int fd, uid_t uid, gid_t gid) { return fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW); }

int clinux_birth_time(int dirfd, const char *path, int flags, int64_t *sec, uint32_t *nsec)
{
    struct statx sx;
    if (statx(dirfd, path, flags, STATX_BTIME, &sx) != 0) return -1;
    if (!(sx.stx_mask & STATX_BTIME)) return 0;
    *sec = sx.stx_btime.tv_sec;
    *nsec = sx.stx_btime.tv_nsec;
    return 1;
}


int clinux_accept_cloexec(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int clinux_peer_credentials(int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    *pid = cred.pid;
    return 0;
}

pid_t clinux_spawn_daemon(const char *path, char *const argv[], char *const envp[], int log_fd, int ready_fd)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    pid_t pid;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
    posix_spawn_file_actions_adddup2(&actions, ready_fd, 3);
    /* Nothing else: a descriptor the parent did not mean to pass (libfuse's fusermount3
     * socket, say) would keep its other end waiting on the child. */
    posix_spawn_file_actions_addclosefrom_np(&actions, 4);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    int rc = posix_spawn(&pid, path, &actions, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc == 0 ? pid : -rc;
}

int clinux_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/* Every item the kernel holds keeps a descriptor (DESIGN.md 28), so the limit bounds how many
 * inodes the kernel may cache, not anything a user asked for. The limit inherited from a
 * login shell is often a few thousand; with CAP_SYS_RESOURCE the hard limit is raised to what
 * the kernel allows a process (fs.nr_open), else the soft one to the hard one. */
int clinux_raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    unsigned long long most = 0;
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    if (f) {
        if (fscanf(f, "%llu", &most) != 1) most = 0;
        fclose(f);
    }
    if (most > rl.rlim_max) {
        struct rlimit raised = { .rlim_cur = (rlim_t)most, .rlim_max = (rlim_t)most };
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return 0;
    }
    rl.rlim_cur = rl.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &rl);
}

int clinux_become_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

int clinux_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

long clinux_bytes_queued(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? (long)n : 0;
}

int clinux_wait_readable(int fd, unsigned microseconds) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    struct timespec t = { .tv_sec = microseconds / 1000000, .tv_nsec = (long)(microseconds % 1000000) * 1000 };
    return ppoll(&p, 1, &t, NULL);
}

void clinux_name_this_thread(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = 0;
    pthread_setname_np(pthread_self(), cut);
}

static volatile sig_atomic_t forwarded_child;

static void forward_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    /* SI_USER, SI_QUEUE, SI_TKILL: from a process; a terminal's (SI_KERNEL) reached the child too. */
    if (info->si_code <= 0 && forwarded_child > 0) kill(forwarded_child, sig);
}

int clinux_forward_signals(int child) {
    forwarded_child = child;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    int signals[] = {SIGINT, SIGTERM, SIGHUP};
    for (unsigned i = 0; i < sizeof signals / sizeof *signals; i++)
        if (sigaction(signals[i], &sa, NULL) != 0) return -1;
    return 0;
}

int clinux_wait_status(int child) {
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return 1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}
const uint32_t clinux_EPOLLIN = EPOLLIN, clinux_EPOLLRDHUP = EPOLLRDHUP, clinux_EPOLLHUP = EPOLLHUP,
               clinux_EPOLLERR = EPOLLERR;

int clinux_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int epoll_change(int epfd, int op, int fd, uint32_t events, uint64_t key)
{
    struct epoll_event e = {.events = events, .data.u64 = key};
    return epoll_ctl(epfd, op, fd, &e);
}
int clinux_epoll_add(int epfd, int fd, uint32_t events, uint64_t key) { return epoll_change(epfd, EPOLL_CTL_ADD, fd, events, key); }
int clinux_epoll_modify(int epfd, int fd, uint32_t events, uint64_t key) { return epoll_change(epfd, EPOLL_CTL_MOD, fd, events, key); }
int clinux_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int clinux_epoll_wait(int epfd, uint64_t *keys, uint32_t *events, int max, int timeout_ms)
{
    struct epoll_event got[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, got, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        keys[i] = got[i].data.u64;
        events[i] = got[i].events;
    }
    return n;
}

int clinux_accept_nonblocking(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK); }

int clinux_dup3(int oldfd, int newfd, int flags) {
    return dup3(oldfd, newfd, flags);
}

int clinux_ficlone(int dst, int src) {
#ifdef FICLONE
    return ioctl(dst, FICLONE, src);
#else
    return ioctl(dst, _IOW(0x94, 9, int), src);
#endif
}

/* MARK: fanotify */
const uint64_t clinux_FAN_CREATE = FAN_CREATE, clinux_FAN_DELETE = FAN_DELETE, clinux_FAN_MOVED_FROM = FAN_MOVED_FROM,
    clinux_FAN_MOVED_TO = FAN_MOVED_TO, clinux_FAN_ATTRIB = FAN_ATTRIB, clinux_FAN_CLOSE_WRITE = FAN_CLOSE_WRITE, clinux_FAN_MODIFY = FAN_MODIFY, clinux_FAN_RENAME = FAN_RENAME,
    clinux_FAN_ONDIR = FAN_ONDIR, clinux_FAN_Q_OVERFLOW = FAN_Q_OVERFLOW, clinux_FAN_DELETE_SELF = FAN_DELETE_SELF;

int clinux_fanotify_init(int unlimited_marks) {
    /* TARGET_FID: an entry event also carries the handle of the entry itself (a directory made,
       moved or removed), not only its directory's. */
    unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME_TARGET;
    return fanotify_init(flags | (unlimited_marks ? FAN_UNLIMITED_MARKS : 0), O_RDONLY | O_LARGEFILE);
}

static const uint64_t clinux_fan_mask = FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ATTRIB | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_ONDIR;

int clinux_fanotify_mark_filesystem(int fan, int dirfd) {
    /* ".": the store's descriptors are O_PATH, which fanotify_mark takes only through a path. */
    return fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, clinux_fan_mask, dirfd, ".");
}

int clinux_fanotify_mark_file(int fan, const char *path) {
    uint64_t mask = FAN_ATTRIB | FAN_MODIFY | FAN_CLOSE_WRITE;
#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE 0x00000200
#endif
    /* EEXIST: the inode has a mark of ours that is not evictable (a directory's never is). A
       kernel before 5.19 refuses evictable marks (EINVAL): no file marks then, rather than
       marks that keep every file in memory. */
    if (fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_EVICTABLE, mask, AT_FDCWD, path) == 0) return 0;
    if (errno != EEXIST) return -1;
    return fanotify_mark(fan, FAN_MARK_ADD, mask, AT_FDCWD, path);
}

int clinux_fanotify_unmark_file(int fan, const char *path) {
    return fanotify_mark(fan, FAN_MARK_REMOVE, FAN_ATTRIB | FAN_MODIFY | FAN_CLOSE_WRITE, AT_FDCWD, path);
}

int clinux_fanotify_mark_directory(int fan, int dirfd) {
    return fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_ONLYDIR, clinux_fan_mask | FAN_EVENT_ON_CHILD, dirfd, ".");
}

long clinux_fanotify_parse(const void *buf, long len, long offset, struct clinux_fan_event *out) {
    if (offset + (long)sizeof(struct fanotify_event_metadata) > len) return 0;
    const struct fanotify_event_metadata *m = (const void *)((const char *)buf + offset);
    if (m->event_len < sizeof(*m) || offset + (long)m->event_len > len || m->vers != FANOTIFY_METADATA_VERSION) return 0;
    out->mask = m->mask;
    out->pid = m->pid;
    out->dir = NULL;
    out->name = NULL;
    out->object = NULL;
    out->old_dir = NULL;
    out->old_name = NULL;
    out->new_dir = NULL;
    out->new_name = NULL;
    long at = m->metadata_len;
    while (at + (long)sizeof(struct fanotify_event_info_header) <= (long)m->event_len) {
        const struct fanotify_event_info_header *h = (const void *)((const char *)m + at);
        if (h->len < sizeof(*h) || at + h->len > m->event_len) break;
        const struct fanotify_event_info_fid *fid = (const void *)h;
        const struct file_handle *handle = (const void *)fid->handle;
        switch (h->info_type) {
        case FAN_EVENT_INFO_TYPE_DFID_NAME:
            out->dir = handle;
            out->name = (const char *)handle->f_handle + handle->handle_bytes;
            break;
        case FAN_EVENT_INFO_TYPE_DFID:
            out->dir = handle;
            break;
        case FAN_EVENT_INFO_TYPE_FID:
            out->object = handle;
            break;
        case FAN_EVENT_INFO_TYPE_OLD_DFID_NAME:
            out->old_dir = handle;
            out->old_name = (const char *)handle->f_handle + handle->handle_bytes;
            break;
        case FAN_EVENT_INFO_TYPE_NEW_DFID_NAME:
            out->new_dir = handle;
            out->new_name = (const char *)handle->f_handle + handle->handle_bytes;
            break;
        default:
            break;
        }
        at += h->len;
    }
    return m->event_len;
}

int clinux_open_handle(int mount_fd, const void *handle) {
    return open_by_handle_at(mount_fd, (struct file_handle *)handle, O_PATH | O_CLOEXEC);
}

long clinux_fs_type(int fd) {
    struct statfs fs;
    return fstatfs(fd, &fs) == 0 ? (long)fs.f_type : 0;
}
