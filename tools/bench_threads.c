/* SPDX-License-Identifier: MIT */
/*
 * bench_threads.c - the threads workload: T threads, each pairing 4 KiB
 * allocations and frees on its own stream, all at once.
 *
 * It measures what a single-threaded loop cannot: contention on the
 * runtime's registry and counters, and whether per-stream state really
 * lets streams proceed independently.  The threads are held at a gate
 * until all exist, so thread creation is never measured.
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
	alignas(64) struct bench_subject *s;	/* a line each: no false sharing */
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

static int threads_once(void *arg, uint64_t *ns)
{
	struct threads_arg *a = arg;
	struct gate gate = { GATE_WAIT, 0 };
	uint32_t nstreams = a->s->ops->stream_count(a->s);
	uint64_t first = UINT64_MAX, last = 0;
	unsigned int created;
	bool failed = false;
	int err = 0;

	if (nstreams == 0)
		nstreams = 1;
	for (created = 0; created < a->nthreads; created++) {
		struct worker *w = &a->workers[created];

		*w = (struct worker){ .s = a->s, .gate = &gate,
				      .stream = created % nstreams, .iters = a->iters };
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
	return 0;
}

int bench_run_threads(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : BENCH_DEFAULT_THREAD_ITERS;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct threads_arg args[BENCH_MAX_SUBJECTS];
	struct worker *workers;
	pthread_t *tids;
	int rc = 0;

	workers = aligned_alloc(alignof(struct worker), BENCH_MAX_THREADS * sizeof(*workers));
	tids = calloc(BENCH_MAX_THREADS, sizeof(*tids));
	if (!workers || !tids) {
		fprintf(stderr, "xdm-bench: threads: out of memory\n");
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < o->nthreads; i++) {
		/* The worker arrays serve every subject: runs never overlap. */
		for (size_t k = 0; k < ctx->nsubjects; k++)
			args[k] = (struct threads_arg){ &ctx->subjects[k], o->threads[i], n,
							workers, tids };
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
			rc = bench_report_result(ctx, &r);
			if (rc)
				goto out;
		}
	}
out:
	free(tids);
	free(workers);
	return rc;
}
