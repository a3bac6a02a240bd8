/* SPDX-License-Identifier: MIT */
/*
 * ipc_raw.h - a client of an exporter's socket that speaks the wire by
 * hand (the structures of core/ipc.h, the handle's documented layout), as
 * a hostile process would: it connects to any token, sends any request,
 * forges handles, never reads, and looks at whatever descriptor it is
 * given.  tests/process/check_ipc_users runs it as another user.
 */
#ifndef XDM_TESTS_IPC_RAW_H
#define XDM_TESTS_IPC_RAW_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/ipc.h"

/* Where a handle keeps what a forger changes (core/ipc_handle.c's header). */
enum {
	RAW_AT_TOKEN = 16,
	RAW_AT_GENERATION = 24,
	RAW_AT_PTR = 32,
	RAW_AT_BYTES = 40,
	RAW_AT_OFFSET = 48,
	RAW_AT_SECRET = 112,
	RAW_AT_CHECKSUM = 248,
};

static inline uint64_t raw_get(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline void raw_put(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The checksum is FNV-1a: anyone can compute it, as a forger does here. */
static inline void raw_reseal(struct xdm_ipc_handle *h)
{
	uint64_t sum = 0xcbf29ce484222325ull;

	for (int i = 0; i < RAW_AT_CHECKSUM; i++) {
		sum ^= h->bytes[i];
		sum *= 0x100000001b3ull;
	}
	raw_put(h->bytes + RAW_AT_CHECKSUM, sum, 8);
}

static inline bool raw_from_hex(const char *hex, struct xdm_ipc_handle *h)
{
	for (int i = 0; i < XDM_IPC_HANDLE_SIZE; i++) {
		unsigned int v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return false;
		h->bytes[i] = (unsigned char)v;
	}
	return true;
}

/* Whether /proc/net/unix lists the exporter's socket: anyone may read it. */
static inline bool raw_token_listed(uint64_t token)
{
	char want[64], line[512];
	bool found = false;
	FILE *f = fopen("/proc/net/unix", "r");

	if (!f)
		return false;
	snprintf(want, sizeof(want), "@xdm-ipc-%016llx", (unsigned long long)token);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* A connection to token's socket; -errno when there is none. */
static inline int raw_connect(uint64_t token, bool nonblocking)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0),
			0);
	int n, err;

	if (fd < 0)
		return -errno;
	n = snprintf(addr.sun_path, sizeof(addr.sun_path), "%cxdm-ipc-%016llx", 0,
		     (unsigned long long)token);
	if (connect(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) +
		    (size_t)n) == 0)
		return fd;
	err = errno;
	close(fd);
	return -err;
}

/* An OPEN of h, or any bytes as a request: 0, or -errno (never waits). */
static inline int raw_send_open(int fd, const struct xdm_ipc_handle *h)
{
	struct xdm_ipc_request req;

	memset(&req, 0, sizeof(req));
	req.op = XDM_IPC_OPEN;
	req.handle = *h;
	return send(fd, &req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(req) ?
		       0 : -errno;
}

static inline int raw_send_bytes(int fd, const void *bytes, size_t len)
{
	return send(fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len ? 0 : -errno;
}

/*
 * The next message, waiting up to timeout_ms: its length, 0 at the
 * server's end, -ETIMEDOUT, or -errno.  A descriptor it carried goes to
 * *fd (-1: none; any more are closed).
 */
static inline ssize_t raw_recv(int fd, void *buf, size_t len, int *passed, int timeout_ms)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (passed)
		*passed = -1;
	if (poll(&pfd, 1, timeout_ms) == 0)
		return -ETIMEDOUT;
	n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	/* A reset (the server closed with our request unread) comes before
	 * what the server sent first: read on once. */
	if (n < 0 && errno == ECONNRESET)
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int one;

			memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (passed && *passed < 0)
				*passed = one;
			else
				close(one);
		}
	}
	return n;
}

/* A reply into *rep (1), or 0 at the end, or -ETIMEDOUT, or -errno; its descriptor in *fd. */
static inline int raw_reply(int fd, struct xdm_ipc_reply *rep, int *passed, int timeout_ms)
{
	ssize_t n = raw_recv(fd, rep, sizeof(*rep), passed, timeout_ms);

	if (n == (ssize_t)sizeof(*rep)) {
		rep->message[sizeof(rep->message) - 1] = '\0';
		return 1;
	}
	if (n > 0) {
		if (passed && *passed >= 0)
			close(*passed);
		return -EPROTO;
	}
	return (int)n;
}

/*
 * Whether the server ends the connection within timeout_ms: every message
 * before the end is read, and every descriptor in them counted (*fds) and
 * closed.
 */
static inline bool raw_ended_by(int fd, int timeout_ms, unsigned int *fds)
{
	unsigned char buf[sizeof(struct xdm_ipc_reply) + 1];

	for (;;) {
		int passed;
		ssize_t n = raw_recv(fd, buf, sizeof(buf), &passed, timeout_ms);

		if (passed >= 0) {
			if (fds)
				(*fds)++;
			close(passed);
		}
		if (n == 0 || n == -ECONNRESET)
			return true;
		if (n < 0)
			return false;
	}
}

/*
 * Every byte a passed memory descriptor lets its holder see, judged: the
 * block's [offset, offset + bytes) must hold want, everything else of the
 * object zero (padding of this block, never a neighbour's bytes).  0, or
 * the first offset that is wrong plus one, or -errno.
 */
static inline long long raw_judge_object(int fd, uint64_t offset, uint64_t bytes,
					 unsigned char want, uint64_t *size)
{
	struct stat st;
	unsigned char *p;
	long long bad = 0;

	if (fstat(fd, &st) != 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	if (!st.st_size)
		return 0;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	for (uint64_t i = 0; i < (uint64_t)st.st_size && !bad; i++) {
		unsigned char expect = i >= offset && i - offset < bytes ? want : 0;

		if (p[i] != expect)
			bad = (long long)i + 1;
	}
	munmap(p, (size_t)st.st_size);
	return bad;
}

#endif /* XDM_TESTS_IPC_RAW_H */
