/* SPDX-License-Identifier: MIT */
/*
 * cross.c - the cross workload: what declaring a use of a block on
 * another stream costs in xdm.
 *
 * A block is allocated on stream 0 before the clock starts; the timed loop
 * declares read-write uses of it on stream 1, each one
 * xdm_prepare_block_use() then xdm_finish_block_use(), as a program does
 * around every kernel it launches on a stream other than the block's own.
 * The first use orders stream 1 after stream 0 (an event and a wait); every
 * later one finds the last write on stream 1 itself, so it queues no wait
 * and records one event, replacing the last: the steady cost of a block
 * that lives on one stream and is worked on by another.  The block is
 * freed after the clock stops.
 *
 * The driver's allocators have no such call, so the anchors do not run
 * it; their event_edge (one record and one wait) is what the report
 * divides it by.
 */
#include "config.h"

#include <stdio.h>

#include "bench.h"

#define CROSS_OWNER 0u
#define CROSS_USER 1u

struct cross_arg {
	struct bench_subject *s;
	uint64_t iters;
};

static int cross_once(void *arg, uint64_t *ns)
{
	struct cross_arg *a = arg;
	struct bench_subject *s = a->s;
	const char *call = "?";
	struct xdm_block blk;
	char why[BENCH_ERR_LEN];
	uint64_t t0, t1;
	int rc = 0;

	if (s->ops->allocate(s, BENCH_CROSS_BYTES, CROSS_OWNER, &blk)) {
		bench_say_failure(s, "cross", "allocate", BENCH_CROSS_BYTES, CROSS_OWNER);
		return -1;
	}
	t0 = bench_now_ns();
	for (uint64_t i = 0; i < a->iters; i++) {
		if (s->ops->cross_use(s, &blk, CROSS_USER, &call)) {
			s->ops->strerror(s, why, sizeof(why));
			fprintf(stderr, "xdm-bench: %s: cross: %s of a %u-byte block of stream %u on stream %u failed: %s\n",
				s->name, call, BENCH_CROSS_BYTES, CROSS_OWNER, CROSS_USER, why);
			rc = -1;
			break;
		}
	}
	t1 = bench_now_ns();
	/* The free waits on stream 1's last use: the tracking's last duty. */
	if (s->ops->deallocate(s, &blk) && rc == 0) {
		bench_say_failure(s, "cross", "free", BENCH_CROSS_BYTES, CROSS_OWNER);
		rc = -1;
	}
	*ns = t1 - t0;
	return rc;
}

static const char *cross_lacks(const struct bench_subject *s)
{
	if (s->ops->cross_use)
		return NULL;
	if (s->anchor)
		return "the driver's allocators have no block-use tracking to measure";
	return "it has no block-use tracking (no cross_use operation)";
}

int bench_run_cross(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : BENCH_DEFAULT_CROSS_ITERS;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct cross_arg args[BENCH_MAX_SUBJECTS];
	bool run[BENCH_MAX_SUBJECTS];
	int rc;

	if (bench_select(ctx, BENCH_W_CROSS, cross_lacks, run, &rc) == 0)
		return rc;
	for (size_t k = 0; k < ctx->nsubjects; k++)
		args[k] = (struct cross_arg){ &ctx->subjects[k], n };
	rc = bench_measure_some(ctx, cross_once, args, sizeof(args[0]), samples, run);
	if (rc)
		return rc;
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_result r = { .subject = &ctx->subjects[k],
					  .workload = BENCH_W_CROSS };

		if (!run[k])
			continue;
		snprintf(r.param, sizeof(r.param), "%u->%u", CROSS_OWNER, CROSS_USER);
		r.bytes = BENCH_CROSS_BYTES;
		r.threads = 1;
		r.ops = n;
		r.ops_requested = n;
		bench_summarize_totals(&r, samples[k], o->repeat);
		rc = bench_report_result(ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}
