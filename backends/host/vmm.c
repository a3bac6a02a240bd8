/* SPDX-License-Identifier: MIT */
/*
 * vmm.c - the host_vmm backend: one reserved range of host addresses,
 * mapped and unmapped a granule at a time.
 *
 * It is the host twin of cuda_vmm.  A layer above (the pool) may treat
 * blocks that are neighbours in the address space as one range, grow a
 * range in place with allocate_at, and give back any run of whole granules
 * however it was handed out; this backend lets that logic run, be tested
 * and be measured on a machine without a GPU.  "Mapping" is mprotect of a
 * PROT_NONE reservation to read-write; "unmapping" drops the pages
 * (MADV_DONTNEED) and protects them again, so a use after release faults.
 *
 * Releases are stream-ordered: deallocate marks the granules RELEASING (no
 * allocation may have them) and queues the unmap on the block's stream,
 * where it runs once the work queued before it is done.  Mapping needs no
 * order: a granule is FREE only after its release ran on its stream.
 *
 * ipc=true backs the range with one memfd (mapped shared over the
 * reservation), so that a block can be mapped by another process: it is
 * exported as cuda_vmm exports its granules, one descriptor a granule it
 * touches (here each the memfd, with where the granule lies in it), and
 * the importer reserves that extent and maps each granule in its place.  A release
 * then punches the granules out of the memfd, which frees them as
 * MADV_DONTNEED frees private pages.
 *
 * One mutex guards the granule map and the counters; no system call is
 * made under it, so that the introspection tree, which takes it to show a
 * counter, never waits behind an mprotect.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xdm/module.h>

#include "backends/common/vrange.h"
#include "host.h"

struct vmm {
	pthread_mutex_t lock;
	struct vrange map;
	void *mapping;			/* what mmap returned, before alignment */
	size_t mapping_bytes;
	int memfd;			/* ipc=true: the memory of the range; else -1 */
	uint64_t mapped_peak;		/* bytes, releases still queued included */
	uint64_t maps;			/* granules mapped since init */
	uint64_t releases;		/* granules unmapped since init */
};

/* A release waiting on its stream. */
struct vmm_release {
	struct vmm *v;
	uint64_t first, n;
};

static struct vmm *vmm_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/* Bytes mapped now: handed out, or handed back with the unmap queued. */
static uint64_t vmm_mapped_locked(const struct vmm *v)
{
	return (v->map.mapped + v->map.releasing) * v->map.granule;
}

static void *vmm_addr(const struct vmm *v, uint64_t index)
{
	return (void *)(uintptr_t)vrange_addr(&v->map, index);
}

/* ---- init and fini ---------------------------------------------------- */

static enum xdm_status vmm_check_shape(uint64_t granule, uint64_t reserve)
{
	long page = sysconf(_SC_PAGESIZE);

	if (page <= 0)
		page = 4096;
	if (!granule || (granule & (granule - 1)) || granule % (uint64_t)page)
		return xdm_error_set(XDM_E_CONFIG,
				     "host_vmm: granule=%" PRIu64 " must be a power of two and a "
				     "multiple of the page size (%ld bytes)", granule, page);
	if (reserve < granule)
		return xdm_error_set(XDM_E_CONFIG,
				     "host_vmm: reserve=%" PRIu64 " is smaller than one granule "
				     "(%" PRIu64 " bytes)", reserve, granule);
	/* One more granule is reserved to align the base. */
	if (reserve > SIZE_MAX - 2 * granule)
		return xdm_error_set(XDM_E_CONFIG,
				     "host_vmm: reserve=%" PRIu64 " is more than this machine can "
				     "address", reserve);
	return XDM_OK;
}

/*
 * ipc=true: the reserved range becomes a shared mapping of one memfd, still
 * PROT_NONE (mapping a granule stays an mprotect).  The memfd is sparse: a
 * page of it costs memory only once touched.
 */
static enum xdm_status vmm_share(struct vmm *v, uintptr_t base, uint64_t reserve)
{
	int err;

	v->memfd = host_sealed_memfd("xdm-host-vmm", reserve);
	if (v->memfd < 0 ||
	    mmap((void *)base, (size_t)reserve, PROT_NONE, MAP_SHARED | MAP_FIXED, v->memfd,
		 0) == MAP_FAILED) {
		err = errno;
		if (v->memfd >= 0)
			close(v->memfd);
		v->memfd = -1;
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: ipc=true: cannot back %"
				     PRIu64 " bytes with a memfd: %s", reserve, strerror(err));
	}
	return XDM_OK;
}

static enum xdm_status vmm_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint64_t granule = xdm_params_size(params, "granule");
	uint64_t reserve = xdm_params_size(params, "reserve");
	enum xdm_status st;
	uintptr_t base;
	struct vmm *v;
	int err;

	st = vmm_check_shape(granule, reserve);
	if (st)
		return st;
	reserve = (reserve + granule - 1) & ~(granule - 1);

	v = calloc(1, sizeof(*v));
	if (!v)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: no memory for its state");
	err = pthread_mutex_init(&v->lock, NULL);
	if (err) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: cannot create its mutex: %s",
				   strerror(err));
		goto err_free;
	}
	/*
	 * PROT_NONE and MAP_NORESERVE: addresses only, no memory and no
	 * commit charge until a granule is mapped.  mmap aligns to a page
	 * only, so one granule more is reserved and the base rounded up in it.
	 */
	v->mapping_bytes = (size_t)(reserve + granule);
	v->mapping = mmap(NULL, v->mapping_bytes, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v->mapping == MAP_FAILED) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY,
				   "host_vmm: cannot reserve %" PRIu64 " bytes of addresses: %s",
				   reserve, strerror(errno));
		goto err_mutex;
	}
	base = ((uintptr_t)v->mapping + granule - 1) & ~(uintptr_t)(granule - 1);
	v->memfd = -1;
	if (xdm_params_bool(params, "ipc")) {
		st = vmm_share(v, base, reserve);
		if (st)
			goto err_unmap;
	}
	if (!vrange_init(&v->map, base, reserve, granule)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY,
				   "host_vmm: no memory for the map of %" PRIu64 " granules",
				   reserve / granule);
		goto err_unmap;
	}
	xdm_layer_set_priv(self, v);
	return XDM_OK;

err_unmap:
	if (v->memfd >= 0)
		close(v->memfd);
	munmap(v->mapping, v->mapping_bytes);
err_mutex:
	pthread_mutex_destroy(&v->lock);
err_free:
	free(v);
	return st;
}

static void vmm_fini(struct xdm_layer *self)
{
	struct vmm *v = vmm_of(self);
	uint32_t i, n;
	bool queued;

	if (!v)
		return;
	/* The runtime drains its streams before fini; a release that is still
	 * queued (a stream that failed) would touch v when it runs. */
	n = xdm_layer_stream_count(self);
	for (i = 0; i < n; i++)
		xdm_layer_stream_synchronize(self, i);
	xdm_layer_set_priv(self, NULL);
	pthread_mutex_lock(&v->lock);
	queued = v->map.releasing != 0;
	pthread_mutex_unlock(&v->lock);
	if (queued)
		return;		/* leaking the reservation is the lesser harm */
	munmap(v->mapping, v->mapping_bytes);
	if (v->memfd >= 0)
		close(v->memfd);
	vrange_fini(&v->map);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

/* ---- mapping ---------------------------------------------------------- */

static void vmm_fill(const struct vmm *v, uint64_t first, uint64_t n, struct xdm_block *out)
{
	/* The core filled generation, ordinal, stream and tag. */
	out->ptr = vrange_addr(&v->map, first);
	out->bytes = (size_t)(n * v->map.granule);
	out->align = (size_t)v->map.granule;
	out->state = XDM_BLOCK_LIVE;
}

/*
 * Map granules [first, first + n), which the caller has just marked
 * VR_MAPPED under the lock; on failure they go back to VR_FREE.
 */
static enum xdm_status vmm_map(struct vmm *v, uint64_t first, uint64_t n, struct xdm_block *out)
{
	size_t bytes = (size_t)(n * v->map.granule);
	uint64_t now;
	int err;

	if (!mprotect(vmm_addr(v, first), bytes, PROT_READ | PROT_WRITE)) {
		pthread_mutex_lock(&v->lock);
		v->maps += n;
		now = vmm_mapped_locked(v);
		if (now > v->mapped_peak)
			v->mapped_peak = now;
		pthread_mutex_unlock(&v->lock);
		vmm_fill(v, first, n, out);
		return XDM_OK;
	}
	err = errno;
	pthread_mutex_lock(&v->lock);
	vrange_set(&v->map, first, n, VR_FREE);
	pthread_mutex_unlock(&v->lock);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: cannot map %zu bytes at 0x%" PRIx64
			     ": %s", bytes, vrange_addr(&v->map, first), strerror(err));
}

/* Granules for bytes; 0 if too many to count.  0 bytes get one granule,
 * so that every block has an address of its own. */
static uint64_t vmm_granules(const struct vmm *v, size_t bytes)
{
	uint64_t g = v->map.granule;

	if (!bytes)
		return 1;
	if ((uint64_t)bytes > UINT64_MAX - (g - 1))
		return 0;
	return ((uint64_t)bytes + g - 1) / g;
}

static enum xdm_status vmm_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				    const char *tag, struct xdm_block *out)
{
	struct vmm *v = vmm_of(self);
	uint64_t n = vmm_granules(v, bytes), first;
	bool found;

	if (!n)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host_vmm: cannot allocate %zu bytes: too large", bytes);
	pthread_mutex_lock(&v->lock);
	found = vrange_find(&v->map, n, &first);
	if (found)
		vrange_set(&v->map, first, n, VR_MAPPED);
	pthread_mutex_unlock(&v->lock);
	if (!found)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host_vmm: no free run of %zu bytes left in its reserved "
				     "range of %" PRIu64 " bytes (raise reserve)", bytes,
				     v->map.count * v->map.granule);
	return vmm_map(v, first, n, out);
}

static enum xdm_status vmm_allocate_at(struct xdm_layer *self, uint64_t ptr, size_t bytes,
				       xdm_stream_id stream, const char *tag,
				       struct xdm_block *out)
{
	struct vmm *v = vmm_of(self);
	uint64_t mask = v->map.granule - 1, first, n;
	bool free_here;

	if (!bytes || (ptr & mask) || ((uint64_t)bytes & mask))
		return xdm_error_set(XDM_E_INVALID,
				     "host_vmm: allocate_at 0x%" PRIx64 ", %zu bytes: address and "
				     "size must be non-zero multiples of the granule (%" PRIu64
				     " bytes)", ptr, bytes, v->map.granule);
	pthread_mutex_lock(&v->lock);
	free_here = vrange_span(&v->map, ptr, bytes, VR_FREE, &first, &n);
	if (free_here)
		vrange_set(&v->map, first, n, VR_MAPPED);
	pthread_mutex_unlock(&v->lock);
	if (!free_here)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host_vmm: cannot map %zu bytes at 0x%" PRIx64 ": the place "
				     "is outside the reserved range or not wholly free", bytes, ptr);
	return vmm_map(v, first, n, out);
}

/* ---- stream-ordered release ------------------------------------------- */

/* Runs on the block's stream once all work queued before the free is done. */
static void vmm_release_run(void *arg)
{
	struct vmm_release *r = arg;
	struct vmm *v = r->v;
	void *p = vmm_addr(v, r->first);
	size_t bytes = (size_t)(r->n * v->map.granule);

	/*
	 * The granules are RELEASING: nobody else touches them, so the system
	 * calls need no lock.  Should either fail, the memory stays readable
	 * but is counted free: only DONTNEED's zeroing and the fault on a
	 * later use are lost, never an address handed out twice.
	 */
	if (v->memfd >= 0)
		fallocate(v->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)((uintptr_t)p - v->map.base), (off_t)bytes);
	else
		madvise(p, bytes, MADV_DONTNEED);
	mprotect(p, bytes, PROT_NONE);
	pthread_mutex_lock(&v->lock);
	vrange_set(&v->map, r->first, r->n, VR_FREE);
	v->releases += r->n;
	pthread_mutex_unlock(&v->lock);
	free(r);
}

static enum xdm_status vmm_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct vmm *v = vmm_of(self);
	struct vmm_release *r;
	enum xdm_status st;
	bool mapped;

	if (!block)
		return xdm_error_set(XDM_E_INVALID, "host_vmm: deallocate of a NULL block");
	r = malloc(sizeof(*r));
	if (!r)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host_vmm: no memory to queue the release of 0x%" PRIx64,
				     block->ptr);
	r->v = v;
	pthread_mutex_lock(&v->lock);
	mapped = vrange_span(&v->map, block->ptr, block->bytes, VR_MAPPED, &r->first, &r->n);
	if (mapped)
		vrange_set(&v->map, r->first, r->n, VR_RELEASING);
	pthread_mutex_unlock(&v->lock);
	if (!mapped) {
		free(r);
		return xdm_error_set(XDM_E_INVALID,
				     "host_vmm: cannot release 0x%" PRIx64 ", %zu bytes: not a "
				     "range of whole granules (%" PRIu64 " bytes) that are all "
				     "mapped now", block->ptr, block->bytes, v->map.granule);
	}

	st = xdm_layer_launch_host(self, block->stream, vmm_release_run, r);
	if (st) {
		/* Not queued: unmapping now could pull the memory from under work
		 * still queued on the stream.  It stays mapped and counted. */
		pthread_mutex_lock(&v->lock);
		vrange_set(&v->map, r->first, r->n, VR_MAPPED);
		pthread_mutex_unlock(&v->lock);
		free(r);
		return st;
	}
	block->state = XDM_BLOCK_RETIRED;
	return XDM_OK;
}

/* A release completes when its stream reaches it; there is nothing else to
 * reap.  Synchronize the stream to wait for it. */
static enum xdm_status vmm_reap_pending(struct xdm_layer *self)
{
	return XDM_OK;
}

static size_t vmm_bytes_outstanding(struct xdm_layer *self)
{
	struct vmm *v = vmm_of(self);
	uint64_t b;

	pthread_mutex_lock(&v->lock);
	b = vmm_mapped_locked(v);
	pthread_mutex_unlock(&v->lock);
	return (size_t)b;
}

static uint64_t vmm_granularity(struct xdm_layer *self)
{
	return vmm_of(self)->map.granule;
}

/* ---- sharing with other processes (ipc=true) ---------------------------- */

static enum xdm_status vmm_ipc_export(struct xdm_layer *self, const struct xdm_block *block,
				      struct xdm_ipc_object *out)
{
	struct vmm *v = vmm_of(self);
	uint64_t g = v->map.granule, lo, hi, first, n;
	struct host_vmm_pieces pieces;
	bool mapped;

	if (v->memfd < 0)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host_vmm: its range is private "
				     "memory; ipc=true backs it with a memfd that can be shared");
	/* A part of a block will do (a pool's block inside its chunk): the
	 * granules it touches must all be mapped. */
	lo = block->ptr & ~(g - 1);
	hi = (block->ptr + (block->bytes ? block->bytes : 1) + g - 1) & ~(g - 1);
	pthread_mutex_lock(&v->lock);
	mapped = hi > lo && vrange_span(&v->map, lo, hi - lo, VR_MAPPED, &first, &n);
	pthread_mutex_unlock(&v->lock);
	if (!mapped)
		return xdm_error_set(XDM_E_INVALID, "host_vmm: 0x%" PRIx64 " (%zu bytes) is not "
				     "mapped memory of this layer", block->ptr, block->bytes);
	n = (hi - lo) / g;
	if (n > XDM_IPC_FDS_MAX)
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "host_vmm: a block of %" PRIu64
				     " granules is more than one handle can pass", n);
	/*
	 * One descriptor a granule, as cuda_vmm's granules are each an
	 * allocation of their own: here each is the memfd again, and the
	 * importer maps each at its place in it.
	 */
	if (!xdm_ipc_fd_room((uint32_t)n))
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: a block of %" PRIu64
				     " granules needs as many descriptors, more than this process "
				     "may open (RLIMIT_NOFILE)", n);
	memset(out, 0, sizeof(*out));
	out->kind = XDM_IPC_FDS;
	out->fd = -1;
	out->offset = block->ptr - lo;
	out->object_bytes = hi - lo;
	memcpy(pieces.tag, HOST_VMM_PIECES_TAG, sizeof(pieces.tag));
	pieces.first_offset = lo - v->map.base;
	pieces.piece_bytes = g;
	memcpy(out->payload, &pieces, sizeof(pieces));
	out->payload_len = sizeof(pieces);
	out->fds = malloc(sizeof(*out->fds) * n);
	if (!out->fds)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: no memory to export a block");
	for (out->nfds = 0; out->nfds < n; out->nfds++) {
		int fd = fcntl(v->memfd, F_DUPFD_CLOEXEC, 0);

		if (fd < 0) {
			int err = errno;

			while (out->nfds)
				close(out->fds[--out->nfds]);
			free(out->fds);
			out->fds = NULL;
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host_vmm: cannot duplicate its "
					     "memfd: %s", strerror(err));
		}
		out->fds[out->nfds] = fd;
	}
	return XDM_OK;
}

/* ---- attributes ------------------------------------------------------- */

enum vmm_stat { VS_MAPPED, VS_MAPPED_PEAK, VS_RELEASING, VS_MAPS, VS_RELEASES };

static uint64_t vmm_stat(struct xdm_layer *self, enum vmm_stat which)
{
	struct vmm *v = vmm_of(self);
	uint64_t x = 0;

	pthread_mutex_lock(&v->lock);
	switch (which) {
	case VS_MAPPED:
		x = vmm_mapped_locked(v);
		break;
	case VS_MAPPED_PEAK:
		x = v->mapped_peak;
		break;
	case VS_RELEASING:
		x = v->map.releasing * v->map.granule;
		break;
	case VS_MAPS:
		x = v->maps;
		break;
	case VS_RELEASES:
		x = v->releases;
		break;
	}
	pthread_mutex_unlock(&v->lock);
	return x;
}

static int vmm_show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

#define VMM_SHOW(name, expr)                                                  \
	static int vmm_show_##name(struct xdm_layer *self, char *buf, size_t len) \
	{                                                                     \
		return vmm_show_u64(buf, len, (expr));                        \
	}

/* The shape is fixed at init: no lock. */
VMM_SHOW(granule, vmm_of(self)->map.granule)
VMM_SHOW(reserved_va, vmm_of(self)->map.count * vmm_of(self)->map.granule)
VMM_SHOW(mapped, vmm_stat(self, VS_MAPPED))
VMM_SHOW(mapped_peak, vmm_stat(self, VS_MAPPED_PEAK))
VMM_SHOW(releasing, vmm_stat(self, VS_RELEASING))
VMM_SHOW(maps, vmm_stat(self, VS_MAPS))
VMM_SHOW(releases, vmm_stat(self, VS_RELEASES))

static const struct xdm_attr vmm_attrs[] = {
	{ "granule", 0444, "bytes per granule: blocks start and end on multiples of it",
	  vmm_show_granule, NULL },
	{ "reserved_va", 0444, "bytes of addresses reserved, mapped or not",
	  vmm_show_reserved_va, NULL },
	{ "mapped", 0444, "bytes mapped now, releases still queued on a stream included",
	  vmm_show_mapped, NULL },
	{ "mapped_peak", 0444, "the most bytes mapped at once since the layer was created",
	  vmm_show_mapped_peak, NULL },
	{ "releasing", 0444, "bytes handed back whose release a stream has not reached yet",
	  vmm_show_releasing, NULL },
	{ "maps", 0444, "granules mapped since the layer was created", vmm_show_maps, NULL },
	{ "releases", 0444, "granules unmapped since the layer was created",
	  vmm_show_releases, NULL },
	{ NULL },
};

static const struct xdm_param_spec vmm_params[] = {
	{ "granule", XDM_PARAM_SIZE, "2M",
	  "bytes mapped at a time: a power of two and a multiple of the page size" },
	{ "reserve", XDM_PARAM_SIZE, "64G",
	  "bytes of addresses reserved at init (rounded up to whole granules); no memory "
	  "is used until it is mapped" },
	{ "ipc", XDM_PARAM_BOOL, "false",
	  "true: the range is one memfd, so that other processes can map its blocks "
	  "(xdm_ipc_export)" },
	{ NULL },
};

const struct xdm_ops host_vmm_ops = {
	XDM_OPS_HEADER("host_vmm", XDM_KIND_BACKEND),
	.description = "host memory mapped a granule at a time into one reserved range, "
		       "the host twin of cuda_vmm",
	.params = vmm_params,
	.attrs = vmm_attrs,
	.init = vmm_init,
	.fini = vmm_fini,
	.allocate = vmm_allocate,
	.deallocate = vmm_deallocate,
	.bytes_outstanding = vmm_bytes_outstanding,
	.reap_pending = vmm_reap_pending,
	/* Releases are stream-ordered: the core's tracking holds. */
	.record_block_use = xdm_track_record,
	.supports_block_use_tracking = xdm_track_supported,
	.prepare_block_use = xdm_track_prepare,
	.finish_block_use = xdm_track_finish,
	.granularity = vmm_granularity,
	.allocate_at = vmm_allocate_at,
	.ipc_export = vmm_ipc_export,
};
