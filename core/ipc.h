/* SPDX-License-Identifier: MIT */
/*
 * ipc.h - sharing blocks with other processes: the handle's fields, the
 * exporter's server and the importer's table (ipc_handle.c, ipc_server.c,
 * ipc_export.c, ipc_import.c).
 *
 * The handle is plain bytes; it grants nothing.  The exporting runtime
 * serves a Unix socket, named by a random token of the runtime, that
 * answers an importer's OPEN with the memory object's descriptor
 * (SCM_RIGHTS) and counts the importer's hold on the block; the
 * importer's CLOSE, or the socket's end (the importer closed all, or
 * died), lets go of it.  A block freed while held is kept from its stack
 * until the last hold goes.
 */
#ifndef XDM_CORE_IPC_H
#define XDM_CORE_IPC_H

#include <pthread.h>
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

#define XDM_IPC_VERSION 1

/* What a handle says, decoded and checked. */
struct xdm_ipc_ref {
	char uuid[40];			/* the block's device */
	uint64_t token;			/* the exporting runtime: names its socket */
	uint32_t exporter_pid;		/* for messages only: pids are not global */
	xdm_generation generation;	/* the block */
	uint64_t ptr;			/* ... as the exporter sees it */
	uint64_t bytes;
	struct xdm_ipc_object obj;	/* fd is not in a handle: -1 */
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

/* ---- what a layer described (ipc_export.c) ----------------------------- */

/* A layer's answer is one other processes will trust: check it (XDM_E_MODULE). */
XDM_HIDDEN enum xdm_status xdm_ipc_check_object(const struct xdm_ipc_object *o,
						const struct xdm_block *b);
/* Close every descriptor of o and free its array (o stays usable, with none). */
XDM_HIDDEN void xdm_ipc_object_close(struct xdm_ipc_object *o);

/* ---- the wire (ipc_server.c, ipc_import.c) ----------------------------- */

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
	char message[256];		/* the exporter's sentence when not OK */
};

/*
 * After an OK reply with nfds, the descriptors, in order, in messages of
 * this header and up to XDM_IPC_FDS_PER_MSG of them each (SCM_RIGHTS).
 */
#define XDM_IPC_FDS_PER_MSG 64

struct xdm_ipc_fds_msg {
	uint32_t first;			/* index of the first descriptor it carries */
	uint32_t n;
};

/* The socket's abstract name for a token, "\0xdm-ipc-<token>"; its length. */
XDM_HIDDEN size_t xdm_ipc_socket_name(uint64_t token, char *out, size_t len);

/* ---- the exporter (ipc_export.c, ipc_server.c) ------------------------- */

/* One block some importer holds, or that was exported and freed since. */
struct xdm_ipc_export {
	struct xdm_ipc_export *next;
	struct xdm_block block;		/* a copy; state FREED once the owner freed it */
	struct xdm_ipc_object obj;	/* what an importer maps; fd ours until removed */
	unsigned int holds;		/* opens not yet closed, over every connection */
	bool freed;			/* xdm_deallocate came while it was held */
	/* For the tree: who holds it (newest first), pid and since when. */
	struct xdm_ipc_holder *holders;
};

struct xdm_ipc_holder {
	struct xdm_ipc_holder *next;
	pid_t pid;			/* as SO_PEERCRED gives it */
	uint64_t since_ns;		/* CLOCK_REALTIME of the open */
	int conn;			/* the connection it came on */
	unsigned int opens;
};

struct xdm_ipc_exporter {
	pthread_mutex_t lock;		/* the list; never held across a syscall */
	struct xdm_ipc_export *exports;
	uint64_t token;
	int listen_fd;			/* -1 until the first export */
	int wake[2];			/* a pipe that stops the server */
	pthread_t thread;
	bool running;
	/* Set at the first export: until then the free path takes no lock. */
	_Atomic bool exports_made;
};

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
	 * while something is imported from it (its end lets go of it all). */
	struct xdm_ipc_conn {
		uint64_t token;
		int fd;
		unsigned int imports;
	} conns[16];
};

struct xdm_ipc {
	struct xdm_ipc_exporter exp;
	struct xdm_ipc_importer imp;
};

XDM_HIDDEN enum xdm_status xdm_ipc_init(struct xdm_ipc *ipc);
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

/* ipc_server.c: start serving (first export); stop; and what lets go. */
XDM_HIDDEN enum xdm_status xdm_ipc_serve(struct xdm_runtime *rt);
XDM_HIDDEN void xdm_ipc_stop(struct xdm_ipc_exporter *e);
/* Under e->lock: one hold of generation by conn goes; a freed block whose
 * last hold it was is handed to its stack. */
XDM_HIDDEN void xdm_ipc_release_locked(struct xdm_runtime *rt, xdm_generation generation,
				       int conn, struct xdm_block *to_free, bool *free_it);

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
