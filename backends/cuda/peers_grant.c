/* SPDX-License-Identifier: MIT */
/*
 * peers_grant.c - what the driver says about peers= : which devices there
 * are, which of them can reach the layer's device, and the access
 * descriptors that grant them its memory.
 *
 * The grant itself is the backend's (cuMemPoolSetAccess on cuda_async's
 * pool, every cuMemSetAccess of cuda_vmm): access to such memory belongs
 * to the allocation or the pool, for a device, whatever contexts exist.
 * cuCtxEnablePeerAccess, which is per context, plays no part.
 */
#include "config.h"

#include <string.h>

#include "cuda_priv.h"

/* Whether device n can access the memory of p's device. */
static enum xdm_status cuda_peer_can_access(const struct cuda_platform *p, const char *layer,
					    uint32_t n, bool *yes)
{
	const struct cuda_driver *d = &p->drv;
	CUdevice dev = 0;
	int can = 0;
	CUresult rc;

	rc = d->DeviceGet(&dev, (int)n);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "%s: cuDeviceGet(%u)", layer, n);
	/* dev is the one that would access, p->dev the one whose memory it is. */
	rc = d->DeviceCanAccessPeer(&can, dev, p->dev);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "%s: cuDeviceCanAccessPeer(device %u, device %u)", layer,
				 n, p->ordinal);
	*yes = can == 1;
	return XDM_OK;
}

enum xdm_status cuda_peers_grant_init(const struct cuda_platform *p, const char *layer,
				      const struct cuda_peers_request *req,
				      struct cuda_peer_grant *out)
{
	const struct cuda_driver *d = &p->drv;
	struct cuda_peers_machine m = { .self = p->ordinal };
	enum xdm_status st;
	uint32_t last;
	int count = 0;
	CUresult rc;

	memset(out, 0, sizeof(*out));
	if (req->kind == CUDA_PEERS_NONE)
		return XDM_OK;
	rc = d->DeviceGetCount(&count);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "%s: cuDeviceGetCount", layer);
	m.count = count > 0 ? (uint32_t)count : 0;
	last = m.count < CUDA_PEERS_MAX ? m.count : CUDA_PEERS_MAX;

	/* Ask only about the devices the request could grant. */
	for (uint32_t n = 0; n < last; n++) {
		bool yes = false;

		if (n == m.self || (req->kind == CUDA_PEERS_LIST &&
				    !(req->listed & (UINT64_C(1) << n))))
			continue;
		st = cuda_peer_can_access(p, layer, n, &yes);
		if (st)
			return st;
		if (yes)
			m.can_access |= UINT64_C(1) << n;
	}
	st = cuda_peers_resolve(layer, req, &m, &out->set);
	if (st)
		return st;

	for (uint32_t n = 0; n < last; n++) {
		CUmemAccessDesc *a = &out->access[out->n];
		CUdevice dev = 0;

		if (!(out->set.granted & (UINT64_C(1) << n)))
			continue;
		rc = d->DeviceGet(&dev, (int)n);
		if (rc != CUDA_SUCCESS) {
			st = cuda_fail(d, rc, "%s: cuDeviceGet(%u)", layer, n);
			memset(out, 0, sizeof(*out));
			return st;
		}
		a->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a->location.id = (int)dev;
		a->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		out->n++;
	}
	return XDM_OK;
}
