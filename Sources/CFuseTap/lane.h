/* The slow lanes: workers for requests that may take long, shared by the io_uring queues
 * (ring.c) and the per-CPU readers (readers.c); not for Swift. Each reader or queue has
 * two, by what the request waits on (DESIGN.md 33, "Slow requests"):
 *   LANE_SYNC  FSYNC, FSYNCDIR: the disk. Workers not pinned ("cfs-sync-N"): the disk's
 *              completion interrupt wakes them on its own CPU, which need not be the
 *              caller's; pinned elsewhere, every I/O an fsync waits on would wake another,
 *              halted vCPU (an fdatasync of 8 KiB here: 318-390 us pinned to CPU 0, 215-217
 *              pinned to CPU 1 where virtio-blk interrupts, 193-204 unpinned).
 *   LANE_LONG  FALLOCATE, COPY_FILE_RANGE: mostly the CPU and the page cache. Workers pinned
 *              to the reader's or queue's CPU ("cfs-slow-N"), so that neither hand-over
 *              wakes another processor (unpinned, fallocate of 64 KiB took 51-67 us instead
 *              of 16-34); unpinned where that CPU is unknown or not the process's. */
#ifndef CFUSETAP_LANE_H
#define CFUSETAP_LANE_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

enum { LANE_SYNC, LANE_LONG, LANE_KINDS };

/* The lane for a request (as read(2) of /dev/fuse gives it, `length` bytes) that may take
 * long (milliseconds): served off the thread that took it, so that this one goes on with its
 * CPU's other requests meanwhile. -1: served where it came. */
int cfusetap_lane_of(const char *request, size_t length);

/* A request waiting for a worker; `run` processes it (and may free the item). */
struct lane_item {
    struct lane_item *next;
    void (*run)(struct lane_item *item);
};

enum { LANE_WORKERS = 2 };

struct lane {
    const char *role;             /* thread names: cfs-ROLE-CPU */
    int cpu;                      /* whose requests it serves */
    cpu_set_t *allowed;           /* workers' CPUs: `cpu` alone, or the set-up thread's;
                                   * NULL: unknown (they inherit their starter's) */
    size_t allowed_size;
    pthread_mutex_t lock;
    pthread_cond_t ready;
    struct lane_item *head, *tail;
    unsigned queued, idle, started;
    int stop, drain;
    pthread_t threads[LANE_WORKERS];
};

/* `pinned`: workers run on `cpu` alone (if known and the calling thread may run there);
 * else on the CPUs of the calling thread. */
void lane_init(struct lane *lane, const char *role, int cpu, int pinned);
/* 1 if a worker will run the item (started now if none is idle, up to LANE_WORKERS); 0 if
 * none can: run it on the calling thread. */
int lane_hand(struct lane *lane, struct lane_item *item);
/* The workers finish the item in hand and end; queued items are run first if `drain`,
 * else dropped (their owner frees them). */
void lane_stop(struct lane *lane, int drain);
void lane_destroy(struct lane *lane);

/* The calling thread's CPUs (CPU_FREE them), their set's size in `*size`; NULL if they
 * cannot be told. The set grows until the kernel's mask fits (EINVAL: more possible CPUs
 * than it holds). Without them a lane's workers keep the CPU of the thread that starts them,
 * and readers go unpinned. */
cpu_set_t *cfusetap_thread_cpus(size_t *size);

/* Names the calling thread "cfs-ROLE-CPU" (ps, top, debuggers; "cfs-ROLE" for cpu -1),
 * blocks every signal (libfuse's own thread takes them) and, if `pin`, pins it to `cpu`
 * (if ≥ 0). */
void cfusetap_settle_thread(const char *role, int cpu, int pin);

#endif
