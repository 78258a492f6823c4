#define _GNU_SOURCE
#include "CFuseTap.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
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
    SETATTR_VALID_AT = 0,         /* fuse_setattr_in.valid */
    OPEN_OPEN_FLAGS_AT = 4,       /* fuse_open_in: flags, open_flags */
    WRITE_WRITE_FLAGS_AT = 20,    /* fuse_write_in: fh, offset, size, write_flags */
};

#define FUSE_HANDLE_KILLPRIV_V2 (1u << 28)
#define FATTR_KILL_SUIDGID (1u << 11)
#define FUSE_OPEN_KILL_SUIDGID (1u << 0)
#define FUSE_WRITE_KILL_SUIDGID (1u << 2)

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
/* The unique id of an INIT this thread read whose kernel offered KILLPRIV_V2 (0: none). */
static __thread uint64_t init_offering_v2;

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

static void look_at_request(const char *buf, size_t n)
{
    request_clears_setid = 0;
    if (n < IN_HEADER_SIZE) return;
    const char *arg = buf + IN_HEADER_SIZE;
    size_t arglen = n - IN_HEADER_SIZE;
    uint32_t opcode = load32(buf + 4);
    if (opcode == OP_INIT) {
        init_offering_v2 = bit_at(arg, arglen, INIT_FLAGS_AT, FUSE_HANDLE_KILLPRIV_V2) ? load64(buf + 8) : 0;
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
    if (n > 0) look_at_request(buf, (size_t)n);
    return n;
}

ssize_t cfusetap_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    /* libfuse sends the INIT reply as [fuse_out_header][fuse_init_out] before any other
     * request can arrive, from the thread that read the INIT. */
    if (init_offering_v2 != 0 && count == 2 && iov[0].iov_len == OUT_HEADER_SIZE) {
        const char *header = iov[0].iov_base;
        if (load64(header + 8) == init_offering_v2) {
            init_offering_v2 = 0;
            int32_t error;
            memcpy(&error, header + 4, sizeof error);
            char reply[256];
            if (error == 0 && iov[1].iov_len >= INIT_FLAGS_AT + 4 && iov[1].iov_len <= sizeof reply) {
                memcpy(reply, iov[1].iov_base, iov[1].iov_len);
                uint32_t flags = load32(reply + INIT_FLAGS_AT) | FUSE_HANDLE_KILLPRIV_V2;
                memcpy(reply + INIT_FLAGS_AT, &flags, sizeof flags);
                struct iovec patched[2] = { iov[0], { reply, iov[1].iov_len } };
                return writev(fd, patched, 2);
            }
        }
    }
    return writev(fd, iov, count);
}

ssize_t cfusetap_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                unsigned int flags, void *userdata)
{
    (void)userdata;
    /* Not used while SPLICE_READ is off (decision 9); kept so the tap never changes which
     * paths libfuse takes. A spliced WRITE would bypass the look at its write_flags. */
    return splice(fdin, offin, fdout, offout, len, flags);
}

ssize_t cfusetap_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                             unsigned int flags, void *userdata)
{
    (void)userdata;
    return splice(fdin, offin, fdout, offout, len, flags);
}
