/* SPDX-License-Identifier: MIT */
/*
 * ipc_serve_open.c - what the exporter's server answers to a request of an
 * admitted peer: an OPEN is checked against the exporter's own record of
 * the block, a hold counted and the memory queued on its way; a CLOSE
 * gives one hold back.
 *
 * The record decides, not the handle: the token must be this runtime's,
 * the block still exported, and the handle's secret the one drawn for
 * this export (compared in constant time).  A message that is not a
 * request, a handle that is not one, and a wrong secret are answered once
 * and end the connection: no peer gets a second guess on the same socket.
 * A block freed since is answered and the connection kept (an importer's
 * late open is no attack).  Memory that holds more than the block goes
 * only to the exporter's own user (enum xdm_ipc_flags).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

/* Under e->lock: the record of generation, or NULL. */
static struct xdm_ipc_export *record_of(struct xdm_ipc_exporter *e, xdm_generation generation)
{
	for (struct xdm_ipc_export *x = e->exports; x; x = x->next)
		if (x->block.generation == generation)
			return x;
	return NULL;
}

/* Under e->lock: p's holder record of x, made if need be. */
static struct xdm_ipc_holder *holder(struct xdm_ipc_export *x, const struct xdm_ipc_peer *p)
{
	struct xdm_ipc_holder *h;

	for (h = x->holders; h; h = h->next)
		if (h->conn == p->fd)
			return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->conn = p->fd;
	h->pid = p->pid;
	h->since_ns = xdm_ipc_now_ns();
	h->next = x->holders;
	x->holders = h;
	return h;
}

/* Whether the handle says of the block what the record says (one export, one handle). */
static bool handle_matches(const struct xdm_ipc_export *x, const struct xdm_ipc_ref *r)
{
	return x->block.ptr == r->ptr && x->block.bytes == r->bytes &&
	       x->obj.kind == r->obj.kind && x->obj.offset == r->obj.offset &&
	       x->obj.object_bytes == r->obj.object_bytes;
}

/* Whether the object the stack described now is the one described at the export. */
static bool same_object(const struct xdm_ipc_object *a, const struct xdm_ipc_object *b)
{
	return a->kind == b->kind && a->nfds == b->nfds && a->offset == b->offset &&
	       a->object_bytes == b->object_bytes && a->payload_len == b->payload_len &&
	       a->flags == b->flags && !memcmp(a->payload, b->payload, a->payload_len);
}

/*
 * The block's memory, described again now by the stack (the hold just
 * counted keeps the block from it meanwhile) as it was at the export, and
 * queued for p: the reply with the driver's payload and one descriptor,
 * or pieces after it.  So an exporter keeps no descriptor open between
 * opens, whatever it exported.  A failure gives the hold back and says why.
 */
static void queue_memory(struct xdm_runtime *rt, struct xdm_ipc_peer *p,
			 const struct xdm_block *block, const struct xdm_ipc_object *described)
{
	struct xdm_ipc_object fresh;
	enum xdm_status st = XDM_OK;

	memset(&fresh, 0, sizeof(fresh));
	fresh.fd = -1;
	if (described->kind == XDM_IPC_BYTES)
		fresh = *described;	/* bytes alone: the record has them all */
	else if (xdm_ipc_fd_room(described->nfds + 1))
		st = xdm_up_ipc_export(&rt->layers[0], block, &fresh);
	else
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "the exporter may not open the %u "
				   "descriptors of the block's memory (RLIMIT_NOFILE)",
				   described->nfds + 1);
	if (!st && described->kind != XDM_IPC_BYTES)
		st = xdm_ipc_check_object(&fresh, block);
	if (!st && !same_object(&fresh, described))
		st = xdm_error_set(XDM_E_MODULE, "the stack describes the block's memory "
				   "otherwise than when it was exported");
	if (st) {
		char msg[sizeof(p->reply.message)];

		snprintf(msg, sizeof(msg), "%s", xdm_last_error_message());
		if (described->kind != XDM_IPC_BYTES)
			xdm_ipc_object_close(&fresh);
		xdm_ipc_peer_release(rt, p, block->generation);
		xdm_ipc_peer_refuse(p, st, "%s", msg);
		return;
	}
	memset(&p->reply, 0, sizeof(p->reply));
	p->reply.status = XDM_OK;
	p->reply.nfds = fresh.kind == XDM_IPC_FDS ? fresh.nfds : 0;
	p->reply.payload_len = fresh.payload_len;
	memcpy(p->reply.payload, fresh.payload, fresh.payload_len);
	p->out = fresh;
	p->answering = block->generation;
	p->sent = 0;
	p->sending = XDM_IPC_SEND_REPLY;
}

static void serve_open(struct xdm_runtime *rt, struct xdm_ipc_peer *p,
		       const struct xdm_ipc_request *req)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct xdm_ipc_object described;
	struct xdm_ipc_export *x;
	struct xdm_ipc_holder *h;
	struct xdm_block block;
	struct xdm_ipc_ref r;

	if (xdm_ipc_decode(&req->handle, &r) != XDM_OK) {
		xdm_ipc_peer_refuse(p, XDM_E_INVALID, "%s", xdm_last_error_message());
		p->last = true;
		return;
	}
	if (r.token != e->token) {
		xdm_ipc_peer_refuse(p, XDM_E_INVALID, "the handle names another exporter than "
				    "process %d", (int)getpid());
		p->last = true;
		return;
	}
	pthread_mutex_lock(&e->lock);
	x = record_of(e, r.generation);
	if (!x || x->freed) {
		pthread_mutex_unlock(&e->lock);
		xdm_ipc_peer_refuse(p, XDM_E_USE_AFTER_FREE, "block 0x%llx (generation %llu) is not "
				    "exported by process %d any more: freed since, or never its",
				    (unsigned long long)r.ptr, (unsigned long long)r.generation,
				    (int)getpid());
		return;
	}
	if (!xdm_ipc_secret_equal(x->secret, r.secret) || !handle_matches(x, &r)) {
		pthread_mutex_unlock(&e->lock);
		xdm_ipc_peer_refuse(p, XDM_E_INVALID, "the handle is not one that process %d made "
				    "for block generation %llu (its secret or its fields differ)",
				    (int)getpid(), (unsigned long long)r.generation);
		p->last = true;
		return;
	}
	if (p->uid != e->uid && !(x->obj.flags & XDM_IPC_ONLY_BLOCK)) {
		pthread_mutex_unlock(&e->lock);
		xdm_ipc_peer_refuse(p, XDM_E_NOT_SUPPORTED, "block generation %llu of process %d "
				    "lies in memory that holds more than the block (a pool's chunk, "
				    "a driver's pool, a guard's canaries): it is shared only with "
				    "processes of uid %u, and this importer is uid %u",
				    (unsigned long long)r.generation, (int)getpid(),
				    (unsigned int)e->uid, (unsigned int)p->uid);
		return;
	}
	h = p->holds < XDM_IPC_MAX_HOLDS ? holder(x, p) : NULL;
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		xdm_ipc_peer_refuse(p, XDM_E_OUT_OF_MEMORY, p->holds < XDM_IPC_MAX_HOLDS ?
				    "the exporter has no memory for the hold" :
				    "this connection holds %llu opens already, the most one may",
				    (unsigned long long)p->holds);
		return;
	}
	h->opens++;
	x->holds++;
	p->holds++;
	block = x->block;
	described = x->obj;
	pthread_mutex_unlock(&e->lock);
	queue_memory(rt, p, &block, &described);
}

enum xdm_ipc_verdict xdm_ipc_serve_request(struct xdm_runtime *rt, struct xdm_ipc_peer *p,
					   const void *msg, size_t len)
{
	struct xdm_ipc_request req;

	/* Not read while an answer is on its way: a request now breaks the protocol. */
	if (p->sending != XDM_IPC_IDLE || len != sizeof(req))
		return XDM_IPC_DROP;
	memcpy(&req, msg, sizeof(req));
	if (req.op == XDM_IPC_OPEN)
		serve_open(rt, p, &req);
	else if (req.op == XDM_IPC_CLOSE)
		/* A close of what the connection never opened changes nothing. */
		xdm_ipc_peer_release(rt, p, req.generation);
	else
		return XDM_IPC_DROP;	/* not our protocol */
	return xdm_ipc_peer_flush(rt, p);
}
