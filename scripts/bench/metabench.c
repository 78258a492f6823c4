/*
 * metabench.c - the metadata workload of scripts/bench/fsbench.sh.
 *
 * usage: metabench DIR NFILES READDIR_PASSES [DROP_COMMAND]
 *
 * Makes DIR (which must not exist) and times, with CLOCK_MONOTONIC, a sequence of phases
 * on NFILES empty files in it, printing one line per phase:
 *
 *     PHASE OPS SECONDS OPS_PER_SECOND
 *
 *   create      openat(O_CREAT|O_EXCL) + close of each file
 *   stat_warm   fstatat of each, straight after (caches as the create left them)
 *   stat_cold   the same after DROP_COMMAND (stat_again without one)
 *   readdir     READDIR_PASSES listings of DIR, names only; OPS = entries seen
 *   ls_l_cold   one listing with an fstatat per entry after DROP_COMMAND (ls_l without)
 *   rename      renameat of each to a new name in DIR
 *   unlink      unlinkat of each
 *
 * Every name is resolved relative to a descriptor of DIR, so each operation is a one-
 * component walk: the figures are the file system's per-operation cost, not path walking.
 * A C program rather than a shell loop because a fork per operation would swamp it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int dirfd_;
static long nfiles;
static int passes;
static const char *drop_command;

static double seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(const char *op, const char *name)
{
	fprintf(stderr, "metabench: %s %s: %s\n", op, name, strerror(errno));
	exit(1);
}

static void file_name(char *buf, size_t size, char prefix, long i)
{
	snprintf(buf, size, "%c%08ld", prefix, i);
}

/* Drops dentries and inodes (the caller's command), then gives the FUSE daemon a moment
 * to take the FORGETs that follow, so they are not timed in the next phase. */
static void drop_caches(void)
{
	if (drop_command == NULL || *drop_command == '\0')
		return;
	int rc = system(drop_command);
	if (rc != 0)
		fprintf(stderr, "metabench: '%s' exited %d\n", drop_command, rc);
	usleep(300 * 1000);
}

static long each_file(char prefix, int (*op)(const char *, long))
{
	char name[32];
	for (long i = 0; i < nfiles; i++) {
		file_name(name, sizeof name, prefix, i);
		if (op(name, i) != 0)
			fail("operation on", name);
	}
	return nfiles;
}

static int create_one(const char *name, long i)
{
	(void)i;
	int fd = openat(dirfd_, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	return fd < 0 ? -1 : close(fd);
}

static int stat_one(const char *name, long i)
{
	struct stat st;
	(void)i;
	return fstatat(dirfd_, name, &st, AT_SYMLINK_NOFOLLOW);
}

static int rename_one(const char *name, long i)
{
	char to[32];
	file_name(to, sizeof to, 'g', i);
	return renameat(dirfd_, name, dirfd_, to);
}

static int unlink_one(const char *name, long i)
{
	(void)i;
	return unlinkat(dirfd_, name, 0);
}

/* One listing of DIR; with_stat: an fstatat of every entry as it comes (what ls -l does). */
static long list_dir(int with_stat)
{
	int fd = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (d == NULL)
		fail("opendir", ".");
	long seen = 0;
	struct dirent *e;
	struct stat st;
	errno = 0;
	while ((e = readdir(d)) != NULL) {
		if (with_stat && fstatat(dirfd_, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			fail("stat", e->d_name);
		seen++;
	}
	if (errno != 0)
		fail("readdir", ".");
	closedir(d);
	return seen;
}

static long create_all(void) { return each_file('f', create_one); }
static long stat_all(void) { return each_file('f', stat_one); }
static long rename_all(void) { return each_file('f', rename_one); }
static long unlink_all(void) { return each_file('g', unlink_one); }
static long readdir_passes(void)
{
	long seen = 0;
	for (int p = 0; p < passes; p++)
		seen += list_dir(0);
	return seen;
}
static long ls_l(void) { return list_dir(1); }

struct phase {
	const char *name, *name_without_drop;
	int drop_first;
	long (*run)(void);
};

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: metabench DIR NFILES READDIR_PASSES [DROP_COMMAND]\n");
		return 2;
	}
	const char *dir = argv[1];
	nfiles = atol(argv[2]);
	passes = atoi(argv[3]);
	drop_command = argc == 5 && *argv[4] ? argv[4] : NULL;
	if (nfiles <= 0 || passes <= 0) {
		fprintf(stderr, "metabench: NFILES and READDIR_PASSES must be positive\n");
		return 2;
	}
	if (mkdir(dir, 0755) != 0)
		fail("mkdir", dir);
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd_ < 0)
		fail("open", dir);

	const struct phase phases[] = {
		{"create", "create", 0, create_all},
		{"stat_warm", "stat_warm", 0, stat_all},
		{"stat_cold", "stat_again", 1, stat_all},
		{"readdir", "readdir", 0, readdir_passes},
		{"ls_l_cold", "ls_l", 1, ls_l},
		{"rename", "rename", 0, rename_all},
		{"unlink", "unlink", 0, unlink_all},
	};
	for (size_t k = 0; k < sizeof phases / sizeof phases[0]; k++) {
		const struct phase *p = &phases[k];
		if (p->drop_first)
			drop_caches();
		double t0 = seconds();
		long ops = p->run();
		double dt = seconds() - t0;
		printf("%s %ld %.6f %.1f\n", drop_command || !p->drop_first ? p->name : p->name_without_drop,
		       ops, dt, dt > 0 ? (double)ops / dt : 0.0);
		fflush(stdout);
	}
	close(dirfd_);
	if (rmdir(dir) != 0)
		fail("rmdir", dir);
	return 0;
}
