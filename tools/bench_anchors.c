/* SPDX-License-Identifier: MIT */
/*
 * bench_anchors.c - whether the CUDA driver's own allocators join the run
 * (--anchors), and the event_edge measurement that comes with them.
 *
 * auto adds them only beside a runtime on the cuda platform: a ratio of a
 * host-memory stack to the GPU driver compares nothing, and the CI machines
 * that run the host platform have no driver to open.  The anchors use the
 * runtime's device ordinal and as many streams as the runtime has, so that
 * the threads workload gives each thread its own stream in both.
 *
 * Built without cuda.h (XDM_BENCH_CUDA undefined), the bench keeps its
 * options and says why there are no anchors where someone expected some.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "bench.h"

#ifdef XDM_BENCH_CUDA
static int open_all(struct bench_ctx *ctx)
{
	static const struct {
		enum bench_cuda_kind kind;
		const char *name;
	} kinds[] = {
		{ BENCH_CUDA_SYNC, "cuMemAlloc" },
		{ BENCH_CUDA_ASYNC, "cuMemAllocAsync" },
	};
	struct bench_subject *x = &ctx->subjects[0];
	uint32_t nstreams = x->ops->stream_count(x);
	char why[BENCH_ERR_LEN];

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct bench_subject *s = &ctx->subjects[ctx->nsubjects];

		if (bench_cuda_open(ctx, kinds[i].kind, nstreams, s, why, sizeof(why))) {
			if (ctx->opts.anchors == BENCH_ANCHORS_ON) {
				fprintf(stderr, "xdm-bench: --anchors on: cannot measure %s on device %u: %s.\n",
					kinds[i].name, ctx->opts.ordinal, why);
				return BENCH_EXIT_FAIL;
			}
			/* auto: the runtime is on cuda, so this is rare; say it and go on. */
			fprintf(stderr, "xdm-bench: warning: no %s anchor on device %u: %s\n",
				kinds[i].name, ctx->opts.ordinal, why);
			continue;
		}
		if (kinds[i].kind == BENCH_CUDA_ASYNC)
			ctx->edge_subject = s;
		ctx->nsubjects++;
	}
	return 0;
}
#endif

int bench_anchors_open(struct bench_ctx *ctx)
{
	switch (ctx->opts.anchors) {
	case BENCH_ANCHORS_OFF:
		return 0;
	case BENCH_ANCHORS_AUTO:
		if (strcmp(ctx->dev.platform, "cuda") != 0)
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
