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
 *  - writev: the INIT reply gets FUSE_HANDLE_KILLPRIV_V2 added when the kernel offered it.
 *
 * No allocation, no lock: per-thread state only. The wire layouts used are the kernel's
 * <linux/fuse.h> (stable ABI), spelled out in the .c file.
 */
#ifndef CFUSETAP_H
#define CFUSETAP_H

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

#endif
