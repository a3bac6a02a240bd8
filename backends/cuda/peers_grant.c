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

#include <errno.h>
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

/*
 * What the driver says about the devices req may grant: how many the
 * process sees, and which of them can reach p's device.  Only those
 * devices are asked about; never p's own.
 */
static enum xdm_status cuda_peers_machine_read(const struct cuda_platform *p, const char *layer,
					       const struct cuda_peers_request *req,
					       struct cuda_peers_machine *m)
{
	const struct cuda_driver *d = &p->drv;
	enum xdm_status st;
	uint32_t last;
	int count = 0;
	CUresult rc;

	memset(m, 0, sizeof(*m));
	m->self = p->ordinal;
	rc = d->DeviceGetCount(&count);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "%s: cuDeviceGetCount", layer);
	m->count = count > 0 ? (uint32_t)count : 0;
	last = m->count < CUDA_PEERS_MAX ? m->count : CUDA_PEERS_MAX;
	for (uint32_t n = 0; n < last; n++) {
		bool yes = false;

		if (n == m->self || (req->kind == CUDA_PEERS_LIST &&
				     !(req->listed & (UINT64_C(1) << n))))
			continue;
		st = cuda_peer_can_access(p, layer, n, &yes);
		if (st)
			return st;
		if (yes)
			m->can_access |= UINT64_C(1) << n;
	}
	return XDM_OK;
}

/* out->access: read and write for each device of set, ascending; out->n of them. */
static enum xdm_status cuda_peers_describe(const struct cuda_platform *p, const char *layer,
					   uint64_t set, struct cuda_peer_grant *out)
{
	const struct cuda_driver *d = &p->drv;

	out->n = 0;
	for (uint32_t n = 0; n < CUDA_PEERS_MAX; n++) {
		CUmemAccessDesc *a = &out->access[out->n];
		CUdevice dev = 0;
		CUresult rc;

		if (!(set & (UINT64_C(1) << n)))
			continue;
		rc = d->DeviceGet(&dev, (int)n);
		if (rc != CUDA_SUCCESS) {
			out->n = 0;
			return cuda_fail(d, rc, "%s: cuDeviceGet(%u)", layer, n);
		}
		a->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a->location.id = (int)dev;
		a->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		out->n++;
	}
	return XDM_OK;
}

enum xdm_status cuda_peers_grant_init(const struct cuda_platform *p, const char *layer,
				      const struct cuda_peers_request *req,
				      struct cuda_peer_grant *out)
{
	struct cuda_peers_machine m;
	enum xdm_status st;

	memset(out, 0, sizeof(*out));
	if (req->kind == CUDA_PEERS_NONE)
		return XDM_OK;
	st = cuda_peers_machine_read(p, layer, req, &m);
	if (st)
		return st;
	st = cuda_peers_resolve(layer, req, &m, &out->set);
	if (st)
		return st;
	st = cuda_peers_describe(p, layer, out->set.granted, out);
	if (st)
		memset(out, 0, sizeof(*out));
	return st;
}

enum xdm_status cuda_peers_grant_more(const struct cuda_platform *p, const char *layer,
				      const struct cuda_peers_request *req,
				      const struct cuda_peers *have, struct cuda_peers *after,
				      struct cuda_peer_grant *add)
{
	struct cuda_peers_machine m;
	enum xdm_status st;

	*after = *have;
	memset(add, 0, sizeof(*add));
	st = cuda_peers_machine_read(p, layer, req, &m);
	if (st)
		return st;
	st = cuda_peers_extend(layer, req, &m, have, after);
	if (st)
		return st;
	add->set.granted = after->granted & ~have->granted;
	st = cuda_peers_describe(p, layer, add->set.granted, add);
	if (st) {
		*after = *have;
		memset(add, 0, sizeof(*add));
	}
	return st;
}

int cuda_peers_errno(enum xdm_status st)
{
	return st == XDM_E_CONFIG || st == XDM_E_INVALID ? -EINVAL : -EIO;
}
