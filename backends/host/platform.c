/* SPDX-License-Identifier: MIT */
/*
 * platform.c - the host platform: device description, and the glue from
 * the platform ops to the streams and events of stream.h.
 *
 * The glue checks arguments and turns errno values into statuses with a
 * sentence; the asynchrony itself lives in stream.c and event.c.  Streams
 * and events need nothing from the layer, so only init, fini and
 * device_info look at self.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/module.h>

#include "host.h"
#include "stream.h"
#include "streams.h"

struct host_platform {
	uint32_t ordinal;
	uint32_t device;		/* the host device it is: visible= maps ordinals */
	uint64_t memory;		/* total_bytes of the device */
	struct host_stream_set streams;	/* what a native handle may name */
};

/* Out of threads or memory is OUT_OF_MEMORY; anything else is the
 * "driver" (here: the C library) refusing, with its errno. */
static enum xdm_status host_errno(int err, const char *what)
{
	char buf[128];
	const char *msg = strerror_r(err, buf, sizeof(buf));

	if (err == ENOMEM || err == EAGAIN)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "host platform: %s: %s", what, msg);
	return xdm_error_set_driver(err, "host platform: %s: %s", what, msg);
}

static enum xdm_status host_null(const char *op, const char *what)
{
	return xdm_error_set(XDM_E_INVALID, "host platform: %s was given a NULL %s", op, what);
}

/*
 * A call a graph capture forbids: it broke the capture, as the driver's
 * would.  Stricter than the driver in one case: a stream outside the
 * capture that waits on a captured event breaks it here, where the driver
 * would have that stream join the capture; xdm never does either.
 */
static enum xdm_status host_capture_broken(const char *op, const char *what)
{
	return xdm_error_set(XDM_E_STREAM_MISUSE, "host platform: %s on %s ends that capture "
			     "(the capture is now invalid)", op, what);
}

static enum xdm_status host_physical_memory(uint64_t *out)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page_size = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || page_size <= 0)
		return xdm_error_set(XDM_E_CONFIG,
				     "host platform: cannot read the size of physical memory; give memory=SIZE");
	*out = (uint64_t)pages * (uint64_t)page_size;
	return XDM_OK;
}

/*
 * visible= is CUDA_VISIBLE_DEVICES for host devices: the devices this
 * process sees, in its order ("1,0": ordinal 0 is device 1).  Each entry a
 * device below devices=, none twice.  Unset: ordinal k is device k.
 */
static enum xdm_status host_visible_device(const char *visible, uint64_t devices,
					   uint32_t ordinal, uint32_t *device)
{
	bool seen[XDM_MAX_DEVICES] = { false };
	const char *p = visible;
	uint32_t k = 0;

	if (!visible) {
		*device = ordinal;
		return XDM_OK;
	}
	for (;;) {
		char *end;
		unsigned long v;

		if (*p < '0' || *p > '9')
			goto bad;
		v = strtoul(p, &end, 10);
		if (v >= devices || v >= XDM_MAX_DEVICES || seen[v])
			goto bad;
		seen[v] = true;
		if (k++ == ordinal)
			*device = (uint32_t)v;
		if (*end == '\0')
			break;
		if (*end != ',')
			goto bad;
		p = end + 1;
	}
	if (ordinal >= k)
		return xdm_error_set(XDM_E_NO_DEVICE,
				     "host platform: there is no host device %" PRIu32
				     ": visible=%s makes only ordinals below %" PRIu32,
				     ordinal, visible, k);
	return XDM_OK;
bad:
	return xdm_error_set(XDM_E_CONFIG,
			     "host platform: visible must list host devices below devices=%"
			     PRIu64 ", each once, separated by ',' (quote it in a platform list: "
			     "visible=\"1,0\"), not '%s'", devices, visible);
}

static enum xdm_status host_platform_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint32_t ordinal = xdm_layer_ordinal(self);
	uint64_t devices = xdm_params_uint(params, "devices");
	struct host_platform *p;
	enum xdm_status st;
	uint64_t memory = 0;
	uint32_t device = 0;

	if (ordinal >= devices)
		return xdm_error_set(XDM_E_NO_DEVICE,
				     "host platform: there is no host device %" PRIu32
				     ": devices=%" PRIu64 " makes only ordinals below %" PRIu64,
				     ordinal, devices, devices);
	st = host_visible_device(xdm_params_string(params, "visible"), devices, ordinal, &device);
	if (st)
		return st;
	if (xdm_params_has(params, "memory")) {
		memory = xdm_params_size(params, "memory");
		if (!memory)
			return xdm_error_set(XDM_E_CONFIG,
					     "host platform: memory must be more than 0 bytes");
	} else {
		st = host_physical_memory(&memory);
		if (st)
			return st;
	}

	p = calloc(1, sizeof(*p));
	if (!p)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "host platform: no memory for the state of device %" PRIu32,
				     ordinal);
	p->ordinal = ordinal;
	p->device = device;
	p->memory = memory;
	host_stream_set_init(&p->streams);
	xdm_layer_set_priv(self, p);
	return XDM_OK;
}

static void host_platform_fini(struct xdm_layer *self)
{
	struct host_platform *p = xdm_layer_priv(self);

	if (p)
		host_stream_set_fini(&p->streams);
	free(p);
	xdm_layer_set_priv(self, NULL);
}

static enum xdm_status host_device_info(struct xdm_layer *self, struct xdm_device_info *out)
{
	const struct host_platform *p = xdm_layer_priv(self);

	if (!out)
		return host_null("device_info", "output");
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "host");
	/* Fixed per ordinal, so that a budget keyed by UUID is shared by
	 * every process using the same host device: "host" in hex, then the
	 * device (the ordinal, unless visible= reorders them). */
	snprintf(out->uuid, sizeof(out->uuid), "686f7374-0000-4000-8000-%012" PRIx32,
		 p->device);
	out->total_bytes = p->memory;
	snprintf(out->platform, sizeof(out->platform), "host");
	return XDM_OK;
}

/*
 * Streams need nothing from the layer, and the table is usable without one
 * (self NULL, as the tests call it); a layer's streams are also remembered,
 * so that a framework's handle can be checked against them.
 */
static struct host_stream_set *host_streams_of(struct xdm_layer *self)
{
	struct host_platform *p = self ? xdm_layer_priv(self) : NULL;

	return p ? &p->streams : NULL;
}

static enum xdm_status host_op_stream_create(struct xdm_layer *self, void **stream)
{
	struct host_stream_set *set = host_streams_of(self);
	struct host_stream *s;
	int err;

	if (!stream)
		return host_null("stream_create", "output");
	err = host_stream_create(&s);
	if (err)
		return host_errno(err, "cannot start a stream's worker thread");
	err = set ? host_stream_set_add(set, s) : 0;
	if (err) {
		host_stream_destroy(s);
		return host_errno(err, "cannot remember a new stream");
	}
	*stream = s;
	return XDM_OK;
}

static void host_op_stream_destroy(struct xdm_layer *self, void *stream)
{
	struct host_stream_set *set = host_streams_of(self);

	if (set)
		host_stream_set_remove(set, stream);
	host_stream_destroy(stream);
}

static enum xdm_status host_op_stream_resolve(struct xdm_layer *self, void *handle,
					      void **canonical)
{
	struct host_stream_set *set = host_streams_of(self);

	if (!canonical)
		return host_null("stream_resolve", "output");
	if (!set)
		return host_null("stream_resolve", "layer");
	return host_stream_set_resolve(set, handle, canonical);
}

static enum xdm_status host_op_stream_synchronize(struct xdm_layer *self, void *stream)
{
	int err;

	if (!stream)
		return host_null("stream_synchronize", "stream");
	err = host_stream_synchronize(stream);
	if (err == EBUSY)
		return host_capture_broken("stream_synchronize", "a stream being captured");
	if (err == EDEADLK)
		return xdm_error_set(XDM_E_STREAM_MISUSE,
				     "host platform: stream_synchronize was called by a host function "
				     "running on that same stream, which would wait for itself forever");
	return err ? host_errno(err, "stream_synchronize") : XDM_OK;
}

static enum xdm_status host_op_event_create(struct xdm_layer *self, void **event)
{
	struct host_event *ev;
	int err;

	if (!event)
		return host_null("event_create", "output");
	err = host_event_create(&ev);
	if (err)
		return host_errno(err, "cannot create an event");
	*event = ev;
	return XDM_OK;
}

static void host_op_event_destroy(struct xdm_layer *self, void *event)
{
	host_event_destroy(event);
}

static enum xdm_status host_op_event_record(struct xdm_layer *self, void *event, void *stream)
{
	int err;

	if (!event)
		return host_null("event_record", "event");
	if (!stream)
		return host_null("event_record", "stream");
	err = host_event_record(event, stream);
	return err ? host_errno(err, "cannot queue an event record") : XDM_OK;
}

static enum xdm_status host_op_stream_wait_event(struct xdm_layer *self, void *stream, void *event)
{
	int err;

	if (!stream)
		return host_null("stream_wait_event", "stream");
	if (!event)
		return host_null("stream_wait_event", "event");
	err = host_stream_wait_event(stream, event);
	if (err == EBUSY)
		return host_capture_broken("stream_wait_event", "a wait across a capture's edge");
	return err ? host_errno(err, "cannot queue an event wait") : XDM_OK;
}

static enum xdm_status host_op_event_query(struct xdm_layer *self, void *event, bool *done)
{
	if (!event)
		return host_null("event_query", "event");
	if (!done)
		return host_null("event_query", "output");
	if (host_event_capture_check(event))
		return host_capture_broken("event_query", "an event recorded in a capture");
	*done = host_event_query(event);
	return XDM_OK;
}

static enum xdm_status host_op_event_synchronize(struct xdm_layer *self, void *event)
{
	if (!event)
		return host_null("event_synchronize", "event");
	if (host_event_capture_check(event))
		return host_capture_broken("event_synchronize", "an event recorded in a capture");
	host_event_synchronize(event);
	return XDM_OK;
}

static enum xdm_status host_op_stream_capture(struct xdm_layer *self, void *stream,
					      uint64_t *capture)
{
	if (!stream)
		return host_null("stream_capture", "stream");
	if (!capture)
		return host_null("stream_capture", "output");
	*capture = host_stream_capture_id(stream);
	return XDM_OK;
}

static enum xdm_status host_op_launch_host_func(struct xdm_layer *self, void *stream,
						void (*fn)(void *arg), void *arg)
{
	int err;

	if (!stream)
		return host_null("launch_host_func", "stream");
	if (!fn)
		return host_null("launch_host_func", "function");
	err = host_stream_launch(stream, fn, arg);
	return err ? host_errno(err, "cannot queue a host function") : XDM_OK;
}

static enum xdm_status host_op_memset_async(struct xdm_layer *self, uint64_t ptr, int value,
					    size_t bytes, void *stream)
{
	int err;

	if (!stream)
		return host_null("memset_async", "stream");
	if (!bytes)
		return XDM_OK;
	if (!ptr)
		return xdm_error_set(XDM_E_INVALID,
				     "host platform: memset_async of %zu bytes at address 0", bytes);
	err = host_stream_memset(stream, (void *)(uintptr_t)ptr, value, bytes);
	return err ? host_errno(err, "cannot queue a memset") : XDM_OK;
}

static enum xdm_status host_op_memcpy_async(struct xdm_layer *self, uint64_t dst, uint64_t src,
					    size_t bytes, void *stream)
{
	int err;

	if (!stream)
		return host_null("memcpy_async", "stream");
	if (!bytes)
		return XDM_OK;
	if (!dst || !src)
		return xdm_error_set(XDM_E_INVALID,
				     "host platform: memcpy_async of %zu bytes with a %s address of 0",
				     bytes, dst ? "source" : "destination");
	err = host_stream_memcpy(stream, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
				 bytes);
	return err ? host_errno(err, "cannot queue a memcpy") : XDM_OK;
}

static const struct xdm_param_spec host_platform_params[] = {
	{ "devices", XDM_PARAM_UINT, "1",
	  "how many host devices exist; ordinals from this number on have none" },
	{ "memory", XDM_PARAM_SIZE, NULL,
	  "total memory each host device reports (default: the machine's physical memory)" },
	{ "visible", XDM_PARAM_STRING, NULL,
	  "the host devices this process sees, in its order, as CUDA_VISIBLE_DEVICES: "
	  "\"1,0\" makes ordinal 0 device 1 (default: ordinal k is device k)" },
	{ NULL },
};

const struct xdm_ops host_platform_ops = {
	XDM_OPS_HEADER("host", XDM_KIND_PLATFORM),
	.description = "host memory, with streams run by one worker thread each",
	.params = host_platform_params,
	.init = host_platform_init,
	.fini = host_platform_fini,
	/* A pool, as on cuda: the pair the benchmarks measure (doc/design.md). */
	.default_stack = "pool | host",
	.device_info = host_device_info,
	.stream_create = host_op_stream_create,
	.stream_destroy = host_op_stream_destroy,
	.stream_synchronize = host_op_stream_synchronize,
	.event_create = host_op_event_create,
	.event_destroy = host_op_event_destroy,
	.event_record = host_op_event_record,
	.stream_wait_event = host_op_stream_wait_event,
	.event_query = host_op_event_query,
	.event_synchronize = host_op_event_synchronize,
	.launch_host_func = host_op_launch_host_func,
	.memset_async = host_op_memset_async,
	.memcpy_async = host_op_memcpy_async,
	.stream_resolve = host_op_stream_resolve,
	.stream_capture = host_op_stream_capture,
	.ipc_import = host_ipc_import,
	.ipc_unmap = host_ipc_unmap,
};
