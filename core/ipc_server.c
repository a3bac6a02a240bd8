/* SPDX-License-Identifier: MIT */
/*
 * ipc_server.c - the exporting runtime's socket: where importers get the
 * memory of the blocks it exported, and say when they let go of them.
 *
 * One thread per exporting runtime, started by its first export, serves a
 * SOCK_SEQPACKET Unix socket with an abstract name made of a random token
 * (no file to clean up, gone with the process).  Each connection is one
 * importing runtime.  OPEN checks the handle against the exporter's own
 * record (the token is ours, the block still exported and live), counts a
 * hold for the connection's peer and answers with the object's descriptor
 * (SCM_RIGHTS).  CLOSE gives one hold back; the connection's end, whether
 * the importer closed it or died (the kernel closes its sockets), gives
 * back every hold that came over it.  A held block freed by its owner is
 * handed to the stack when its last hold goes: stream-ordered, as its
 * free would have been.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/internal.h"

#define MAX_CONNS 256

/* A random token from the kernel: it names the socket, and must not repeat. */
static uint64_t new_token(void)
{
	uint64_t t = 0;

	while (!t)
		if (getentropy(&t, sizeof(t)) != 0)
			t = ((uint64_t)getpid() << 32) ^ xdm_ipc_now_ns();
	return t;
}

/* Room for the most descriptors one message carries. */
union fds_control {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
};

/* Send iov's bytes with n descriptors (SCM_RIGHTS; none: a plain message). */
static int send_with_fds(int fd, void *bytes, size_t len, const int *fds, uint32_t n)
{
	struct iovec iov = { bytes, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	union fds_control ctl;

	if (n) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static int send_reply(int fd, enum xdm_status st, const char *msg, int pass_fd, uint32_t nfds)
{
	struct xdm_ipc_reply rep;

	memset(&rep, 0, sizeof(rep));
	rep.status = st;
	rep.nfds = nfds;
	snprintf(rep.message, sizeof(rep.message), "%s", msg ? msg : "");
	return send_with_fds(fd, &rep, sizeof(rep), &pass_fd, pass_fd >= 0);
}

/* The descriptors of a fresh XDM_IPC_FDS description, after its OK reply. */
static int send_fds(int fd, const int *fds, uint32_t nfds, uint32_t *sent)
{
	for (uint32_t first = 0; first < nfds; first += XDM_IPC_FDS_PER_MSG) {
		uint32_t n = nfds - first < XDM_IPC_FDS_PER_MSG ? nfds - first : XDM_IPC_FDS_PER_MSG;
		struct xdm_ipc_fds_msg h = { .first = first, .n = n };

		if (send_with_fds(fd, &h, sizeof(h), fds + first, n) != 0)
			return -1;
		*sent = first + n;
	}
	return 0;
}

static pid_t peer_pid(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
}

/* Under e->lock: conn's holder record of x, made if need be. */
static struct xdm_ipc_holder *holder(struct xdm_ipc_export *x, int conn)
{
	struct xdm_ipc_holder *h;

	for (h = x->holders; h; h = h->next)
		if (h->conn == conn)
			return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->conn = conn;
	h->pid = peer_pid(conn);
	h->since_ns = xdm_ipc_now_ns();
	h->next = x->holders;
	x->holders = h;
	return h;
}

static void release(struct xdm_runtime *rt, int conn, bool all, xdm_generation generation);

/* After an OK reply with nfds: the pieces did not all go.  Say so in-band. */
static void pieces_failed(int conn, uint32_t sent)
{
	struct xdm_ipc_fds_msg h = { .first = sent, .n = 0 };

	/* A header of none ends the importer's wait with an error (it closes
	 * its hold); where even that cannot go, the connection ends, which
	 * gives every hold of it back. */
	if (send(conn, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		shutdown(conn, SHUT_RDWR);
}

/*
 * The block's memory, described again now by the stack (the hold just
 * counted keeps the block from it meanwhile) as it was at the export, and
 * its descriptors passed: one in the reply, or pieces after it.  So an
 * exporter keeps no descriptor open between opens, whatever it exported.
 * A failure gives the hold back and says why.
 */
static void serve_memory(struct xdm_runtime *rt, int conn, const struct xdm_block *block,
			 const struct xdm_ipc_object *described)
{
	struct xdm_ipc_object fresh;
	uint32_t sent = 0;
	enum xdm_status st;
	char msg[256];

	if (described->kind == XDM_IPC_BYTES) {
		/* Bytes alone: the handle has them all. */
		send_reply(conn, XDM_OK, NULL, -1, 0);
		return;
	}
	memset(&fresh, 0, sizeof(fresh));
	fresh.fd = -1;
	if (xdm_ipc_fd_room(described->nfds + 1))
		st = xdm_up_ipc_export(&rt->layers[0], block, &fresh);
	else
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "the exporter may not open the %u "
				   "descriptors of the block's memory (RLIMIT_NOFILE)",
				   described->nfds + 1);
	if (!st)
		st = xdm_ipc_check_object(&fresh, block);
	if (!st && (fresh.kind != described->kind || fresh.nfds != described->nfds ||
		    fresh.offset != described->offset ||
		    fresh.object_bytes != described->object_bytes ||
		    fresh.payload_len != described->payload_len ||
		    memcmp(fresh.payload, described->payload, fresh.payload_len)))
		st = xdm_error_set(XDM_E_MODULE, "the stack describes the block's memory "
				   "otherwise than when it was exported");
	if (st) {
		snprintf(msg, sizeof(msg), "%s", xdm_last_error_message());
		xdm_ipc_object_close(&fresh);
		release(rt, conn, false, block->generation);
		send_reply(conn, st, msg, -1, 0);
		return;
	}
	/* A failed reply: the importer is gone, and its end gives the hold back. */
	if (fresh.kind == XDM_IPC_FD)
		send_reply(conn, XDM_OK, NULL, fresh.fd, 0);
	else if (send_reply(conn, XDM_OK, NULL, -1, fresh.nfds) == 0 &&
		 send_fds(conn, fresh.fds, fresh.nfds, &sent) != 0)
		pieces_failed(conn, sent);
	xdm_ipc_object_close(&fresh);
}

static void serve_open(struct xdm_runtime *rt, int conn, const struct xdm_ipc_request *req)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct xdm_ipc_object described;
	struct xdm_ipc_export *x;
	struct xdm_ipc_holder *h;
	struct xdm_block block;
	struct xdm_ipc_ref r;
	char msg[256];

	if (xdm_ipc_decode(&req->handle, &r) != XDM_OK) {
		send_reply(conn, XDM_E_INVALID, xdm_last_error_message(), -1, 0);
		return;
	}
	pthread_mutex_lock(&e->lock);
	for (x = e->exports; x; x = x->next)
		if (x->block.generation == r.generation)
			break;
	if (r.token != e->token || !x || x->freed || x->block.ptr != r.ptr ||
	    x->block.bytes != r.bytes) {
		pthread_mutex_unlock(&e->lock);
		snprintf(msg, sizeof(msg), "block 0x%llx (generation %llu) is not exported by "
			 "process %d any more: freed since, or never its",
			 (unsigned long long)r.ptr, (unsigned long long)r.generation,
			 (int)getpid());
		send_reply(conn, XDM_E_USE_AFTER_FREE, msg, -1, 0);
		return;
	}
	h = holder(x, conn);
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		send_reply(conn, XDM_E_OUT_OF_MEMORY, "the exporter has no memory for the hold", -1,
			   0);
		return;
	}
	h->opens++;
	x->holds++;
	block = x->block;
	described = x->obj;
	pthread_mutex_unlock(&e->lock);
	serve_memory(rt, conn, &block, &described);
}

void xdm_ipc_release_locked(struct xdm_runtime *rt, xdm_generation generation, int conn,
			    struct xdm_block *to_free, bool *free_it)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct xdm_ipc_export **p, *x;
	struct xdm_ipc_holder **hp, *h;

	*free_it = false;
	for (p = &e->exports; (x = *p) != NULL; p = &x->next)
		if (x->block.generation == generation)
			break;
	if (!x)
		return;
	for (hp = &x->holders; (h = *hp) != NULL; hp = &h->next)
		if (h->conn == conn)
			break;
	if (!h || !h->opens)
		return;	/* a close of what this connection never opened */
	h->opens--;
	x->holds--;
	if (!h->opens) {
		*hp = h->next;
		free(h);
	}
	if (x->holds || !x->freed)
		return;
	*to_free = x->block;
	*free_it = true;
	*p = x->next;
	xdm_ipc_object_close(&x->obj);
	free(x);
}

/* What a connection held goes back, all of it (its end) or one (a CLOSE). */
static void release(struct xdm_runtime *rt, int conn, bool all, xdm_generation generation)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;

	for (;;) {
		struct xdm_block b;
		bool free_it = false;

		pthread_mutex_lock(&e->lock);
		if (all) {
			generation = 0;
			for (struct xdm_ipc_export *x = e->exports; x && !generation; x = x->next)
				for (struct xdm_ipc_holder *h = x->holders; h; h = h->next)
					if (h->conn == conn)
						generation = x->block.generation;
		}
		if (generation)
			xdm_ipc_release_locked(rt, generation, conn, &b, &free_it);
		pthread_mutex_unlock(&e->lock);
		/* The owner's free, held back until now, in stream order. */
		if (free_it)
			xdm_up_deallocate(&rt->layers[0], &b);
		if (!all || !generation)
			return;
	}
}

static bool serve_request(struct xdm_runtime *rt, int conn)
{
	struct xdm_ipc_request req;
	ssize_t n = recv(conn, &req, sizeof(req), 0);

	if (n <= 0)
		return false;
	if (n == (ssize_t)sizeof(req) && req.op == XDM_IPC_OPEN)
		serve_open(rt, conn, &req);
	else if (n == (ssize_t)sizeof(req) && req.op == XDM_IPC_CLOSE)
		release(rt, conn, false, req.generation);
	else
		return false;	/* not our protocol: the connection goes */
	return true;
}

static void *server_run(void *arg)
{
	struct xdm_runtime *rt = arg;
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct pollfd fds[2 + MAX_CONNS];
	nfds_t n = 2;

	fds[0] = (struct pollfd){ .fd = e->wake[0], .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = e->listen_fd, .events = POLLIN };
	for (;;) {
		if (poll(fds, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[0].revents)
			break;
		if (fds[1].revents & POLLIN) {
			int c = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0 && n < 2 + MAX_CONNS)
				fds[n++] = (struct pollfd){ .fd = c, .events = POLLIN };
			else if (c >= 0)
				close(c);
		}
		for (nfds_t i = 2; i < n; i++) {
			if (!fds[i].revents)
				continue;
			if ((fds[i].revents & POLLIN) && serve_request(rt, fds[i].fd))
				continue;
			/* Its end: every hold that came over it goes. */
			release(rt, fds[i].fd, true, 0);
			close(fds[i].fd);
			fds[i--] = fds[--n];
		}
	}
	for (nfds_t i = 2; i < n; i++)
		close(fds[i].fd);
	return NULL;
}

enum xdm_status xdm_ipc_serve(struct xdm_runtime *rt)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	enum xdm_status st = XDM_OK;
	size_t len;
	int err;

	pthread_mutex_lock(&e->lock);
	if (e->running)
		goto out;
	if (!e->token)
		e->token = new_token();
	len = xdm_ipc_socket_name(e->token, addr.sun_path, sizeof(addr.sun_path));
	e->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (e->listen_fd < 0 || !len ||
	    bind(e->listen_fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + len) ||
	    listen(e->listen_fd, 64) || pipe2(e->wake, O_CLOEXEC)) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED, "xdm_ipc_export: cannot serve the socket "
				   "importers reach this runtime by: %s", strerror(errno));
		goto fail;
	}
	err = pthread_create(&e->thread, NULL, server_run, rt);
	if (err) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_export: cannot start the IPC "
				   "server thread: %s", strerror(err));
		goto fail;
	}
	e->running = true;
	goto out;

fail:
	if (e->listen_fd >= 0)
		close(e->listen_fd);
	for (int i = 0; i < 2; i++)
		if (e->wake[i] >= 0)
			close(e->wake[i]);
	e->listen_fd = e->wake[0] = e->wake[1] = -1;
out:
	pthread_mutex_unlock(&e->lock);
	return st;
}

void xdm_ipc_stop(struct xdm_ipc_exporter *e)
{
	if (!e->running)
		return;
	(void)!write(e->wake[1], "x", 1);
	pthread_join(e->thread, NULL);
	close(e->listen_fd);
	close(e->wake[0]);
	close(e->wake[1]);
	e->listen_fd = e->wake[0] = e->wake[1] = -1;
	e->running = false;
}
