/* SPDX-License-Identifier: MIT */
/*
 * reserved.c - peak reserved over peak live: what a pool held from
 * below at its worst, against the most bytes the workload had asked for at
 * once.  1 is a pool that wasted nothing; 2 held twice what was in use.
 *
 * Each subject keeps its figure its own way (the xdm pool layer's
 * reserved_peak attribute, the driver pool's RESERVED_MEM_HIGH); the
 * workloads only restart it before they start and read it after they end,
 * outside every timing.  A subject without a pool has no figure, and that
 * is not an error.
 */
#include "config.h"

#include "bench.h"

void bench_reserved_begin(struct bench_ctx *ctx, bool *has)
{
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];

		has[k] = s->ops->reserved_reset && s->ops->reserved_peak &&
			 s->ops->reserved_reset(s);
	}
}

void bench_reserved_end(struct bench_ctx *ctx, bool *has, uint64_t *peak)
{
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];

		peak[k] = 0;
		if (has[k])
			has[k] = s->ops->reserved_peak(s, &peak[k]);
	}
}
