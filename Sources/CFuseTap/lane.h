/* The slow lane: workers for requests that wait on the disk, shared by the io_uring queues
 * (ring.c) and the per-CPU readers (readers.c); not for Swift. */
#ifndef CFUSETAP_LANE_H
#define CFUSETAP_LANE_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

/* Whether a request (as read(2) of /dev/fuse gives it, `length` bytes) waits on the disk
 * (milliseconds): served off the thread that took it, so that this one goes on with its
 * CPU's other requests meanwhile. */
int cfusetap_is_slow(const char *request, size_t length);

/* A request waiting for a worker; `run` processes it (and may free the item). */
struct lane_item {
    struct lane_item *next;
    void (*run)(struct lane_item *item);
};

enum { LANE_WORKERS = 2 };

struct lane {
    const char *role;             /* thread names: cfs-ROLE-CPU */
    int cpu;                      /* whose requests it serves (names only: workers are not pinned) */
    cpu_set_t *allowed;           /* workers' CPUs: those of the thread that set the lane up */
    size_t allowed_size;
    pthread_mutex_t lock;
    pthread_cond_t ready;
    struct lane_item *head, *tail;
    unsigned queued, idle, started;
    int stop, drain;
    pthread_t threads[LANE_WORKERS];
};

void lane_init(struct lane *lane, const char *role, int cpu);
/* 1 if a worker will run the item (started now if none is idle, up to LANE_WORKERS); 0 if
 * none can: run it on the calling thread. */
int lane_hand(struct lane *lane, struct lane_item *item);
/* The workers finish the item in hand and end; queued items are run first if `drain`,
 * else dropped (their owner frees them). */
void lane_stop(struct lane *lane, int drain);
void lane_destroy(struct lane *lane);

/* Names the calling thread "cfs-ROLE-CPU" (ps, top, debuggers; "cfs-ROLE" for cpu -1),
 * blocks every signal (libfuse's own thread takes them) and, if `pin`, pins it to `cpu`
 * (if ≥ 0). */
void cfusetap_settle_thread(const char *role, int cpu, int pin);

#endif
