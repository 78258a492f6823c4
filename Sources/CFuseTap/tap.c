#define _GNU_SOURCE
#include "CFuseTap.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* MARK: the wire (linux/fuse.h, protocol 7.33 and later; layouts are ABI) */

enum {
    IN_HEADER_SIZE = 40,          /* fuse_in_header: len, opcode, unique, nodeid, uid, gid, pid, ... */
    OUT_HEADER_SIZE = 16,         /* fuse_out_header: len, error, unique */

    OP_SETATTR = 4,
    OP_OPEN = 14,
    OP_WRITE = 16,
    OP_INIT = 26,

    INIT_FLAGS_AT = 12,           /* fuse_init_in / fuse_init_out: major, minor, max_readahead, flags */
    INIT_IN_FLAGS2_AT = 16,       /* fuse_init_in.flags2 (valid with FUSE_INIT_EXT) */
    INIT_OUT_FLAGS2_AT = 32,      /* fuse_init_out: ..., max_pages, map_alignment, flags2 */
    INIT_OUT_STACK_DEPTH_AT = 36, /* fuse_init_out.max_stack_depth (protocol 7.40) */
    OPEN_OUT_SIZE = 16,           /* fuse_open_out: fh, open_flags, backing_id */
    OPEN_OUT_FLAGS_AT = 8,
    OPEN_OUT_BACKING_AT = 12,
    ENTRY_OUT_SIZE = 128,         /* fuse_entry_out, before the fuse_open_out of a CREATE reply */
    SETATTR_VALID_AT = 0,         /* fuse_setattr_in.valid */
    OPEN_OPEN_FLAGS_AT = 4,       /* fuse_open_in: flags, open_flags */
    WRITE_WRITE_FLAGS_AT = 20,    /* fuse_write_in: fh, offset, size, write_flags */
};

#define FUSE_HANDLE_KILLPRIV_V2 (1u << 28)
#define FATTR_KILL_SUIDGID (1u << 11)
#define FUSE_OPEN_KILL_SUIDGID (1u << 0)
#define FUSE_WRITE_KILL_SUIDGID (1u << 2)
#define FUSE_INIT_EXT (1u << 30)
#define FUSE_WRITEBACK_CACHE_FLAG (1u << 16)
#define FUSE_PASSTHROUGH_FLAGS2 (1u << (37 - 32))
#define FUSE_OVER_IO_URING_FLAGS2 (1u << (41 - 32))
#define FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2 (1u << (36 - 32))
#define FOPEN_PASSTHROUGH (1u << 7)
/* What the kernel accepts next to FOPEN_PASSTHROUGH (FOPEN_PASSTHROUGH_MASK): DIRECT_IO,
 * NOFLUSH, PARALLEL_DIRECT_WRITES; anything else (KEEP_CACHE...) fails the open with EIO. */
#define FOPEN_PASSTHROUGH_ALLOWED ((1u << 0) | (1u << 5) | (1u << 6))

/* <linux/fuse.h> since 6.9; Debian bookworm's headers predate it. */
struct cfusetap_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
#define CFUSETAP_IOC_MAGIC 229
#define CFUSETAP_IOC_BACKING_OPEN _IOW(CFUSETAP_IOC_MAGIC, 1, struct cfusetap_backing_map)
#define CFUSETAP_IOC_BACKING_CLOSE _IOW(CFUSETAP_IOC_MAGIC, 2, uint32_t)

static uint32_t load32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* MARK: per-thread state */

static __thread int request_clears_setid;
/* The INIT this thread read last (libfuse answers it on the same thread): its unique id,
 * and what the kernel offered that libfuse 3.14 cannot ask for. */
static __thread uint64_t init_unique;
static __thread int init_offers_v2;
static __thread int init_offers_passthrough;
static __thread int init_offers_uring;
static __thread int init_offers_direct_io_mmap;
/* The backing id the OPEN or CREATE reply this thread is sending right now carries
 * (0: none); set only around fuse_reply_open/fuse_reply_create, which write on the
 * calling thread. */
static __thread int32_t reply_backing_id;

/* MARK: per-session wishes (a few sessions per process at most) */

enum { MAX_SESSIONS = 16 };
static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static int passthrough_fds[MAX_SESSIONS];
static int passthrough_count;
/* How each session's INIT was answered (0: not yet, 1: accepted, -errno: refused), for the
 * daemon, which must not report the mount live before the kernel has the answer, nor exit
 * 0 when libfuse refused INIT (it did so for -o max_read=1, after the mount had been
 * reported live). */
static int init_answer_fds[MAX_SESSIONS];
static int init_answer_values[MAX_SESSIONS];
static int init_answer_count;

void cfusetap_offer_passthrough(int fd)
{
    pthread_mutex_lock(&sessions_lock);
    if (passthrough_count < MAX_SESSIONS) passthrough_fds[passthrough_count++] = fd;
    pthread_mutex_unlock(&sessions_lock);
}

void cfusetap_forget_session(int fd)
{
    pthread_mutex_lock(&sessions_lock);
    for (int i = 0; i < passthrough_count; i++) {
        if (passthrough_fds[i] == fd) passthrough_fds[i--] = passthrough_fds[--passthrough_count];
    }
    for (int i = 0; i < init_answer_count; i++) {
        if (init_answer_fds[i] == fd) {
            init_answer_count--;
            init_answer_fds[i] = init_answer_fds[init_answer_count];
            init_answer_values[i--] = init_answer_values[init_answer_count];
        }
    }
    pthread_mutex_unlock(&sessions_lock);
}

/* Kept for cfusetap_init_answer (init_answer_fds, above). */
static void record_init_answer(int fd, int answer)
{
    pthread_mutex_lock(&sessions_lock);
    int i = 0;
    while (i < init_answer_count && init_answer_fds[i] != fd) i++;
    if (i < MAX_SESSIONS) {
        init_answer_fds[i] = fd;
        init_answer_values[i] = answer;
        if (i == init_answer_count) init_answer_count++;
    }
    pthread_mutex_unlock(&sessions_lock);
}

int cfusetap_init_answer(int fd)
{
    int answer = 0;
    pthread_mutex_lock(&sessions_lock);
    for (int i = 0; i < init_answer_count; i++) {
        if (init_answer_fds[i] == fd) answer = init_answer_values[i];
    }
    pthread_mutex_unlock(&sessions_lock);
    return answer;
}

static int wants_passthrough(int fd)
{
    int found = 0;
    pthread_mutex_lock(&sessions_lock);
    for (int i = 0; i < passthrough_count; i++) found |= passthrough_fds[i] == fd;
    pthread_mutex_unlock(&sessions_lock);
    return found;
}

int cfusetap_request_clears_setid(void) { return request_clears_setid; }

static int bit_at(const char *arg, size_t arglen, size_t at, uint32_t bit)
{
    return arglen >= at + 4 && (load32(arg + at) & bit) != 0;
}

/* Where each request kind carries the kernel's "clear the set-ID bits" bit. */
static const struct {
    uint32_t opcode;
    size_t at;
    uint32_t bit;
} kill_bits[] = {
    { OP_WRITE, WRITE_WRITE_FLAGS_AT, FUSE_WRITE_KILL_SUIDGID },
    { OP_SETATTR, SETATTR_VALID_AT, FATTR_KILL_SUIDGID },
    { OP_OPEN, OPEN_OPEN_FLAGS_AT, FUSE_OPEN_KILL_SUIDGID },
    /* Not CREATE: an O_CREAT|O_TRUNC that meets an existing file reopens it as the caller
     * with capabilities dropped (Volume.openExisting), which clears the bits by itself. */
};

void cfusetap_observe_request(int fd, const char *buf, size_t n)
{
    request_clears_setid = 0;
    if (n < IN_HEADER_SIZE) return;
    const char *arg = buf + IN_HEADER_SIZE;
    size_t arglen = n - IN_HEADER_SIZE;
    uint32_t opcode = load32(buf + 4);
    if (opcode == OP_INIT) {
        init_unique = load64(buf + 8);
        init_offers_v2 = bit_at(arg, arglen, INIT_FLAGS_AT, FUSE_HANDLE_KILLPRIV_V2);
        init_offers_passthrough = bit_at(arg, arglen, INIT_FLAGS_AT, FUSE_INIT_EXT)
            && bit_at(arg, arglen, INIT_IN_FLAGS2_AT, FUSE_PASSTHROUGH_FLAGS2) && wants_passthrough(fd);
        init_offers_direct_io_mmap = bit_at(arg, arglen, INIT_FLAGS_AT, FUSE_INIT_EXT)
            && bit_at(arg, arglen, INIT_IN_FLAGS2_AT, FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2);
        int wants_ring = cfusetap_ring_wanted(fd);
        init_offers_uring = wants_ring && bit_at(arg, arglen, INIT_FLAGS_AT, FUSE_INIT_EXT)
            && bit_at(arg, arglen, INIT_IN_FLAGS2_AT, FUSE_OVER_IO_URING_FLAGS2);
        if (wants_ring && !init_offers_uring) cfusetap_ring_answered_init(fd, 0);
        return;
    }
    for (size_t i = 0; i < sizeof kill_bits / sizeof kill_bits[0]; i++) {
        if (kill_bits[i].opcode == opcode) {
            request_clears_setid = bit_at(arg, arglen, kill_bits[i].at, kill_bits[i].bit);
            return;
        }
    }
}

/* MARK: the channel */

ssize_t cfusetap_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    if (n > 0) {
        cfusetap_observe_request(fd, buf, (size_t)n);
        if (cfusetap_ring_active()) cfusetap_ring_channel_request(fd, buf, (size_t)n);
    }
    return n;
}

/* The INIT reply, with what the kernel offered and libfuse 3.14 could not ask for. */
static ssize_t write_init_reply(int fd, struct iovec *iov)
{
    char reply[256];
    if (iov[1].iov_len < INIT_OUT_STACK_DEPTH_AT + 4 || iov[1].iov_len > sizeof reply) {
        if (init_offers_uring) cfusetap_ring_answered_init(fd, 0);
        return writev(fd, iov, 2);
    }
    memcpy(reply, iov[1].iov_base, iov[1].iov_len);
    uint32_t flags = load32(reply + INIT_FLAGS_AT);
    if (init_offers_v2) flags |= FUSE_HANDLE_KILLPRIV_V2;
    /* FUSE passthrough (kernel 6.9): the kernel refuses it alongside a writeback cache, and
     * a file system stacked on this one may then go at most one level deeper. */
    uint32_t flags2 = load32(reply + INIT_OUT_FLAGS2_AT);
    if (init_offers_passthrough && (flags & FUSE_WRITEBACK_CACHE_FLAG) == 0) {
        flags |= FUSE_INIT_EXT;
        flags2 |= FUSE_PASSTHROUGH_FLAGS2;
        uint32_t depth = 1;
        memcpy(reply + INIT_OUT_STACK_DEPTH_AT, &depth, sizeof depth);
    }
    /* Shared mappings of uncached handles (kernel 6.6; FOPEN_DIRECT_IO: O_DIRECT callers,
     * and under writeback a file changed in the store while the kernel held it): without
     * it such an mmap(MAP_SHARED) fails with ENODEV. */
    if (init_offers_direct_io_mmap) {
        flags |= FUSE_INIT_EXT;
        flags2 |= FUSE_DIRECT_IO_ALLOW_MMAP_FLAGS2;
    }
    /* FUSE over io_uring (kernel 6.14): requests then come through the session's ring,
     * whose queues register once the kernel has this reply. */
    if (init_offers_uring) {
        flags |= FUSE_INIT_EXT;
        flags2 |= FUSE_OVER_IO_URING_FLAGS2;
    }
    memcpy(reply + INIT_OUT_FLAGS2_AT, &flags2, sizeof flags2);
    memcpy(reply + INIT_FLAGS_AT, &flags, sizeof flags);
    struct iovec patched[2] = { iov[0], { reply, iov[1].iov_len } };
    ssize_t n = writev(fd, patched, 2);
    if (init_offers_uring) cfusetap_ring_answered_init(fd, n > 0);
    return n;
}

/* A reply goes where its request came from: the ring entry serving it, or /dev/fuse. */
static ssize_t send_reply(int fd, struct iovec *iov, int count)
{
    ssize_t sent;
    if (cfusetap_ring_active() && cfusetap_ring_route(fd, iov, count, &sent)) return sent;
    return writev(fd, iov, count);
}

/* An OPEN or CREATE reply naming the backing file the kernel should pass I/O to. */
static ssize_t write_open_reply(int fd, struct iovec *iov)
{
    char reply[ENTRY_OUT_SIZE + OPEN_OUT_SIZE];
    size_t len = iov[1].iov_len;
    if (len != OPEN_OUT_SIZE && len != ENTRY_OUT_SIZE + OPEN_OUT_SIZE) return writev(fd, iov, 2);
    memcpy(reply, iov[1].iov_base, len);
    char *open_out = reply + len - OPEN_OUT_SIZE;
    uint32_t open_flags = (load32(open_out + OPEN_OUT_FLAGS_AT) & FOPEN_PASSTHROUGH_ALLOWED) | FOPEN_PASSTHROUGH;
    memcpy(open_out + OPEN_OUT_FLAGS_AT, &open_flags, sizeof open_flags);
    memcpy(open_out + OPEN_OUT_BACKING_AT, &reply_backing_id, sizeof reply_backing_id);
    struct iovec patched[2] = { iov[0], { reply, len } };
    return send_reply(fd, patched, 2);
}

ssize_t cfusetap_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    /* An INTERRUPT answered EAGAIN while a ring serves: its request is still on the way to
     * libfuse; the ring delivers the interrupt again after it (DESIGN.md 31). */
    if (cfusetap_ring_active() && count >= 1 && iov[0].iov_len >= OUT_HEADER_SIZE) {
        const char *h = iov[0].iov_base;
        int32_t error;
        uint64_t unique = load64(h + 8);
        memcpy(&error, h + 4, sizeof error);
        if ((unique & 1) && error == -EAGAIN && cfusetap_ring_defer_interrupt(fd, unique & ~(uint64_t)1)) {
            size_t total = 0;
            for (int i = 0; i < count; i++) total += iov[i].iov_len;
            return (ssize_t)total;
        }
    }
    /* libfuse refuses INIT with an error reply (a lone header) from the thread that read it. */
    if (init_unique != 0 && count >= 1 && iov[0].iov_len >= OUT_HEADER_SIZE
        && load64((const char *)iov[0].iov_base + 8) == init_unique) {
        int32_t refused;
        memcpy(&refused, (const char *)iov[0].iov_base + 4, sizeof refused);
        if (refused != 0) {
            init_unique = 0;
            ssize_t n = send_reply(fd, iov, count);
            record_init_answer(fd, refused < 0 ? refused : -EPROTO);
            return n;
        }
    }
    if (count != 2 || iov[0].iov_len != OUT_HEADER_SIZE) return send_reply(fd, iov, count);
    const char *header = iov[0].iov_base;
    int32_t error;
    memcpy(&error, header + 4, sizeof error);
    if (error != 0) return send_reply(fd, iov, count);
    /* libfuse sends the INIT reply as [fuse_out_header][fuse_init_out] before any other
     * request can arrive, from the thread that read the INIT. */
    if (init_unique != 0 && load64(header + 8) == init_unique) {
        init_unique = 0;
        ssize_t n = write_init_reply(fd, iov);
        record_init_answer(fd, n > 0 ? 1 : errno ? -errno : -EIO);
        return n;
    }
    if (reply_backing_id > 0) return write_open_reply(fd, iov);
    return send_reply(fd, iov, count);
}

ssize_t cfusetap_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                unsigned int flags, void *userdata)
{
    (void)userdata;
    /* Not used while SPLICE_READ is off (decision 9); kept so the tap never changes which
     * paths libfuse takes. A spliced WRITE would bypass the look at its write_flags. */
    return splice(fdin, offin, fdout, offout, len, flags);
}

/* libfuse splices a data reply (header, then the file's pages) from a pipe. A reply for a
 * ring request is read out of the pipe into its entry; any other, once its header has been
 * read, is written whole from memory (only while a ring exists: requests then reach
 * /dev/fuse only before the ring is ready). */
ssize_t cfusetap_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                             unsigned int flags, void *userdata)
{
    (void)userdata;
    if (!cfusetap_ring_active() || offin || len < OUT_HEADER_SIZE) return splice(fdin, offin, fdout, offout, len, flags);
    char header[OUT_HEADER_SIZE];
    if (cfusetap_read_full(fdin, header, OUT_HEADER_SIZE) < 0) { errno = EIO; return -1; }
    int failed = 0;
    if (cfusetap_ring_route_pipe(fdout, header, fdin, len - OUT_HEADER_SIZE, &failed)) {
        if (failed) { errno = EIO; return -1; }
        return (ssize_t)len;
    }
    char *message = malloc(len);
    if (!message) { errno = ENOMEM; return -1; }
    memcpy(message, header, OUT_HEADER_SIZE);
    if (cfusetap_read_full(fdin, message + OUT_HEADER_SIZE, len - OUT_HEADER_SIZE) < 0) {
        free(message);
        errno = EIO;
        return -1;
    }
    ssize_t n = write(fdout, message, len);
    free(message);
    return n;
}

/* MARK: FUSE passthrough */

int cfusetap_backing_open(int devfd, int fd)
{
    struct cfusetap_backing_map map = { .fd = fd, .flags = 0, .padding = 0 };
    int id = ioctl(devfd, CFUSETAP_IOC_BACKING_OPEN, &map);
    return id < 0 ? -errno : id;
}

int cfusetap_backing_close(int devfd, int id)
{
    uint32_t backing = (uint32_t)id;
    return ioctl(devfd, CFUSETAP_IOC_BACKING_CLOSE, &backing) < 0 ? -errno : 0;
}

void cfusetap_reply_passthrough(int backing_id) { reply_backing_id = backing_id; }

/* MARK: notifications libfuse 3.14 cannot send */

/* Their codes and layouts, from <linux/fuse.h>; Debian bookworm's headers predate them. */
#define CFUSETAP_NOTIFY_INVAL_ENTRY 3
#define CFUSETAP_NOTIFY_PRUNE 9       /* protocol 7.45 (kernel 6.18) */
#define CFUSETAP_EXPIRE_ONLY (1u << 0) /* protocol 7.38 (kernel 6.2): `flags` was padding */
struct cfusetap_out_header {
    uint32_t len;
    int32_t error;   /* a notification's code */
    uint64_t unique; /* 0: a notification */
};
struct cfusetap_notify_prune_out {
    uint32_t count;
    uint32_t padding;
    uint64_t spare;
};
struct cfusetap_notify_inval_entry_out {
    uint64_t parent;
    uint32_t namelen;
    uint32_t flags;
};
_Static_assert(sizeof(struct cfusetap_out_header) == OUT_HEADER_SIZE, "fuse_out_header");
_Static_assert(sizeof(struct cfusetap_notify_prune_out) == 16, "fuse_notify_prune_out");
_Static_assert(sizeof(struct cfusetap_notify_inval_entry_out) == 16, "fuse_notify_inval_entry_out");

/* Writes notification `code`: its fixed part `out`, then `payload`. A write to /dev/fuse is
 * one message, whole or not at all. 0 or -errno. */
static int send_notification(int devfd, int32_t code, const void *out, size_t out_size,
                             const void *payload, size_t payload_size)
{
    struct cfusetap_out_header header = {
        .len = (uint32_t)(sizeof header + out_size + payload_size),
        .error = code,
        .unique = 0,
    };
    struct iovec iov[3] = {
        { .iov_base = &header, .iov_len = sizeof header },
        { .iov_base = (void *)out, .iov_len = out_size },
        { .iov_base = (void *)payload, .iov_len = payload_size },
    };
    return writev(devfd, iov, 3) < 0 ? -errno : 0;
}

int cfusetap_notify_prune(int devfd, const uint64_t *nodeids, uint32_t count)
{
    struct cfusetap_notify_prune_out out = { .count = count, .padding = 0, .spare = 0 };
    return send_notification(devfd, CFUSETAP_NOTIFY_PRUNE, &out, sizeof out, nodeids, (size_t)count * sizeof(uint64_t));
}

int cfusetap_notify_expire_entry(int devfd, uint64_t parent, const char *name, uint32_t namelen)
{
    struct cfusetap_notify_inval_entry_out out = { .parent = parent, .namelen = namelen, .flags = CFUSETAP_EXPIRE_ONLY };
    /* the name and its NUL */
    return send_notification(devfd, CFUSETAP_NOTIFY_INVAL_ENTRY, &out, sizeof out, name, (size_t)namelen + 1);
}
