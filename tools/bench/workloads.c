/* SPDX-License-Identifier: MIT */
/*
 * workloads.c - the pair and random workloads, and the measuring
 * loop every workload shares.
 *
 * Only the loop between the two clock reads is measured.  Everything a run
 * needs besides allocate and free (choosing sizes, drawing random numbers,
 * waiting for queued frees) happens outside it, so that the numbers are the
 * cost of the subject, not of the bench.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

void bench_say_failure(struct bench_subject *s, const char *workload, const char *what,
		       size_t bytes, uint32_t stream)
{
	char why[BENCH_ERR_LEN];

	s->ops->strerror(s, why, sizeof(why));
	fprintf(stderr, "xdm-bench: %s: %s: %s of %zu bytes on stream %u failed: %s\n",
		s->name, workload, what, bytes, stream, why);
}

int bench_measure(struct bench_ctx *ctx, struct bench_subject *s,
		  int (*once)(void *arg, uint64_t *ns), void *arg, double *samples)
{
	char why[BENCH_ERR_LEN];
	uint64_t ns;

	/* Run 0 warms caches, pools and lazily created streams; it is not kept. */
	for (unsigned int r = 0; r <= ctx->opts.repeat; r++) {
		if (once(arg, &ns))
			return BENCH_EXIT_FAIL;
		/* Each run starts from settled streams, not from the last run's backlog. */
		if (s->ops->settle(s)) {
			s->ops->strerror(s, why, sizeof(why));
			fprintf(stderr, "xdm-bench: %s: waiting for queued frees failed: %s\n",
				s->name, why);
			return BENCH_EXIT_FAIL;
		}
		if (r > 0)
			samples[r - 1] = (double)ns;
	}
	return 0;
}

/*
 * All subjects of one measurement, interleaved: each warms up once, then
 * every round runs each subject once, starting with a different subject
 * each round.  The driver and the machine have slow phases that last longer
 * than a run (seen on the H200: whole runs of cuMemAllocAsync at twice the
 * usual cost); interleaving spreads them over all subjects alike instead of
 * handing them to whichever subject ran during one.
 */
int bench_measure_some(struct bench_ctx *ctx, int (*once)(void *arg, uint64_t *ns),
		       void *args, size_t arg_size, double (*samples)[BENCH_MAX_REPEAT],
		       const bool *run)
{
	size_t n = ctx->nsubjects;
	char why[BENCH_ERR_LEN];
	uint64_t ns;

	for (unsigned int r = 0; r <= ctx->opts.repeat; r++) {
		for (size_t j = 0; j < n; j++) {
			size_t k = (j + r) % n;
			struct bench_subject *s = &ctx->subjects[k];

			if (run && !run[k])
				continue;
			bench_tree_reader_set(ctx, s->reads_tree);
			if (once((char *)args + k * arg_size, &ns))
				return BENCH_EXIT_FAIL;
			bench_tree_reader_set(ctx, false);
			if (s->ops->settle(s)) {
				s->ops->strerror(s, why, sizeof(why));
				fprintf(stderr, "xdm-bench: %s: waiting for queued frees failed: %s\n",
					s->name, why);
				return BENCH_EXIT_FAIL;
			}
			if (r > 0)
				samples[k][r - 1] = (double)ns;
		}
	}
	return 0;
}

int bench_measure_all(struct bench_ctx *ctx, int (*once)(void *arg, uint64_t *ns),
		      void *args, size_t arg_size, double (*samples)[BENCH_MAX_REPEAT])
{
	return bench_measure_some(ctx, once, args, arg_size, samples, NULL);
}

void bench_summarize_totals(struct bench_result *r, double *samples, unsigned int runs)
{
	for (unsigned int i = 0; i < runs; i++)
		samples[i] /= (double)r->ops;
	bench_summarize(samples, runs, &r->median_ns, &r->min_ns);
	r->runs = runs;
	r->ops_per_s = r->median_ns > 0 ? 1e9 / r->median_ns : 0;
}

/*
 * A subject joins a workload when it has the op the workload needs and its
 * ready op (if any) says yes.  Every other subject is named in a note, so
 * that a missing row is never a silent one.
 */
size_t bench_select(struct bench_ctx *ctx, enum bench_workload w,
		    const char *(*lacks)(const struct bench_subject *s), bool *run, int *rc)
{
	char why[BENCH_ERR_LEN];
	const char *no;
	size_t n = 0;

	*rc = 0;
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];

		run[k] = false;
		no = lacks ? lacks(s) : NULL;
		if (no) {
			snprintf(why, sizeof(why), "%s", no);
		} else if (s->ops->ready && s->ops->ready(s, w, why, sizeof(why))) {
			/* why was filled by ready() */
		} else {
			run[k] = true;
			n++;
			continue;
		}
		if (bench_report_skip(ctx, s, w, why)) {
			*rc = BENCH_EXIT_FAIL;
			return 0;
		}
	}
	return n;
}

/* ---- pair: allocate and free one block, again and again ---------------- */

struct pair_arg {
	struct bench_subject *s;
	size_t bytes;
	uint64_t iters;
};

static int pair_once(void *arg, uint64_t *ns)
{
	struct pair_arg *a = arg;
	struct bench_subject *s = a->s;
	struct xdm_block blk;
	uint64_t t0 = bench_now_ns();

	for (uint64_t i = 0; i < a->iters; i++) {
		if (s->ops->allocate(s, a->bytes, 0, &blk)) {
			bench_say_failure(s, "pair", "allocate", a->bytes, 0);
			return -1;
		}
		if (s->ops->deallocate(s, &blk)) {
			bench_say_failure(s, "pair", "free", a->bytes, 0);
			return -1;
		}
	}
	*ns = bench_now_ns() - t0;
	return 0;
}

/*
 * Big blocks may cost a page-table walk or a memset each, so by default the
 * sizes above 1 MiB run proportionally fewer pairs (never fewer than 1000):
 * 16M runs 1/16 of the default.  An explicit --iterations is obeyed as is.
 * The report shows both counts.
 */
static uint64_t pair_iterations(const struct bench_opts *o, uint64_t bytes)
{
	const uint64_t mib = UINT64_C(1) << 20;
	uint64_t n = BENCH_DEFAULT_PAIR_ITERS;

	if (o->iterations_set)
		return o->iterations;
	if (bytes > mib) {
		n = n / (bytes / mib);
		if (n < 1000)
			n = 1000;
	}
	return n;
}

int bench_run_pair(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct pair_arg args[BENCH_MAX_SUBJECTS];
	int rc;

	/* Subjects innermost: rows of one size sit together, ready for ratios. */
	for (size_t i = 0; i < o->nsizes; i++) {
		for (size_t k = 0; k < ctx->nsubjects; k++)
			args[k] = (struct pair_arg){ &ctx->subjects[k], (size_t)o->sizes[i],
						     pair_iterations(o, o->sizes[i]) };
		rc = bench_measure_all(ctx, pair_once, args, sizeof(args[0]), samples);
		if (rc)
			return rc;
		for (size_t k = 0; k < ctx->nsubjects; k++) {
			struct bench_result r = { .subject = &ctx->subjects[k],
						  .workload = BENCH_W_PAIR };

			bench_format_size(o->sizes[i], r.param, sizeof(r.param));
			r.bytes = o->sizes[i];
			r.threads = 1;
			r.ops = args[k].iters;
			r.ops_requested = o->iterations_set ? o->iterations : BENCH_DEFAULT_PAIR_ITERS;
			bench_summarize_totals(&r, samples[k], o->repeat);
			rc = bench_report_result(ctx, &r);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- random: a churning population of up to 1000 live blocks ---------- */

/* One prepared operation: allocate bytes, or (bytes == 0) free live[victim]. */
struct random_step {
	uint32_t bytes;
	uint32_t victim;
};

struct random_arg {
	struct bench_subject *s;
	const struct random_step *steps;
	size_t nsteps;
	struct xdm_block *live;		/* BENCH_RANDOM_MAX_LIVE slots */
	uint64_t peak_bytes;
	uint64_t peak_blocks;
};

/* What the script asks for at most at once, the divisor of fragmentation. */
struct random_script {
	struct random_step *steps;
	uint64_t peak_asked;
};

/* Log-uniform in [256 B, 4 MiB]: every octave is drawn equally often. */
static uint32_t random_size(struct bench_rng *rng)
{
	const double lo = 8.0, hi = 22.0;	/* log2 of the bounds */
	double b = exp2(lo + (hi - lo) * bench_rng_unit(rng));

	if (b < BENCH_RANDOM_MIN_BYTES)
		return BENCH_RANDOM_MIN_BYTES;
	if (b > BENCH_RANDOM_MAX_BYTES)
		return BENCH_RANDOM_MAX_BYTES;
	return (uint32_t)b;
}

/*
 * The whole sequence is decided before any run, from the seed alone: every
 * run (and every subject) replays exactly the same operations, and neither
 * exp2() nor the PRNG is inside the timing.  The live blocks are simulated
 * here the way the runs will see them (the same swap-remove), so victim
 * indices stay valid and the peak of requested bytes is known exactly.
 */
static int random_script(uint64_t seed, size_t n, struct random_script *out)
{
	struct random_step *steps = calloc(n, sizeof(*steps));
	uint32_t sizes[BENCH_RANDOM_MAX_LIVE];
	uint64_t asked = 0, peak = 0;
	struct bench_rng rng;
	size_t live = 0;

	if (!steps)
		return -1;
	bench_rng_seed(&rng, seed);
	for (size_t i = 0; i < n; i++) {
		bool coin = bench_rng_next(&rng) & 1;

		if (live == 0 || (coin && live < BENCH_RANDOM_MAX_LIVE)) {
			steps[i].bytes = random_size(&rng);
			sizes[live++] = steps[i].bytes;
			asked += steps[i].bytes;
			if (asked > peak)
				peak = asked;
		} else {
			uint32_t v = (uint32_t)(bench_rng_next(&rng) % live);

			steps[i].victim = v;
			asked -= sizes[v];
			sizes[v] = sizes[--live];
		}
	}
	out->steps = steps;
	out->peak_asked = peak;
	return 0;
}

/* Frees what a run still holds; after a failure it is best effort. */
static int random_drain(struct random_arg *a, size_t live)
{
	int rc = 0;

	while (live > 0) {
		struct xdm_block *b = &a->live[--live];

		if (a->s->ops->deallocate(a->s, b) && rc == 0) {
			bench_say_failure(a->s, "random", "free", b->bytes, b->stream);
			rc = -1;
		}
	}
	return rc;
}

static int random_once(void *arg, uint64_t *ns)
{
	struct random_arg *a = arg;
	struct bench_subject *s = a->s;
	uint64_t live_bytes = 0, t0;
	size_t live = 0;

	t0 = bench_now_ns();
	for (size_t i = 0; i < a->nsteps; i++) {
		const struct random_step *st = &a->steps[i];

		if (st->bytes) {
			struct xdm_block *b = &a->live[live];

			if (s->ops->allocate(s, st->bytes, 0, b)) {
				bench_say_failure(s, "random", "allocate", st->bytes, 0);
				goto fail;
			}
			live++;
			live_bytes += b->bytes;
			if (live_bytes > a->peak_bytes)
				a->peak_bytes = live_bytes;
			if (live > a->peak_blocks)
				a->peak_blocks = live;
		} else {
			struct xdm_block *b = &a->live[st->victim];
			struct xdm_block gone = *b;

			/* Swap-remove first: a failed free still consumed the block. */
			*b = a->live[--live];
			live_bytes -= gone.bytes;
			if (s->ops->deallocate(s, &gone)) {
				bench_say_failure(s, "random", "free", gone.bytes, gone.stream);
				goto fail;
			}
		}
	}
	*ns = bench_now_ns() - t0;
	return random_drain(a, live);
fail:
	random_drain(a, live);
	return -1;
}

int bench_run_random(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : BENCH_DEFAULT_RANDOM_OPS;
	double samples[BENCH_MAX_SUBJECTS][BENCH_MAX_REPEAT];
	struct random_arg args[BENCH_MAX_SUBJECTS];
	uint64_t reserved[BENCH_MAX_SUBJECTS];
	bool has_reserved[BENCH_MAX_SUBJECTS];
	struct random_script script = { NULL, 0 };
	struct random_step *steps;
	struct xdm_block *live;
	int rc = 0;

	rc = random_script(o->seed, (size_t)n, &script);
	steps = script.steps;
	live = calloc(BENCH_RANDOM_MAX_LIVE, sizeof(*live));
	if (rc || !live) {
		fprintf(stderr, "xdm-bench: random: out of memory for %llu operations\n",
			(unsigned long long)n);
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	for (size_t k = 0; k < ctx->nsubjects; k++)
		args[k] = (struct random_arg){ .s = &ctx->subjects[k], .steps = steps,
					       .nsteps = (size_t)n, .live = live };
	/* One live array serves all: every run frees its blocks before it ends. */
	bench_reserved_begin(ctx, has_reserved);
	rc = bench_measure_all(ctx, random_once, args, sizeof(args[0]), samples);
	if (rc)
		goto out;
	bench_reserved_end(ctx, has_reserved, reserved);
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_result r = { .subject = &ctx->subjects[k],
					  .workload = BENCH_W_RANDOM };

		snprintf(r.param, sizeof(r.param), "256-4M");
		r.threads = 1;
		r.ops = n;
		r.ops_requested = n;
		r.peak_live_bytes = args[k].peak_bytes;
		r.peak_live_blocks = args[k].peak_blocks;
		r.peak_asked_bytes = script.peak_asked;
		r.has_reserved = has_reserved[k];
		r.peak_reserved_bytes = reserved[k];
		bench_summarize_totals(&r, samples[k], o->repeat);
		rc = bench_report_result(ctx, &r);
		if (rc)
			goto out;
	}
out:
	free(live);
	free(steps);
	return rc;
}
