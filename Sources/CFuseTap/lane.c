#define _GNU_SOURCE
#include "lane.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { IN_HEADER = 40, OP_FSYNC = 20, OP_FSYNCDIR = 30, OP_FALLOCATE = 43, OP_COPY_FILE_RANGE = 47 };

int cfusetap_lane_of(const char *request, size_t length)
{
    uint32_t opcode;
    if (length < IN_HEADER) return -1;
    memcpy(&opcode, request + 4, sizeof opcode);   /* fuse_in_header: len, opcode, ... */
    if (opcode == OP_FSYNC || opcode == OP_FSYNCDIR) return LANE_SYNC;
    if (opcode == OP_FALLOCATE || opcode == OP_COPY_FILE_RANGE) return LANE_LONG;
    return -1;
}

/* A set of `cpu` alone (CPU_FREE it), its size in `*size`; NULL if it cannot be made. */
static cpu_set_t *one_cpu(int cpu, size_t *size)
{
    cpu_set_t *set = CPU_ALLOC(cpu + 1);
    if (!set) return NULL;
    *size = CPU_ALLOC_SIZE(cpu + 1);
    CPU_ZERO_S(*size, set);
    CPU_SET_S(cpu, *size, set);
    return set;
}

void cfusetap_settle_thread(const char *role, int cpu, int pin)
{
    char name[16];
    if (cpu >= 0) snprintf(name, sizeof name, "cfs-%s-%d", role, cpu);
    else snprintf(name, sizeof name, "cfs-%s", role);
    pthread_setname_np(pthread_self(), name);
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    if (cpu < 0 || !pin) return;
    size_t size;
    cpu_set_t *set = one_cpu(cpu, &size);
    if (!set) return;
    (void)sched_setaffinity(0, size, set);
    CPU_FREE(set);
}

static void *worker_main(void *arg)
{
    struct lane *lane = arg;
    /* Its CPUs were set when it was started (lane->allowed). */
    cfusetap_settle_thread(lane->role, lane->cpu, 0);
    pthread_mutex_lock(&lane->lock);
    for (;;) {
        while (!lane->head && !lane->stop) {
            lane->idle++;
            pthread_cond_wait(&lane->ready, &lane->lock);
            lane->idle--;
        }
        if (lane->stop && (!lane->drain || !lane->head)) break;
        struct lane_item *item = lane->head;
        lane->head = item->next;
        if (!lane->head) lane->tail = NULL;
        lane->queued--;
        pthread_mutex_unlock(&lane->lock);
        item->run(item);
        pthread_mutex_lock(&lane->lock);
    }
    pthread_mutex_unlock(&lane->lock);
    return NULL;
}

cpu_set_t *cfusetap_thread_cpus(size_t *size)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    for (int count = configured > CPU_SETSIZE ? (int)configured : CPU_SETSIZE; count <= (1 << 20); count *= 2) {
        cpu_set_t *set = CPU_ALLOC(count);
        if (!set) return NULL;
        *size = CPU_ALLOC_SIZE(count);
        if (sched_getaffinity(0, *size, set) == 0) return set;
        CPU_FREE(set);
        if (errno != EINVAL) return NULL;
    }
    return NULL;
}

void lane_init(struct lane *lane, const char *role, int cpu, int pinned)
{
    *lane = (struct lane){ .role = role, .cpu = cpu };
    pthread_mutex_init(&lane->lock, NULL);
    pthread_cond_init(&lane->ready, NULL);
    /* A new thread inherits its creator's CPUs, and workers are started by a pinned reader or
     * queue thread: unpinned workers get the CPUs of the thread setting the lane up (all the
     * process may use) instead. */
    lane->allowed = cfusetap_thread_cpus(&lane->allowed_size);
    /* Pinned workers get `cpu` alone, if the process may run there: an io_uring queue exists
     * for every possible CPU, also one a cpuset keeps the daemon off, where a worker pinned
     * to it could not even be started. */
    if (!pinned || cpu < 0 || (lane->allowed && !CPU_ISSET_S(cpu, lane->allowed_size, lane->allowed))) return;
    size_t size;
    cpu_set_t *one = one_cpu(cpu, &size);
    if (!one) return;
    if (lane->allowed) CPU_FREE(lane->allowed);
    lane->allowed = one;
    lane->allowed_size = size;
}

/* Starts one worker, on the lane's CPUs when they are known. */
static int start_worker(struct lane *lane, pthread_t *thread)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return -1;
    if (lane->allowed) (void)pthread_attr_setaffinity_np(&attr, lane->allowed_size, lane->allowed);
    int error = pthread_create(thread, &attr, worker_main, lane);
    pthread_attr_destroy(&attr);
    return error;
}

int lane_hand(struct lane *lane, struct lane_item *item)
{
    int taken = 0;
    pthread_mutex_lock(&lane->lock);
    if (lane->queued >= lane->idle && lane->started < LANE_WORKERS && !lane->stop
        && start_worker(lane, &lane->threads[lane->started]) == 0)
        lane->started++;
    if (lane->started > 0 && !lane->stop) {
        item->next = NULL;
        if (lane->tail) lane->tail->next = item; else lane->head = item;
        lane->tail = item;
        lane->queued++;
        pthread_cond_signal(&lane->ready);
        taken = 1;
    }
    pthread_mutex_unlock(&lane->lock);
    return taken;
}

void lane_stop(struct lane *lane, int drain)
{
    pthread_mutex_lock(&lane->lock);
    lane->stop = 1;
    lane->drain = drain;
    pthread_cond_broadcast(&lane->ready);
    pthread_mutex_unlock(&lane->lock);
    for (unsigned i = 0; i < lane->started; i++) pthread_join(lane->threads[i], NULL);
    lane->started = 0;
}

void lane_destroy(struct lane *lane)
{
    if (lane->allowed) CPU_FREE(lane->allowed);
    pthread_cond_destroy(&lane->ready);
    pthread_mutex_destroy(&lane->lock);
}
