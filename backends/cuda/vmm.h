/* SPDX-License-Identifier: MIT */
/*
 * vmm.h - what the files of cuda_vmm share: its state, and the calls that
 * map granules, release them, and finish releases queued behind streams.
 *
 * One mutex guards everything here except the counters the attributes
 * read, which are atomics written under it: introspection must never wait
 * on a lock held across driver calls (a map costs tens of microseconds, and
 * the rare out-of-memory path waits on streams).
 */
#ifndef XDM_CUDA_VMM_H
#define XDM_CUDA_VMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/common/vrange.h"
#include "cuda_priv.h"

/* Granules handed back on a stream, unmapped once `done` has completed. */
struct cuda_vmm_release {
	struct cuda_vmm_release *next;
	uint64_t first;			/* granule index */
	uint64_t n;			/* granules */
	CUevent done;			/* recorded on the block's stream at deallocate */
};

struct cuda_vmm {
	const struct cuda_platform *p;
	pthread_mutex_t lock;
	struct vrange vr;		/* free, mapped or releasing, per granule */
	uint64_t reserved;		/* bytes of the reserved range, vr.count granules */
	/*
	 * One physical allocation per granule, 0 where none: the driver
	 * cannot unmap part of a mapping, so only a granule that is its own
	 * allocation can be given back on its own.
	 */
	CUmemGenericAllocationHandle *handles;
	CUmemAllocationProp prop;	/* pinned memory of the device */
	bool exportable;		/* ipc: granules carry a POSIX descriptor type */
	/*
	 * What every cuMemSetAccess grants: read and write for the device
	 * first, then for each peer of peers= and of the writes of `peers`
	 * since (the grant is per mapping, so each map must name them all).
	 * Only ever appended to, under lock; see cuda_vmm_grant().
	 */
	CUmemAccessDesc access[1 + CUDA_PEERS_MAX];
	uint32_t naccess;
	struct cuda_peers peers;	/* the devices of access[1..], and skipped */
	struct cuda_vmm_release *pending;	/* oldest first */
	struct cuda_vmm_release **pending_tail;

	/* For the attributes: written under lock, read without it. */
	atomic_uint_fast64_t outstanding;	/* bytes VR_MAPPED */
	atomic_uint_fast64_t mapped;		/* bytes VR_MAPPED or VR_RELEASING */
	atomic_uint_fast64_t mapped_peak;
	atomic_uint_fast64_t releasing;		/* bytes VR_RELEASING */
	atomic_uint_fast64_t maps;		/* granules mapped since init */
	atomic_uint_fast64_t releases;		/* granules released since init */
	atomic_uint_fast64_t peers_shown;	/* peers.granted */
	atomic_uint_fast64_t skipped_shown;	/* peers.skipped */
};

static inline struct cuda_vmm *cuda_vmm_of(struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/*
 * Under lock and the context rule, each of these.
 *
 * cuda_vmm_map: a fresh allocation for each granule of [first, first + n),
 * each mapped in its place, then one cuMemSetAccess over the whole run for
 * the device and its peers.
 * On failure nothing of it is left; *call names the driver call that
 * failed.  The granules' state is the caller's to set.
 */
CUresult cuda_vmm_map(struct cuda_vmm *v, uint64_t first, uint64_t n, const char **call);

/*
 * Unmap and release granules [first, first + n), which are VR_RELEASING
 * (or VR_MAPPED at fini), and make each VR_FREE.  A granule the driver will
 * not unmap stays as it is, never to be handed out again; XDM_E_DRIVER then
 * says which.
 */
enum xdm_status cuda_vmm_unmap(struct cuda_vmm *v, uint64_t first, uint64_t n);

/*
 * Finish every queued release whose stream has reached its event; with
 * wait, every one, synchronizing on each event (the out-of-memory path and
 * fini only).  The first failure is returned; a release that failed stays
 * queued.
 */
enum xdm_status cuda_vmm_reap(struct cuda_vmm *v, bool wait);

/*
 * Grant the devices of req (a write of `peers`) read and write on every
 * mapping there is and every one made from now on, in addition to those
 * granted already; on failure nothing is added to what later maps grant.
 */
enum xdm_status cuda_vmm_grant(struct cuda_vmm *v, const struct cuda_peers_request *req);

/* Refresh the attributes' counters from the granule map. */
void cuda_vmm_publish(struct cuda_vmm *v);

extern const struct xdm_attr cuda_vmm_attrs[];

/*
 * ipc=: whether granules are created exportable, settled once at init
 * (vmm_ipc.c): asked of the device and tried on one granule; under the
 * context rule, before the range is used.
 */
enum cuda_vmm_ipc { CUDA_VMM_IPC_AUTO, CUDA_VMM_IPC_TRUE, CUDA_VMM_IPC_FALSE };

/* ipc='s word; false for none of the three. */
bool cuda_vmm_ipc_parse(const char *word, enum cuda_vmm_ipc *out);
enum xdm_status cuda_vmm_ipc_setup(struct cuda_vmm *v, enum cuda_vmm_ipc ipc, size_t granule);
enum xdm_status cuda_vmm_ipc_export(struct xdm_layer *self, const struct xdm_block *block,
				    struct xdm_ipc_object *out);

#endif /* XDM_CUDA_VMM_H */
