#define _GNU_SOURCE
#include "CFuseTap.h"
#include "lane.h"
#include "ring.h"

#include <errno.h>
#include <stddef.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* MARK: the wire (<linux/fuse.h> 6.14, FUSE over io_uring; bookworm's headers predate it) */

struct ring_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;   /* the request's unique: named again in its commit */
    uint32_t payload_sz;  /* bytes of the payload buffer in use, either way */
    uint32_t padding;
    uint64_t reserved;
};

struct ring_req_header {
    char in_out[128];     /* fuse_in_header of the request; fuse_out_header of the reply */
    char op_in[128];      /* the request's first argument (its per-opcode struct) */
    struct ring_ent_in_out ent;
};

struct ring_cmd_req {     /* in the SQE's 80-byte command area (IORING_SETUP_SQE128) */
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

enum {
    CMD_REGISTER = 1,
    CMD_COMMIT_AND_FETCH = 2,
    SQE_SIZE = 128,
    IN_HEADER = 40,
    OUT_HEADER = 16,
    /* Room before each payload buffer for the fuse_in_header and the per-opcode struct, so
     * that a request lies contiguous in memory for libfuse without moving its payload. */
    PREFIX = 4096,
    POLL_TAG = 0,         /* user_data of the eventfd poll; an entry's is its address */
    /* Entries of a queue: a parked request (waiting for a claim) keeps its entry until it is
     * answered, so a queue grows while fewer than SPARE entries are free for the kernel,
     * GROW at a time, up to MAX_ENTRIES (payload buffers are mapped lazily and unreserved:
     * an entry costs only the pages its largest request touched). Spare entries must be
     * there *before* requests queue up: the kernel hands a request waiting in its queue only
     * to an entry that commits, never to one that registers. */
    SPARE = 8,
    GROW = 16,
    MAX_ENTRIES = 1024,
    /* Every entry has at most one command in flight or prepared, plus the poll: the
     * submission ring is never full, so nothing is submitted while a handler runs. */
    SQ_SIZE = 2048,
    CQ_SIZE = 4096,
    OP_FORGET = 2,
    OP_INIT = 26,
    OP_INTERRUPT = 36,
    OP_BATCH_FORGET = 42,
    PENDING_INTERRUPTS = 64,
};

/* MARK: one queue per CPU, one thread per queue */

struct ring_entry {
    struct ring_queue *queue;
    struct ring_req_header *header;
    char *memory;                 /* PREFIX bytes, then the payload buffer */
    struct iovec iov[2];
    uint64_t commit_id;           /* the request being served; 0 when none */
    _Atomic uint64_t answered;    /* the request whose reply was made last (maybe not yet committed) */
    uint32_t last_op;             /* the command in flight, and its commit id, */
    uint64_t last_commit;         /* to issue again after EAGAIN/EINTR */
    struct ring_entry *next_handed;
    int dead;
    /* in a slow lane: the request laid out, waiting for a worker */
    struct lane_item slow;
    char *request;
    uint32_t length;
};

struct ring_queue {
    struct cfusetap_ring *ring;
    unsigned qid;
    int fd;                       /* the io_uring */
    int eventfd;                  /* other threads' commits, and stop */
    pthread_t thread;
    int started;
    unsigned live;                /* entries registered and not given up */
    unsigned held;                /* entries whose request the daemon has not answered yet */
    /* submission ring (only this queue's thread touches it) */
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, sq_entries, unsubmitted;
    char *sqes;
    /* completion ring */
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_cqe *cqes;
    void *rings;
    size_t rings_size, sqes_size;
    /* commits made on other threads (a parked request answered later) */
    pthread_mutex_t lock;
    struct ring_entry *handed;
    struct ring_entry **entries;  /* MAX_ENTRIES slots, `count` of them made */
    _Atomic unsigned count;
    struct lane lanes[LANE_KINDS]; /* see "the slow lanes" */
};

enum { WAITING, SERVING, DECLINED, STOPPING };

struct cfusetap_ring {
    int devfd;
    unsigned nqueues, depth;      /* depth: entries each queue starts with */
    size_t payload;
    cfusetap_ring_process process;
    void *context;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int state;
    _Atomic uint64_t requests;
    _Atomic uint64_t strays;      /* requests read from /dev/fuse once the ring served one */
    _Atomic uint64_t unringed;    /* ... and before it did (but INIT) */
    _Atomic uint64_t redelivered; /* interrupts given to libfuse again (see process_request) */
    struct ring_queue *queues;
    int registered;               /* in the registry (under registry_lock) */
    struct cfusetap_ring *next;   /* the registry: rings by /dev/fuse descriptor */
    /* Interrupts libfuse answered EAGAIN because their request had not reached it yet
     * (under `lock`): given to it again once the request has (see serve). */
    uint64_t pending_interrupts[PENDING_INTERRUPTS];
    unsigned next_interrupt;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cfusetap_ring *registry;
static _Atomic int live_rings;

static void set_error(struct ring_entry *e, int32_t error);
static int ring_state(struct cfusetap_ring *ring);
static void unregister(struct cfusetap_ring *ring);
static void commit(struct ring_entry *e);

/* The entry whose request this thread is serving right now (its own queue's). */
static __thread struct ring_entry *serving;

/* MARK: io_uring, by hand (no liburing: three system calls and two mappings) */

static int ring_setup(struct ring_queue *q)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
    p.cq_entries = CQ_SIZE;
    int fd = (int)syscall(__NR_io_uring_setup, SQ_SIZE, &p);
    if (fd < 0) return -errno;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP)) { close(fd); return -ENOSYS; }
    size_t sq = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    q->rings_size = sq > cq ? sq : cq;
    q->rings = mmap(NULL, q->rings_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (q->rings == MAP_FAILED) { int e = -errno; close(fd); return e; }
    q->sqes_size = p.sq_entries * SQE_SIZE;
    q->sqes = mmap(NULL, q->sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (q->sqes == MAP_FAILED) { int e = -errno; munmap(q->rings, q->rings_size); close(fd); return e; }
    char *r = q->rings;
    q->sq_head = (unsigned *)(r + p.sq_off.head);
    q->sq_tail = (unsigned *)(r + p.sq_off.tail);
    q->sq_mask = (unsigned *)(r + p.sq_off.ring_mask);
    q->sq_array = (unsigned *)(r + p.sq_off.array);
    q->sq_entries = p.sq_entries;
    q->cq_head = (unsigned *)(r + p.cq_off.head);
    q->cq_tail = (unsigned *)(r + p.cq_off.tail);
    q->cq_mask = (unsigned *)(r + p.cq_off.ring_mask);
    q->cqes = (struct io_uring_cqe *)(r + p.cq_off.cqes);
    q->fd = fd;
    return 0;
}

/* A zeroed SQE to fill, published by sqe_publish; NULL only if the invariant above broke. */
static struct io_uring_sqe *sqe_next(struct ring_queue *q)
{
    unsigned tail = *q->sq_tail;
    unsigned head = __atomic_load_n(q->sq_head, __ATOMIC_ACQUIRE);
    if (tail - head >= q->sq_entries) return NULL;
    struct io_uring_sqe *sqe = (struct io_uring_sqe *)(q->sqes + (size_t)(tail & *q->sq_mask) * SQE_SIZE);
    memset(sqe, 0, SQE_SIZE);
    return sqe;
}

static void sqe_publish(struct ring_queue *q)
{
    unsigned tail = *q->sq_tail;
    q->sq_array[tail & *q->sq_mask] = tail & *q->sq_mask;
    __atomic_store_n(q->sq_tail, tail + 1, __ATOMIC_RELEASE);
    q->unsubmitted++;
}

/* A queue that cannot go on would leave its CPU's callers waiting for good: the session
 * ends instead (as for SIGTERM: unmounted, visibly). */
static void fatal(struct ring_queue *q, const char *what, int error)
{
    if (ring_state(q->ring) == STOPPING) return;
    char line[256];
    int n = snprintf(line, sizeof line, "containerfs: io_uring queue %u: %s: %s; ending the session\n",
                     q->qid, what, strerror(error));
    if (n > 0) (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    kill(getpid(), SIGTERM);
}

static void submit_command(struct ring_queue *q, struct ring_entry *e, uint32_t op, uint64_t commit_id, uint16_t qid)
{
    struct io_uring_sqe *sqe = sqe_next(q);
    if (!sqe) {
        e->dead = 1;
        q->live--;
        return fatal(q, "submission ring full", ENOSPC);
    }
    e->last_op = op;
    e->last_commit = commit_id;
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = q->ring->devfd;
    sqe->cmd_op = op;
    sqe->user_data = (uint64_t)(uintptr_t)e;
    if (op == CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)e->iov;
        sqe->len = 2;
    }
    struct ring_cmd_req *cmd = (struct ring_cmd_req *)sqe->cmd;
    cmd->qid = qid;
    cmd->commit_id = commit_id;
    sqe_publish(q);
}

static void prepare_command(struct ring_queue *q, struct ring_entry *e, uint32_t op)
{
    uint64_t commit_id = op == CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
    if (op == CMD_COMMIT_AND_FETCH) q->held--;
    __atomic_store_n(&e->commit_id, 0, __ATOMIC_RELEASE);
    submit_command(q, e, op, commit_id, (uint16_t)q->qid);
}

static void prepare_poll(struct ring_queue *q)
{
    struct io_uring_sqe *sqe = sqe_next(q);
    if (!sqe) return;
    sqe->opcode = IORING_OP_POLL_ADD;
    sqe->fd = q->eventfd;
    sqe->poll32_events = POLLIN;
    sqe->user_data = POLL_TAG;
    sqe_publish(q);
}

/* MARK: requests in, replies out */

static int take_pending_interrupt(struct cfusetap_ring *ring, uint64_t unique)
{
    int found = 0;
    pthread_mutex_lock(&ring->lock);
    for (unsigned i = 0; i < PENDING_INTERRUPTS && !found; i++) {
        if (ring->pending_interrupts[i] == unique) {
            ring->pending_interrupts[i] = 0;
            found = 1;
        }
    }
    pthread_mutex_unlock(&ring->lock);
    return found;
}

/* Gives libfuse a request laid out in its entry (on the queue's thread, or a slow-lane
 * worker): the tap's per-thread look at it first, as for a read of /dev/fuse. */
static void process_request(struct cfusetap_ring *ring, struct ring_entry *e, char *start, uint32_t len)
{
    cfusetap_observe_request(ring->devfd, start, len);
    uint64_t unique = __atomic_load_n(&e->commit_id, __ATOMIC_ACQUIRE);
    ring->process(ring->context, start, len);
    if (take_pending_interrupt(ring, unique) && atomic_load_explicit(&e->answered, memory_order_acquire) != unique
        && __atomic_load_n(&e->commit_id, __ATOMIC_ACQUIRE) == unique) {
        /* Interrupted before libfuse knew the request; it waits now (parked): interrupt it. */
        char interrupt[IN_HEADER + 8];
        memset(interrupt, 0, sizeof interrupt);
        uint32_t n = sizeof interrupt, op = OP_INTERRUPT;
        uint64_t own = unique | 1;
        memcpy(interrupt, &n, 4);
        memcpy(interrupt + 4, &op, 4);
        memcpy(interrupt + 8, &own, 8);
        memcpy(interrupt + IN_HEADER, &unique, 8);
        atomic_fetch_add_explicit(&ring->redelivered, 1, memory_order_relaxed);
        ring->process(ring->context, interrupt, sizeof interrupt);
    }
}

/* MARK: the slow lanes
 *
 * A queue serves its CPU's requests one after the other, so a request that waits on the
 * disk (an fsync: milliseconds) would hold back every other request made on that CPU. Such
 * requests go to one of the queue's lanes instead (lane.c: fsyncs to unpinned workers, which
 * the disk wakes on its interrupt's CPU; fallocate and copy_file_range to workers pinned to
 * the queue's CPU): while a worker waits the queue's thread goes on. A reply reaches its
 * queue as a parked request's does (handed over through the eventfd). */

static void run_slow(struct lane_item *item)
{
    struct ring_entry *e = (struct ring_entry *)((char *)item - offsetof(struct ring_entry, slow));
    process_request(e->queue->ring, e, e->request, e->length);
}

/* MARK: the queue's requests */

/* Lays the request out as read(2) of /dev/fuse would have: header, first argument,
 * payload, contiguous (the payload stays where the kernel put it). */
static void serve(struct ring_queue *q, struct ring_entry *e)
{
    struct cfusetap_ring *ring = q->ring;
    uint32_t len;
    memcpy(&len, e->header->in_out, sizeof len);
    uint32_t payload = e->header->ent.payload_sz;
    __atomic_store_n(&e->commit_id, e->header->ent.commit_id, __ATOMIC_RELEASE);
    q->held++;
    serving = e;
    if (len < IN_HEADER || payload > ring->payload || len - IN_HEADER < payload
        || len - IN_HEADER - payload > sizeof e->header->op_in) {
        /* Not a request this code understands: answer it, so that its caller is not stuck. */
        set_error(e, -EIO);
        commit(e);
        serving = NULL;
        return;
    }
    size_t first = len - IN_HEADER - payload;
    char *start = e->memory + PREFIX - IN_HEADER - first;
    memcpy(start, e->header->in_out, IN_HEADER);
    memcpy(start + IN_HEADER, e->header->op_in, first);
    atomic_fetch_add_explicit(&ring->requests, 1, memory_order_relaxed);
    e->request = start;
    e->length = len;
    e->slow.run = run_slow;
    int kind = cfusetap_lane_of(start, len);
    if (kind < 0 || !lane_hand(&q->lanes[kind], &e->slow)) process_request(ring, e, start, len);
    serving = NULL;
}

/* Wakes the queue's thread (its poll on the eventfd): handed commits, or stop. */
static void wake(struct ring_queue *q)
{
    uint64_t one = 1;
    (void)!write(q->eventfd, &one, sizeof one);
}

/* The commit goes out on the queue's own thread: now if this is it, else handed over. */
static void commit(struct ring_entry *e)
{
    struct ring_queue *q = e->queue;
    atomic_store_explicit(&e->answered, e->commit_id, memory_order_release);
    if (serving && serving->queue == q) {
        prepare_command(q, e, CMD_COMMIT_AND_FETCH);
        return;
    }
    pthread_mutex_lock(&q->lock);
    e->next_handed = q->handed;
    q->handed = e;
    pthread_mutex_unlock(&q->lock);
    wake(q);
}

/* The ring of a session's /dev/fuse descriptor (one at most); under registry_lock. */
static struct cfusetap_ring *ring_of_locked(int devfd)
{
    struct cfusetap_ring *r = registry;
    while (r && r->devfd != devfd) r = r->next;
    return r;
}

static struct ring_entry *find(int devfd, uint64_t unique)
{
    struct cfusetap_ring *r = ring_of_locked(devfd);
    for (unsigned qid = 0; r && qid < r->nqueues; qid++) {
        struct ring_queue *q = &r->queues[qid];
        unsigned count = atomic_load_explicit(&q->count, memory_order_acquire);
        for (unsigned i = 0; i < count; i++) {
            struct ring_entry *c = q->entries[i];
            if (__atomic_load_n(&c->commit_id, __ATOMIC_ACQUIRE) == unique) return c;
        }
    }
    return NULL;
}

/* Puts a reply into the ring entry serving `unique` and commits it: at once on the queue's
 * own thread, under the registry lock elsewhere (a ring stopped meanwhile is then simply
 * not found). 0 when no ring serves that request: it came through /dev/fuse. */
static int route(int devfd, uint64_t unique, void (*fill)(struct ring_entry *, void *), void *context)
{
    if (unique == 0 || atomic_load_explicit(&live_rings, memory_order_acquire) == 0) return 0;
    struct ring_entry *e = serving;
    if (e && e->commit_id == unique && e->queue->ring->devfd == devfd) {
        fill(e, context);
        commit(e);
        return 1;
    }
    pthread_mutex_lock(&registry_lock);
    e = find(devfd, unique);
    if (e) {
        fill(e, context);
        commit(e);
    }
    pthread_mutex_unlock(&registry_lock);
    return e != NULL;
}

static void set_error(struct ring_entry *e, int32_t error)
{
    uint32_t n = OUT_HEADER;
    memcpy(e->header->in_out, &n, 4);
    memcpy(e->header->in_out + 4, &error, 4);
    e->header->ent.payload_sz = 0;
}

struct iov_reply { const struct iovec *iov; int count; };

static void fill_from_iov(struct ring_entry *e, void *context)
{
    const struct iov_reply *r = context;
    memcpy(e->header->in_out, r->iov[0].iov_base, OUT_HEADER);
    size_t copied = 0, room = e->queue->ring->payload;
    for (int i = 1; i < r->count; i++) {
        if (copied + r->iov[i].iov_len > room) return set_error(e, -EIO);
        memmove(e->memory + PREFIX + copied, r->iov[i].iov_base, r->iov[i].iov_len);
        copied += r->iov[i].iov_len;
    }
    e->header->ent.payload_sz = (uint32_t)copied;
}

int cfusetap_ring_route(int devfd, const struct iovec *iov, int count, ssize_t *sent)
{
    if (count < 1 || iov[0].iov_len < OUT_HEADER) return 0;
    uint64_t unique;
    memcpy(&unique, (const char *)iov[0].iov_base + 8, sizeof unique);
    struct iov_reply reply = { iov, count };
    if (!route(devfd, unique, fill_from_iov, &reply)) return 0;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    *sent = (ssize_t)total;
    return 1;
}

struct pipe_reply { const char *header; int pipe; size_t rest; int failed; };

int cfusetap_read_full(int fd, char *to, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, to, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        to += r;
        n -= (size_t)r;
    }
    return 0;
}

static void fill_from_pipe(struct ring_entry *e, void *context)
{
    struct pipe_reply *r = context;
    memcpy(e->header->in_out, r->header, OUT_HEADER);
    if (r->rest > e->queue->ring->payload || cfusetap_read_full(r->pipe, e->memory + PREFIX, r->rest) < 0) {
        r->failed = 1;
        return set_error(e, -EIO);
    }
    e->header->ent.payload_sz = (uint32_t)r->rest;
}

int cfusetap_ring_route_pipe(int devfd, const char *header, int pipe, size_t rest, int *failed)
{
    uint64_t unique;
    memcpy(&unique, header + 8, sizeof unique);
    struct pipe_reply reply = { header, pipe, rest, 0 };
    int routed = route(devfd, unique, fill_from_pipe, &reply);
    *failed = reply.failed;
    return routed;
}

/* FORGET, INTERRUPT and BATCH_FORGET always come through /dev/fuse. (NOTIFY_REPLY would come
 * through the ring, and get no reply from libfuse: the daemon never asks for one.) */
void cfusetap_ring_channel_request(int devfd, const char *buf, size_t n)
{
    if (n < IN_HEADER) return;
    uint32_t opcode;
    memcpy(&opcode, buf + 4, sizeof opcode);
    if (opcode == OP_FORGET || opcode == OP_INTERRUPT || opcode == OP_BATCH_FORGET || opcode == OP_INIT) return;
    pthread_mutex_lock(&registry_lock);
    struct cfusetap_ring *r = ring_of_locked(devfd);
    if (r) {
        int served = atomic_load_explicit(&r->requests, memory_order_relaxed) > 0;
        atomic_fetch_add_explicit(served ? &r->strays : &r->unringed, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&registry_lock);
}

int cfusetap_ring_defer_interrupt(int devfd, uint64_t unique)
{
    pthread_mutex_lock(&registry_lock);
    struct cfusetap_ring *r = ring_of_locked(devfd);
    if (r) {
        pthread_mutex_lock(&r->lock);
        r->pending_interrupts[r->next_interrupt++ % PENDING_INTERRUPTS] = unique;
        pthread_mutex_unlock(&r->lock);
    }
    pthread_mutex_unlock(&registry_lock);
    return r != NULL;
}

int cfusetap_ring_active(void) { return atomic_load_explicit(&live_rings, memory_order_acquire) != 0; }

/* MARK: entries */

static void free_entry(struct ring_entry *e, size_t payload)
{
    if (e->header) munmap(e->header, 4096);
    if (e->memory) munmap(e->memory, PREFIX + payload);
    free(e);
}

/* A new entry, registered with the kernel (on the queue's thread, or before it starts). */
static int add_entry(struct ring_queue *q)
{
    unsigned count = atomic_load_explicit(&q->count, memory_order_relaxed);
    if (count >= MAX_ENTRIES) return -ENOSPC;
    size_t payload = q->ring->payload;
    struct ring_entry *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->queue = q;
    /* Page-aligned, as the kernel wants them for its copies. */
    e->header = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    e->memory = mmap(NULL, PREFIX + payload, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (e->header == MAP_FAILED || e->memory == MAP_FAILED) {
        if (e->header == MAP_FAILED) e->header = NULL;
        if (e->memory == MAP_FAILED) e->memory = NULL;
        free_entry(e, payload);
        return -ENOMEM;
    }
    e->iov[0] = (struct iovec){ e->header, sizeof(struct ring_req_header) };
    e->iov[1] = (struct iovec){ e->memory + PREFIX, payload };
    q->entries[count] = e;
    atomic_store_explicit(&q->count, count + 1, memory_order_release);
    q->live++;
    prepare_command(q, e, CMD_REGISTER);
    return 0;
}

/* Keeps SPARE entries free for the kernel while requests are held (parked). */
static void keep_spare(struct ring_queue *q)
{
    if (q->live - q->held >= SPARE) return;
    for (unsigned i = 0; i < GROW; i++) {
        if (add_entry(q) < 0) break;
    }
}

/* MARK: the queue's thread */

static void take_handed(struct ring_queue *q)
{
    uint64_t n;
    (void)!read(q->eventfd, &n, sizeof n);
    pthread_mutex_lock(&q->lock);
    struct ring_entry *e = q->handed;
    q->handed = NULL;
    pthread_mutex_unlock(&q->lock);
    for (; e; e = e->next_handed) prepare_command(q, e, CMD_COMMIT_AND_FETCH);
}

static int ring_state(struct cfusetap_ring *ring)
{
    pthread_mutex_lock(&ring->lock);
    int s = ring->state;
    pthread_mutex_unlock(&ring->lock);
    return s;
}

static void *queue_main(void *arg)
{
    struct ring_queue *q = arg;
    struct cfusetap_ring *ring = q->ring;
    /* Requests of a process on CPU n come to queue n: served on that CPU, the caller
     * hands over to this thread without waking another (virtual) processor. */
    cfusetap_settle_thread("ring", (int)q->qid, 1);

    pthread_mutex_lock(&ring->lock);
    while (ring->state == WAITING) pthread_cond_wait(&ring->changed, &ring->lock);
    int state = ring->state;
    pthread_mutex_unlock(&ring->lock);
    if (state != SERVING) return NULL;

    prepare_poll(q);
    for (unsigned i = 0; i < ring->depth; i++) {
        if (add_entry(q) < 0) break;
    }
    if (q->live == 0) {
        /* This CPU's queue has no entry, so the kernel would never call the ring ready and
         * would hold every request back meanwhile. A registration it must refuse (no such
         * queue) makes it give up the ring: requests go on through /dev/fuse. */
        struct ring_entry none = { .queue = q, .iov = { { NULL, 0 }, { NULL, 0 } } };
        submit_command(q, &none, CMD_REGISTER, 0, UINT16_MAX);
        (void)syscall(__NR_io_uring_enter, q->fd, q->unsubmitted, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        pthread_mutex_lock(&ring->lock);
        if (ring->state == SERVING) ring->state = DECLINED;   /* the kernel dropped the ring */
        pthread_mutex_unlock(&ring->lock);
        unregister(ring);
        return NULL;
    }
    while (q->live > 0) {
        int n = (int)syscall(__NR_io_uring_enter, q->fd, q->unsubmitted, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EBUSY) continue;
            fatal(q, "io_uring_enter", errno);
            break;
        }
        q->unsubmitted -= (unsigned)n < q->unsubmitted ? (unsigned)n : q->unsubmitted;
        unsigned head = *q->cq_head;
        unsigned tail = __atomic_load_n(q->cq_tail, __ATOMIC_ACQUIRE);
        for (; head != tail; head++) {
            struct io_uring_cqe cqe = q->cqes[head & *q->cq_mask];
            __atomic_store_n(q->cq_head, head + 1, __ATOMIC_RELEASE);
            if (cqe.user_data == POLL_TAG) {
                take_handed(q);
                if (ring_state(ring) == STOPPING) { q->live = 0; break; }
                prepare_poll(q);
                continue;
            }
            struct ring_entry *e = (struct ring_entry *)(uintptr_t)cqe.user_data;
            if (cqe.res == 0) {
                serve(q, e);
                keep_spare(q);
            } else if (cqe.res == -EAGAIN || cqe.res == -EINTR) {
                submit_command(q, e, e->last_op, e->last_commit, (uint16_t)q->qid);
            } else if (!e->dead) {
                /* ENOTCONN, ECONNABORTED, ECANCELED: the connection or the ring ends.
                 * Anything else: this entry is lost, and maybe a reply with it. */
                e->dead = 1;
                q->live--;
                if (cqe.res != -ENOTCONN && cqe.res != -ECONNABORTED && cqe.res != -ECANCELED)
                    fatal(q, e->last_op == CMD_REGISTER ? "register" : "commit", -cqe.res);
            }
        }
    }
    return NULL;
}

/* MARK: life cycle */

static void free_queue(struct ring_queue *q)
{
    for (int kind = 0; kind < LANE_KINDS; kind++) lane_stop(&q->lanes[kind], 0);
    if (q->fd >= 0) {
        munmap(q->sqes, q->sqes_size);
        munmap(q->rings, q->rings_size);
        close(q->fd);   /* cancels what the kernel still holds */
    }
    if (q->eventfd >= 0) close(q->eventfd);
    unsigned count = atomic_load_explicit(&q->count, memory_order_relaxed);
    for (unsigned i = 0; q->entries && i < count; i++) free_entry(q->entries[i], q->ring->payload);
    free(q->entries);
    for (int kind = 0; kind < LANE_KINDS; kind++) lane_destroy(&q->lanes[kind]);
    pthread_mutex_destroy(&q->lock);
}

/* The kernel's queue count: num_possible_cpus(), the highest id in .../cpu/possible + 1. */
static unsigned possible_cpus(void)
{
    unsigned highest = 0;
    int found = 0;
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    if (f) {
        unsigned a, b;
        char sep;
        while (fscanf(f, "%u", &a) == 1) {
            b = a;
            if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u", &b) == 1) (void)fscanf(f, "%c", &sep);
            if (b >= highest) highest = b;
            found = 1;
        }
        fclose(f);
    }
    if (found) return highest + 1;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? (unsigned)n : 1;
}

struct cfusetap_ring *cfusetap_ring_new(unsigned depth, size_t payload, cfusetap_ring_process process,
                                        void *context, int *error)
{
    *error = 0;
    struct cfusetap_ring *ring = calloc(1, sizeof *ring);
    if (!ring) { *error = ENOMEM; return NULL; }
    ring->devfd = -1;
    ring->nqueues = possible_cpus();
    ring->depth = depth;
    ring->payload = payload;
    ring->process = process;
    ring->context = context;
    pthread_mutex_init(&ring->lock, NULL);
    pthread_cond_init(&ring->changed, NULL);
    ring->queues = calloc(ring->nqueues, sizeof *ring->queues);
    if (!ring->queues) { *error = ENOMEM; ring->nqueues = 0; }
    for (unsigned qid = 0; qid < ring->nqueues; qid++) {
        struct ring_queue *q = &ring->queues[qid];
        q->ring = ring;
        q->qid = qid;
        q->fd = -1;
        q->eventfd = -1;
        pthread_mutex_init(&q->lock, NULL);
        lane_init(&q->lanes[LANE_SYNC], "sync", (int)qid, 0);
        lane_init(&q->lanes[LANE_LONG], "slow", (int)qid, 1);
    }
    for (unsigned qid = 0; qid < ring->nqueues && !*error; qid++) {
        struct ring_queue *q = &ring->queues[qid];
        q->eventfd = eventfd(0, EFD_CLOEXEC);
        if (q->eventfd < 0) { *error = errno; break; }
        q->entries = calloc(MAX_ENTRIES, sizeof *q->entries);
        if (!q->entries) { *error = ENOMEM; break; }
        int rc = ring_setup(q);
        if (rc < 0) { *error = -rc; break; }
        rc = pthread_create(&q->thread, NULL, queue_main, q);
        if (rc != 0) { *error = rc; break; }
        q->started = 1;
    }
    if (*error) {
        cfusetap_ring_stop(ring);
        return NULL;
    }
    return ring;
}

void cfusetap_ring_attach(struct cfusetap_ring *ring, int devfd)
{
    pthread_mutex_lock(&registry_lock);
    ring->devfd = devfd;
    ring->next = registry;
    registry = ring;
    ring->registered = 1;
    atomic_fetch_add_explicit(&live_rings, 1, memory_order_release);
    pthread_mutex_unlock(&registry_lock);
}

/* Out of the registry: replies stop looking for its entries. */
static void unregister(struct cfusetap_ring *ring)
{
    pthread_mutex_lock(&registry_lock);
    if (ring->registered) {
        for (struct cfusetap_ring **p = &registry; *p; p = &(*p)->next) {
            if (*p == ring) { *p = ring->next; break; }
        }
        ring->registered = 0;
        atomic_fetch_sub_explicit(&live_rings, 1, memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
}

static struct cfusetap_ring *ring_of(int devfd)
{
    pthread_mutex_lock(&registry_lock);
    struct cfusetap_ring *r = ring_of_locked(devfd);
    pthread_mutex_unlock(&registry_lock);
    return r;
}

int cfusetap_ring_wanted(int devfd) { return ring_of(devfd) != NULL; }

/* Registrations on anything but a FUSE device fail, and a queue whose registration fails
 * ends the session (fatal): only a character device gets queues (the tap's unit tests
 * answer INIT over a FIFO). */
static int is_device(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode);
}

void cfusetap_ring_answered_init(int devfd, int accepted)
{
    struct cfusetap_ring *ring = ring_of(devfd);
    if (!ring) return;
    accepted = accepted && is_device(devfd);
    pthread_mutex_lock(&ring->lock);
    if (ring->state == WAITING) ring->state = accepted ? SERVING : DECLINED;
    pthread_cond_broadcast(&ring->changed);
    pthread_mutex_unlock(&ring->lock);
    if (!accepted) unregister(ring);
}

int cfusetap_ring_serving(struct cfusetap_ring *ring)
{
    return ring_state(ring) == SERVING && atomic_load_explicit(&ring->requests, memory_order_relaxed) > 0;
}

int cfusetap_ring_taken(struct cfusetap_ring *ring) { return ring_state(ring) == SERVING; }

uint64_t cfusetap_ring_requests(struct cfusetap_ring *ring)
{
    return atomic_load_explicit(&ring->requests, memory_order_relaxed);
}

uint64_t cfusetap_ring_strays(struct cfusetap_ring *ring)
{
    return atomic_load_explicit(&ring->strays, memory_order_relaxed);
}

uint64_t cfusetap_ring_unringed(struct cfusetap_ring *ring)
{
    return atomic_load_explicit(&ring->unringed, memory_order_relaxed);
}

uint64_t cfusetap_ring_redelivered(struct cfusetap_ring *ring)
{
    return atomic_load_explicit(&ring->redelivered, memory_order_relaxed);
}

void cfusetap_ring_stop(struct cfusetap_ring *ring)
{
    if (!ring) return;
    unregister(ring);
    pthread_mutex_lock(&ring->lock);
    ring->state = STOPPING;
    pthread_cond_broadcast(&ring->changed);
    pthread_mutex_unlock(&ring->lock);
    for (unsigned qid = 0; ring->queues && qid < ring->nqueues; qid++) {
        struct ring_queue *q = &ring->queues[qid];
        if (q->started) {
            wake(q);
            pthread_join(q->thread, NULL);
        }
    }
    for (unsigned qid = 0; ring->queues && qid < ring->nqueues; qid++) free_queue(&ring->queues[qid]);
    free(ring->queues);
    pthread_cond_destroy(&ring->changed);
    pthread_mutex_destroy(&ring->lock);
    free(ring);
}
