/* SPDX-License-Identifier: MIT */
/*
 * anchors.c - whether the CUDA driver's own allocators join the run
 * (--anchors), and the event_edge measurement that comes with them.
 *
 * auto adds them only beside a runtime on the cuda platform: a ratio of a
 * host-memory stack to the GPU driver compares nothing, and the CI machines
 * that run the host platform have no driver to open.  The anchors use the
 * runtime's device ordinal and as many streams as the runtime has, so that
 * the threads workload gives each thread its own stream in both.  With
 * --devices each anchor is a group, one part per listed device, and auto
 * asks that every listed device be on cuda.
 *
 * Built without cuda.h (XDM_BENCH_CUDA undefined), the bench keeps its
 * options and says why there are no anchors where someone expected some.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "bench.h"

#ifdef XDM_BENCH_CUDA
static const struct {
	enum bench_cuda_kind kind;
	const char *name;
} kinds[] = {
	{ BENCH_CUDA_SYNC, "cuMemAlloc" },
	{ BENCH_CUDA_ASYNC, "cuMemAllocAsync" },
};

/*
 * --devices: the anchor once per device, each part on its own device's
 * primary context and with as many streams as that device's runtime, so
 * that a thread on device k calls the driver in device k's context, as a
 * thread of the runtime on device k does.  All parts or none: a group
 * missing a device would not measure the same thing as xdm's.
 */
static int open_group(struct bench_ctx *ctx, size_t i, struct bench_subject *g, char *why,
		      size_t len)
{
	struct bench_subject *x = &ctx->subjects[0];
	char part_why[BENCH_ERR_LEN - 32];	/* room for "device N: " in why */

	if (bench_group_init(g, kinds[i].name, ctx->ndevices)) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	g->anchor = true;
	for (size_t d = 0; d < ctx->ndevices; d++) {
		struct bench_subject *p = &x->parts[d];

		if (bench_cuda_open(ctx->devices[d].ordinal, kinds[i].kind,
				    p->ops->stream_count(p), &g->parts[d], part_why,
				    sizeof(part_why))) {
			snprintf(why, len, "device %u: %s", ctx->devices[d].ordinal, part_why);
			g->ops->destroy(g);
			return -1;
		}
		g->nparts++;
		bench_group_name_part(g, d, ctx->devices[d].ordinal);
	}
	snprintf(g->desc, sizeof(g->desc), "%s", g->parts[0].desc);
	return 0;
}

static int open_all(struct bench_ctx *ctx)
{
	struct bench_subject *x = &ctx->subjects[0];
	uint32_t nstreams = x->ops->stream_count(x);
	char why[BENCH_ERR_LEN], where[32];

	if (ctx->ndevices)
		snprintf(where, sizeof(where), "every listed device");
	else
		snprintf(where, sizeof(where), "device %u", ctx->opts.ordinal);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct bench_subject *s = &ctx->subjects[ctx->nsubjects];
		int rc;

		if (ctx->ndevices)
			rc = open_group(ctx, i, s, why, sizeof(why));
		else
			rc = bench_cuda_open(ctx->opts.ordinal, kinds[i].kind, nstreams, s, why,
					     sizeof(why));
		if (rc) {
			if (ctx->opts.anchors == BENCH_ANCHORS_ON) {
				fprintf(stderr, "xdm-bench: --anchors on: cannot measure %s on %s: %s.\n",
					kinds[i].name, where, why);
				return BENCH_EXIT_FAIL;
			}
			/* auto: the runtime is on cuda, so this is rare; say it and go on. */
			fprintf(stderr, "xdm-bench: warning: no %s anchor on %s: %s\n",
				kinds[i].name, where, why);
			continue;
		}
		/* event_edge belongs with cross, which a group does not run. */
		if (kinds[i].kind == BENCH_CUDA_ASYNC && !ctx->ndevices)
			ctx->edge_subject = s;
		ctx->nsubjects++;
	}
	return 0;
}
#endif

/* auto: every device the runtimes run on is a cuda device. */
static bool all_cuda(const struct bench_ctx *ctx)
{
	if (!ctx->ndevices)
		return strcmp(ctx->dev.platform, "cuda") == 0;
	for (size_t d = 0; d < ctx->ndevices; d++)
		if (strcmp(ctx->devices[d].info.platform, "cuda") != 0)
			return false;
	return true;
}

int bench_anchors_open(struct bench_ctx *ctx)
{
	switch (ctx->opts.anchors) {
	case BENCH_ANCHORS_OFF:
		return 0;
	case BENCH_ANCHORS_AUTO:
		if (!all_cuda(ctx))
			return 0;
		break;
	case BENCH_ANCHORS_ON:
		break;
	}
#ifdef XDM_BENCH_CUDA
	return open_all(ctx);
#else
	if (ctx->opts.anchors == BENCH_ANCHORS_ON) {
		fprintf(stderr, "xdm-bench: --anchors on: this xdm-bench was built without the CUDA toolkit headers, so it cannot call the CUDA driver's allocators; configure --with-cuda=DIR and rebuild.\n");
		return BENCH_EXIT_FAIL;
	}
	fprintf(stderr, "xdm-bench: warning: the runtime is on the cuda platform, but this xdm-bench was built without the CUDA toolkit headers: no driver anchors, no ratios\n");
	return 0;
#endif
}

int bench_anchors_event_edge(struct bench_ctx *ctx)
{
	if (!ctx->edge_subject)
		return 0;
#ifdef XDM_BENCH_CUDA
	return bench_cuda_event_edge(ctx, ctx->edge_subject);
#else
	return 0;
#endif
}
