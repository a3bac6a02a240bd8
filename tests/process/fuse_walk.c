/* SPDX-License-Identifier: MIT */
/*
 * fuse_walk.c - walk a mounted xdm tree as an outside reader would: list
 * every directory, open and read every file to its end.
 *
 *	fuse_walk [--repeat N] [--interval-ms M] [--duration-s S] DIR
 *
 * One walk by default; N walks, or walks until S seconds have passed,
 * starting M ms apart (a walk that takes longer than M starts the next one
 * at once: missed starts are dropped, not made up).  At the end, or when
 * SIGINT or SIGTERM comes (taken between walks only, so that no walk is cut
 * short), one line:
 *
 *	walks=.. dirs=.. files=.. bytes=.. vanished=.. errors=.. writeonly=.. busy_ms=..
 *
 * counted over all walks; busy_ms is the time spent walking, sleeps left
 * out, so that the cost of reading the tree can be measured next to a
 * workload.  A block is freed whenever its owner likes, so ENOENT under a
 * blocks/ directory is expected and counted as vanished.  An action (a 0200
 * file, such as logging's flush) cannot be read: its EACCES is counted as
 * writeonly once its mode says so.  Any other failure is printed (path and
 * strerror) and makes the exit status 1.  2 is a usage error.
 *
 * It links nothing of xdm: what it sees is what any program sees.  Each
 * directory is walked through its descriptor (openat), so a path is looked
 * up one component at a time, as the kernel must anyway, and no entry is
 * stat()ed but an action's: a name whose type readdir does not tell is
 * opened and read, and a directory answers that read with EISDIR, which
 * costs no request to the server.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Past this many, errors are counted but no longer printed. */
#define MAX_PRINTED 20

struct counts {
	unsigned long long dirs, files, bytes, vanished, errors, writeonly;
};

static struct counts total;
/* Every file is read into this: most values in one read, long tables in a few. */
static char readbuf[65536];

/* Is path (relative to the root) inside some runtime's blocks/? */
static bool under_blocks(const char *path)
{
	for (const char *p = strstr(path, "blocks/"); p; p = strstr(p + 1, "blocks/"))
		if (p == path || p[-1] == '/')
			return true;
	return false;
}

static void failed(const char *root, const char *path, int err)
{
	if (err == ENOENT && under_blocks(path)) {
		total.vanished++;
		return;
	}
	if (total.errors++ < MAX_PRINTED)
		fprintf(stderr, "fuse_walk: %s%s%s: %s\n", root, path[0] ? "/" : "", path,
			strerror(err));
	else if (total.errors == MAX_PRINTED + 1)
		fprintf(stderr, "fuse_walk: more errors; only counting them now\n");
}

static void walk_dir(const char *root, int fd, char *path, size_t plen);

/* A file nobody may read: an action, which is only written. */
static bool write_only(int dir, const char *name)
{
	struct stat st;

	return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       !(st.st_mode & 0444);
}

/* Read fd to its end; a directory opened by a name of unknown type recurses. */
static void read_file(const char *root, int fd, char *path, size_t plen)
{
	for (;;) {
		ssize_t n = read(fd, readbuf, sizeof(readbuf));

		if (n > 0) {
			total.bytes += (unsigned long long)n;
			continue;
		}
		if (n == 0) {
			total.files++;
		} else if (errno == EISDIR) {
			walk_dir(root, fd, path, plen);
			return;	/* walk_dir closed fd */
		} else if (errno == EINTR) {
			continue;
		} else {
			failed(root, path, errno);
		}
		break;
	}
	close(fd);
}

/* Walk the directory open at fd, named path (plen long); closes fd. */
static void walk_dir(const char *root, int fd, char *path, size_t plen)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (!d) {
		failed(root, path, errno);
		close(fd);
		return;
	}
	total.dirs++;
	for (;;) {
		size_t nlen;
		int sub;

		errno = 0;
		e = readdir(d);
		if (!e) {
			if (errno)
				failed(root, path, errno);
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		nlen = strlen(e->d_name);
		if (plen + 1 + nlen + 1 > PATH_MAX) {
			failed(root, path, ENAMETOOLONG);
			continue;
		}
		if (plen)
			path[plen] = '/';
		memcpy(path + plen + (plen ? 1 : 0), e->d_name, nlen + 1);
		sub = openat(dirfd(d), e->d_name,
			     O_RDONLY | O_CLOEXEC | (e->d_type == DT_DIR ? O_DIRECTORY : 0));
		if (sub < 0 && errno == EACCES && write_only(dirfd(d), e->d_name))
			total.writeonly++;
		else if (sub < 0)
			failed(root, path, errno);
		else if (e->d_type == DT_DIR)
			walk_dir(root, sub, path, plen + (plen ? 1 : 0) + nlen);
		else
			read_file(root, sub, path, plen + (plen ? 1 : 0) + nlen);
		path[plen] = '\0';
	}
	closedir(d);
}

static void walk(const char *root)
{
	static char path[PATH_MAX];
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	path[0] = '\0';
	if (fd < 0) {
		failed(root, "", errno);
		return;
	}
	walk_dir(root, fd, path, 0);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * SIGINT and SIGTERM stay blocked and are taken here, between walks: wait
 * until t (not at all if t is past) and say whether one came.
 */
static bool stopped_by_signal(const sigset_t *stop, int64_t t)
{
	for (;;) {
		int64_t left = t - now_ns();
		struct timespec ts = { 0, 0 };

		if (left > 0) {
			ts.tv_sec = (time_t)(left / 1000000000);
			ts.tv_nsec = (long)(left % 1000000000);
		}
		if (sigtimedwait(stop, NULL, &ts) > 0)
			return true;
		if (errno == EAGAIN)
			return false;
		/* EINTR: another signal's handler ran; wait out the rest. */
	}
}

static bool parse_count(const char *opt, const char *arg, long long max, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || *out < 0 || *out > max) {
		fprintf(stderr, "fuse_walk: %s: '%s' is not a number from 0 to %lld\n", opt, arg,
			max);
		return false;
	}
	return true;
}

static void usage(void)
{
	fprintf(stderr, "usage: fuse_walk [--repeat N] [--interval-ms M] [--duration-s S] "
		"DIR\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "repeat", required_argument, NULL, 'r' },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "duration-s", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long long repeat = -1, interval_ms = 0, duration_s = -1;
	int64_t start, end = 0, next, busy = 0;
	unsigned long long walks = 0;
	sigset_t stop;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (!parse_count("--repeat", optarg, 1LL << 40, &repeat))
				return 2;
			break;
		case 'i':
			if (!parse_count("--interval-ms", optarg, 86400000, &interval_ms))
				return 2;
			break;
		case 'd':
			if (!parse_count("--duration-s", optarg, 86400 * 365, &duration_s))
				return 2;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage();
		return 2;
	}
	/* A duration alone means as many walks as fit in it. */
	if (repeat < 0)
		repeat = duration_s >= 0 ? -1 : 1;

	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	start = next = now_ns();
	if (duration_s >= 0)
		end = start + duration_s * 1000000000LL;
	while (repeat != 0 && (duration_s < 0 || start < end)) {
		int64_t t0 = now_ns(), t1;

		walk(argv[optind]);
		walks++;
		t1 = now_ns();
		busy += t1 - t0;
		if (repeat > 0 && walks >= (unsigned long long)repeat)
			break;
		next += interval_ms * 1000000LL;
		if (next < t1)	/* overran: start again now, drop the missed starts */
			next = t1;
		if (duration_s >= 0 && next >= end)
			break;
		if (stopped_by_signal(&stop, next))
			break;
	}
	printf("walks=%llu dirs=%llu files=%llu bytes=%llu vanished=%llu errors=%llu "
	       "writeonly=%llu busy_ms=%lld\n", walks, total.dirs, total.files, total.bytes,
	       total.vanished, total.errors, total.writeonly, (long long)(busy / 1000000));
	return total.errors ? 1 : 0;
}
