/* SPDX-License-Identifier: MIT */
/*
 * platform.c - the cuda platform: one instance per runtime, that is per
 * device ordinal.  init opens the driver, finds the device, retains its
 * primary context and reads what describes the device; fini gives the
 * context back.  Streams, events and copies are in stream.c.
 *
 * The primary context, not a context of our own, because it is the one the
 * CUDA runtime API and the libraries built on it (PyTorch, CuPy) use: their
 * streams can then be imported into the runtime and memory moves freely
 * between their work and ours.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_priv.h"

int cuda_show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

enum xdm_status cuda_device_attribute(const struct cuda_platform *p, const char *layer,
				      CUdevice_attribute attr, const char *name, int *out)
{
	CUresult rc = p->drv.DeviceGetAttribute(out, attr, p->dev);

	if (rc != CUDA_SUCCESS)
		return cuda_fail(&p->drv, rc, "%s: cuDeviceGetAttribute(%s, device %u)", layer,
				 name, p->ordinal);
	return XDM_OK;
}

/* Find the device of p->ordinal and read its name, UUID and memory. */
static enum xdm_status cuda_describe(struct cuda_platform *p)
{
	const struct cuda_driver *d = &p->drv;
	size_t total = 0;
	CUuuid uuid;
	int count = 0;
	CUresult rc;

	rc = d->DeviceGetCount(&count);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda: cuDeviceGetCount");
	if (count < 0 || p->ordinal >= (uint32_t)count)
		return xdm_error_set(XDM_E_NO_DEVICE,
				     "no CUDA device %u: the driver sees %d device%s (numbered from "
				     "0; CUDA_VISIBLE_DEVICES may hide some)",
				     p->ordinal, count, count == 1 ? "" : "s");
	rc = d->DeviceGet(&p->dev, (int)p->ordinal);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda: cuDeviceGet(%u)", p->ordinal);
	rc = d->DeviceGetName(p->name, (int)sizeof(p->name), p->dev);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda: cuDeviceGetName(device %u)", p->ordinal);
	p->name[sizeof(p->name) - 1] = '\0';
	rc = d->DeviceGetUuid(&uuid, p->dev);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda: cuDeviceGetUuid(device %u)", p->ordinal);
	xdm_uuid_format((const unsigned char *)uuid.bytes, p->uuid, sizeof(p->uuid));
	rc = d->DeviceTotalMem(&total, p->dev);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(d, rc, "cuda: cuDeviceTotalMem(device %u)", p->ordinal);
	p->total_bytes = total;
	return XDM_OK;
}

static enum xdm_status cuda_platform_init(struct xdm_layer *self, const struct xdm_params *params)
{
	struct cuda_platform *p;
	enum xdm_status st;
	CUresult rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "cuda: no memory for the platform's state");
	p->ordinal = xdm_layer_ordinal(self);
	st = cuda_driver_open(&p->drv);
	if (st)
		goto err_free;
	st = cuda_describe(p);
	if (st)
		goto err_close;
	rc = p->drv.DevicePrimaryCtxRetain(&p->ctx, p->dev);
	if (rc != CUDA_SUCCESS) {
		st = cuda_fail(&p->drv, rc, "cuda: cuDevicePrimaryCtxRetain(device %u)", p->ordinal);
		goto err_close;
	}
	cuda_ipc_imports_init(&p->imports);
	xdm_layer_set_priv(self, p);
	return XDM_OK;

err_close:
	cuda_driver_close(&p->drv);
err_free:
	free(p);
	return st;
}

static void cuda_platform_fini(struct xdm_layer *self)
{
	struct cuda_platform *p = xdm_layer_priv(self);

	if (!p)
		return;
	/* The core destroyed our streams and events already; the primary
	 * context stays alive while anyone else in the process holds it. */
	cuda_ipc_imports_fini(p);
	cuda_stream_join_fini(p);
	p->drv.DevicePrimaryCtxRelease(p->dev);
	cuda_driver_close(&p->drv);
	free(p);
	xdm_layer_set_priv(self, NULL);
}

static enum xdm_status cuda_device_info(struct xdm_layer *self, struct xdm_device_info *out)
{
	const struct cuda_platform *p = xdm_layer_priv(self);

	if (!out)
		return xdm_error_set(XDM_E_INVALID, "cuda platform: device_info was given a NULL output");
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", p->name);
	snprintf(out->uuid, sizeof(out->uuid), "%s", p->uuid);
	out->total_bytes = p->total_bytes;
	snprintf(out->platform, sizeof(out->platform), "cuda");
	return XDM_OK;
}

enum xdm_status cuda_platform_of(struct xdm_layer *self, struct cuda_platform **out)
{
	const char *platform = xdm_layer_device(self)->platform;

	/* Only then is the platform's priv a struct cuda_platform. */
	if (strcmp(platform, "cuda") != 0)
		return xdm_error_set(XDM_E_CONFIG, "%s needs the cuda platform, not '%s'",
				     xdm_layer_name(self), platform);
	*out = xdm_layer_platform_priv(self);
	if (!*out)
		return xdm_error_set(XDM_E_INVALID, "%s: the cuda platform has no state",
				     xdm_layer_name(self));
	return XDM_OK;
}

const struct xdm_ops cuda_platform_ops = {
	XDM_OPS_HEADER("cuda", XDM_KIND_PLATFORM),
	.description = "NVIDIA GPUs through the CUDA driver API (libcuda.so.1, opened at run time)",
	.init = cuda_platform_init,
	.fini = cuda_platform_fini,
	/* The least memory at the speed of the others (doc/design.md, "Default stacks"). */
	.default_stack = "pool | cuda_vmm",
	.device_info = cuda_device_info,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.stream_synchronize = cuda_stream_synchronize,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.event_record = cuda_event_record,
	.stream_wait_event = cuda_stream_wait_event,
	.event_query = cuda_event_query,
	.event_synchronize = cuda_event_synchronize,
	.launch_host_func = cuda_launch_host_func,
	.memset_async = cuda_memset_async,
	.memcpy_async = cuda_memcpy_async,
	.stream_resolve = cuda_stream_resolve,
	.stream_capture = cuda_stream_capture,
	.stream_join = cuda_stream_join,
	.ipc_import = cuda_ipc_import,
	.ipc_unmap = cuda_ipc_unmap,
};
