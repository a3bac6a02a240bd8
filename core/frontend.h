/* SPDX-License-Identifier: MIT */
/*
 * frontend.h - what the core asks of fusefs.so, the FUSE front end of the
 * introspection tree.  libxdm does not link libfuse: it dlopens fusefs.so
 * from the module path when a mount is asked for, and finds this table by
 * its one exported symbol.  The server reads the tree through the public
 * xdm_tree_* calls only.
 */
#ifndef XDM_CORE_FRONTEND_H
#define XDM_CORE_FRONTEND_H

#include <stddef.h>
#include <stdint.h>

#define XDM_FRONTEND_SYMBOL "xdm_fusefs_frontend"
#define XDM_FRONTEND_ABI 1

struct xdm_frontend {
	uint32_t abi;
	/*
	 * Mount the tree at dir (which exists) and serve it from a new thread.
	 * 0 or a negative errno, with a sentence in msg.
	 */
	int (*start)(const char *dir, void **server, char *msg, size_t len);
	/* Wake the server thread, join it, unmount and free everything. */
	void (*stop)(void *server);
	/*
	 * In the child of a fork: the server thread is not there and the mount
	 * is the parent's.  Close the child's copies of the server's
	 * descriptors (so a dead parent's mount is not kept alive by the
	 * child) and touch nothing else.  Async-signal-safe.
	 */
	void (*forget)(void *server);
};

#endif /* XDM_CORE_FRONTEND_H */
