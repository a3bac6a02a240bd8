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
 *
 * A release waits on the event recorded on the block's stream.  Unmapping
 * memory a kernel still uses is not a wrong result but a dead context
 * (CUDA_ERROR_ILLEGAL_ADDRESS, measured), so a granule is never unmapped
 * before its event has completed.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>

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
