/* SPDX-License-Identifier: MIT */
/*
 * ipc_peer.c - the server's side of one importer's connection: sending
 * its answer without ever blocking, and letting go of what it holds.
 *
 * Every socket of the server is non-blocking.  An answer (a reply, with
 * the block's descriptor or followed by its pieces) is kept on the peer
 * and sent as far as the socket takes it; the rest goes when poll says
 * there is room.  Meanwhile the connection is not read, so a peer has one
 * answer in flight at most, and one that stops reading stops only itself:
 * by its deadline it is dropped, and every hold that came over it goes
 * back, as at its death.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

uint64_t xdm_ipc_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Room for the most descriptors one message carries. */
union fds_control {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
};

/* One message with n descriptors, never waiting: 0, or the errno (EAGAIN: no room yet). */
static int send_now(int fd, const void *bytes, size_t len, const int *fds, uint32_t n)
{
	struct iovec iov = { (void *)bytes, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	union fds_control ctl;
	ssize_t sent;

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
	do
		sent = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (sent < 0 && errno == EINTR);
	if (sent == (ssize_t)len)
		return 0;
	/* A packet goes whole or not at all; a short count is the socket's end. */
	return sent < 0 ? (errno == EWOULDBLOCK ? EAGAIN : errno) : EPIPE;
}

static void forget_answer(struct xdm_ipc_peer *p)
{
	xdm_ipc_object_close(&p->out);
	p->sending = XDM_IPC_IDLE;
	p->answering = 0;
	p->sent = 0;
}

void xdm_ipc_peer_refuse(struct xdm_ipc_peer *p, enum xdm_status st, const char *fmt, ...)
{
	va_list ap;

	forget_answer(p);
	memset(&p->reply, 0, sizeof(p->reply));
	p->reply.status = st;
	va_start(ap, fmt);
	vsnprintf(p->reply.message, sizeof(p->reply.message), fmt, ap);
	va_end(ap);
	p->sending = XDM_IPC_SEND_REPLY;
}

static void progress(struct xdm_runtime *rt, struct xdm_ipc_peer *p)
{
	p->deadline_ns = xdm_ipc_mono_ns() + (uint64_t)rt->ipc.timeout_ms * 1000000ull;
}

static bool gone(int err)
{
	return err == EPIPE || err == ECONNRESET || err == ENOTCONN;
}

/*
 * The OK reply could not go with its memory (the kernel refused the
 * descriptor: too many in flight, no buffer): the hold it was for goes
 * back, and the importer is told why instead.
 */
static enum xdm_ipc_verdict reply_failed(struct xdm_runtime *rt, struct xdm_ipc_peer *p, int err)
{
	if (gone(err))
		return XDM_IPC_DROP;
	if (p->answering)
		xdm_ipc_peer_release(rt, p, p->answering);
	xdm_ipc_peer_refuse(p, XDM_E_OUT_OF_MEMORY, "the exporter could not pass the block's "
			    "memory: %s", strerror(err));
	return XDM_IPC_KEEP;
}

/* The reply, with the object's one descriptor if it has one. */
static int send_reply(struct xdm_ipc_peer *p)
{
	int one = p->reply.status == XDM_OK && p->out.kind == XDM_IPC_FD ? p->out.fd : -1;

	return send_now(p->fd, &p->reply, sizeof(p->reply), &one, one >= 0);
}

/* The next message of pieces. */
static int send_piece(struct xdm_ipc_peer *p)
{
	uint32_t left = p->out.nfds - p->sent;
	struct xdm_ipc_fds_msg h = {
		.first = p->sent,
		.n = left < XDM_IPC_FDS_PER_MSG ? left : XDM_IPC_FDS_PER_MSG,
	};
	int err = send_now(p->fd, &h, sizeof(h), p->out.fds + p->sent, h.n);

	if (!err)
		p->sent += h.n;
	return err;
}

enum xdm_ipc_verdict xdm_ipc_peer_flush(struct xdm_runtime *rt, struct xdm_ipc_peer *p)
{
	struct xdm_ipc_fds_msg none;
	int err;

	for (;;) {
		switch (p->sending) {
		case XDM_IPC_IDLE:
			return p->last ? XDM_IPC_DROP : XDM_IPC_KEEP;
		case XDM_IPC_SEND_REPLY:
			err = send_reply(p);
			if (err == EAGAIN)
				return XDM_IPC_KEEP;
			if (err && p->reply.status == XDM_OK) {
				if (reply_failed(rt, p, err) == XDM_IPC_DROP)
					return XDM_IPC_DROP;
				continue;
			}
			if (err)
				return XDM_IPC_DROP;
			progress(rt, p);
			if (p->reply.status == XDM_OK && p->reply.nfds) {
				p->sending = XDM_IPC_SEND_PIECES;
				p->sent = 0;
			} else {
				forget_answer(p);
			}
			continue;
		case XDM_IPC_SEND_PIECES:
			if (p->sent == p->out.nfds) {
				forget_answer(p);
				continue;
			}
			err = send_piece(p);
			if (err == EAGAIN)
				return XDM_IPC_KEEP;
			if (gone(err))
				return XDM_IPC_DROP;
			/* The importer, told by a header of none, closes the hold itself. */
			if (err)
				p->sending = XDM_IPC_SEND_ABORT;
			else
				progress(rt, p);
			continue;
		case XDM_IPC_SEND_ABORT:
			none = (struct xdm_ipc_fds_msg){ .first = p->sent, .n = 0 };
			err = send_now(p->fd, &none, sizeof(none), NULL, 0);
			if (err == EAGAIN)
				return XDM_IPC_KEEP;
			if (err)
				return XDM_IPC_DROP;
			progress(rt, p);
			forget_answer(p);
			continue;
		}
	}
}

/*
 * Under e->lock: one hold of generation by conn goes (false: conn had
 * none); a freed block whose last hold it was is handed back in *to_free.
 */
static bool release_locked(struct xdm_ipc_exporter *e, xdm_generation generation, int conn,
			   struct xdm_block *to_free, bool *free_it)
{
	struct xdm_ipc_export **p, *x;
	struct xdm_ipc_holder **hp, *h;

	*free_it = false;
	for (p = &e->exports; (x = *p) != NULL; p = &x->next)
		if (x->block.generation == generation)
			break;
	if (!x)
		return false;
	for (hp = &x->holders; (h = *hp) != NULL; hp = &h->next)
		if (h->conn == conn)
			break;
	if (!h || !h->opens)
		return false;	/* a close of what this connection never opened */
	h->opens--;
	x->holds--;
	if (!h->opens) {
		*hp = h->next;
		free(h);
	}
	if (x->holds || !x->freed)
		return true;
	*to_free = x->block;
	*free_it = true;
	*p = x->next;
	xdm_ipc_object_close(&x->obj);
	free(x);
	return true;
}

bool xdm_ipc_peer_release(struct xdm_runtime *rt, struct xdm_ipc_peer *p,
			  xdm_generation generation)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	bool released, free_it = false;
	struct xdm_block b;

	pthread_mutex_lock(&e->lock);
	released = release_locked(e, generation, p->fd, &b, &free_it);
	pthread_mutex_unlock(&e->lock);
	if (released && p->holds)
		p->holds--;
	/* The owner's free, held back until now, in stream order. */
	if (free_it)
		xdm_up_deallocate(&rt->layers[0], &b);
	return released;
}

/* Under e->lock: a block p holds, or 0. */
static xdm_generation held_by(struct xdm_ipc_exporter *e, int conn)
{
	for (struct xdm_ipc_export *x = e->exports; x; x = x->next)
		for (struct xdm_ipc_holder *h = x->holders; h; h = h->next)
			if (h->conn == conn)
				return x->block.generation;
	return 0;
}

void xdm_ipc_peer_drop(struct xdm_runtime *rt, struct xdm_ipc_peer *p)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;

	forget_answer(p);
	for (;;) {
		xdm_generation g;

		pthread_mutex_lock(&e->lock);
		g = held_by(e, p->fd);
		pthread_mutex_unlock(&e->lock);
		if (!g || !xdm_ipc_peer_release(rt, p, g))
			break;
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->holds = 0;
}
