/* SPDX-License-Identifier: MIT */
/*
 * ipc_export.c - the exporter's side of sharing a block: the handle, the
 * record of each exported block, and the free that waits for importers.
 *
 * A block is exported once per generation: the first export asks the
 * stack for the block's memory object (ipc_export), keeps its description
 * in a record (no descriptor: the server asks the stack again at each
 * open) and starts the runtime's server; later exports of it read the
 * record, so they give the same bytes.  The record goes with the block's free,
 * unless an importer holds the block: then the free is held back (the
 * owner's xdm_deallocate returns at once, the stack does not see it) and
 * made by the server when the last hold goes (ipc_server.c).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/tree.h"

uint64_t xdm_ipc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* $XDM_IPC_TIMEOUT_MS: a whole number of milliseconds, 1 to an hour. */
static enum xdm_status read_timeout(unsigned int *ms)
{
	const char *text = getenv("XDM_IPC_TIMEOUT_MS");
	unsigned long v;
	char *end;

	*ms = XDM_IPC_TIMEOUT_MS_DEFAULT;
	if (!text)
		return XDM_OK;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-' || !v || v > 3600000)
		return xdm_error_set(XDM_E_CONFIG, "XDM_IPC_TIMEOUT_MS='%s' is not a number of "
				     "milliseconds from 1 to 3600000", text);
	*ms = (unsigned int)v;
	return XDM_OK;
}

/* $XDM_IPC_ALLOW, else the configuration's ipc_allow (checked when it was parsed). */
static enum xdm_status read_allow(struct xdm_ipc_allow *allow, const struct xdm_config *cfg)
{
	const char *env = getenv("XDM_IPC_ALLOW");
	const char *text = env ? env : cfg ? cfg->ipc_allow : NULL;
	size_t at, len;
	char why[192];

	memset(allow, 0, sizeof(*allow));
	if (!text || xdm_ipc_allow_parse(text, allow, &at, &len, why, sizeof(why)))
		return XDM_OK;
	return xdm_error_set(XDM_E_CONFIG, "%s: %s, at '%.*s'", env ? "XDM_IPC_ALLOW" :
			     cfg->source, why, (int)len, text + at);
}

enum xdm_status xdm_ipc_init(struct xdm_ipc *ipc, const struct xdm_config *cfg)
{
	enum xdm_status st;

	memset(ipc, 0, sizeof(*ipc));
	ipc->exp.listen_fd = -1;
	ipc->exp.wake[0] = ipc->exp.wake[1] = -1;
	ipc->exp.uid = geteuid();
	for (size_t i = 0; i < sizeof(ipc->imp.conns) / sizeof(ipc->imp.conns[0]); i++)
		ipc->imp.conns[i].fd = -1;
	st = read_timeout(&ipc->timeout_ms);
	if (!st)
		st = read_allow(&ipc->exp.allow, cfg);
	if (st)
		return st;
	if (pthread_mutex_init(&ipc->exp.lock, NULL) != 0)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cannot create the IPC lock");
	if (pthread_mutex_init(&ipc->imp.lock, NULL) != 0) {
		pthread_mutex_destroy(&ipc->exp.lock);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cannot create the IPC lock");
	}
	return XDM_OK;
}

/* Descriptors open now; 0 where /proc cannot tell (the limit then decides alone). */
static uint32_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	uint32_t n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

bool xdm_ipc_fd_room(uint32_t need)
{
	struct rlimit lim;
	uint64_t want;

	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
		return true;
	/* A few to spare: a socket, a pipe, what another thread opens meanwhile. */
	want = (uint64_t)open_fds() + need + 16;
	if (lim.rlim_cur >= want)
		return true;
	if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < want)
		return false;
	lim.rlim_cur = lim.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

void xdm_ipc_object_close(struct xdm_ipc_object *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	for (uint32_t i = 0; o->fds && i < o->nfds; i++)
		if (o->fds[i] >= 0)
			close(o->fds[i]);
	free(o->fds);
	o->fds = NULL;
	o->nfds = 0;
}

static void record_free(struct xdm_ipc_export *x)
{
	while (x->holders) {
		struct xdm_ipc_holder *h = x->holders;

		x->holders = h->next;
		free(h);
	}
	xdm_ipc_object_close(&x->obj);
	free(x);
}

/* Under e->lock: the record of a live block's generation, or NULL. */
static struct xdm_ipc_export *find(struct xdm_ipc_exporter *e, xdm_generation generation)
{
	for (struct xdm_ipc_export *x = e->exports; x; x = x->next)
		if (x->block.generation == generation)
			return x;
	return NULL;
}

static void fill_ref(struct xdm_runtime *rt, const struct xdm_ipc_export *x,
		     struct xdm_ipc_ref *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->uuid, sizeof(r->uuid), "%s", rt->device.uuid);
	r->token = rt->ipc.exp.token;
	r->exporter_pid = (uint32_t)getpid();
	r->exporter_uid = (uint32_t)rt->ipc.exp.uid;
	memcpy(r->secret, x->secret, sizeof(r->secret));
	r->generation = x->block.generation;
	r->ptr = x->block.ptr;
	r->bytes = x->block.bytes;
	r->obj = x->obj;
	r->obj.fd = -1;
	r->obj.fds = NULL;
	r->obj.nfds = 0;
}

static bool fds_good(const struct xdm_ipc_object *o)
{
	if (!o->fds || !o->nfds || o->nfds > XDM_IPC_FDS_MAX)
		return false;
	for (uint32_t i = 0; i < o->nfds; i++)
		if (o->fds[i] < 0)
			return false;
	return true;
}

/*
 * A module's answer goes into a handle other processes trust to map: one
 * that contradicts itself is the module's bug, said as such, never encoded.
 */
enum xdm_status xdm_ipc_check_object(const struct xdm_ipc_object *o, const struct xdm_block *b)
{
	if ((o->kind != XDM_IPC_FD || o->fd < 0) && o->kind != XDM_IPC_BYTES &&
	    (o->kind != XDM_IPC_FDS || !fds_good(o)))
		return xdm_error_set(XDM_E_MODULE, "xdm_ipc_export: the stack described the "
				     "block's memory with no descriptor and no bytes");
	if (o->payload_len > XDM_IPC_PAYLOAD_MAX)
		return xdm_error_set(XDM_E_MODULE, "xdm_ipc_export: the stack gave a payload of "
				     "%u bytes; a handle holds %d", o->payload_len,
				     XDM_IPC_PAYLOAD_MAX);
	if (o->object_bytes < b->bytes || o->offset > o->object_bytes - b->bytes)
		return xdm_error_set(XDM_E_MODULE, "xdm_ipc_export: the stack placed the block "
				     "(%zu bytes) at offset %llu of a memory object of %llu bytes",
				     b->bytes, (unsigned long long)o->offset,
				     (unsigned long long)o->object_bytes);
	return XDM_OK;
}

enum xdm_status xdm_ipc_export(struct xdm_runtime *rt, const struct xdm_block *block,
			       struct xdm_ipc_handle *out)
{
	struct xdm_ipc_exporter *e;
	struct xdm_ipc_export *x, *made;
	struct xdm_ipc_ref r;
	struct xdm_block live;
	enum xdm_status st;

	if (!rt || !block || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_ipc_export: NULL argument");
	e = &rt->ipc.exp;
	st = xdm_block_lookup(rt, xdm_block_id_of(block), &live);
	if (st)
		return st;
	/* Writes queued before the export are in the memory when it returns:
	 * at every export, since each may be the one another process reads. */
	st = xdm_stream_synchronize(rt, live.stream);
	if (st)
		return st;
	pthread_mutex_lock(&e->lock);
	x = find(e, live.generation);
	if (x) {
		fill_ref(rt, x, &r);
		pthread_mutex_unlock(&e->lock);
		xdm_ipc_encode(&r, out);
		return XDM_OK;
	}
	pthread_mutex_unlock(&e->lock);

	/* The first export: what the importer maps, then the server. */
	made = calloc(1, sizeof(*made));
	if (!made)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_export: no memory");
	made->block = live;
	made->obj.fd = -1;
	/* The handle's credential: from the kernel, or no export at all. */
	if (getentropy(made->secret, sizeof(made->secret)) != 0) {
		st = xdm_error_set(XDM_E_DRIVER, "xdm_ipc_export: the kernel gave no randomness "
				   "for the handle's secret: %s", strerror(errno));
		free(made);
		return st;
	}
	st = xdm_up_ipc_export(&rt->layers[0], &live, &made->obj);
	if (!st)
		st = xdm_ipc_check_object(&made->obj, &live);
	/* The memory is described afresh for each importer (ipc_server.c):
	 * the record keeps what goes into the handle and how many pieces, and
	 * no descriptor, so that an exporter of many blocks holds none. */
	if (!st) {
		uint32_t pieces = made->obj.nfds;

		xdm_ipc_object_close(&made->obj);
		made->obj.nfds = pieces;
	}
	if (!st)
		st = xdm_ipc_serve(rt);
	if (st) {
		record_free(made);
		return st;
	}
	pthread_mutex_lock(&e->lock);
	x = find(e, live.generation);
	if (x) {
		/* Another thread exported it meanwhile: one record. */
		record_free(made);
	} else {
		made->next = e->exports;
		e->exports = made;
		x = made;
		atomic_store_explicit(&e->exports_made, true, memory_order_release);
	}
	fill_ref(rt, x, &r);
	pthread_mutex_unlock(&e->lock);
	xdm_ipc_encode(&r, out);
	return XDM_OK;
}

bool xdm_ipc_hold_free_exported(struct xdm_ipc_exporter *e, const struct xdm_block *b)
{
	struct xdm_ipc_export **p, *x;
	bool held = false;

	pthread_mutex_lock(&e->lock);
	for (p = &e->exports; (x = *p) != NULL; p = &x->next)
		if (x->block.generation == b->generation)
			break;
	if (x && x->holds) {
		x->freed = true;
		x->block = *b;
		held = true;
	} else if (x) {
		*p = x->next;
		record_free(x);
	}
	pthread_mutex_unlock(&e->lock);
	return held;
}

/*
 * The runtime goes: its server stops, what it imported is unmapped, and
 * blocks whose free waited for importers go to the stack now (an importer
 * keeps its own mapping where the memory allows: a memfd lives on while
 * mapped).  Safe on a runtime built only this far.
 */
void xdm_ipc_fini(struct xdm_runtime *rt)
{
	struct xdm_ipc *ipc = &rt->ipc;

	xdm_ipc_stop(&ipc->exp);
	if (rt->platform.ops && rt->platform.inited)
		xdm_ipc_import_fini(rt);
	while (ipc->exp.exports) {
		struct xdm_ipc_export *x = ipc->exp.exports;

		ipc->exp.exports = x->next;
		if (x->freed && rt->nlayers && rt->layers[0].inited)
			xdm_up_deallocate(&rt->layers[0], &x->block);
		record_free(x);
	}
}

void xdm_ipc_show_holders(struct xdm_runtime *rt, xdm_generation generation,
			  struct tree_buf *b)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	bool any = false;

	pthread_mutex_lock(&e->lock);
	for (struct xdm_ipc_export *x = e->exports; x; x = x->next) {
		if (x->block.generation != generation)
			continue;
		for (struct xdm_ipc_holder *h = x->holders; h; h = h->next, any = true)
			tree_printf(b, "%d %llu %llu.%09llu\n", (int)h->pid,
				    (unsigned long long)h->opens,
				    (unsigned long long)(h->since_ns / 1000000000ull),
				    (unsigned long long)(h->since_ns % 1000000000ull));
	}
	pthread_mutex_unlock(&e->lock);
	if (!any)
		tree_printf(b, "none\n");
}
