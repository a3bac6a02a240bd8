/* SPDX-License-Identifier: MIT */
/*
 * threads.c - the threads workload: T threads, each pairing 4 KiB
 * allocations and frees on its own stream, all at once.
 *
 * It measures what a single-threaded loop cannot: contention on the
 * runtime's registry and counters, and whether per-stream state really
 * lets streams proceed independently.  The threads are held at a gate
 * until all exist, so thread creation is never measured.
 *
 * On a subject spread over --devices (a group, devices.c) thread i
 * runs on part i mod n, the runtime of the (i mod n)-th listed device, on
 * stream (i / n) mod that runtime's stream count: each thread still has a
 * stream of its own, on its own device.  Beside the run's span, each
 * device's span is kept (its first thread's start to its last thread's
 * end), the time of that device's share of the pairs.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum gate_state { GATE_WAIT, GATE_GO, GATE_ABORT };

/*
 * Opens once for every thread; ABORT sends them home without work.  The
 * threads spin at it rather than sleep on a condition: a broadcast wakes
 * sleepers one after the other through its mutex, which staggered the
 * starts of sixteen threads by a measurable share of a short run.
 */
struct gate {
	_Atomic int state;
	_Atomic unsigned int ready;	/* threads spinning at the gate */
};

struct worker {
	alignas(64) struct bench_subject *s;	/* a line each: no false sharing;
						 * a group's part */
	struct gate *gate;
	uint32_t stream;
	uint64_t iters;
	uint64_t t0, t1;
	bool failed;
};

struct threads_arg {
	struct bench_subject *s;
	unsigned int nthreads;
	uint64_t iters;
	struct worker *workers;
	pthread_t *tids;
	/*
	 * A group's spans: spans[run * nparts + d] is part d's in run run,
	 * where run counts this measurement's calls, the warm-up first (the
	 * order bench_measure_some calls in); NULL for a plain subject.
	 */
	double *spans;
	unsigned int run;
	unsigned int runs;		/* what spans holds room for */
};

/* Spin briefly, then give the CPU away: there may be more threads than CPUs. */
static void gate_pause(unsigned int *spins)
{
	if (++*spins < 1000) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ __volatile__("pause");
#endif
		return;
	}
	*spins = 0;
	sched_yield();
}

static enum gate_state gate_wait(struct gate *g)
{
	unsigned int spins = 0;
	int st;

	atomic_fetch_add_explicit(&g->ready, 1, memory_order_release);
	while ((st = atomic_load_explicit(&g->state, memory_order_acquire)) == GATE_WAIT)
		gate_pause(&spins);
	return (enum gate_state)st;
}

/* Opens when every created thread is at the gate. */
static void gate_open(struct gate *g, unsigned int threads, enum gate_state st)
{
	unsigned int spins = 0;

	while (st == GATE_GO && atomic_load_explicit(&g->ready, memory_order_acquire) < threads)
		gate_pause(&spins);
	atomic_store_explicit(&g->state, st, memory_order_release);
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	struct bench_subject *s = w->s;
	struct xdm_block blk;

	if (gate_wait(w->gate) != GATE_GO)
		return NULL;
	/* Each thread times itself; the run spans the first start to the last end. */
	w->t0 = bench_now_ns();
	for (uint64_t i = 0; i < w->iters; i++) {
		if (s->ops->allocate(s, BENCH_THREAD_BYTES, w->stream, &blk)) {
			/* Said here: the reason is in this thread's last error. */
			bench_say_failure(s, "threads", "allocate", BENCH_THREAD_BYTES, w->stream);
			w->failed = true;
			break;
		}
		if (s->ops->deallocate(s, &blk)) {
			bench_say_failure(s, "threads", "free", BENCH_THREAD_BYTES, w->stream);
			w->failed = true;
			break;
		}
	}
	w->t1 = bench_now_ns();
	return NULL;
}

/* Each part's span of this run, from its own threads' clocks. */
static void keep_spans(struct threads_arg *a, size_t nparts)
{
	double *spans = &a->spans[(size_t)a->run * nparts];

	for (size_t d = 0; d < nparts; d++) {
		uint64_t first = UINT64_MAX, last = 0;

		for (size_t i = d; i < a->nthreads; i += nparts) {
			if (a->workers[i].t0 < first)
				first = a->workers[i].t0;
			if (a->workers[i].t1 > last)
				last = a->workers[i].t1;
		}
		spans[d] = first < last ? (double)(last - first) : 0;
	}
}

static int threads_once(void *arg, uint64_t *ns)
{
	struct threads_arg *a = arg;
	struct gate gate = { GATE_WAIT, 0 };
	size_t nparts = bench_nparts(a->s);
	uint64_t first = UINT64_MAX, last = 0;
	unsigned int created;
	bool failed = false;
	int err = 0;

	for (created = 0; created < a->nthreads; created++) {
		struct worker *w = &a->workers[created];
		struct bench_subject *p = bench_part(a->s, created % nparts);
		uint32_t nstreams = p->ops->stream_count(p);

		if (nstreams == 0)
			nstreams = 1;
		*w = (struct worker){ .s = p, .gate = &gate,
				      .stream = (uint32_t)((created / nparts) % nstreams),
				      .iters = a->iters };
		err = pthread_create(&a->tids[created], NULL, worker_main, w);
		if (err)
			break;
	}
	gate_open(&gate, created, err ? GATE_ABORT : GATE_GO);
	for (unsigned int i = 0; i < created; i++) {
		struct worker *w = &a->workers[i];

		pthread_join(a->tids[i], NULL);
		failed |= w->failed;
		if (w->t0 < first)
			first = w->t0;
		if (w->t1 > last)
			last = w->t1;
	}
	if (err) {
		fprintf(stderr, "xdm-bench: threads: cannot start thread %u of %u: %s\n",
			created + 1, a->nthreads, strerror(err));
		return -1;
	}
	if (failed)
		return -1;
	*ns = last - first;
	if (a->spans && a->run < a->runs)
		keep_spans(a, nparts);
	a->run++;
	return 0;
}

/*
 * A group's row gets one share per device: its threads (thread i on the
 * (i mod n)-th), their pairs, and the median and min over the timed runs
 * of its span.  The warm-up's spans (run 0) are not kept, as for the row.
 */
static void make_shares(struct bench_ctx *ctx, const struct threads_arg *a,
			struct bench_share *shares, double *samples)
{
	const struct bench_subject *g = a->s;
	unsigned int repeat = ctx->opts.repeat;
	size_t n = g->nparts;

	for (size_t d = 0; d < n; d++) {
		struct bench_share *sh = &shares[d];
		double median = 0, min = 0;

		*sh = (struct bench_share){ .ordinal = ctx->devices[d].ordinal };
		sh->threads = a->nthreads / (unsigned int)n + (d < a->nthreads % n ? 1 : 0);
		sh->ops = a->iters * sh->threads;
		if (!sh->threads)
			continue;
		for (unsigned int r = 0; r < repeat; r++)
			samples[r] = a->spans[(size_t)(r + 1) * n + d];
		bench_summarize(samples, repeat, &median, &min);
		sh->median_ns = median / (double)a->iters;
		sh->min_ns = min / (double)a->iters;
		sh->ops_per_s = median > 0 ? (double)sh->ops * 1e9 / median : 0;
	}
}

/* Span arrays for the groups among the subjects; 0, or -1 said. */
static int alloc_spans(struct bench_ctx *ctx, double **spans)
{
	size_t runs = (size_t)ctx->opts.repeat + 1;

	for (size_t k = 0; k < ctx->nsubjects; k++) {
		spans[k] = NULL;
		if (!ctx->subjects[k].nparts)
			continue;
		spans[k] = calloc(runs * ctx->subjects[k].nparts, sizeof(double));
		if (!spans[k]) {
			fprintf(stderr, "xdm-bench: threads: out of memory\n");
			return -1;
		}
	}
	return 0;
}

int bench_run_threads(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : BENCH_DEFAULT_THREAD_ITERS;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct threads_arg args[BENCH_MAX_SUBJECTS];
	double *spans[BENCH_MAX_SUBJECTS] = { NULL };
	struct bench_share *shares = NULL;
	struct worker *workers;
	pthread_t *tids;
	int rc = 0;

	workers = aligned_alloc(alignof(struct worker), BENCH_MAX_THREADS * sizeof(*workers));
	tids = calloc(BENCH_MAX_THREADS, sizeof(*tids));
	if (ctx->ndevices)
		shares = calloc(ctx->ndevices, sizeof(*shares));
	if (!workers || !tids || (ctx->ndevices && !shares)) {
		fprintf(stderr, "xdm-bench: threads: out of memory\n");
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	if (alloc_spans(ctx, spans)) {
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < o->nthreads; i++) {
		/* The worker arrays serve every subject: runs never overlap. */
		for (size_t k = 0; k < ctx->nsubjects; k++)
			args[k] = (struct threads_arg){ &ctx->subjects[k], o->threads[i], n,
							workers, tids, spans[k], 0,
							o->repeat + 1 };
		rc = bench_measure_all(ctx, threads_once, args, sizeof(args[0]), samples);
		if (rc)
			goto out;
		for (size_t k = 0; k < ctx->nsubjects; k++) {
			struct bench_result r = { .subject = &ctx->subjects[k],
						  .workload = BENCH_W_THREADS };
			double median_wall, min_wall;

			bench_summarize(samples[k], o->repeat, &median_wall, &min_wall);
			snprintf(r.param, sizeof(r.param), "%u thread%s", args[k].nthreads,
				 args[k].nthreads == 1 ? "" : "s");
			r.bytes = BENCH_THREAD_BYTES;
			r.threads = args[k].nthreads;
			r.ops = n * args[k].nthreads;
			r.ops_requested = r.ops;
			r.runs = o->repeat;
			/* Latency as one thread sees it; throughput of all together. */
			r.median_ns = median_wall / (double)n;
			r.min_ns = min_wall / (double)n;
			r.ops_per_s = median_wall > 0 ? (double)r.ops * 1e9 / median_wall : 0;
			if (args[k].spans) {
				make_shares(ctx, &args[k], shares, samples[k]);
				r.shares = shares;
				r.nshares = ctx->subjects[k].nparts;
			}
			rc = bench_report_result(ctx, &r);
			if (rc)
				goto out;
		}
	}
out:
	for (size_t k = 0; k < BENCH_MAX_SUBJECTS; k++)
		free(spans[k]);
	free(shares);
	free(tids);
	free(workers);
	return rc;
}
