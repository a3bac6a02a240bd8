/* SPDX-License-Identifier: MIT */
/*
 * bench_subject_xdm.c - an xdm runtime as a bench subject.
 *
 * The runtime is either the process-wide one of the device (configured by
 * XDM_CONFIG, the system file or the embedded default) or a private one
 * around --stack / --platform, which is destroyed at the end.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct xdm_subject {
	struct xdm_runtime *rt;
	bool owned;		/* from xdm_runtime_create(): ours to destroy */
};

/* Every block the bench takes carries this tag, for logs and the mount. */
static const char bench_tag[] = "xdm-bench";

static int xs_allocate(struct bench_subject *s, size_t bytes, uint32_t stream,
		       struct xdm_block *out)
{
	struct xdm_subject *x = s->priv;

	return xdm_allocate(x->rt, bytes, stream, bench_tag, out) == XDM_OK ? 0 : -1;
}

static int xs_deallocate(struct bench_subject *s, struct xdm_block *blk)
{
	struct xdm_subject *x = s->priv;

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

static void xs_destroy(struct bench_subject *s)
{
	struct xdm_subject *x = s->priv;

	if (!x)
		return;
	/* A singleton belongs to the process: the library tears it down. */
	if (x->owned && xdm_runtime_destroy(x->rt) != XDM_OK)
		fprintf(stderr, "xdm-bench: warning: destroying the runtime failed: %s\n",
			xdm_last_error_message());
	free(x);
	s->priv = NULL;
}

static const struct bench_subject_ops xdm_subject_ops = {
	.allocate = xs_allocate,
	.deallocate = xs_deallocate,
	.stream_count = xs_stream_count,
	.settle = xs_settle,
	.counters = xs_counters,
	.strerror = xs_strerror,
	.destroy = xs_destroy,
};

static void describe(struct bench_ctx *ctx, struct xdm_runtime *rt)
{
	const struct bench_opts *o = &ctx->opts;

	/* Neither failure spoils a measurement: say so and show what is known. */
	if (xdm_runtime_device(rt, &ctx->dev) != XDM_OK) {
		fprintf(stderr, "xdm-bench: warning: cannot describe device %u: %s\n",
			o->ordinal, xdm_last_error_message());
		memset(&ctx->dev, 0, sizeof(ctx->dev));
		snprintf(ctx->dev.name, sizeof(ctx->dev.name), "unknown");
	}
	if (xdm_runtime_stack_spec(rt, ctx->stack, sizeof(ctx->stack)) != XDM_OK) {
		fprintf(stderr, "xdm-bench: warning: cannot read the stack spec: %s\n",
			xdm_last_error_message());
		snprintf(ctx->stack, sizeof(ctx->stack), "%s", o->stack ? o->stack : "unknown");
	}
}

/* Opens the runtime the options ask for.  0, or an exit code, said. */
int bench_subject_xdm_open(struct bench_ctx *ctx, struct bench_subject *s)
{
	const struct bench_opts *o = &ctx->opts;
	struct xdm_subject *x;
	enum xdm_status st;

	x = calloc(1, sizeof(*x));
	if (!x) {
		fprintf(stderr, "xdm-bench: out of memory\n");
		return BENCH_EXIT_FAIL;
	}
	x->owned = o->stack || o->platform;
	if (x->owned)
		st = xdm_runtime_create(o->ordinal, o->platform, o->stack, &x->rt);
	else
		st = xdm_runtime_get(o->ordinal, &x->rt);
	if (st != XDM_OK)
		goto fail;

	s->ops = &xdm_subject_ops;
	s->priv = x;
	snprintf(s->name, sizeof(s->name), "xdm");
	describe(ctx, x->rt);
	snprintf(s->desc, sizeof(s->desc), "%s", ctx->stack);
	return 0;
fail:
	if (o->stack)
		fprintf(stderr, "xdm-bench: cannot create a runtime for device %u with stack \"%s\": %s\n",
			o->ordinal, o->stack, xdm_last_error_message());
	else if (o->platform)
		fprintf(stderr, "xdm-bench: cannot create a runtime for device %u on platform \"%s\": %s\n",
			o->ordinal, o->platform, xdm_last_error_message());
	else
		fprintf(stderr, "xdm-bench: cannot get the runtime of device %u: %s\n",
			o->ordinal, xdm_last_error_message());
	free(x);
	return BENCH_EXIT_FAIL;
}
