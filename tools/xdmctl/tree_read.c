/* SPDX-License-Identifier: MIT */
/*
 * tree_read.c - a file of a tree read, or a directory listed, by a child
 * with a deadline (tree_read.h).
 *
 * A tree is served by a thread of the process it describes (xdm-fs(7)):
 * a stopped or hung process never answers, and a read of its files waits
 * in the kernel for as long as it stays so.  So, as mounts.c does for the
 * small files, a child opens and reads the file and passes its bytes up a
 * pipe; this process waits for them with a deadline, kills a child that
 * has not finished by then, and stops taking bytes past a bound, so that
 * a file that never ends (or a FIFO, or /dev/zero, named by mistake or by
 * someone else) costs a timeout or an error, never a hang or all memory.
 * The child's exit status is 0 or the errno that stopped it.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_read.h"

/* An exit status the child uses for an errno too large to be one. */
#define CHILD_EIO 125

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void child_exit(int err)
{
	_exit(err > 0 && err < CHILD_EIO ? err : CHILD_EIO);
}

/* In the child: n bytes up the pipe, or the child ends. */
static void child_send(int out, const char *buf, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = write(out, buf + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			child_exit(EPIPE);
		off += (size_t)w;
	}
}

/* In the child: path's bytes to out, at most max + 1 of them (one more says "too big"). */
static void child_read(const char *path, size_t max, int out)
{
	char buf[65536];
	size_t sent = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		child_exit(errno);
	/*
	 * A regular file that says it is larger than the bound is refused
	 * before a byte moves.  A tree's files say nothing true of their size
	 * (their text is made at each read), so the bound on what is sent
	 * stays the check that counts.
	 */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
		child_exit(EFBIG);
	while (sent <= max) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			child_exit(errno);
		if (n == 0)
			break;
		child_send(out, buf, (size_t)n);
		sent += (size_t)n;
	}
	_exit(0);
}

/* In the child: the names of directory path to out, a line each, as far as max + 1 bytes. */
static void child_list(const char *path, size_t max, int out)
{
	size_t sent = 0;
	struct dirent *e;
	DIR *d = opendir(path);

	if (!d)
		child_exit(errno);
	while (sent <= max && (errno = 0, e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || memchr(e->d_name, '\n', n))
			continue;
		child_send(out, e->d_name, n);
		child_send(out, "\n", 1);
		sent += n + 1;
	}
	if (sent <= max && errno)
		child_exit(errno);
	_exit(0);
}

struct gathered {
	char *text;
	size_t len, cap;
};

/* Bytes from fd until its end, the deadline, or more than max: 0, ETIMEDOUT, EFBIG, ENOMEM. */
static int gather(int fd, size_t max, uint64_t deadline, struct gathered *g)
{
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline)
			return ETIMEDOUT;
		if (poll(&pf, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return errno;
		if (g->cap - g->len < 4096 + 1) {
			size_t cap = g->cap ? g->cap * 2 : 65536;
			char *bigger = realloc(g->text, cap);

			if (!bigger)
				return ENOMEM;
			g->text = bigger;
			g->cap = cap;
		}
		n = read(fd, g->text + g->len, g->cap - g->len - 1);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return 0;
		g->len += (size_t)n;
		if (g->len > max)
			return EFBIG;
	}
}

/*
 * The child's answer once its pipe ended: 0, its errno, or ETIMEDOUT.
 * *reaped: it is gone, and its pid may be another process's already.
 */
static int child_status(pid_t child, uint64_t deadline, bool *reaped)
{
	int status;

	for (;;) {
		pid_t got = waitpid(child, &status, WNOHANG);
		struct timespec pause = { 0, 2000000 };

		if (got == child)
			break;
		if (got < 0 && errno != EINTR) {
			*reaped = true;
			return ECHILD;
		}
		if (now_ms() >= deadline)
			return ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
	*reaped = true;
	if (!WIFEXITED(status))
		return EIO;
	return WEXITSTATUS(status) == CHILD_EIO ? EIO : WEXITSTATUS(status);
}

/*
 * Waits a little for a child, then leaves it.  SIGKILL ends a wait for a
 * FUSE answer only while the request is queued: once the server has read
 * it, the kernel waits for the answer whatever the signal, and a child of
 * a stopped server stays until the server runs again.  Such a child is
 * reaped by a later call, or by init once xdmctl exits.
 */
void xdmctl_child_reap(pid_t child)
{
	for (int tries = 0; tries < 50; tries++) {
		struct timespec pause = { 0, 2000000 };
		pid_t got = waitpid(child, NULL, WNOHANG);

		if (got == child || (got < 0 && errno != EINTR))
			return;
		nanosleep(&pause, NULL);
	}
}

/* A child that did not finish is killed, and waited for a little. */
static void stop_child(pid_t child)
{
	kill(child, SIGKILL);
	xdmctl_child_reap(child);
}

/* work(path, max, pipe) in a child, its bytes gathered here: as xdmctl_tree_read. */
static int in_child(void (*work)(const char *path, size_t max, int out), const char *path,
		    size_t max, int timeout_ms, char **text, size_t *len)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	struct gathered g = { NULL, 0, 0 };
	bool reaped = false;
	pid_t child;
	int p[2], err;

	if (pipe2(p, O_CLOEXEC) != 0)
		return errno;
	fflush(NULL);
	child = fork();
	if (child < 0) {
		err = errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (child == 0) {
		close(p[0]);
		work(path, max, p[1]);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	err = gather(p[0], max, deadline, &g);
	close(p[0]);
	if (!err)
		err = child_status(child, deadline, &reaped);
	if (!reaped)
		stop_child(child);
	if (err) {
		free(g.text);
		return err;
	}
	if (!g.text && !(g.text = malloc(1)))
		return ENOMEM;
	g.text[g.len] = '\0';
	*text = g.text;
	*len = g.len;
	return 0;
}

int xdmctl_tree_read(const char *path, size_t max, int timeout_ms, char **text, size_t *len)
{
	return in_child(child_read, path, max, timeout_ms, text, len);
}

int xdmctl_tree_list(const char *path, size_t max, int timeout_ms, char **text, size_t *len)
{
	return in_child(child_list, path, max, timeout_ms, text, len);
}
