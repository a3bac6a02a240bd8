/* SPDX-License-Identifier: MIT */
/*
 * main.c - xdm-bench: allocation throughput and latency of an xdm
 * stack, beside the CUDA driver's allocators where it runs on a GPU.
 * main() owns the one context; it opens the subjects (the runtime, then
 * the anchors), runs the chosen workloads against all of them, reads every
 * subject's counters after each workload and refuses to call a run good
 * while memory is still outstanding at the end (exit 3): a leak is a bug
 * the bench must not hide behind good numbers.  Under --devices a subject
 * is a group of one part per device (devices.c); what reads a
 * runtime here reads each part.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ipc_wire.h"

static const struct {
	enum bench_workload which;
	int (*run)(struct bench_ctx *ctx);
} workloads[] = {
	{ BENCH_W_PAIR, bench_run_pair },
	{ BENCH_W_RANDOM, bench_run_random },
	{ BENCH_W_THREADS, bench_run_threads },
	{ BENCH_W_STREAMS, bench_run_streams },
	{ BENCH_W_CROSS, bench_run_cross },
	{ BENCH_W_REPLAY, bench_run_replay },
	{ BENCH_W_IPC, bench_run_ipc },
};

/* Waits for one runtime's queued frees, then records its counters. */
static int settle_and_count_one(struct bench_ctx *ctx, struct bench_subject *s,
				enum bench_workload after)
{
	char why[BENCH_ERR_LEN];

	if (s->ops->settle(s)) {
		s->ops->strerror(s, why, sizeof(why));
		fprintf(stderr, "xdm-bench: %s: reaping the frees of %s failed: %s\n", s->name,
			bench_workload_name(after), why);
		return BENCH_EXIT_FAIL;
	}
	return bench_report_counters(ctx, s, after);
}

/* Every subject's, and of a group every part's: each device's runtime. */
static int settle_and_count(struct bench_ctx *ctx, enum bench_workload after)
{
	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];

		if (s->borrowed)
			continue;	/* its runtime is counted once, as its owner */
		for (size_t d = 0; d < bench_nparts(s); d++) {
			int rc = settle_and_count_one(ctx, bench_part(s, d), after);

			if (rc)
				return rc;
		}
	}
	return 0;
}

static int run_workloads(struct bench_ctx *ctx)
{
	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
		int rc;

		if (!(ctx->opts.workloads & workloads[i].which))
			continue;
		rc = workloads[i].run(ctx);
		if (rc)
			return rc;
		rc = settle_and_count(ctx, workloads[i].which);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Every block the bench took has been freed and reaped by now, so any byte
 * or block still counted, or an alloc without its free, is the stack's.
 */
static bool check_leak(const struct bench_subject *s)
{
	const struct bench_counters *c = &s->last;

	if (!s->has_last)
		return false;
	if (c->bytes_outstanding || c->blocks_outstanding || c->stack_bytes_outstanding ||
	    c->allocs != c->frees) {
		fprintf(stderr,
			"xdm-bench: warning: %s still counts %llu bytes in %llu blocks outstanding (the stack reports %llu bytes; %llu allocs, %llu frees) after the bench freed every block: a leak\n",
			s->name, (unsigned long long)c->bytes_outstanding,
			(unsigned long long)c->blocks_outstanding,
			(unsigned long long)c->stack_bytes_outstanding,
			(unsigned long long)c->allocs, (unsigned long long)c->frees);
		return true;
	}
	return false;
}

static bool check_leaks(struct bench_ctx *ctx)
{
	bool leak = false;

	for (size_t k = 0; k < ctx->nsubjects; k++) {
		struct bench_subject *s = &ctx->subjects[k];

		if (s->borrowed)
			continue;	/* its owner's runtime, judged as the owner */
		for (size_t d = 0; d < bench_nparts(s); d++)
			leak |= check_leak(bench_part(s, d));
	}
	return leak;
}

/* --read-tree: the runtime once more, as "xdm+tree", and its reader. */
static int add_tree_subject(struct bench_ctx *ctx)
{
	struct bench_subject *t;

	if (!ctx->opts.read_tree_hz)
		return 0;
	if (ctx->nsubjects == BENCH_MAX_SUBJECTS)
		return BENCH_EXIT_FAIL;
	t = &ctx->subjects[ctx->nsubjects];
	*t = ctx->subjects[0];
	snprintf(t->name, sizeof(t->name), "xdm+tree");
	t->reads_tree = true;
	t->borrowed = true;
	t->has_last = false;
	ctx->nsubjects++;
	return bench_tree_reader_start(ctx);
}

int main(int argc, char **argv)
{
	struct bench_ctx ctx;
	bool leak;
	int rc;

	/* The ipc workload's second process (ipc_importer.c). */
	if (argc > 1 && !strcmp(argv[1], "--ipc-importer"))
		return bench_ipc_importer(argc, argv);
	memset(&ctx, 0, sizeof(ctx));
	bench_opts_init(&ctx.opts);
	rc = bench_parse_args(argc, argv, &ctx.opts);
	if (rc != BENCH_CONTINUE)
		return rc;
	/* Before any xdm call: the library reads XDM_CONFIG when first used. */
	if (ctx.opts.config && setenv("XDM_CONFIG", ctx.opts.config, 1)) {
		fprintf(stderr, "xdm-bench: cannot set XDM_CONFIG: %s\n", strerror(errno));
		return BENCH_EXIT_FAIL;
	}
	if (bench_mount_request(&ctx.opts))
		return BENCH_EXIT_FAIL;
	if (bench_parse_lists(&ctx.opts))
		return BENCH_EXIT_USAGE;
	/* A file that cannot be replayed is a usage error: say it before any runtime. */
	if (ctx.opts.replay) {
		rc = bench_replay_load(ctx.opts.replay, &ctx.replay);
		if (rc)
			return rc;
	}
	ctx.report.out = stdout;
	ctx.report.json = ctx.opts.json;

	if (ctx.opts.devices_text) {
		rc = bench_devices_open(&ctx);
		if (rc)
			goto out;
	} else {
		rc = bench_subject_xdm_open(&ctx, &ctx.subjects[0]);
		if (rc) {
			bench_replay_free(&ctx.replay);
			return rc;
		}
		ctx.nsubjects = 1;
		if (ctx.opts.compare) {
			rc = bench_subject_compare_open(&ctx.opts, ctx.opts.ordinal,
							&ctx.subjects[1]);
			if (rc)
				goto out;
			ctx.nsubjects = 2;
		}
	}
	rc = bench_mount_check(&ctx.opts);
	if (rc)
		goto out;
	/* After the runtime: auto looks at its platform, and its stream count. */
	rc = bench_anchors_open(&ctx);
	if (rc)
		goto out;

	rc = add_tree_subject(&ctx);
	if (rc)
		goto out;
	bench_report_header(&ctx);
	rc = run_workloads(&ctx);
	if (rc)
		goto out;
	rc = bench_anchors_event_edge(&ctx);
	if (rc)
		goto out;
	leak = check_leaks(&ctx);
	bench_report_finish(&ctx, leak);
	if (leak)
		rc = BENCH_EXIT_LEAK;
	bench_hold(&ctx.opts);
out:
	bench_tree_reader_stop(&ctx);
	/* A subject whose opening failed early has no ops yet. */
	for (size_t k = 0; k < ctx.nsubjects; k++)
		if (!ctx.subjects[k].borrowed && ctx.subjects[k].ops)
			ctx.subjects[k].ops->destroy(&ctx.subjects[k]);
	free(ctx.devices);
	bench_report_free(&ctx.report);
	bench_replay_free(&ctx.replay);
	return rc;
}
