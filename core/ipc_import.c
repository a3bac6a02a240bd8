/* SPDX-License-Identifier: MIT */
/*
 * ipc_import.c - the importer's side: open a handle (ask its exporter for
 * the memory, map it with this runtime's platform), close it (unmap after
 * the work on its stream, tell the exporter).
 *
 * One connection per exporter, kept while anything is imported from it:
 * the exporter counts this process's holds on it, and its end (all closed,
 * or this process dead) gives them all back.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/tree.h"

#define NCONNS (sizeof(((struct xdm_ipc_importer *)0)->conns) / \
		sizeof(((struct xdm_ipc_importer *)0)->conns[0]))

/* Under imp->lock: the connection to token's exporter, made if need be. */
static enum xdm_status conn_get(struct xdm_ipc_importer *imp, const struct xdm_ipc_ref *r,
				struct xdm_ipc_conn **out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct xdm_ipc_conn *free_c = NULL;
	size_t len;
	int fd;

	for (size_t i = 0; i < NCONNS; i++) {
		if (imp->conns[i].fd >= 0 && imp->conns[i].token == r->token) {
			*out = &imp->conns[i];
			return XDM_OK;
		}
		if (imp->conns[i].fd < 0 && !free_c)
			free_c = &imp->conns[i];
	}
	if (!free_c)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_open: this runtime holds imports "
				     "from %zu exporters already", NCONNS);
	len = xdm_ipc_socket_name(r->token, addr.sun_path, sizeof(addr.sun_path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return xdm_error_set_driver(errno, "xdm_ipc_open: socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + len)) {
		int err = errno;

		close(fd);
		return xdm_error_set(XDM_E_INVALID,
				     "xdm_ipc_open: the exporter of this handle (process %u, as "
				     "it saw itself) cannot be reached: %s; it has ended, or is "
				     "in another network namespace (its socket is abstract)",
				     r->exporter_pid, strerror(err));
	}
	free_c->fd = fd;
	free_c->token = r->token;
	free_c->imports = 0;
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
 * The descriptors of an object of pieces, in the messages after the reply;
 * *out gets them all, or nothing is left open.  Every message announced is
 * read even after one went wrong, so that the connection's next reply is a
 * reply (other imports from this exporter go on over it).
 */
static enum xdm_status receive_fds(int conn, uint32_t nfds, int **out)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
	} ctl;
	const char *wrong = NULL;
	uint32_t got = 0, seen = 0;
	int *fds = NULL;

	if (!nfds || nfds > XDM_IPC_FDS_MAX)
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter announced %u "
				     "descriptors", nfds);
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
		ssize_t n;

		do
			n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			wrong = "the exporter went away before it sent them all";
			break;
		}
		/* Kept only while all is well, and never past the count. */
		keep = wrong ? 0 : nfds - got;
		in_msg = take_fds(&m, keep ? fds + got : NULL, keep);
		got += in_msg < keep ? in_msg : keep;
		if (n != (ssize_t)sizeof(h) || !h.n || h.first != seen || h.n > nfds - seen) {
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
				     "block's memory: %s", nfds, wrong);
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

/*
 * One request and its reply; *fd gets a passed descriptor, or -1; an
 * object of pieces comes as *fds, *nfds of them.
 */
static enum xdm_status ask(int conn, const struct xdm_ipc_request *req, int *fd, int **fds,
			   uint32_t *nfds, bool *held)
{
	struct xdm_ipc_reply rep;
	struct iovec iov = { &rep, sizeof(rep) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	enum xdm_status st;
	ssize_t n;

	*fd = -1;
	*fds = NULL;
	*nfds = 0;
	*held = false;
	if (send(conn, req, sizeof(*req), MSG_NOSIGNAL) != (ssize_t)sizeof(*req))
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter went away (%s)",
				     strerror(errno));
	do
		n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* Whatever descriptors came are ours to keep one of, or to close. */
	if (n > 0)
		take_fds(&m, fd, 1);
	if (n != (ssize_t)sizeof(rep)) {
		drop_fd(fd);
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter went away "
				     "before it answered");
	}
	rep.message[sizeof(rep.message) - 1] = '\0';
	/* Answered OK, the exporter counted a hold, which a failure below must give back. */
	*held = rep.status == XDM_OK;
	if (*held && (m.msg_flags & MSG_CTRUNC)) {
		drop_fd(fd);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_open: the descriptor of the "
				     "block's memory could not be received: this process has too "
				     "many open (RLIMIT_NOFILE)");
	}
	if (rep.status != XDM_OK) {
		drop_fd(fd);
		return xdm_error_set(rep.status >= 0 && rep.status < XDM_STATUS_COUNT ?
					     (enum xdm_status)rep.status : XDM_E_INVALID,
				     "xdm_ipc_open: the exporter says: %s", rep.message);
	}
	if (!rep.nfds)
		return XDM_OK;
	drop_fd(fd);
	st = receive_fds(conn, rep.nfds, fds);
	if (!st)
		*nfds = rep.nfds;
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
	int fd = -1;

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
	st = conn_get(imp, &r, &conn);
	if (st)
		goto unlock;
	st = ask(conn->fd, &req, &fd, &r.obj.fds, &r.obj.nfds, &held);
	if (st && !held)
		goto put;
	r.obj.fd = fd;
	if (!st && (r.obj.kind == XDM_IPC_FDS) != (r.obj.nfds > 0))
		st = xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: the exporter's descriptors do "
				   "not match the handle's kind of memory");
	if (!st)
		st = rt->platform.ops->ipc_import(&rt->platform, &r.obj, r.bytes, &im->ptr,
						  &im->cookie);
	xdm_ipc_object_close(&r.obj);
	if (st) {
		/* Mapped nothing: the hold the exporter counted goes back. */
		req.op = XDM_IPC_CLOSE;
		req.generation = r.generation;
		(void)!send(conn->fd, &req, sizeof(req), MSG_NOSIGNAL);
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
	struct xdm_ipc_request req;

	rt->platform.ops->ipc_unmap(&rt->platform, im->ptr, im->bytes, im->cookie);
	memset(&req, 0, sizeof(req));
	req.op = XDM_IPC_CLOSE;
	req.generation = im->generation;
	for (size_t i = 0; i < NCONNS; i++) {
		struct xdm_ipc_conn *c = &imp->conns[i];

		if (c->fd == im->conn && c->token == im->token) {
			(void)!send(c->fd, &req, sizeof(req), MSG_NOSIGNAL);
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
