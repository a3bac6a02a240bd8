/* SPDX-License-Identifier: MIT */
/*
 * ipc_import.c - the importer's side: open a handle (ask its exporter for
 * the memory, map it with this runtime's platform), close it (unmap after
 * the work on its stream, tell the exporter).
 *
 * One connection per exporter, kept while anything is imported from it:
 * the exporter counts this process's holds on it, and its end (all closed,
 * or this process dead) gives them all back.
 *
 * The handle's secret goes only to a server of the user the handle names
 * (SO_PEERCRED of the connected socket): an exporter's abstract name can
 * be bound by anyone once the exporter has gone.  Every wait on the
 * exporter has a deadline ($XDM_IPC_TIMEOUT_MS); an exporter that does
 * not answer in time is named in the error, and its connection is asked
 * nothing more (a late answer would be taken for the next one's): it is
 * kept only for the holds that came over it, and a new one is made for
 * the next open.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/tree.h"

#define NCONNS (sizeof(((struct xdm_ipc_importer *)0)->conns) / \
		sizeof(((struct xdm_ipc_importer *)0)->conns[0]))

/* The deadline of a wait that starts now. */
static uint64_t deadline_in(const struct xdm_runtime *rt)
{
	return xdm_ipc_mono_ns() + (uint64_t)rt->ipc.timeout_ms * 1000000ull;
}

/* Until fd is ready for events or the deadline passes: 0 or ETIMEDOUT. */
static int wait_ready(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		uint64_t now = xdm_ipc_mono_ns();
		int n;

		if (now >= deadline_ns)
			return ETIMEDOUT;
		n = poll(&pfd, 1, (int)((deadline_ns - now + 999999) / 1000000));
		if (n > 0)
			return 0;	/* ready, or its end: the call after says which */
		if (n < 0 && errno != EINTR)
			return errno;
	}
}

static enum xdm_status no_answer(const struct xdm_runtime *rt, const struct xdm_ipc_ref *r,
				 const char *what)
{
	return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter of this handle (process "
			     "%u, uid %u) did not %s within %u ms ($XDM_IPC_TIMEOUT_MS): it is "
			     "stopped, stuck, or serving too many", r->exporter_pid, r->exporter_uid,
			     what, rt->ipc.timeout_ms);
}

/*
 * Connect to the abstract name, waiting (to the deadline) while its
 * backlog is full: a Unix socket refuses a non-blocking connect then.
 */
static enum xdm_status connect_by_deadline(const struct xdm_runtime *rt,
					   const struct xdm_ipc_ref *r, int *out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	uint64_t deadline = deadline_in(rt);
	size_t len = xdm_ipc_socket_name(r->token, addr.sun_path, sizeof(addr.sun_path));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return xdm_error_set_driver(errno, "xdm_ipc_open: socket: %s", strerror(errno));
	while (connect(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + len)) {
		int err = errno;

		if ((err == EAGAIN || err == EINTR) && xdm_ipc_mono_ns() < deadline) {
			struct timespec ms = { 0, 1000000 };

			nanosleep(&ms, NULL);
			continue;
		}
		close(fd);
		if (err == EAGAIN)
			return no_answer(rt, r, "take the connection");
		return xdm_error_set(XDM_E_INVALID,
				     "xdm_ipc_open: the exporter of this handle (process %u, as "
				     "it saw itself) cannot be reached: %s; it has ended, or is "
				     "in another network namespace (its socket is abstract)",
				     r->exporter_pid, strerror(err));
	}
	*out = fd;
	return XDM_OK;
}

/* The handle's secret goes only to a server of the user the handle names. */
static enum xdm_status check_server(int fd, const struct xdm_ipc_ref *r)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return xdm_error_set_driver(errno, "xdm_ipc_open: SO_PEERCRED: %s",
					    strerror(errno));
	if (cred.uid == r->exporter_uid)
		return XDM_OK;
	return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the socket of the handle's exporter "
			     "(process %u, uid %u) is served by process %d of uid %u: its exporter "
			     "has ended and another user took the name; nothing was sent to it",
			     r->exporter_pid, r->exporter_uid, (int)cred.pid,
			     (unsigned int)cred.uid);
}

/* Under imp->lock: the connection to token's exporter, made if need be. */
static enum xdm_status conn_get(struct xdm_runtime *rt, const struct xdm_ipc_ref *r,
				struct xdm_ipc_conn **out)
{
	struct xdm_ipc_importer *imp = &rt->ipc.imp;
	struct xdm_ipc_conn *free_c = NULL;
	enum xdm_status st;
	int fd = -1;

	for (size_t i = 0; i < NCONNS; i++) {
		if (imp->conns[i].fd >= 0 && imp->conns[i].token == r->token &&
		    !imp->conns[i].broken) {
			*out = &imp->conns[i];
			return XDM_OK;
		}
		if (imp->conns[i].fd < 0 && !free_c)
			free_c = &imp->conns[i];
	}
	if (!free_c)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_open: this runtime holds imports "
				     "from %zu exporters already", NCONNS);
	st = connect_by_deadline(rt, r, &fd);
	if (st)
		return st;
	st = check_server(fd, r);
	if (st) {
		close(fd);
		return st;
	}
	free_c->fd = fd;
	free_c->token = r->token;
	free_c->imports = 0;
	free_c->broken = false;
	*out = free_c;
	return XDM_OK;
}

static void conn_put(struct xdm_ipc_conn *c)
{
	if (c->imports)
		return;
	close(c->fd);
	c->fd = -1;
	c->token = 0;
	c->broken = false;
}

/* A CLOSE of generation, waiting for room no longer than the deadline. */
static void send_close(struct xdm_runtime *rt, struct xdm_ipc_conn *c, xdm_generation generation)
{
	uint64_t deadline = deadline_in(rt);
	struct xdm_ipc_request req;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.op = XDM_IPC_CLOSE;
	req.generation = generation;
	for (;;) {
		n = send(c->fd, &req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (errno == EAGAIN && wait_ready(c->fd, POLLOUT, deadline))
			break;
	}
	/* Not taken: the hold stays until the connection ends; ask it nothing more. */
	if (n != (ssize_t)sizeof(req))
		c->broken = true;
}

/*
 * The descriptors a received message carried: the first `keep` into fds
 * (NULL: none kept), every other one closed.  How many came.
 */
static uint32_t take_fds(struct msghdr *m, int *fds, uint32_t keep)
{
	uint32_t came = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, came++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fds && came < keep)
				fds[came] = fd;
			else
				close(fd);
		}
	}
	return came;
}

/*
 * One message, waiting no longer than the deadline: its length, 0 at the
 * exporter's end, or a negative errno (-ETIMEDOUT: no answer in time).
 */
static ssize_t recv_by(int fd, struct msghdr *m, uint64_t deadline)
{
	bool reset = false;

	for (;;) {
		ssize_t n = recvmsg(fd, m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		int err;

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		/*
		 * A server that closes with our request unread resets the
		 * connection, and the reset is reported before what it sent
		 * first (a refusal's reason): read on once, then it is the end.
		 */
		if (errno == ECONNRESET && !reset) {
			reset = true;
			continue;
		}
		if (reset)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		err = wait_ready(fd, POLLIN, deadline);
		if (err)
			return -err;
	}
}

/*
 * The descriptors of an object of pieces, in the messages after the reply;
 * *out gets them all, or nothing is left open.  Every message announced is
 * read even after one went wrong, so that the connection's next reply is a
 * reply (other imports from this exporter go on over it); if they do not
 * come in time, the connection is broken instead.
 */
static enum xdm_status receive_fds(struct xdm_ipc_conn *c, const struct xdm_ipc_ref *r,
				   uint32_t nfds, uint64_t deadline, int **out)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
	} ctl;
	const char *wrong = NULL;
	uint32_t got = 0, seen = 0;
	int *fds = NULL;

	if (!nfds || nfds > XDM_IPC_FDS_MAX) {
		c->broken = true;
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter announced %u "
				     "descriptors", nfds);
	}
	if (!xdm_ipc_fd_room(nfds))
		wrong = "more descriptors than this process may open (RLIMIT_NOFILE)";
	else if (!(fds = malloc(sizeof(*fds) * nfds)))
		wrong = "no memory for their list";
	while (seen < nfds) {
		struct xdm_ipc_fds_msg h;
		struct iovec iov = { &h, sizeof(h) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf) };
		uint32_t in_msg, keep;
		ssize_t n = recv_by(c->fd, &m, deadline);

		if (n == -ETIMEDOUT) {
			c->broken = true;
			wrong = "they did not all come in time";
			break;
		}
		if (n <= 0) {
			wrong = "the exporter went away before it sent them all";
			break;
		}
		/* Kept only while all is well, and never past the count. */
		keep = wrong ? 0 : nfds - got;
		in_msg = take_fds(&m, keep ? fds + got : NULL, keep);
		got += in_msg < keep ? in_msg : keep;
		if (n == (ssize_t)sizeof(h) && !h.n && h.first == seen) {
			wrong = "the exporter could not pass them all";
			break;
		}
		if (n != (ssize_t)sizeof(h) || !h.n || h.first != seen || h.n > nfds - seen) {
			c->broken = true;
			wrong = "a message that is not the next of them";
			break;
		}
		if (!wrong && ((m.msg_flags & MSG_CTRUNC) || in_msg != h.n))
			wrong = "fewer of them than the exporter sent (RLIMIT_NOFILE?)";
		seen += h.n;
	}
	if (wrong) {
		while (got)
			close(fds[--got]);
		free(fds);
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the %u descriptors of the "
				     "memory of process %u's block: %s", nfds, r->exporter_pid,
				     wrong);
	}
	*out = fds;
	return XDM_OK;
}

static void drop_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The request, waiting for room no longer than the deadline: 0 or an errno. */
static int send_by(int fd, const struct xdm_ipc_request *req, uint64_t deadline)
{
	for (;;) {
		ssize_t n = send(fd, req, sizeof(*req), MSG_NOSIGNAL | MSG_DONTWAIT);
		int err;

		if (n == (ssize_t)sizeof(*req))
			return 0;
		if (n >= 0)
			return EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return errno;
		err = wait_ready(fd, POLLOUT, deadline);
		if (err)
			return err;
	}
}

/*
 * One request and its reply: the object's descriptor (r->obj.fd) or its
 * pieces (r->obj.fds, nfds), and the driver's payload, into r->obj.
 * *held: the exporter counted a hold, which a failure after must give back.
 */
static enum xdm_status ask(struct xdm_runtime *rt, struct xdm_ipc_conn *c,
			   const struct xdm_ipc_request *req, struct xdm_ipc_ref *r, bool *held)
{
	uint64_t deadline = deadline_in(rt);
	struct xdm_ipc_reply rep;
	struct iovec iov = { &rep, sizeof(rep) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	enum xdm_status st;
	int sent, fd = -1;
	ssize_t n;

	*held = false;
	sent = send_by(c->fd, req, deadline);
	if (sent == ETIMEDOUT) {
		c->broken = true;
		return no_answer(rt, r, "take the request");
	}
	/* Refused at once (not admitted, no room): the reason may wait unread. */
	n = recv_by(c->fd, &m, sent ? xdm_ipc_mono_ns() : deadline);
	if (n == -ETIMEDOUT && !sent) {
		c->broken = true;
		return no_answer(rt, r, "answer");
	}
	/* Whatever descriptors came are ours to keep one of, or to close. */
	if (n > 0)
		take_fds(&m, &fd, 1);
	if (n != (ssize_t)sizeof(rep)) {
		drop_fd(&fd);
		c->broken = true;
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter (process %u) went "
				     "away before it answered%s%s", r->exporter_pid,
				     sent ? ": " : "", sent ? strerror(sent) : "");
	}
	rep.message[sizeof(rep.message) - 1] = '\0';
	*held = rep.status == XDM_OK;
	if (*held && ((m.msg_flags & MSG_CTRUNC) || rep.payload_len > XDM_IPC_PAYLOAD_MAX)) {
		drop_fd(&fd);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_open: the block's memory could "
				     "not be received: %s", rep.payload_len > XDM_IPC_PAYLOAD_MAX ?
				     "its payload is longer than a reply holds" : "this process "
				     "has too many descriptors open (RLIMIT_NOFILE)");
	}
	if (rep.status != XDM_OK) {
		drop_fd(&fd);
		return xdm_error_set(rep.status >= 0 && rep.status < XDM_STATUS_COUNT ?
					     (enum xdm_status)rep.status : XDM_E_INVALID,
				     "xdm_ipc_open: the exporter says: %s", rep.message);
	}
	r->obj.payload_len = rep.payload_len;
	memcpy(r->obj.payload, rep.payload, rep.payload_len);
	r->obj.fd = fd;
	if (!rep.nfds)
		return XDM_OK;
	drop_fd(&r->obj.fd);
	st = receive_fds(c, r, rep.nfds, deadline, &r->obj.fds);
	if (!st)
		r->obj.nfds = rep.nfds;
	return st;
}

enum xdm_status xdm_ipc_open(struct xdm_runtime *rt, const struct xdm_ipc_handle *h,
			     xdm_stream_id stream, uint64_t *ptr, size_t *bytes)
{
	struct xdm_ipc_importer *imp;
	struct xdm_ipc_request req;
	struct xdm_ipc_import *im;
	struct xdm_ipc_conn *conn = NULL;
	struct xdm_ipc_ref r;
	enum xdm_status st;
	bool held;

	if (!rt || !h || !ptr || !bytes)
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: NULL argument");
	if (stream >= xdm_stream_count(rt))
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: no stream %u", (unsigned)stream);
	st = xdm_ipc_decode(h, &r);
	if (st)
		return st;
	if (strncmp(r.uuid, rt->device.uuid, sizeof(r.uuid)))
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the handle is of device %s, and "
				     "this runtime's device is %s", r.uuid, rt->device.uuid);
	if (!rt->platform.ops->ipc_import || !rt->platform.ops->ipc_unmap)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "xdm_ipc_open: the %s platform cannot "
				     "map another process's memory", rt->platform.ops->name);
	im = calloc(1, sizeof(*im));
	if (!im)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_open: no memory");
	imp = &rt->ipc.imp;
	memset(&req, 0, sizeof(req));
	req.op = XDM_IPC_OPEN;
	req.handle = *h;
	pthread_mutex_lock(&imp->lock);
	st = conn_get(rt, &r, &conn);
	if (st)
		goto unlock;
	st = ask(rt, conn, &req, &r, &held);
	if (st && !held)
		goto put;
	if (!st && (r.obj.kind == XDM_IPC_FDS) != (r.obj.nfds > 0))
		st = xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter's descriptors do "
				   "not match the handle's kind of memory");
	if (!st)
		st = rt->platform.ops->ipc_import(&rt->platform, &r.obj, r.bytes, &im->ptr,
						  &im->cookie);
	xdm_ipc_object_close(&r.obj);
	if (st) {
		/* Mapped nothing: the hold the exporter counted goes back. */
		send_close(rt, conn, r.generation);
		goto put;
	}
	im->bytes = r.bytes;
	im->token = r.token;
	im->generation = r.generation;
	im->exporter_pid = (pid_t)r.exporter_pid;
	im->since_ns = xdm_ipc_now_ns();
	im->conn = conn->fd;
	im->next = imp->imports;
	imp->imports = im;
	conn->imports++;
	pthread_mutex_unlock(&imp->lock);
	*ptr = im->ptr;
	*bytes = im->bytes;
	return XDM_OK;

put:
	conn_put(conn);
unlock:
	pthread_mutex_unlock(&imp->lock);
	free(im);
	return st;
}

/* Under imp->lock: unmap one import and tell its exporter. */
static void import_drop(struct xdm_runtime *rt, struct xdm_ipc_import *im)
{
	struct xdm_ipc_importer *imp = &rt->ipc.imp;

	rt->platform.ops->ipc_unmap(&rt->platform, im->ptr, im->bytes, im->cookie);
	for (size_t i = 0; i < NCONNS; i++) {
		struct xdm_ipc_conn *c = &imp->conns[i];

		if (c->fd == im->conn && c->token == im->token) {
			send_close(rt, c, im->generation);
			c->imports--;
			conn_put(c);
			break;
		}
	}
	free(im);
}

enum xdm_status xdm_ipc_close(struct xdm_runtime *rt, uint64_t ptr, xdm_stream_id stream)
{
	struct xdm_ipc_importer *imp;
	struct xdm_ipc_import **p, *im;
	enum xdm_status st;

	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_close: NULL runtime");
	imp = &rt->ipc.imp;
	pthread_mutex_lock(&imp->lock);
	for (p = &imp->imports; (im = *p) != NULL; p = &im->next)
		if (im->ptr == ptr)
			break;
	if (im)
		*p = im->next;
	pthread_mutex_unlock(&imp->lock);
	if (!im)
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_close: 0x%llx is no block this runtime "
				     "opened with xdm_ipc_open", (unsigned long long)ptr);
	/* The work queued on stream may still read or write it. */
	st = xdm_stream_synchronize(rt, stream);
	pthread_mutex_lock(&imp->lock);
	import_drop(rt, im);
	pthread_mutex_unlock(&imp->lock);
	return st;
}

void xdm_ipc_import_fini(struct xdm_runtime *rt)
{
	struct xdm_ipc_importer *imp = &rt->ipc.imp;

	pthread_mutex_lock(&imp->lock);
	while (imp->imports) {
		struct xdm_ipc_import *im = imp->imports;

		imp->imports = im->next;
		import_drop(rt, im);
	}
	pthread_mutex_unlock(&imp->lock);
}

void xdm_ipc_show_imports(struct xdm_runtime *rt, struct tree_buf *b)
{
	struct xdm_ipc_importer *imp = &rt->ipc.imp;
	bool any = false;

	pthread_mutex_lock(&imp->lock);
	for (struct xdm_ipc_import *im = imp->imports; im; im = im->next, any = true)
		tree_printf(b, "0x%llx %zu %d %llu %llu.%09llu\n", (unsigned long long)im->ptr,
			    im->bytes, (int)im->exporter_pid, (unsigned long long)im->generation,
			    (unsigned long long)(im->since_ns / 1000000000ull),
			    (unsigned long long)(im->since_ns % 1000000000ull));
	pthread_mutex_unlock(&imp->lock);
	if (!any)
		tree_printf(b, "none\n");
}
