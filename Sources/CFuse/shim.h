/*
 * The one place that decides which libfuse API ContainerFS is written against.
 *
 * FUSE_USE_VERSION must be defined before <fuse_lowlevel.h> is included; doing it here
 * means no build flag anywhere else has to know. 314 is Debian bookworm's libfuse 3.14.
 *
 * Everything macro-shaped or bitfield-shaped that Swift cannot import cleanly is wrapped
 * below in a static inline function (the swift-foundation `_filemanager_shims` pattern).
 */
#ifndef CFUSE_SHIM_H
#define CFUSE_SHIM_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

/* MARK: fuse_file_info bitfields */

static inline void cfuse_fi_set_direct_io(struct fuse_file_info *fi, int v) { fi->direct_io = v ? 1 : 0; }
static inline void cfuse_fi_set_keep_cache(struct fuse_file_info *fi, int v) { fi->keep_cache = v ? 1 : 0; }
static inline void cfuse_fi_set_cache_readdir(struct fuse_file_info *fi, int v) { fi->cache_readdir = v ? 1 : 0; }
static inline void cfuse_fi_set_noflush(struct fuse_file_info *fi, int v) { fi->noflush = v ? 1 : 0; }
static inline void cfuse_fi_set_nonseekable(struct fuse_file_info *fi, int v) { fi->nonseekable = v ? 1 : 0; }

/* MARK: zero-copy data paths */

/*
 * Reply to READ with `size` bytes of `fd` at `off`, without copying them through user
 * space when libfuse can splice (FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK). A fuse_bufvec holds a
 * flexible array; building it on the C stack keeps the hot path allocation-free.
 */
static inline int cfuse_reply_fd_data(fuse_req_t req, int fd, size_t size, off_t off)
{
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = off;
    return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/*
 * Copy a WRITE's payload (memory or a pipe, whichever libfuse received) into `fd` at
 * `off`. Returns bytes written or -errno.
 */
static inline ssize_t cfuse_write_buf_to_fd(struct fuse_bufvec *in, int fd, off_t off)
{
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
    out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = fd;
    out.buf[0].pos = off;
    return fuse_buf_copy(&out, in, (enum fuse_buf_copy_flags)0);
}

/* MARK: session and arguments */

static inline struct fuse_args cfuse_args_init(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    return args;
}

static inline int cfuse_session_loop_mt(struct fuse_session *se, unsigned int max_idle, unsigned int max_threads)
{
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -ENOMEM;
    fuse_loop_cfg_set_clone_fd(config, 0);
    /* UINT_MAX is the default (keep every idle thread); libfuse would log it as invalid. */
    if (max_idle != UINT_MAX) fuse_loop_cfg_set_idle_threads(config, max_idle);
    fuse_loop_cfg_set_max_threads(config, max_threads);
    int rc = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    return rc;
}

#endif
