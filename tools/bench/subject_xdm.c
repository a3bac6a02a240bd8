/* SPDX-License-Identifier: MIT */
/*
 * subject_xdm.c - an xdm runtime as a bench subject.
 *
 * The runtime is either the process-wide one of the device (configured by
 * XDM_CONFIG, the system file or the embedded default) or a private one
 * around --stack / --platform, which is destroyed at the end.
 *
 * Beside allocate and free it can touch a block from a stream (streams),
 * declare a cross-stream use (cross) and report what a layer named "pool"
 * reserved at its peak (the fragmentation figure).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* How the streams workload's touch reaches the memory of the runtime. */
enum xs_touch {
	XS_TOUCH_NONE,		/* not set up yet */
	XS_TOUCH_HOST,		/* host platform: a host function on the stream */
	XS_TOUCH_CUDA,		/* cuda platform: cuMemsetD8Async on the native stream */
};

struct xdm_subject {
	struct xdm_runtime *rt;
	bool owned;		/* from xdm_runtime_create(): ours to destroy */
	enum xs_touch touch;
	void **handles;		/* XS_TOUCH_CUDA: each stream's CUstream */
	uint32_t nhandles;
#ifdef XDM_BENCH_CUDA
	struct bench_cuda_touch *cuda;
#endif
	uint32_t pool_layer;	/* the layer named "pool", found by reserved_reset */
	bool native;		/* --native: the framework entry on native_handle */
	void *native_handle;
};

/* The size of the host page the touch writes to, one byte each. */
#define XS_PAGE 4096u

/* Every block the bench takes carries this tag, for logs and the mount. */
static const char bench_tag[] = "xdm-bench";

static int xs_allocate(struct bench_subject *s, size_t bytes, uint32_t stream,
		       struct xdm_block *out)
{
	struct xdm_subject *x = s->priv;
	void *ptr;

	if (!x->native)
		return xdm_allocate(x->rt, bytes, stream, bench_tag, out) == XDM_OK ? 0 : -1;
	/* What a framework has of its block: the address (and the size it asked). */
	if (xdm_native_allocate(x->rt, bytes, x->native_handle, bench_tag, &ptr) != XDM_OK)
		return -1;
	memset(out, 0, sizeof(*out));
	out->ptr = (uintptr_t)ptr;
	out->bytes = bytes;
	out->stream = stream;
	return 0;
}

static int xs_deallocate(struct bench_subject *s, struct xdm_block *blk)
{
	struct xdm_subject *x = s->priv;

	if (x->native)
		return xdm_native_free(x->rt, (void *)(uintptr_t)blk->ptr, x->native_handle) ==
		       XDM_OK ? 0 : -1;
	return xdm_deallocate(x->rt, blk) == XDM_OK ? 0 : -1;
}

static uint32_t xs_stream_count(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;

	return xdm_stream_count(x->rt);
}

/*
 * Frees are queued on their streams; until each stream has run its queue
 * and the runtime reaped them, the counters still show them.  Synchronize
 * every owned stream first so that "outstanding" after settle means leaked.
 */
static int xs_settle(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;
	uint32_t n = xdm_stream_count(x->rt);

	for (uint32_t i = 0; i < n; i++) {
		if (xdm_stream_synchronize(x->rt, i) != XDM_OK)
			return -1;
	}
	/* Reaping also finishes a log layer's writing, before the next timed run. */
	return xdm_reap_pending(x->rt) == XDM_OK ? 0 : -1;
}

static bool xs_counters(struct bench_subject *s, struct bench_counters *out)
{
	struct xdm_subject *x = s->priv;
	struct xdm_stats st;

	xdm_runtime_stats(x->rt, &st);
	out->bytes_outstanding = st.bytes_outstanding;
	out->blocks_outstanding = st.blocks_outstanding;
	out->bytes_peak = st.bytes_peak;
	out->allocs = st.allocs;
	out->frees = st.frees;
	out->failures = st.failures;
	out->stack_bytes_outstanding = xdm_bytes_outstanding(x->rt);
	return true;
}

static void xs_strerror(struct bench_subject *s, char *buf, size_t len)
{
	const struct xdm_error *e = xdm_last_error();

	if (e->message[0])
		snprintf(buf, len, "%s", e->message);
	else
		snprintf(buf, len, "%s", xdm_strerror(e->code));
}

/* ---- streams: touching a block from its stream ------------------------- */

/*
 * Runs on the host platform's stream worker: one byte into each page of the
 * first BENCH_STREAMS_BYTES of the block, enough to fault every page in and
 * to have the block in use, cheap enough that the stream keeps pace with
 * the thread that queues the work.
 */
static void xs_touch_pages(void *arg)
{
	unsigned char *p = arg;

	for (size_t off = 0; off < BENCH_STREAMS_BYTES; off += XS_PAGE)
		p[off] = 1;
}

static int xs_touch(struct bench_subject *s, const struct xdm_block *blk, uint32_t stream,
		    char *why, size_t len)
{
	struct xdm_subject *x = s->priv;

	switch (x->touch) {
	case XS_TOUCH_HOST:
		if (blk->bytes < BENCH_STREAMS_BYTES) {
			snprintf(why, len, "the host touch writes the first %u bytes, and the block has %zu",
				 BENCH_STREAMS_BYTES, blk->bytes);
			return -1;
		}
		if (xdm_stream_launch_host(x->rt, stream, xs_touch_pages,
					   (void *)(uintptr_t)blk->ptr) == XDM_OK)
			return 0;
		snprintf(why, len, "xdm_stream_launch_host: %s", xdm_last_error_message());
		return -1;
#ifdef XDM_BENCH_CUDA
	case XS_TOUCH_CUDA:
		if (stream >= x->nhandles) {
			snprintf(why, len, "stream %u has no native handle", stream);
			return -1;
		}
		return bench_cuda_touch(x->cuda, blk->ptr, blk->bytes, x->handles[stream], why, len);
#endif
	default:
		snprintf(why, len, "the touch was not set up");
		return -1;
	}
}

#ifdef XDM_BENCH_CUDA
/* The driver and every stream's CUstream, so that touch asks xdm nothing. */
static int xs_touch_cuda_ready(struct xdm_subject *x, char *why, size_t len)
{
	uint32_t n = xdm_stream_count(x->rt);

	x->handles = calloc(n ? n : 1, sizeof(*x->handles));
	if (!x->handles) {
		snprintf(why, len, "out of memory for %u stream handles", n);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (xdm_stream_handle(x->rt, i, &x->handles[i]) != XDM_OK) {
			snprintf(why, len, "xdm_stream_handle(%u): %s", i, xdm_last_error_message());
			goto fail;
		}
	}
	x->nhandles = n;
	if (bench_cuda_touch_open(xdm_runtime_ordinal(x->rt), &x->cuda, why, len))
		goto fail;
	x->touch = XS_TOUCH_CUDA;
	return 0;
fail:
	free(x->handles);
	x->handles = NULL;
	x->nhandles = 0;
	return -1;
}
#endif

/* Chooses the touch by the runtime's platform: host memory or device memory. */
static int xs_touch_ready(struct xdm_subject *x, char *why, size_t len)
{
	struct xdm_device_info info;

	if (x->touch != XS_TOUCH_NONE)
		return 0;
	if (xdm_runtime_device(x->rt, &info) != XDM_OK) {
		snprintf(why, len, "xdm_runtime_device: %s", xdm_last_error_message());
		return -1;
	}
	if (strcmp(info.platform, "host") == 0) {
		x->touch = XS_TOUCH_HOST;
		return 0;
	}
	if (strcmp(info.platform, "cuda") == 0) {
#ifdef XDM_BENCH_CUDA
		return xs_touch_cuda_ready(x, why, len);
#else
		snprintf(why, len, "this xdm-bench was built without the CUDA toolkit headers, so it cannot queue a memset on a cuda stream");
		return -1;
#endif
	}
	snprintf(why, len, "the bench knows no way to write into memory of the '%s' platform from a stream",
		 info.platform);
	return -1;
}

/* ---- cross: a use on another stream ------------------------------------ */

static int xs_cross_use(struct bench_subject *s, const struct xdm_block *blk, uint32_t stream,
			const char **call)
{
	struct xdm_subject *x = s->priv;
	struct xdm_block_id id = xdm_block_id_of(blk);

	if (xdm_prepare_block_use(x->rt, id, stream, XDM_ACCESS_READ_WRITE) != XDM_OK) {
		*call = "xdm_prepare_block_use";
		return -1;
	}
	/* A real program queues its kernel here; the bench measures the bookkeeping. */
	if (xdm_finish_block_use(x->rt, id, stream, XDM_ACCESS_READ_WRITE) != XDM_OK) {
		*call = "xdm_finish_block_use";
		return -1;
	}
	return 0;
}

static int xs_ready(struct bench_subject *s, enum bench_workload w, char *why, size_t len)
{
	struct xdm_subject *x = s->priv;
	uint32_t n;

	switch (w) {
	case BENCH_W_STREAMS:
		return xs_touch_ready(x, why, len);
	case BENCH_W_CROSS:
		n = xdm_stream_count(x->rt);
		if (n < 2) {
			snprintf(why, len, "a use on stream 1 needs two streams, and the runtime has %u", n);
			return -1;
		}
		if (!xdm_supports_block_use_tracking(x->rt)) {
			snprintf(why, len, "the stack does not support block-use tracking (xdm_supports_block_use_tracking is false)");
			return -1;
		}
		return 0;
	default:
		return 0;
	}
}

/* ---- the pool layer's reserved peak ------------------------------------ */

/* The topmost layer named "pool"; false when the stack has none. */
static bool xs_find_pool(struct xdm_subject *x)
{
	uint32_t n = xdm_runtime_layer_count(x->rt);

	for (uint32_t i = 0; i < n; i++) {
		const char *name = xdm_runtime_layer_name(x->rt, i);

		if (name && strcmp(name, "pool") == 0) {
			x->pool_layer = i;
			return true;
		}
	}
	return false;
}

/*
 * A pool keeps what it reserved for earlier workloads.  Where it can give
 * wholly free memory back (a "trim" attribute), it does so first, as the
 * cuMemAllocAsync anchor trims its pool: both then reserve afresh for the
 * workload.  Writing 0 to reserved_peak restarts the peak from what is
 * reserved now.  A stack without a pool, or a pool without these
 * attributes, simply has no figure.
 */
static bool xs_reserved_reset(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;

	if (!xs_find_pool(x))
		return false;
	if (xs_settle(s))
		return false;
	(void)xdm_layer_attr_store(x->rt, x->pool_layer, "trim", "1");
	return xdm_layer_attr_store(x->rt, x->pool_layer, "reserved_peak", "0") == XDM_OK;
}

/* The attribute is bytes in decimal and a newline. */
static bool xs_reserved_peak(struct bench_subject *s, uint64_t *bytes)
{
	struct xdm_subject *x = s->priv;
	unsigned long long v;
	char buf[64], *end;

	if (xdm_layer_attr_show(x->rt, x->pool_layer, "reserved_peak", buf, sizeof(buf)) != XDM_OK)
		return false;
	if (buf[0] < '0' || buf[0] > '9')
		goto bad;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || (*end != '\n' && *end != '\0'))
		goto bad;
	*bytes = v;
	return true;
bad:
	fprintf(stderr, "xdm-bench: warning: %s: the pool's reserved_peak reads '%.20s', not a number of bytes\n",
		s->name, buf);
	return false;
}

static void xs_destroy(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;

	if (!x)
		return;
#ifdef XDM_BENCH_CUDA
	if (x->cuda)
		bench_cuda_touch_close(x->cuda);
#endif
	free(x->handles);
	/* A singleton belongs to the process: the library tears it down. */
	if (x->owned && xdm_runtime_destroy(x->rt) != XDM_OK)
		fprintf(stderr, "xdm-bench: warning: destroying the runtime failed: %s\n",
			xdm_last_error_message());
	free(x);
	s->priv = NULL;
}

static struct xdm_runtime *xs_runtime(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;

	return x->rt;
}

static const struct bench_subject_ops xdm_subject_ops = {
	.allocate = xs_allocate,
	.deallocate = xs_deallocate,
	.stream_count = xs_stream_count,
	.settle = xs_settle,
	.counters = xs_counters,
	.strerror = xs_strerror,
	.destroy = xs_destroy,
	.ready = xs_ready,
	.touch = xs_touch,
	.cross_use = xs_cross_use,
	.reserved_reset = xs_reserved_reset,
	.reserved_peak = xs_reserved_peak,
	.runtime = xs_runtime,
};

static void describe(const struct bench_opts *o, uint32_t ordinal, struct xdm_runtime *rt,
		     struct xdm_device_info *dev, char *stack, size_t stack_len)
{
	/* Neither failure spoils a measurement: say so and show what is known. */
	if (xdm_runtime_device(rt, dev) != XDM_OK) {
		fprintf(stderr, "xdm-bench: warning: cannot describe device %u: %s\n", ordinal,
			xdm_last_error_message());
		memset(dev, 0, sizeof(*dev));
		snprintf(dev->name, sizeof(dev->name), "unknown");
	}
	if (xdm_runtime_stack_spec(rt, stack, stack_len) != XDM_OK) {
		fprintf(stderr, "xdm-bench: warning: cannot read the stack spec: %s\n",
			xdm_last_error_message());
		snprintf(stack, stack_len, "%s", o->stack ? o->stack : "unknown");
	}
}

/* --compare: a private runtime around its own stack, named xdm2. */
int bench_subject_compare_open(const struct bench_opts *o, uint32_t ordinal,
			       struct bench_subject *s)
{
	struct xdm_subject *x = calloc(1, sizeof(*x));

	if (!x) {
		fprintf(stderr, "xdm-bench: out of memory\n");
		return BENCH_EXIT_FAIL;
	}
	x->owned = true;
	if (xdm_runtime_create(ordinal, o->platform, o->compare, &x->rt) != XDM_OK) {
		fprintf(stderr, "xdm-bench: --compare: cannot create a runtime for device %u with stack \"%s\": %s\n",
			ordinal, o->compare, xdm_last_error_message());
		free(x);
		return BENCH_EXIT_FAIL;
	}
	s->ops = &xdm_subject_ops;
	s->priv = x;
	s->compared = true;
	snprintf(s->name, sizeof(s->name), "xdm2");
	if (xdm_runtime_stack_spec(x->rt, s->desc, sizeof(s->desc)) != XDM_OK)
		snprintf(s->desc, sizeof(s->desc), "%s", o->compare);
	return 0;
}

/*
 * A private runtime where --stack or --platform asks for one (the platform
 * string goes to xdm_runtime_create as given, parameters and all: "host
 * devices=2"), else the process-wide runtime of the ordinal.
 */
int bench_subject_xdm_open_on(const struct bench_opts *o, uint32_t ordinal, bool probe,
			      struct bench_subject *s, struct xdm_device_info *dev,
			      char *stack, size_t stack_len)
{
	struct xdm_subject *x;
	enum xdm_status st;

	x = calloc(1, sizeof(*x));
	if (!x) {
		fprintf(stderr, "xdm-bench: out of memory\n");
		return BENCH_EXIT_FAIL;
	}
	x->owned = o->stack || o->platform;
	if (x->owned)
		st = xdm_runtime_create(ordinal, o->platform, o->stack, &x->rt);
	else
		st = xdm_runtime_get(ordinal, &x->rt);
	if (st != XDM_OK)
		goto fail;

	s->ops = &xdm_subject_ops;
	s->priv = x;
	x->native = o->native_name != NULL;
	x->native_handle = o->native;
	snprintf(s->name, sizeof(s->name), "xdm");
	describe(o, ordinal, x->rt, dev, stack, stack_len);
	if (x->native)
		snprintf(s->desc, sizeof(s->desc), "%s, native %s", stack, o->native_name);
	else
		snprintf(s->desc, sizeof(s->desc), "%s", stack);
	return 0;
fail:
	free(x);
	if (probe && st == XDM_E_NO_DEVICE)
		return BENCH_NO_DEVICE;
	if (o->stack)
		fprintf(stderr, "xdm-bench: cannot create a runtime for device %u with stack \"%s\": %s\n",
			ordinal, o->stack, xdm_last_error_message());
	else if (o->platform)
		fprintf(stderr, "xdm-bench: cannot create a runtime for device %u on platform \"%s\": %s\n",
			ordinal, o->platform, xdm_last_error_message());
	else
		fprintf(stderr, "xdm-bench: cannot get the runtime of device %u: %s\n", ordinal,
			xdm_last_error_message());
	return BENCH_EXIT_FAIL;
}

/* Opens the runtime the options ask for.  0, or an exit code, said. */
int bench_subject_xdm_open(struct bench_ctx *ctx, struct bench_subject *s)
{
	return bench_subject_xdm_open_on(&ctx->opts, ctx->opts.ordinal, false, s, &ctx->dev,
					 ctx->stack, sizeof(ctx->stack));
}
