/* SPDX-License-Identifier: MIT */
/*
 * vmm_map.c - cuda_vmm's physical side: granules mapped into the reserved
 * range, and given back once the stream they were freed on is past them.
 *
 * Each granule is a cuMemCreate of exactly one granule, mapped on its own.
 * Measured on the H100: cuMemUnmap of part of a mapping fails with
 * CUDA_ERROR_INVALID_VALUE, so a run mapped from one large allocation could
 * only ever be given back whole, and the pool above gives back whatever
 * granules it finds wholly free.  Access is set once per run: one
 * cuMemSetAccess over neighbouring, separately created mappings works
 * (measured), and it is the costliest call of the map (~50 us).  It names
 * the device and every peer of peers= in one call: a mapping starts with
 * no access for anyone, and access is the mapping's, not a context's.
 * That is also why a grant at run time (cuda_vmm_grant) must reach every
 * mapping already made as well as every later one.
 *
 * A release waits on the event recorded on the block's stream.  Unmapping
 * memory a kernel still uses is not a wrong result but a dead context
 * (CUDA_ERROR_ILLEGAL_ADDRESS, measured), so a granule is never unmapped
 * before its event has completed.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

CUresult cuda_vmm_map(struct cuda_vmm *v, uint64_t first, uint64_t n, const char **call)
{
	const struct cuda_driver *d = &v->p->drv;
	uint64_t g = v->vr.granule, created = 0, mapped = 0;
	CUresult rc = CUDA_SUCCESS;

	for (; created < n; created++) {
		uint64_t i = first + created;

		*call = "cuMemCreate";
		rc = d->MemCreate(&v->handles[i], g, &v->prop, 0);
		if (rc != CUDA_SUCCESS) {
			v->handles[i] = 0;
			goto unwind;
		}
		*call = "cuMemMap";
		rc = d->MemMap(vrange_addr(&v->vr, i), g, 0, v->handles[i], 0);
		if (rc != CUDA_SUCCESS) {
			created++;	/* its handle is released below */
			goto unwind;
		}
		mapped++;
	}
	*call = "cuMemSetAccess";
	rc = d->MemSetAccess(vrange_addr(&v->vr, first), n * g, v->access, v->naccess);
	if (rc == CUDA_SUCCESS)
		return CUDA_SUCCESS;

unwind:
	/* Best effort: these undo calls of our own that just succeeded. */
	for (uint64_t j = 0; j < mapped; j++)
		d->MemUnmap(vrange_addr(&v->vr, first + j), g);
	for (uint64_t j = 0; j < created; j++) {
		d->MemRelease(v->handles[first + j]);
		v->handles[first + j] = 0;
	}
	return rc;
}

enum xdm_status cuda_vmm_unmap(struct cuda_vmm *v, uint64_t first, uint64_t n)
{
	const struct cuda_driver *d = &v->p->drv;
	enum xdm_status st = XDM_OK;
	uint64_t g = v->vr.granule, done = 0;

	for (uint64_t i = first; i < first + n; i++) {
		uint64_t addr = vrange_addr(&v->vr, i);
		CUresult rc = d->MemUnmap(addr, g);

		if (rc != CUDA_SUCCESS) {
			if (!st)
				st = cuda_fail(d, rc, "cuda_vmm: cuMemUnmap(0x%" PRIx64 ", %"
					       PRIu64 " bytes) on CUDA device %u; the granule "
					       "is not handed out again", addr, g, v->p->ordinal);
			continue;
		}
		/* Unmapped, the address is free whatever the release says. */
		rc = d->MemRelease(v->handles[i]);
		if (rc != CUDA_SUCCESS && !st)
			st = cuda_fail(d, rc, "cuda_vmm: cuMemRelease(granule of 0x%" PRIx64 ") on "
				       "CUDA device %u", addr, v->p->ordinal);
		v->handles[i] = 0;
		vrange_set(&v->vr, i, 1, VR_FREE);
		done++;
	}
	atomic_fetch_add_explicit(&v->releases, done, memory_order_relaxed);
	return st;
}

/*
 * cuMemSetAccess for the descriptors `add` over every run of granules that
 * has a mapping: handed out, or handed back and not yet unmapped (a kernel
 * queued before the free may still use it).  Neighbouring mappings are
 * granted in one call, as cuda_vmm_map does.
 */
static enum xdm_status cuda_vmm_grant_mapped(struct cuda_vmm *v, const CUmemAccessDesc *add,
					     uint32_t nadd)
{
	const struct cuda_driver *d = &v->p->drv;
	uint64_t g = v->vr.granule;

	for (uint64_t i = 0; i < v->vr.count;) {
		uint64_t first = i, addr = vrange_addr(&v->vr, i);
		CUresult rc;

		if (v->vr.state[i] == VR_FREE) {
			i++;
			continue;
		}
		while (i < v->vr.count && v->vr.state[i] != VR_FREE)
			i++;
		rc = d->MemSetAccess(addr, (i - first) * g, add, nadd);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(d, rc, "cuda_vmm: cuMemSetAccess(0x%" PRIx64 ", %" PRIu64
					 " bytes) for %u more device%s on CUDA device %u; "
					 "mappings below it may have been granted", addr,
					 (i - first) * g, nadd, nadd == 1 ? "" : "s", v->p->ordinal);
	}
	return XDM_OK;
}

/*
 * Under lock and the context rule.  The ordering that keeps a concurrent
 * map from missing the grant: cuda_vmm_map reads access[] under the same
 * lock, and a granule's state leaves VR_FREE only under it, after its map.
 * So a map either finished before this took the lock (its granules are not
 * VR_FREE, and are granted below) or starts after this released it (it
 * reads access[] with the new devices appended).  The existing mappings
 * are granted first and access[] grows only once they all were: should
 * the driver fail, later maps grant what they did before, and the write
 * may be made again (a grant made twice is the same grant).
 */
enum xdm_status cuda_vmm_grant(struct cuda_vmm *v, const struct cuda_peers_request *req)
{
	struct cuda_peer_grant add;
	struct cuda_peers after;
	enum xdm_status st;

	st = cuda_peers_grant_more(v->p, "cuda_vmm", req, &v->peers, &after, &add);
	if (st)
		return st;
	if (add.n) {
		st = cuda_vmm_grant_mapped(v, add.access, add.n);
		if (st)
			return st;
		/* Each device is granted once, never the owner: this fits. */
		memcpy(&v->access[v->naccess], add.access, add.n * sizeof(add.access[0]));
		v->naccess += add.n;
	}
	v->peers = after;
	atomic_store_explicit(&v->peers_shown, after.granted, memory_order_relaxed);
	atomic_store_explicit(&v->skipped_shown, after.skipped, memory_order_relaxed);
	return XDM_OK;
}

/* Whether r's stream has reached its event; with wait, wait until it has. */
static enum xdm_status cuda_vmm_release_done(struct cuda_vmm *v, struct cuda_vmm_release *r,
					     bool wait, bool *done)
{
	const struct cuda_driver *d = &v->p->drv;
	CUresult rc = wait ? d->EventSynchronize(r->done) : d->EventQuery(r->done);

	*done = rc == CUDA_SUCCESS;
	if (rc == CUDA_SUCCESS || (!wait && rc == CUDA_ERROR_NOT_READY))
		return XDM_OK;
	return cuda_fail(d, rc, "cuda_vmm: %s(release of %" PRIu64 " granules at 0x%" PRIx64 ")",
			 wait ? "cuEventSynchronize" : "cuEventQuery", r->n,
			 vrange_addr(&v->vr, r->first));
}

enum xdm_status cuda_vmm_reap(struct cuda_vmm *v, bool wait)
{
	struct cuda_vmm_release **link = &v->pending, *r;
	enum xdm_status first = XDM_OK, st;

	while ((r = *link)) {
		bool done = false;

		/* A release whose event cannot be asked about stays queued. */
		st = cuda_vmm_release_done(v, r, wait, &done);
		if (st || !done) {
			if (st && !first)
				first = st;
			link = &r->next;
			continue;
		}
		/* Done: dequeued even if a granule would not unmap, since the
		 * others are free now and must not be unmapped twice. */
		st = cuda_vmm_unmap(v, r->first, r->n);
		if (st && !first)
			first = st;
		*link = r->next;
		v->p->drv.EventDestroy(r->done);
		free(r);
	}
	v->pending_tail = link;
	cuda_vmm_publish(v);
	return first;
}

void cuda_vmm_publish(struct cuda_vmm *v)
{
	uint64_t g = v->vr.granule;
	uint64_t mapped = (v->vr.mapped + v->vr.releasing) * g;

	atomic_store_explicit(&v->outstanding, v->vr.mapped * g, memory_order_relaxed);
	atomic_store_explicit(&v->mapped, mapped, memory_order_relaxed);
	atomic_store_explicit(&v->releasing, v->vr.releasing * g, memory_order_relaxed);
	if (mapped > atomic_load_explicit(&v->mapped_peak, memory_order_relaxed))
		atomic_store_explicit(&v->mapped_peak, mapped, memory_order_relaxed);
}
