/* SPDX-License-Identifier: MIT */
/*
 * replay.c - the replay workload: a real program's allocations and
 * frees, as the logging adaptor wrote them (--replay FILE), run against
 * every subject.
 *
 * The script comes from replay_csv.c: each step allocates the
 * logged bytes or frees an earlier step's block, in the log's order.  A
 * block goes on the logged stream modulo the subject's stream count, so a
 * log from a runtime with more streams still runs, and its frees go where
 * its allocations went.  Blocks the log never freed are freed after the
 * clock stops.  One thread replays it all: the log's threads are merged
 * into one sequence, so what is measured is the allocator under the
 * program's pattern of sizes and lifetimes, not under its concurrency.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct replay_arg {
	struct bench_subject *s;
	const struct bench_replay *rp;
	const uint32_t *stream_of;	/* per step: the stream on this subject */
	struct xdm_block *live;		/* rp->nslots; bytes 0 marks a free slot */
	uint64_t peak_bytes;
	uint64_t peak_blocks;
};

/* Frees every block still held: after a good run, what the log left live. */
static int replay_drain(struct replay_arg *a)
{
	int rc = 0;

	for (size_t i = 0; i < a->rp->nslots; i++) {
		struct xdm_block *b = &a->live[i];

		if (!b->bytes)
			continue;
		if (a->s->ops->deallocate(a->s, b) && rc == 0) {
			bench_say_failure(a->s, "replay", "free", b->bytes, b->stream);
			rc = -1;
		}
		b->bytes = 0;
	}
	return rc;
}

static int replay_once(void *arg, uint64_t *ns)
{
	struct replay_arg *a = arg;
	struct bench_subject *s = a->s;
	const struct bench_replay_step *steps = a->rp->steps;
	uint64_t live_bytes = 0, live = 0, t0;

	memset(a->live, 0, a->rp->nslots * sizeof(*a->live));
	t0 = bench_now_ns();
	for (size_t i = 0; i < a->rp->nsteps; i++) {
		const struct bench_replay_step *st = &steps[i];
		struct xdm_block *b = &a->live[st->slot];

		if (st->bytes) {
			if (s->ops->allocate(s, (size_t)st->bytes, a->stream_of[i], b)) {
				bench_say_failure(s, "replay", "allocate", (size_t)st->bytes,
						  a->stream_of[i]);
				b->bytes = 0;
				goto fail;
			}
			live++;
			live_bytes += b->bytes;
			if (live_bytes > a->peak_bytes)
				a->peak_bytes = live_bytes;
			if (live > a->peak_blocks)
				a->peak_blocks = live;
		} else {
			struct xdm_block gone = *b;

			/* Marked free first: a failed free still consumed the block. */
			b->bytes = 0;
			live--;
			live_bytes -= gone.bytes;
			if (s->ops->deallocate(s, &gone)) {
				bench_say_failure(s, "replay", "free", gone.bytes, gone.stream);
				goto fail;
			}
		}
	}
	*ns = bench_now_ns() - t0;
	return replay_drain(a);
fail:
	replay_drain(a);
	return -1;
}

/*
 * The streams of each step on a subject of n streams, computed before any
 * run: a division per allocation would be the bench's cost, not the
 * subject's.  Subjects with the same count share one array.
 */
struct stream_map {
	uint32_t n;
	uint32_t *stream_of;
};

static const uint32_t *streams_for(const struct bench_replay *rp, uint32_t n,
				   struct stream_map *maps, size_t *nmaps)
{
	uint32_t *s;

	if (n == 0)
		n = 1;
	for (size_t i = 0; i < *nmaps; i++)
		if (maps[i].n == n)
			return maps[i].stream_of;
	s = malloc((rp->nsteps ? rp->nsteps : 1) * sizeof(*s));
	if (!s)
		return NULL;
	for (size_t i = 0; i < rp->nsteps; i++)
		s[i] = rp->steps[i].stream % n;
	maps[*nmaps] = (struct stream_map){ n, s };
	(*nmaps)++;
	return s;
}

int bench_run_replay(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	const struct bench_replay *rp = &ctx->replay;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct replay_arg args[BENCH_MAX_SUBJECTS];
	struct stream_map maps[BENCH_MAX_SUBJECTS];
	uint64_t reserved[BENCH_MAX_SUBJECTS];
	bool has_reserved[BENCH_MAX_SUBJECTS];
	struct xdm_block *live;
	size_t nmaps = 0;
	int rc = 0;

	live = calloc(rp->nslots ? rp->nslots : 1, sizeof(*live));
	if (!live)
		goto oom;
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];
		const uint32_t *map = streams_for(rp, s->ops->stream_count(s), maps, &nmaps);

		if (!map)
			goto oom;
		/* One live array serves all: every run frees its blocks before it ends. */
		args[k] = (struct replay_arg){ .s = s, .rp = rp, .stream_of = map, .live = live };
	}
	ctx->report.replay = rp;
	bench_reserved_begin(ctx, has_reserved);
	rc = bench_measure_all(ctx, replay_once, args, sizeof(args[0]), samples);
	if (rc)
		goto out;
	bench_reserved_end(ctx, has_reserved, reserved);
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_result r = { .subject = &ctx->subjects[k],
					  .workload = BENCH_W_REPLAY };

		snprintf(r.param, sizeof(r.param), "%s", rp->name);
		r.threads = 1;
		r.ops = rp->nsteps;
		r.ops_requested = rp->nsteps;
		r.peak_live_bytes = args[k].peak_bytes;
		r.peak_live_blocks = args[k].peak_blocks;
		r.peak_asked_bytes = rp->peak_bytes;
		r.has_reserved = has_reserved[k];
		r.peak_reserved_bytes = reserved[k];
		bench_summarize_totals(&r, samples[k], o->repeat);
		rc = bench_report_result(ctx, &r);
		if (rc)
			goto out;
	}
	goto out;
oom:
	fprintf(stderr, "xdm-bench: replay: out of memory for %zu steps\n", rp->nsteps);
	rc = BENCH_EXIT_FAIL;
out:
	for (size_t i = 0; i < nmaps; i++)
		free(maps[i].stream_of);
	free(live);
	return rc;
}
