/* Between the channel tap (tap.c) and the io_uring transport (ring.c); not for Swift. */
#ifndef CFUSETAP_RING_H
#define CFUSETAP_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The tap's look at a request's bytes (per-thread set-ID bit; INIT's offers). */
void cfusetap_observe_request(int fd, const char *buf, size_t n);

/* Reads exactly `n` bytes (a pipe libfuse filled), retrying short reads and EINTR; -1 on
 * an error or end of file. */
int cfusetap_read_full(int fd, char *to, size_t n);

/* Whether any ring exists (replies then may belong to one). */
int cfusetap_ring_active(void);
/* A request read from /dev/fuse: counted as a stray if a ring already serves (the kernel
 * should send only FORGET and INTERRUPT there then). */
void cfusetap_ring_channel_request(int devfd, const char *buf, size_t n);
/* Whether the session on `devfd` asked for a ring (INIT should offer FUSE_OVER_IO_URING). */
int cfusetap_ring_wanted(int devfd);
/* The INIT reply went out, with FUSE_OVER_IO_URING (`accepted`) or without: the queues
 * register with the kernel, or give up. */
void cfusetap_ring_answered_init(int devfd, int accepted);
/* libfuse answered an INTERRUPT with EAGAIN: the request it names had not reached libfuse
 * yet (it waits in its ring queue). Kept for the queue to deliver again once that request
 * has been processed; 1 if a ring of `devfd` took it (the EAGAIN reply is then dropped:
 * the kernel could not match it to a ring request anyway). */
int cfusetap_ring_defer_interrupt(int devfd, uint64_t unique);
/* A reply: committed to the ring entry that serves its request (1, `*sent` as writev's),
 * or 0 when that request came through /dev/fuse. */
int cfusetap_ring_route(int devfd, const struct iovec *iov, int count, ssize_t *sent);
/* The same for a reply libfuse spliced into `pipe`: `header` (16 bytes) already read from
 * it, `rest` bytes follow there. On 0 nothing more was read. */
int cfusetap_ring_route_pipe(int devfd, const char *header, int pipe, size_t rest, int *failed);

#endif
