/* SPDX-License-Identifier: MIT */
/*
 * cuda_priv.h - what the files of the cuda module share: the platform
 * instance's state, the context rule, and the four ops tables.
 *
 * The backends cuda_direct, cuda_async and cuda_vmm live in the same shared
 * object as the platform and reach its state (the driver table, the primary
 * context) through xdm_layer_platform_priv(), after checking that the
 * runtime's platform really is "cuda".
 */
#ifndef XDM_CUDA_PRIV_H
#define XDM_CUDA_PRIV_H

#include <stdatomic.h>
#include <stdint.h>

#include <xdm/module.h>

#include "driver.h"
#include "ipc.h"
#include "peers.h"

/* One per runtime: the device of one ordinal. */
struct cuda_platform {
	struct cuda_driver drv;
	uint32_t ordinal;
	CUdevice dev;
	CUcontext ctx;			/* the device's primary context, retained */
	char name[128];
	char uuid[40];			/* 8-4-4-4-12 lowercase hex */
	uint64_t total_bytes;
	struct cuda_ipc_imports imports;	/* other processes' memory mapped here */
	_Atomic(CUevent) join_mark;	/* cuda_stream_join()'s, made at the first */
};

/*
 * The context rule.  Any thread may call the runtime, and many driver calls
 * act on the calling thread's current context (cuMemAlloc, cuMemFree, and
 * every create).  So every platform call and every cuda_direct call first
 * makes the device's primary context current if it is not already: one
 * cuCtxGetCurrent in the common case, which is what keeps this cheap enough
 * for the allocation path.  A thread that had no context keeps ours
 * afterwards, as it would after its first CUDA runtime call; a thread that
 * had another context (another device, a library's own context) gets it
 * back in cuda_ctx_leave(), so xdm never changes which device a caller
 * works on.  cuda_async's two stream-ordered calls are the exception; see
 * async.c for why.
 */
static inline enum xdm_status cuda_ctx_enter(const struct cuda_platform *p, CUcontext *restore)
{
	CUcontext cur = NULL;
	CUresult rc;

	*restore = NULL;
	rc = p->drv.CtxGetCurrent(&cur);
	if (rc == CUDA_SUCCESS && cur == p->ctx)
		return XDM_OK;
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "cuda: cuCtxGetCurrent");
	rc = p->drv.CtxSetCurrent(p->ctx);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc,
				 "cuda: cuCtxSetCurrent(primary context of CUDA device %u)",
				 p->ordinal);
	*restore = cur;
	return XDM_OK;
}

static inline void cuda_ctx_leave(const struct cuda_platform *p, CUcontext restore)
{
	/* Nothing useful can be done if this fails: the call already ran,
	 * and the caller's own next call reports its context anyway. */
	if (restore)
		p->drv.CtxSetCurrent(restore);
}

/*
 * For the backends: the cuda platform's state, or XDM_E_CONFIG when the
 * runtime's platform is another one ("cuda_direct needs the cuda
 * platform, not 'host'").
 */
enum xdm_status cuda_platform_of(struct xdm_layer *self, struct cuda_platform **out);

/* Streams, events and copies (stream.c), for the platform's table. */
enum xdm_status cuda_stream_create(struct xdm_layer *self, void **stream);
void cuda_stream_destroy(struct xdm_layer *self, void *stream);
enum xdm_status cuda_stream_synchronize(struct xdm_layer *self, void *stream);
enum xdm_status cuda_event_create(struct xdm_layer *self, void **event);
void cuda_event_destroy(struct xdm_layer *self, void *event);
enum xdm_status cuda_event_record(struct xdm_layer *self, void *event, void *stream);
enum xdm_status cuda_stream_wait_event(struct xdm_layer *self, void *stream, void *event);
enum xdm_status cuda_stream_resolve(struct xdm_layer *self, void *handle, void **canonical);
enum xdm_status cuda_stream_join(struct xdm_layer *self, void *handle, void *canonical);
void cuda_stream_join_fini(struct cuda_platform *p);
enum xdm_status cuda_stream_capture(struct xdm_layer *self, void *stream, uint64_t *capture);
/* The same, for the backends: their platform's state and a native stream. */
enum xdm_status cuda_capture_of(const struct cuda_platform *p, CUstream s, uint64_t *capture);
enum xdm_status cuda_event_query(struct xdm_layer *self, void *event, bool *done);
enum xdm_status cuda_event_synchronize(struct xdm_layer *self, void *event);
enum xdm_status cuda_launch_host_func(struct xdm_layer *self, void *stream,
				      void (*fn)(void *arg), void *arg);
enum xdm_status cuda_memset_async(struct xdm_layer *self, uint64_t ptr, int value, size_t bytes,
				  void *stream);
enum xdm_status cuda_memcpy_async(struct xdm_layer *self, uint64_t dst, uint64_t src,
				  size_t bytes, void *stream);

/*
 * The devices a layer's memory is granted to (peers=, or a write of the
 * `peers` attribute), with one access descriptor per peer: read and write,
 * for the peer's CUdevice, ascending by ordinal.  The layer's own device is
 * never among them.
 */
struct cuda_peer_grant {
	struct cuda_peers set;
	uint32_t n;
	CUmemAccessDesc access[CUDA_PEERS_MAX];
};

/*
 * Ask the driver about the devices req may name (cuDeviceGetCount,
 * cuDeviceGet, cuDeviceCanAccessPeer; no context needed), check req against
 * them and fill *out.  XDM_E_CONFIG, naming the ordinal, for a listed device
 * that cannot be granted; XDM_E_DRIVER if the driver fails.  A request of
 * none grants nothing and asks nothing.
 */
enum xdm_status cuda_peers_grant_init(const struct cuda_platform *p, const char *layer,
				      const struct cuda_peers_request *req,
				      struct cuda_peer_grant *out);

/*
 * A write of the `peers` attribute, read (cuda_peers_parse_write) into req:
 * ask the driver about the devices it names and check them as
 * cuda_peers_extend does over `have`, the devices granted already.
 * *after: the union, to be shown once granted; *add: only the devices not
 * in have (add->set.granted), with their descriptors, for the backend to
 * grant.  Nothing to grant is add->n == 0.  On failure *after is *have and
 * *add is empty: XDM_E_CONFIG for a device that cannot be granted,
 * XDM_E_DRIVER if the driver fails.
 */
enum xdm_status cuda_peers_grant_more(const struct cuda_platform *p, const char *layer,
				      const struct cuda_peers_request *req,
				      const struct cuda_peers *have, struct cuda_peers *after,
				      struct cuda_peer_grant *add);

/* An attribute store's answer for st: -EINVAL for a bad value, else -EIO. */
int cuda_peers_errno(enum xdm_status st);

/*
 * A device attribute (cuDeviceGetAttribute; no context needed): XDM_E_DRIVER
 * from layer, naming the attribute, when the driver fails.
 */
enum xdm_status cuda_device_attribute(const struct cuda_platform *p, const char *layer,
				      CUdevice_attribute attr, const char *name, int *out);
#define CUDA_DEVICE_ATTRIBUTE(p, layer, attr, out) \
	cuda_device_attribute((p), (layer), (attr), #attr, (out))

/* Attributes print one decimal number and a newline. */
int cuda_show_u64(char *buf, size_t len, uint64_t value);

extern const struct xdm_ops cuda_platform_ops;
extern const struct xdm_ops cuda_direct_ops;
extern const struct xdm_ops cuda_async_ops;
extern const struct xdm_ops cuda_vmm_ops;

#endif /* XDM_CUDA_PRIV_H */
