/*
 * A tap on the /dev/fuse channel, for the one thing libfuse 3.14 cannot say.
 *
 * FUSE_HANDLE_KILLPRIV_V2 (kernel 5.11, protocol 7.33) moves clearing set-user-ID and
 * set-group-ID bits on write and truncate from the kernel to the file system. Its real
 * prize is SB_NOSEC: without it the kernel asks the daemon for `security.capability`
 * before *every* write(2) (file_remove_privs), doubling the round trips of small writes.
 * libfuse learned the flag in 3.16; 3.14 neither offers it in INIT nor passes on the
 * per-request bits that go with it (write_flags, setattr valid, open_flags).
 *
 * libfuse 3.14 does let a file system bring its own channel I/O (fuse_session_custom_io).
 * These four functions are that I/O: plain read/writev/splice on the same descriptor,
 * plus a look at the bytes going by:
 *
 *  - read: the INIT request's offered flags are remembered for this thread (libfuse
 *    answers INIT on the thread that read it); for WRITE, SETATTR and OPEN the
 *    kernel's "caller lacks CAP_FSETID, clear the set-ID bits" bit is kept for this thread
 *    until the next request it reads, which is the one its handler runs for.
 *  - writev: the INIT reply gets FUSE_HANDLE_KILLPRIV_V2 added when the kernel offered it,
 *    and FUSE_PASSTHROUGH (kernel 6.9) when the session asked for it; an OPEN or CREATE
 *    reply sent while `cfusetap_reply_passthrough` is set gets FOPEN_PASSTHROUGH and the
 *    backing id (libfuse 3.16 learned both; 3.14 has a zero `padding` where the id goes).
 *
 * No allocation on the /dev/fuse path; per-thread state, and one short lock on reading an
 * INIT. With an io_uring ring (below) replies look up their entry, under a lock when
 * they are made off the entry's own thread. The wire
 * layouts used are the kernel's <linux/fuse.h> (stable ABI), spelled out in the .c file.
 */
#ifndef CFUSETAP_H
#define CFUSETAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

ssize_t cfusetap_read(int fd, void *buf, size_t len, void *userdata);
ssize_t cfusetap_writev(int fd, struct iovec *iov, int count, void *userdata);
ssize_t cfusetap_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                unsigned int flags, void *userdata);
ssize_t cfusetap_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                             unsigned int flags, void *userdata);

/* Whether the request this thread read last asks the file system to clear set-ID bits
 * (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID). Read it in the
 * request's handler, before it can be parked and resumed on another thread. */
int cfusetap_request_clears_setid(void);

/* FUSE passthrough (DESIGN.md 29). Before the session's first request: offer the kernel
 * passthrough in the INIT reply of the session on `fd` (if the kernel offers it). */
void cfusetap_offer_passthrough(int fd);
/* The session on `fd` is gone (its descriptor number may be reused). */
void cfusetap_forget_session(int fd);
/* How the session on `fd` answered the kernel's INIT: 0 not yet, 1 accepted (the reply
 * was written), -errno refused (or the reply could not be written). */
int cfusetap_init_answer(int fd);
/* FUSE_DEV_IOC_BACKING_OPEN on the session's /dev/fuse descriptor: registers `fd` (an
 * O_PATH descriptor will do) as a backing file; its id (> 0), or -errno. */
int cfusetap_backing_open(int devfd, int fd);
/* FUSE_DEV_IOC_BACKING_CLOSE: 0 or -errno. */
int cfusetap_backing_close(int devfd, int id);
/* The OPEN/CREATE reply this thread sends next carries `backing_id` (0: none again). */
void cfusetap_reply_passthrough(int backing_id);

/* FUSE_NOTIFY_PRUNE (protocol 7.45, DESIGN.md 28): asks the kernel to drop the unused
 * entries of these nodes, and so forget them. 0 or -errno. */
int cfusetap_notify_prune(int devfd, const uint64_t *nodeids, uint32_t count);

/* FUSE_NOTIFY_INVAL_ENTRY with FUSE_EXPIRE_ONLY (protocol 7.38): the entry `name` (NUL
 * terminated, `namelen` bytes before the NUL) of `parent` is looked up again at its next
 * use, but not unhashed: a working directory or a mount there is left alone. 0 or -errno. */
int cfusetap_notify_expire_entry(int devfd, uint64_t parent, const char *name, uint32_t namelen);

/* FUSE over io_uring (kernel 6.14, DESIGN.md 31): one queue per possible CPU, served by a
 * thread pinned to it, so a request is answered on the CPU that made it. `process` gets
 * each request laid out as a read(2) of /dev/fuse would give it (header, arguments), on the
 * queue's thread (requests that wait on the disk, such as FSYNC, on a worker of one of the
 * queue's slow lanes, so they do not hold up the queue); replies go through the tap's
 * writev/splice_send, which commit them to the entry they answer (from any thread). The
 * ring is made before the mount (its threads wait), attached to the session's /dev/fuse
 * descriptor before INIT is read; the queues register once the INIT reply, offering
 * FUSE_OVER_IO_URING, is out. A queue that cannot go on ends
 * the session with SIGTERM (its CPU's callers would wait for good otherwise). */
typedef void (*cfusetap_ring_process)(void *context, void *request, size_t length);
struct cfusetap_ring;
/* Queues starting with `depth` entries of `payload` bytes (at least max_write). NULL and
 * `*error` (an errno) on failure. */
struct cfusetap_ring *cfusetap_ring_new(unsigned depth, size_t payload, cfusetap_ring_process process,
                                        void *context, int *error);
/* The session's /dev/fuse descriptor, before its INIT is read. */
void cfusetap_ring_attach(struct cfusetap_ring *ring, int devfd);
/* Whether requests have come through the ring (the kernel took it). */
int cfusetap_ring_serving(struct cfusetap_ring *ring);
/* Requests served through the ring so far. */
uint64_t cfusetap_ring_requests(struct cfusetap_ring *ring);
/* Requests other than FORGET and INTERRUPT that still came through /dev/fuse after the
 * ring had served its first (none, unless the kernel fell back). */
uint64_t cfusetap_ring_strays(struct cfusetap_ring *ring);
/* Whether the kernel took the ring: INIT offered and accepted it, on a FUSE device, and every
 * queue registered (false also before INIT). */
int cfusetap_ring_taken(struct cfusetap_ring *ring);
/* Requests (not INIT, FORGET or INTERRUPT) that came through /dev/fuse, the ring taken, before
 * it had served any. */
uint64_t cfusetap_ring_unringed(struct cfusetap_ring *ring);
/* Interrupts that reached libfuse before their request did, given to it again once the
 * request was there and still unanswered (parked). */
uint64_t cfusetap_ring_redelivered(struct cfusetap_ring *ring);
/* Stops the queues' threads (after the session loop) and frees everything. */
void cfusetap_ring_stop(struct cfusetap_ring *ring);

/* One reader of /dev/fuse per CPU (DESIGN.md 33), the transport without io_uring: a thread
 * pinned to each CPU this process may run on (up to 16; two on a single CPU) waits in
 * poll(2), so that the reader on the caller's CPU serves its request without waking another
 * processor. `process` gets each request as read(2) gave it, on the reader's thread (FSYNC
 * and kin on a worker of one of the reader's slow lanes, lane.h). Serves on the calling
 * thread's behalf until the kernel ends the session (0), `exited(context)` says the session
 * was told to stop (0), or reading fails (-errno). */
typedef int (*cfusetap_exited)(void *context);
struct cfusetap_readers_counts {
    unsigned readers;
    uint64_t requests;
    uint64_t idle_wakeups;    /* a reader woken for a request another one took */
};
int cfusetap_readers_serve(int devfd, size_t size, cfusetap_ring_process process, cfusetap_exited exited,
                           void *context, struct cfusetap_readers_counts *counts);

#endif
