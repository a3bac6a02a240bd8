/* SPDX-License-Identifier: MIT */
/*
 * ipc.h - sharing blocks with other processes: the handle's fields, who
 * may import, the exporter's server and the importer's table
 * (ipc_handle.c, ipc_allow.c, ipc_server.c, ipc_serve_open.c, ipc_peer.c,
 * ipc_export.c, ipc_import.c).
 *
 * The handle is plain bytes with a secret in them.  The exporting runtime
 * serves a Unix socket, named by a random token of the runtime, that
 * answers only processes of the users it admits (SO_PEERCRED, checked at
 * accept: its own user, and those of ipc_allow), and among their requests
 * only handles whose secret is the block's.  It answers an OPEN with the
 * memory object's descriptor (SCM_RIGHTS) and counts the importer's hold
 * on the block; the importer's CLOSE, or the socket's end (the importer
 * closed all, or died, or its connection was dropped), lets go of it.  A
 * block freed while held is kept from its stack until the last hold goes.
 * The importer sends the secret only to a server of the user the handle
 * names, and waits for nothing without a deadline.
 */
#ifndef XDM_CORE_IPC_H
#define XDM_CORE_IPC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <xdm/module.h>
#include <xdm/xdm.h>

#ifndef XDM_HIDDEN
#define XDM_HIDDEN __attribute__((visibility("hidden")))
#endif

struct xdm_runtime;

/* ---- the handle (ipc_handle.c) ---------------------------------------- */

/* 2: the handle carries a secret and the exporter's uid, and no payload. */
#define XDM_IPC_VERSION 2
#define XDM_IPC_SECRET_BYTES 16

/* What a handle says, decoded and checked. */
struct xdm_ipc_ref {
	char uuid[40];			/* the block's device */
	uint64_t token;			/* the exporting runtime: names its socket */
	uint32_t exporter_pid;		/* for messages only: pids are not global */
	uint32_t exporter_uid;		/* who must be serving its socket */
	xdm_generation generation;	/* the block */
	uint64_t ptr;			/* ... as the exporter sees it */
	uint64_t bytes;
	unsigned char secret[XDM_IPC_SECRET_BYTES];	/* the credential */
	/* fd is not in a handle (-1), nor the payload: the reply brings them. */
	struct xdm_ipc_object obj;
};

XDM_HIDDEN void xdm_ipc_encode(const struct xdm_ipc_ref *r, struct xdm_ipc_handle *h);
/*
 * The handle's fields into *r, or INVALID with a sentence naming what is
 * wrong: not a handle (its mark), another layout, a damaged one (its
 * checksum), fields that contradict each other.  Never reads past the
 * handle and writes *r only when it is good.
 */
XDM_HIDDEN enum xdm_status xdm_ipc_decode(const struct xdm_ipc_handle *h,
					  struct xdm_ipc_ref *r);
/* Whether two secrets are equal, in time that does not depend on where they differ. */
XDM_HIDDEN bool xdm_ipc_secret_equal(const unsigned char *a, const unsigned char *b);

/* ---- what a layer described (ipc_export.c) ----------------------------- */

/* A layer's answer is one other processes will trust: check it (XDM_E_MODULE). */
XDM_HIDDEN enum xdm_status xdm_ipc_check_object(const struct xdm_ipc_object *o,
						const struct xdm_block *b);
/* Close every descriptor of o and free its array (o stays usable, with none). */
XDM_HIDDEN void xdm_ipc_object_close(struct xdm_ipc_object *o);

/* ---- who may import (ipc_allow.c) --------------------------------------- */

/*
 * The users and groups besides the exporter's own user whose processes
 * the server answers: ipc_allow in xdm.conf(5), or $XDM_IPC_ALLOW, a list
 * of user names, uids, and groups (@name, @gid) separated by commas or
 * blanks.  Empty: the exporter's user alone.
 */
#define XDM_IPC_ALLOW_MAX 32

struct xdm_ipc_allow {
	uint32_t nuids, ngids;
	uid_t uids[XDM_IPC_ALLOW_MAX];
	gid_t gids[XDM_IPC_ALLOW_MAX];
};

/*
 * Parse text into *out; false with a sentence in why and the bad entry's
 * place in text (*at, *len) for a name that no user or group has, a
 * number out of range, or too many entries.  *out is written only when
 * the whole list is good.
 */
XDM_HIDDEN bool xdm_ipc_allow_parse(const char *text, struct xdm_ipc_allow *out, size_t *at,
				    size_t *len, char *why, size_t whylen);
/* Whether the peer of a connected socket (its uid and gid, its groups) is admitted. */
XDM_HIDDEN bool xdm_ipc_allow_admits(const struct xdm_ipc_allow *a, uid_t self, int fd,
				     uid_t uid, gid_t gid);

/* ---- the wire (ipc_server.c, ipc_serve_open.c, ipc_import.c) ----------- */

enum xdm_ipc_op {
	XDM_IPC_OPEN = 1,		/* a handle: answered with OK and the descriptor */
	XDM_IPC_CLOSE = 2,		/* a generation the importer lets go of once */
};

struct xdm_ipc_request {
	uint32_t op;
	uint32_t pad;
	xdm_generation generation;	/* CLOSE */
	struct xdm_ipc_handle handle;	/* OPEN */
};

struct xdm_ipc_reply {
	int32_t status;			/* enum xdm_status */
	uint32_t nfds;			/* XDM_IPC_FDS: the descriptors that follow */
	uint32_t payload_len;		/* OK: what the driver needs besides descriptors */
	uint32_t pad;
	unsigned char payload[XDM_IPC_PAYLOAD_MAX];
	char message[256];		/* the exporter's sentence when not OK */
};

/*
 * After an OK reply with nfds, the descriptors, in order, in messages of
 * this header and up to XDM_IPC_FDS_PER_MSG of them each (SCM_RIGHTS).
 * A header of none ends them early: the exporter could not pass the rest.
 */
#define XDM_IPC_FDS_PER_MSG 64

struct xdm_ipc_fds_msg {
	uint32_t first;			/* index of the first descriptor it carries */
	uint32_t n;
};

/* The socket's abstract name for a token, "\0xdm-ipc-<token>"; its length. */
XDM_HIDDEN size_t xdm_ipc_socket_name(uint64_t token, char *out, size_t len);

/*
 * How long an importer waits for its exporter's answer, and how long the
 * server waits for a connection to take an answer (or, holding nothing, to
 * ask something) before it drops it: $XDM_IPC_TIMEOUT_MS, else this.
 */
#define XDM_IPC_TIMEOUT_MS_DEFAULT 5000

/* Bounds the server answers, never spins on (ipc_server.c). */
#define XDM_IPC_MAX_PEERS 256		/* connections at once */
#define XDM_IPC_MAX_PEERS_OTHER 128	/* ... of other users than the exporter's, together */
#define XDM_IPC_MAX_PEERS_PER_UID 64	/* ... of any one other user */
#define XDM_IPC_MAX_HOLDS 1048576ull	/* opens not yet closed over one connection */

/* ---- the exporter (ipc_export.c, ipc_server.c, ipc_serve_open.c) -------- */

/* One block some importer holds, or that was exported and freed since. */
struct xdm_ipc_export {
	struct xdm_ipc_export *next;
	struct xdm_block block;		/* a copy; state FREED once the owner freed it */
	struct xdm_ipc_object obj;	/* what an importer maps; no descriptor kept */
	unsigned char secret[XDM_IPC_SECRET_BYTES];	/* its handle's credential */
	uint64_t holds;			/* opens not yet closed, over every connection */
	bool freed;			/* xdm_deallocate came while it was held */
	/* For the tree: who holds it (newest first), pid and since when. */
	struct xdm_ipc_holder *holders;
};

struct xdm_ipc_holder {
	struct xdm_ipc_holder *next;
	pid_t pid;			/* as SO_PEERCRED gives it */
	uint64_t since_ns;		/* CLOCK_REALTIME of the open */
	int conn;			/* the connection it came on */
	uint64_t opens;
};

struct xdm_ipc_exporter {
	pthread_mutex_t lock;		/* the list; never held across a syscall */
	struct xdm_ipc_export *exports;
	uint64_t token;
	uid_t uid;			/* the exporter's (effective) user */
	struct xdm_ipc_allow allow;	/* who else is answered */
	int listen_fd;			/* -1 until the first export */
	int wake[2];			/* a pipe that stops the server */
	pthread_t thread;
	bool running;
	/* Set at the first export: until then the free path takes no lock. */
	_Atomic bool exports_made;
};

/*
 * The server's side of one connection: who is at the other end, what it
 * holds, and the answer on its way to it.  Sockets never block: an answer
 * the socket has no room for waits here, the connection is not read
 * meanwhile (one answer in flight each), and it is dropped if it has not
 * drained by its deadline.
 */
enum xdm_ipc_sending {
	XDM_IPC_IDLE,			/* nothing on its way */
	XDM_IPC_SEND_REPLY,		/* the reply (with its one descriptor) */
	XDM_IPC_SEND_PIECES,		/* then the descriptors, from .sent on */
	XDM_IPC_SEND_ABORT,		/* a header of none: the rest cannot go */
};

struct xdm_ipc_peer {
	int fd;
	uid_t uid;
	pid_t pid;
	uint64_t holds;			/* opens over it not yet closed */
	uint64_t deadline_ns;		/* CLOCK_MONOTONIC; see XDM_IPC_TIMEOUT_MS */
	enum xdm_ipc_sending sending;
	bool last;			/* drop it once the answer went */
	xdm_generation answering;	/* the hold the answer is for, or 0 */
	struct xdm_ipc_reply reply;
	struct xdm_ipc_object out;	/* the descriptors to pass; ours until then */
	uint32_t sent;			/* pieces passed so far */
};

/* What the server does with a connection after a request or a flush. */
enum xdm_ipc_verdict {
	XDM_IPC_KEEP,
	XDM_IPC_DROP,			/* close it; every hold of it goes back */
};

/*
 * One request of a connection (the bytes one message brought): answered
 * on p (queued, and sent as far as the socket takes it), holds counted or
 * given back.  DROP for a message that is not a request, a handle that is
 * not one, or a secret that does not match.  ipc_serve_open.c; the fuzz
 * target calls it directly.
 */
XDM_HIDDEN enum xdm_ipc_verdict xdm_ipc_serve_request(struct xdm_runtime *rt,
						      struct xdm_ipc_peer *p, const void *msg,
						      size_t len);
/* Send what p has on its way, as far as the socket takes it (ipc_peer.c). */
XDM_HIDDEN enum xdm_ipc_verdict xdm_ipc_peer_flush(struct xdm_runtime *rt,
						   struct xdm_ipc_peer *p);
/* Queue a reply of status and message, with no memory (ipc_peer.c). */
XDM_HIDDEN void xdm_ipc_peer_refuse(struct xdm_ipc_peer *p, enum xdm_status st,
				    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Every hold of p goes back, its answer is forgotten and its socket closed. */
XDM_HIDDEN void xdm_ipc_peer_drop(struct xdm_runtime *rt, struct xdm_ipc_peer *p);
/* One hold of generation that came over p goes back; false if it had none. */
XDM_HIDDEN bool xdm_ipc_peer_release(struct xdm_runtime *rt, struct xdm_ipc_peer *p,
				     xdm_generation generation);

/* CLOCK_MONOTONIC in ns (deadlines). */
XDM_HIDDEN uint64_t xdm_ipc_mono_ns(void);

/* One block this process opened from another. */
struct xdm_ipc_import {
	struct xdm_ipc_import *next;
	uint64_t ptr;			/* as mapped here */
	size_t bytes;
	void *cookie;			/* the platform's, for its unmap */
	uint64_t token;			/* its exporter */
	xdm_generation generation;
	pid_t exporter_pid;
	uint64_t since_ns;
	int conn;			/* the connection to its exporter */
};

struct xdm_ipc_importer {
	pthread_mutex_t lock;
	struct xdm_ipc_import *imports;
	/* Connections to exporters, by token: one per exporter, kept open
	 * while something is imported from it (its end lets go of it all).
	 * One whose answer did not come in time is kept for the holds that
	 * came over it, but asked nothing more (broken): a late answer on it
	 * would be taken for the next one's. */
	struct xdm_ipc_conn {
		uint64_t token;
		int fd;
		unsigned int imports;
		bool broken;
	} conns[16];
};

struct xdm_ipc {
	struct xdm_ipc_exporter exp;
	struct xdm_ipc_importer imp;
	unsigned int timeout_ms;	/* XDM_IPC_TIMEOUT_MS */
};

struct xdm_config;
/*
 * The allow-list ($XDM_IPC_ALLOW, else cfg's ipc_allow) and the timeout
 * ($XDM_IPC_TIMEOUT_MS) are read here: a bad one is XDM_E_CONFIG.
 */
XDM_HIDDEN enum xdm_status xdm_ipc_init(struct xdm_ipc *ipc, const struct xdm_config *cfg);
/* Stops the server; what importers hold is theirs (the exporter is going). */
XDM_HIDDEN void xdm_ipc_fini(struct xdm_runtime *rt);

/*
 * The free path: true when the block is held by an importer; it is then
 * kept from the stack (its owner's xdm_deallocate returns at once) until
 * the last hold goes.  Cheap when nothing is exported.
 */
XDM_HIDDEN bool xdm_ipc_hold_free_exported(struct xdm_ipc_exporter *e,
					   const struct xdm_block *b);

static inline bool xdm_ipc_hold_free(struct xdm_ipc *ipc, const struct xdm_block *b)
{
	/* Inline, so that a runtime that never exported pays one load. */
	if (__builtin_expect(!atomic_load_explicit(&ipc->exp.exports_made,
						   memory_order_acquire), 1))
		return false;
	return xdm_ipc_hold_free_exported(&ipc->exp, b);
}

/* ipc_server.c: start serving (first export); stop. */
XDM_HIDDEN enum xdm_status xdm_ipc_serve(struct xdm_runtime *rt);
XDM_HIDDEN void xdm_ipc_stop(struct xdm_ipc_exporter *e);
/* ipc_import.c: every import unmapped, every connection closed. */
XDM_HIDDEN void xdm_ipc_import_fini(struct xdm_runtime *rt);

/* CLOCK_REALTIME in ns (the tree's "since"). */
XDM_HIDDEN uint64_t xdm_ipc_now_ns(void);

/*
 * The tree (tree_blocks.c, tree_runtime.c): the importers of a block, one
 * "<pid> <opens> <since>" line each (since: seconds since the epoch); the
 * imports of a runtime, one "<ptr> <bytes> <exporter pid> <generation>
 * <since>" line each; "none" for neither.
 */
struct tree_buf;
XDM_HIDDEN void xdm_ipc_show_holders(struct xdm_runtime *rt, xdm_generation generation,
				     struct tree_buf *b);
XDM_HIDDEN void xdm_ipc_show_imports(struct xdm_runtime *rt, struct tree_buf *b);

#endif /* XDM_CORE_IPC_H */
