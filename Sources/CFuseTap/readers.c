#define _GNU_SOURCE
#include "CFuseTap.h"
#include "lane.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* One reader of /dev/fuse per CPU (DESIGN.md 33).
 *
 * libfuse's loop keeps workers blocked in read(2) of /dev/fuse, and the kernel wakes the
 * one that has waited longest, on whichever CPU it last ran: the caller's request wakes an
 * idle (on a virtual machine: halted) processor, and the reply wakes the caller's processor
 * back. Here every CPU has one reader, pinned to it, that waits in poll(2). Poll waiters are
 * all woken by a new request, and the one on the caller's own CPU is woken without an
 * interrupt to another processor: it runs as soon as the caller sleeps for the answer,
 * reads the request (the descriptor is non-blocking), serves it and wakes the caller on the
 * same CPU. The others find nothing (EAGAIN); a reader that was woken for nothing pauses
 * before it polls again (1 ms, doubled for each further such wake-up up to 4 ms, and
 * forgotten once it serves a request), so that a run of requests from one CPU does not wake
 * the other CPUs for each of them; a request made meanwhile on a pausing reader's CPU is
 * served by another CPU's reader, or by its own once the pause is over. The longest pause
 * is also the longest a request waits when every other reader pauses and the one still
 * polling is busy with a long request (a cold read).
 *
 * Requests that may take long (FSYNC and kin) go to one of the reader's slow lanes
 * (lane.c), so that the reader goes on with its CPU's other requests. Every other request
 * runs on the reader that took it, so at most one request per CPU runs at a time outside the
 * lanes; a request that waits for a coordinated claim does not hold its reader (it is
 * parked). */

enum {
    PAUSE_NS = 1000000,       /* after a wake-up for nothing; doubled up to PAUSE_NS << MAX_DOUBLINGS */
    MAX_DOUBLINGS = 2,
    MAX_READERS = 16,
};

struct reader {
    struct cfusetap_readers *all;
    int cpu;                  /* pinned to it; -1: not pinned */
    pthread_t thread;
    int started;
    struct lane lanes[LANE_KINDS];
};

struct cfusetap_readers {
    int devfd;
    int stopfd;               /* readable once the readers are to stop */
    size_t size;
    cfusetap_ring_process process;
    cfusetap_exited exited;
    void *context;
    unsigned count;
    struct reader *readers;
    _Atomic int stopping;
    _Atomic int error;        /* the errno that ended the session, 0 for the kernel's end */
    _Atomic uint64_t requests, idle_wakeups;
};

/* A slow request, copied out of the reader's buffer (it has no payload to speak of). */
struct slow_request {
    struct lane_item item;
    struct cfusetap_readers *all;
    size_t length;
    char bytes[];
};

static void process(struct cfusetap_readers *all, char *request, size_t length)
{
    cfusetap_observe_request(all->devfd, request, length);
    all->process(all->context, request, length);
}

static void run_slow(struct lane_item *item)
{
    struct slow_request *r = (struct slow_request *)item;
    process(r->all, r->bytes, r->length);
    free(r);
}

static void serve(struct reader *reader, char *request, size_t length)
{
    struct cfusetap_readers *all = reader->all;
    atomic_fetch_add_explicit(&all->requests, 1, memory_order_relaxed);
    int kind = cfusetap_lane_of(request, length);
    if (kind >= 0) {
        struct slow_request *r = malloc(sizeof *r + length);
        if (r) {
            r->item.run = run_slow;
            r->all = all;
            r->length = length;
            memcpy(r->bytes, request, length);
            if (lane_hand(&reader->lanes[kind], &r->item)) return;
            free(r);
        }
    }
    process(all, request, length);
}

static void stop_all(struct cfusetap_readers *all, int error)
{
    int none = 0;
    atomic_compare_exchange_strong(&all->error, &none, error);
    atomic_store_explicit(&all->stopping, 1, memory_order_release);
    uint64_t one = 1;
    (void)!write(all->stopfd, &one, sizeof one);
}

static int stopping(struct cfusetap_readers *all)
{
    return atomic_load_explicit(&all->stopping, memory_order_acquire);
}

/* Waits for a request (or the stop); 1 if poll said one was there. */
static int wait_for_request(struct cfusetap_readers *all)
{
    struct pollfd fds[2] = { { .fd = all->devfd, .events = POLLIN }, { .fd = all->stopfd, .events = POLLIN } };
    int n = poll(fds, 2, -1);
    return n > 0 && (fds[0].revents & POLLIN) != 0;
}

/* The pause after the `missed`-th wake-up in a row that found the request taken. */
static void pause_after(struct cfusetap_readers *all, unsigned missed)
{
    unsigned doublings = missed - 1 < MAX_DOUBLINGS ? missed - 1 : MAX_DOUBLINGS;
    long ns = (long)PAUSE_NS << doublings;
    struct pollfd stop = { .fd = all->stopfd, .events = POLLIN };
    struct timespec pause = { ns / 1000000000L, ns % 1000000000L };
    (void)ppoll(&stop, 1, &pause, NULL);
}

static void *reader_main(void *arg)
{
    struct reader *reader = arg;
    struct cfusetap_readers *all = reader->all;
    cfusetap_settle_thread("read", reader->cpu, 1);
    char *buffer = malloc(all->size);
    if (!buffer) { stop_all(all, ENOMEM); return NULL; }
    int woken = 0;
    unsigned missed = 0;      /* wake-ups in a row that found the request taken */
    while (!stopping(all)) {
        ssize_t n = read(all->devfd, buffer, all->size);
        if (n > 0) {
            woken = 0;
            missed = 0;
            serve(reader, buffer, (size_t)n);
            /* libfuse may end the session from a handler (an INIT it cannot honour), which
             * no signal announces. */
            if (all->exited(all->context)) stop_all(all, 0);
            continue;
        }
        int error = n == 0 ? EIO : errno;
        if (error == EINTR) continue;
        if (error == EAGAIN) {
            if (woken) {
                atomic_fetch_add_explicit(&all->idle_wakeups, 1, memory_order_relaxed);
                pause_after(all, ++missed);
            }
            woken = wait_for_request(all);
            continue;
        }
        /* ENODEV: unmounted (the kernel ended the session); anything else ends it here. */
        stop_all(all, error == ENODEV ? 0 : error);
    }
    free(buffer);
    return NULL;
}

/* MARK: signals
 *
 * libfuse's handlers (fuse_set_signal_handlers: SIGHUP, SIGINT, SIGTERM) only mark the
 * session exited, and the signal may land on any thread that does not block it. So that the
 * thread serving the loop hears of it at once without looking every so often (an idle mount
 * wakes nobody), each of those handlers is wrapped while the readers serve: the handler runs,
 * then the wrapper writes an eventfd that thread polls. Signal dispositions belong to the
 * process, hence this state is static: one readers' loop per process (one mount per daemon).
 * The eventfd is made once and never closed, so a handler still running on another thread
 * after the loop ends cannot write into a descriptor number reused meanwhile. A signal left
 * at its default or ignored (SIGHUP under nohup) is left alone, and so is one whose handler
 * was changed while the readers served. */

static const int wrapped_signals[] = { SIGHUP, SIGINT, SIGTERM };
enum { WRAPPED_SIGNALS = sizeof wrapped_signals / sizeof wrapped_signals[0] };
static struct sigaction previous_actions[WRAPPED_SIGNALS];
static int signal_wake_fd = -1;

static void on_signal(int sig, siginfo_t *info, void *ucontext)
{
    int saved = errno;
    for (unsigned i = 0; i < WRAPPED_SIGNALS; i++) {
        if (wrapped_signals[i] != sig) continue;
        const struct sigaction *previous = &previous_actions[i];
        if (previous->sa_flags & SA_SIGINFO) previous->sa_sigaction(sig, info, ucontext);
        else previous->sa_handler(sig);
    }
    uint64_t one = 1;
    (void)!write(signal_wake_fd, &one, sizeof one);
    errno = saved;
}

/* The eventfd a handled signal makes readable (made once, EFD_NONBLOCK); -1 if it cannot be. */
static int signal_wake(void)
{
    if (signal_wake_fd < 0) signal_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return signal_wake_fd;
}

static void wrap_signals(void)
{
    for (unsigned i = 0; i < WRAPPED_SIGNALS; i++) {
        struct sigaction old;
        if (sigaction(wrapped_signals[i], NULL, &old) != 0) continue;
        if (old.sa_flags & SA_SIGINFO ? old.sa_sigaction == on_signal
                                      : old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN) continue;
        previous_actions[i] = old;
        struct sigaction wrapper = old;
        wrapper.sa_flags = old.sa_flags | SA_SIGINFO;
        wrapper.sa_sigaction = on_signal;
        (void)sigaction(wrapped_signals[i], &wrapper, NULL);
    }
}

/* Puts libfuse's handlers back (fuse_remove_signal_handlers removes only its own), where
 * the wrapper is still in place (SA_RESETHAND, or someone else's sigaction, may have
 * replaced it). Only wrap_signals installs on_signal, having saved what it replaced. */
static void unwrap_signals(void)
{
    for (unsigned i = 0; i < WRAPPED_SIGNALS; i++) {
        struct sigaction now;
        if (sigaction(wrapped_signals[i], NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO)
            && now.sa_sigaction == on_signal)
            (void)sigaction(wrapped_signals[i], &previous_actions[i], NULL);
    }
}

/* MARK: where the readers go */

/* The CPUs this process may run on (taskset is respected), at most `max`; none if they
 * cannot be told. */
static unsigned allowed_cpus(int *cpus, unsigned max)
{
    size_t size;
    cpu_set_t *set = cfusetap_thread_cpus(&size);
    unsigned count = 0;
    if (!set) return 0;
    for (int cpu = 0; cpu < (int)(size * 8) && count < max; cpu++) {
        if (CPU_ISSET_S(cpu, size, set)) cpus[count++] = cpu;
    }
    CPU_FREE(set);
    return count;
}

/* Where the readers go: one per allowed CPU, up to MAX_READERS (beyond that the wake-ups of
 * every polling reader per request would cost more than the locality buys). A single CPU
 * gets two, so that a request waiting on the disk does not hold up every caller; if the
 * CPUs cannot be told, two readers run unpinned (cpu -1). */
static unsigned reader_cpus(int *cpus)
{
    unsigned count = allowed_cpus(cpus, MAX_READERS);
    if (count == 0) cpus[count++] = -1;
    if (count == 1) { cpus[1] = cpus[0]; count = 2; }
    return count;
}

int cfusetap_readers_serve(int devfd, size_t size, cfusetap_ring_process process, cfusetap_exited exited,
                           void *context, struct cfusetap_readers_counts *counts)
{
    int flags = fcntl(devfd, F_GETFL);
    if (flags < 0) return -errno;
    struct cfusetap_readers all = {
        .devfd = devfd, .size = size, .process = process, .exited = exited, .context = context,
    };
    int cpus[MAX_READERS];
    all.count = reader_cpus(cpus);
    all.readers = calloc(all.count, sizeof *all.readers);
    if (!all.readers) return -ENOMEM;
    all.stopfd = eventfd(0, EFD_CLOEXEC);
    int signals = signal_wake();
    if (all.stopfd < 0 || signals < 0 || fcntl(devfd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int error = errno;
        if (all.stopfd >= 0) close(all.stopfd);
        free(all.readers);
        return -error;
    }
    unsigned started = 0;
    int failure = 0;
    for (unsigned i = 0; i < all.count; i++) {
        struct reader *r = &all.readers[i];
        r->all = &all;
        r->cpu = cpus[i];
        lane_init(&r->lanes[LANE_SYNC], "sync", cpus[i], 0);
        lane_init(&r->lanes[LANE_LONG], "slow", cpus[i], 1);
        int error = pthread_create(&r->thread, NULL, reader_main, r);
        r->started = error == 0;
        if (error) failure = error; else started++;
    }
    /* Fewer readers than CPUs still serve every request (with less locality); none cannot. */
    if (started == 0) stop_all(&all, failure);
    /* Signals (SIGTERM...) reach this thread or another non-reader one; libfuse's handler
     * marks the session exited and the wrapper wakes this thread, which tells the readers.
     * A signal that came before the wrapping is seen by the first look at `exited`. */
    wrap_signals();
    struct pollfd wake[2] = { { .fd = all.stopfd, .events = POLLIN }, { .fd = signals, .events = POLLIN } };
    while (!stopping(&all)) {
        if (exited(context)) { stop_all(&all, 0); break; }
        (void)poll(wake, 2, -1);
        uint64_t count;
        (void)!read(signals, &count, sizeof count);
    }
    unwrap_signals();
    for (unsigned i = 0; i < all.count; i++) {
        struct reader *r = &all.readers[i];
        if (r->started) pthread_join(r->thread, NULL);
        /* Queued fsyncs (and fallocates, copies) still run: after a signal the connection is
         * alive and they are owed an answer (after an unmount their replies just fail). */
        for (int kind = 0; kind < LANE_KINDS; kind++) {
            lane_stop(&r->lanes[kind], 1);
            lane_destroy(&r->lanes[kind]);
        }
    }
    free(all.readers);
    close(all.stopfd);
    (void)fcntl(devfd, F_SETFL, flags);
    if (counts) {
        counts->readers = started;
        counts->requests = atomic_load(&all.requests);
        counts->idle_wakeups = atomic_load(&all.idle_wakeups);
    }
    return -atomic_load(&all.error);
}
