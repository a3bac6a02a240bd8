/* SPDX-License-Identifier: MIT */
/*
 * streams.c - the streams workload: many streams busy at once.
 *
 * One thread goes round the streams: on each, it allocates a 64 KiB block,
 * queues work that writes into it (the subject's touch: a memset on a GPU,
 * a host function on the host platform) and frees it, all on that stream.
 * The free therefore finds the block still held by queued work, as a real
 * program's frees do, and a stream-ordered allocator has as many streams
 * with work in flight as the runtime has.  That is what pair (one idle
 * stream) and threads (one thread per stream, nothing queued) leave out:
 * how the allocator copes when the memory it is asked for is tied up in
 * work still queued on other streams.
 */
#include "config.h"

#include <stdio.h>

#include "bench.h"

struct streams_arg {
	struct bench_subject *s;
	uint32_t nstreams;
	uint64_t iters;			/* pairs per stream */
};

static int streams_once(void *arg, uint64_t *ns)
{
	struct streams_arg *a = arg;
	struct bench_subject *s = a->s;
	char why[BENCH_ERR_LEN];
	struct xdm_block blk;
	uint64_t t0 = bench_now_ns();

	for (uint64_t i = 0; i < a->iters; i++) {
		for (uint32_t st = 0; st < a->nstreams; st++) {
			if (s->ops->allocate(s, BENCH_STREAMS_BYTES, st, &blk)) {
				bench_say_failure(s, "streams", "allocate", BENCH_STREAMS_BYTES, st);
				return -1;
			}
			if (s->ops->touch(s, &blk, st, why, sizeof(why))) {
				fprintf(stderr, "xdm-bench: %s: streams: queuing the touch of %zu bytes on stream %u failed: %s\n",
					s->name, blk.bytes, st, why);
				/* Best effort: the run has failed already. */
				s->ops->deallocate(s, &blk);
				return -1;
			}
			if (s->ops->deallocate(s, &blk)) {
				bench_say_failure(s, "streams", "free", BENCH_STREAMS_BYTES, st);
				return -1;
			}
		}
	}
	*ns = bench_now_ns() - t0;
	return 0;
}

static const char *streams_lacks(const struct bench_subject *s)
{
	if (s->ops->touch)
		return NULL;
	return "it has no way to queue work on a block (no touch operation)";
}

/* Every stream the subject has, but no more than --streams (default 16). */
static uint32_t streams_used(const struct bench_opts *o, struct bench_subject *s)
{
	uint32_t cap = o->streams_set ? o->streams : BENCH_DEFAULT_STREAMS;
	uint32_t n = s->ops->stream_count(s);

	if (n == 0)
		n = 1;
	return n < cap ? n : cap;
}

int bench_run_streams(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : BENCH_DEFAULT_STREAMS_ITERS;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct streams_arg args[BENCH_MAX_SUBJECTS];
	bool run[BENCH_MAX_SUBJECTS];
	int rc;

	if (bench_select(ctx, BENCH_W_STREAMS, streams_lacks, run, &rc) == 0)
		return rc;
	for (size_t k = 0; k < ctx->nsubjects; k++)
		args[k] = (struct streams_arg){ &ctx->subjects[k],
						streams_used(o, &ctx->subjects[k]), n };
	rc = bench_measure_some(ctx, streams_once, args, sizeof(args[0]), samples, run);
	if (rc)
		return rc;
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_result r = { .subject = &ctx->subjects[k],
					  .workload = BENCH_W_STREAMS };

		if (!run[k])
			continue;
		snprintf(r.param, sizeof(r.param), "%u stream%s", args[k].nstreams,
			 args[k].nstreams == 1 ? "" : "s");
		r.bytes = BENCH_STREAMS_BYTES;
		r.threads = 1;
		r.streams = args[k].nstreams;
		r.ops = n * args[k].nstreams;
		r.ops_requested = r.ops;
		/* Per pair; one thread issues them all, so ops/s is every stream's together. */
		bench_summarize_totals(&r, samples[k], o->repeat);
		rc = bench_report_result(ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}
