/* SPDX-License-Identifier: MIT */
/*
 * mounts.c - the xdm trees mounted on this machine, and whose they
 * are.
 *
 * A tree is served by a thread of the process it describes (xdm-fs(7)), so
 * reading it asks that process, and a process that is stopped, or hung,
 * never answers: the read waits in the kernel for as long as the process
 * stays so.  Each tree is therefore read by a child of its own, which is
 * killed (a fatal signal ends a wait for a FUSE answer) if it has not
 * answered in time.  The trees are read in parallel, so a stopped process
 * costs one timeout, not one per tree.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "lib/mountinfo/mountinfo.h"
#include "segments.h"
#include "tree_read.h"

#define TREE_TYPE "fuse.xdm"

struct mount_list {
	struct xdmctl_mount *m;
	size_t n, cap;
	const char *under;	/* only trees below this directory; NULL: all */
};

/* Whether point is dir or below it ("/a/b" is below "/a", "/ab" is not). */
static bool below(const char *point, const char *dir)
{
	size_t len = strlen(dir);

	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len == 1 && dir[0] == '/')
		return true;	/* every absolute path is below the root */
	return strncmp(point, dir, len) == 0 && (point[len] == '\0' || point[len] == '/');
}

/*
 * A mount over another at the same point hides it: only the last line of a
 * point counts, and an xdm tree that something else covers is not listed.
 */
static int collect(const char *point, const char *type, void *arg)
{
	struct mount_list *l = arg;

	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->m[i].path, point) == 0) {
			l->m[i] = l->m[--l->n];
			break;
		}
	}
	if (strcmp(type, TREE_TYPE) != 0 || (l->under && !below(point, l->under)))
		return 0;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 4;
		struct xdmctl_mount *bigger = realloc(l->m, ncap * sizeof(*l->m));

		if (!bigger)
			return -ENOMEM;
		l->m = bigger;
		l->cap = ncap;
	}
	memset(&l->m[l->n], 0, sizeof(l->m[0]));
	snprintf(l->m[l->n].path, sizeof(l->m[0].path), "%s", point);
	l->n++;
	return 0;
}

/* A file of one line into buf, its newline cut; 0 or an errno. */
static int read_line(int dirfd, const char *name, char *buf, size_t len)
{
	ssize_t n;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		int err = errno;

		close(fd);
		return err;
	}
	close(fd);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static uint64_t read_u64(int dirfd, const char *name)
{
	char buf[32];

	return read_line(dirfd, name, buf, sizeof(buf)) == 0 ? strtoull(buf, NULL, 10) : 0;
}

static void read_runtime(int dirfd, const char *name, struct xdmctl_runtime_view *rt)
{
	size_t len = strnlen(name, sizeof(rt->name) - 1);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* Names are "N" or "N.K": far shorter than the field. */
	memcpy(rt->name, name, len);
	rt->name[len] = '\0';
	if (fd < 0)
		return;
	if (read_line(fd, "uuid", rt->uuid, sizeof(rt->uuid)) != 0)
		rt->uuid[0] = '\0';
	rt->bytes = read_u64(fd, "bytes_outstanding");
	rt->blocks = read_u64(fd, "blocks_outstanding");
	rt->peak = read_u64(fd, "bytes_peak");
	rt->allocs = read_u64(fd, "allocs");
	rt->frees = read_u64(fd, "frees");
	rt->failures = read_u64(fd, "failures");
	close(fd);
}

/* In the child: everything asked of one tree, into *m. */
static void read_tree(struct xdmctl_mount *m, bool with_runtimes)
{
	char buf[32];
	struct dirent *d;
	DIR *dir;
	int fd;

	fd = open(m->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		m->err = errno;
		return;
	}
	m->err = read_line(fd, "pid", buf, sizeof(buf));
	if (m->err == 0)
		m->pid = (pid_t)strtol(buf, NULL, 10);
	if (m->err || !with_runtimes) {
		close(fd);
		return;
	}
	dir = fdopendir(fd);
	if (!dir) {
		m->err = errno;
		close(fd);
		return;
	}
	/* Runtime directories are named by their ordinal: "0", "1.2". */
	while ((d = readdir(dir)) && m->nruntimes < XDMCTL_RUNTIMES_MAX) {
		if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
			read_runtime(dirfd(dir), d->d_name, &m->rt[m->nruntimes++]);
	}
	closedir(dir);
}

struct reader {
	pid_t child;
	int fd;			/* the read end of its pipe; -1 once done */
	size_t got;		/* bytes of the answer so far */
};

static void start_reader(struct xdmctl_mount *m, bool with_runtimes, struct reader *r)
{
	int p[2];

	r->child = -1;
	r->fd = -1;
	r->got = 0;
	if (pipe2(p, O_CLOEXEC) != 0) {
		m->err = errno;
		return;
	}
	r->child = fork();
	if (r->child < 0) {
		m->err = errno;
		close(p[0]);
		close(p[1]);
		return;
	}
	if (r->child == 0) {
		const char *at = (const char *)m;
		size_t left = sizeof(*m);

		close(p[0]);
		read_tree(m, with_runtimes);
		while (left) {
			ssize_t n = write(p[1], at, left);

			if (n <= 0)
				_exit(1);
			at += n;
			left -= (size_t)n;
		}
		_exit(0);
	}
	close(p[1]);
	r->fd = p[0];
}

/* Reads every child's answer into its mount until done or the deadline. */
static void gather(struct xdmctl_mount *m, struct reader *r, size_t n, int timeout_ms)
{
	uint64_t deadline = budget_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct pollfd *pf = calloc(n, sizeof(*pf));

	for (;;) {
		size_t k = 0;
		uint64_t now = budget_now_ns();
		int left = now < deadline ? (int)((deadline - now + 999999) / 1000000) : 0;

		for (size_t i = 0; i < n; i++) {
			if (r[i].fd >= 0 && pf)
				pf[k++] = (struct pollfd){ .fd = r[i].fd, .events = POLLIN };
		}
		if (k == 0 || left <= 0 || !pf)
			break;
		if (poll(pf, k, left) < 0 && errno != EINTR)
			break;
		for (size_t i = 0; i < n; i++) {
			ssize_t got;

			if (r[i].fd < 0)
				continue;
			/* The answer lands in the parent's copy of the mount. */
			got = read(r[i].fd, (char *)&m[i] + r[i].got, sizeof(m[i]) - r[i].got);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got > 0) {
				r[i].got += (size_t)got;
				if (r[i].got < sizeof(m[i]))
					continue;
			}
			close(r[i].fd);
			r[i].fd = -1;
		}
	}
	free(pf);
}

int xdmctl_mounts_read(const struct xdmctl_ctx *ctx, bool with_runtimes, int timeout_ms,
		       struct xdmctl_mount **out, size_t *n)
{
	struct mount_list l = { NULL, 0, 0, ctx->trees_under };
	struct reader *r = NULL;
	int rc;

	/* Children left by an earlier call whose wait has ended since. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	rc = mountinfo_each(collect, &l);
	if (rc)
		goto fail;
	r = calloc(l.n ? l.n : 1, sizeof(*r));
	if (!r) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < l.n; i++) {
		start_reader(&l.m[i], with_runtimes, &r[i]);
		if (r[i].fd >= 0)
			fcntl(r[i].fd, F_SETFL, O_NONBLOCK);
	}
	gather(l.m, r, l.n, timeout_ms);
	for (size_t i = 0; i < l.n; i++) {
		if (r[i].child <= 0)
			continue;
		if (r[i].fd >= 0 || r[i].got != sizeof(l.m[i])) {
			/* No whole answer in time: what it copied is not trusted. */
			char path[sizeof(l.m[i].path)];

			memcpy(path, l.m[i].path, sizeof(path));
			memset(&l.m[i], 0, sizeof(l.m[i]));
			memcpy(l.m[i].path, path, sizeof(path));
			l.m[i].err = ETIMEDOUT;
			kill(r[i].child, SIGKILL);
			if (r[i].fd >= 0)
				close(r[i].fd);
		}
		xdmctl_child_reap(r[i].child);
	}
	free(r);
	*out = l.m;
	*n = l.n;
	return 0;
fail:
	free(l.m);
	return rc < 0 ? rc : -EIO;
}

const struct xdmctl_mount *xdmctl_mount_of(const struct xdmctl_mount *mounts, size_t n,
					   pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (mounts[i].err == 0 && mounts[i].pid == pid)
			return &mounts[i];
	}
	return NULL;
}

void xdmctl_segments_link_mounts(struct xdmctl_segment *segs, size_t nsegs,
				 const struct xdmctl_mount *mounts, size_t nmounts)
{
	for (size_t i = 0; i < nsegs; i++) {
		for (size_t k = 0; k < segs[i].nprocs; k++) {
			struct xdmctl_proc *p = &segs[i].procs[k];

			p->mount = p->state == XDMCTL_PROC_DEAD ? NULL
								: xdmctl_mount_of(mounts, nmounts, p->pid);
		}
	}
}

bool xdmctl_tree_has_budget(const struct xdmctl_mount *m, const struct xdmctl_segment *segs,
			    size_t nsegs)
{
	for (size_t i = 0; i < nsegs; i++) {
		for (size_t k = 0; k < segs[i].nprocs; k++) {
			if (segs[i].procs[k].mount == m)
				return true;
		}
	}
	return false;
}
