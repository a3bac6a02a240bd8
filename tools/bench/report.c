/* SPDX-License-Identifier: MIT */
/*
 * report.c - what xdm-bench prints: a header, the results table, the
 * ratios of xdm to the driver anchors, notes and the counters, or all of it
 * as one JSON object.
 *
 * Table rows are printed as each measurement ends, so a long run shows
 * progress; JSON is printed once at the end because it is one object.
 * Every number the table shows is also in the JSON, under the name the man
 * page gives it.  Under --devices the header describes every device, and
 * each threads row of a group is followed by one row per device, its share
 * (subject "xdm@1"); the JSON gives the shares as the row's per_device.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *bench_workload_name(enum bench_workload w)
{
	switch (w) {
	case BENCH_W_PAIR:
		return "pair";
	case BENCH_W_RANDOM:
		return "random";
	case BENCH_W_THREADS:
		return "threads";
	case BENCH_W_STREAMS:
		return "streams";
	case BENCH_W_CROSS:
		return "cross";
	case BENCH_W_REPLAY:
		return "replay";
	case BENCH_W_IPC:
		return "ipc";
	default:
		return "all";
	}
}

/* "15.6 GiB": for people; the JSON keeps exact bytes. */
static void human_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* A share's name: its row's subject and the device, "xdm@1", "xdm+tree@1". */
static void share_name(const struct bench_subject *s, uint32_t ordinal, char *buf, size_t len)
{
	snprintf(buf, len, "%s@%u", s->name, ordinal);
}

/* Wide enough for every subject's and share's name, and never narrower than before anchors. */
static int name_width(struct bench_ctx *ctx)
{
	size_t w = strlen("subject") + 1;
	char name[64];

	for (size_t i = 0; i < ctx->nsubjects; i++) {
		const struct bench_subject *s = &ctx->subjects[i];

		if (strlen(s->name) > w)
			w = strlen(s->name);
		for (size_t d = 0; s->nparts && d < ctx->ndevices; d++) {
			share_name(s, ctx->devices[d].ordinal, name, sizeof(name));
			if (strlen(name) > w)
				w = strlen(name);
		}
	}
	return (int)w;
}

static void header_device(FILE *f, uint32_t ordinal, const struct xdm_device_info *d,
			  const char *stack)
{
	char mem[32];

	human_bytes(d->total_bytes, mem, sizeof(mem));
	fprintf(f, "device    %u: %s\n", ordinal, d->name);
	fprintf(f, "platform  %s\n", d->platform);
	fprintf(f, "uuid      %s\n", d->uuid);
	fprintf(f, "memory    %s (%llu bytes)\n", mem, (unsigned long long)d->total_bytes);
	fprintf(f, "stack     %s\n", stack);
}

/* --devices: the list as found, and each device as --device would show it. */
static void header_devices(FILE *f, const struct bench_ctx *ctx)
{
	fprintf(f, "devices   ");
	for (size_t d = 0; d < ctx->ndevices; d++)
		fprintf(f, "%s%u", d ? "," : "", ctx->devices[d].ordinal);
	fprintf(f, ": the threads workload runs thread i on the (i mod %zu)-th of them, each device with its own runtime\n",
		ctx->ndevices);
	for (size_t d = 0; d < ctx->ndevices; d++)
		header_device(f, ctx->devices[d].ordinal, &ctx->devices[d].info,
			      ctx->devices[d].stack);
}

void bench_report_header(struct bench_ctx *ctx)
{
	FILE *f = ctx->report.out;

	ctx->report.name_width = name_width(ctx);
	if (ctx->report.json)
		return;
	fprintf(f, "xdm-bench %s (libxdm %s)\n", PACKAGE_VERSION, xdm_version());
	if (ctx->ndevices)
		header_devices(f, ctx);
	else
		header_device(f, ctx->opts.ordinal, &ctx->dev, ctx->stack);
	if (ctx->opts.native_name)
		fprintf(f, "native    xdm's pairs through xdm_native_allocate / xdm_native_free "
			"on the %s handle\n", ctx->opts.native_name);
	for (size_t i = 0; i < ctx->nsubjects; i++) {
		struct bench_subject *s = &ctx->subjects[i];

		if (!s->anchor)
			continue;
		for (size_t d = 0; d < bench_nparts(s); d++)
			fprintf(f, "anchor    %s: %s\n", bench_part(s, d)->name,
				bench_part(s, d)->desc);
	}
	fprintf(f, "timing    median and min of %u timed runs after 1 warm-up run\n",
		ctx->opts.repeat);
	fflush(f);
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	void *p;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	p = realloc(*arr, ncap * elem);
	if (!p) {
		fprintf(stderr, "xdm-bench: out of memory for the report\n");
		return -1;
	}
	*arr = p;
	*cap = ncap;
	return 0;
}

/*
 * One device's share of a threads row, under it: its threads, their pairs,
 * its span per pair of one thread and its pairs a second.  A device that
 * got no thread (fewer threads than devices) has no time to show.
 */
static void print_share(struct bench_report *rep, const struct bench_result *r,
			const struct bench_share *sh)
{
	char name[64], param[48];

	share_name(r->subject, sh->ordinal, name, sizeof(name));
	snprintf(param, sizeof(param), "%u thread%s", sh->threads, sh->threads == 1 ? "" : "s");
	if (!sh->threads) {
		fprintf(rep->out, "%-*s %-8s %-10s %10d %13s %11s %15s\n", rep->name_width, name,
			"threads", param, 0, "-", "-", "-");
		return;
	}
	fprintf(rep->out, "%-*s %-8s %-10s %10llu %13.1f %11.1f %15.0f\n", rep->name_width,
		name, "threads", param, (unsigned long long)sh->ops, sh->median_ns, sh->min_ns,
		sh->ops_per_s);
}

int bench_report_result(struct bench_ctx *ctx, const struct bench_result *r)
{
	struct bench_report *rep = &ctx->report;
	struct bench_result *kept;
	FILE *f = rep->out;

	if (grow((void **)&rep->results, &rep->results_cap, rep->nresults, sizeof(*r)))
		return BENCH_EXIT_FAIL;
	kept = &rep->results[rep->nresults];
	*kept = *r;
	kept->shares = NULL;
	/* The workload's shares live until its next row: keep a copy. */
	if (r->nshares) {
		struct bench_share *copy = calloc(r->nshares, sizeof(*copy));

		if (!copy) {
			fprintf(stderr, "xdm-bench: out of memory for the report\n");
			return BENCH_EXIT_FAIL;
		}
		memcpy(copy, r->shares, r->nshares * sizeof(*copy));
		kept->shares = copy;
	}
	rep->nresults++;
	if (rep->json)
		return 0;
	if (!rep->table_started) {
		fprintf(f, "\n%-*s %-8s %-10s %10s %13s %11s %15s\n", rep->name_width, "subject",
			"workload", "param", "ops", "median ns/op", "min ns/op", "ops/s (median)");
		rep->table_started = true;
	}
	fprintf(f, "%-*s %-8s %-10s %10llu %13.1f %11.1f %15.0f\n", rep->name_width,
		r->subject->name, bench_workload_name(r->workload), r->param,
		(unsigned long long)r->ops, r->median_ns, r->min_ns, r->ops_per_s);
	for (size_t d = 0; d < r->nshares; d++)
		print_share(rep, r, &r->shares[d]);
	fflush(f);
	return 0;
}

int bench_report_counters(struct bench_ctx *ctx, struct bench_subject *s,
			  enum bench_workload after)
{
	struct bench_report *rep = &ctx->report;
	struct bench_counter_row row = { .subject = s, .after = after };

	if (grow((void **)&rep->rows, &rep->rows_cap, rep->nrows, sizeof(row)))
		return BENCH_EXIT_FAIL;
	row.valid = s->ops->counters(s, &row.c);
	s->has_last = row.valid;
	s->last = row.c;
	rep->rows[rep->nrows++] = row;
	return 0;
}

int bench_report_skip(struct bench_ctx *ctx, const struct bench_subject *s,
		      enum bench_workload w, const char *why)
{
	struct bench_report *rep = &ctx->report;
	struct bench_skip *k;

	if (grow((void **)&rep->skips, &rep->skips_cap, rep->nskips, sizeof(*k)))
		return BENCH_EXIT_FAIL;
	k = &rep->skips[rep->nskips++];
	k->subject = s;
	k->workload = w;
	snprintf(k->why, sizeof(k->why), "%s", why);
	return 0;
}

/* ---- ratios ------------------------------------------------------------ */

/*
 * x is a row of the xdm runtime and a a row of an anchor, measured under the
 * same workload and parameter: the ratio of their medians, per operation.
 * For threads ns/op is the run's wall time over the pairs of one thread, so
 * the same number is also the anchor's ops/s over xdm's.
 */
static bool ratio_of(const struct bench_result *x, const struct bench_result *a, double *ratio)
{
	/* xdm+tree is also divided by xdm: what being read costs; and xdm2
	 * by xdm: what its stack costs more. */
	bool base = (x->subject->reads_tree && !a->subject->reads_tree &&
		     x->subject->priv == a->subject->priv) ||
		    (x->subject->compared && !a->subject->anchor && !a->subject->compared &&
		     !a->subject->reads_tree);

	if (x->subject->anchor || !(a->subject->anchor || base) || x->workload != a->workload ||
	    strcmp(x->param, a->param) != 0)
		return false;
	*ratio = x->median_ns / a->median_ns;
	return true;
}

/*
 * A cross row over event_edge: xdm's bookkeeping of one declared use
 * against the driver's one record and one wait, measured in the same run.
 */
static bool edge_ratio_of(const struct bench_report *rep, const struct bench_result *x,
			  double *ratio)
{
	if (x->workload != BENCH_W_CROSS || x->subject->anchor || !rep->edge.subject)
		return false;
	*ratio = x->median_ns / rep->edge.median_ns;
	return true;
}

/* Peak reserved over the peak of live bytes as the workload asked for them. */
static bool frag_of(const struct bench_result *r, double *ratio)
{
	if (!r->has_reserved || !r->peak_asked_bytes)
		return false;
	*ratio = (double)r->peak_reserved_bytes / (double)r->peak_asked_bytes;
	return true;
}

/* ---- human ------------------------------------------------------------- */

static void ratios_start(struct bench_report *rep, int w, bool *started)
{
	if (*started)
		return;
	fprintf(rep->out, "\nratios: xdm ns / anchor ns; below 1 means xdm is faster (for threads it is also anchor ops/s / xdm ops/s)\n");
	fprintf(rep->out, "%-8s %-10s %-*s %-*s %10s\n", "workload", "param", w, "subject", w,
		"anchor", "ratio");
	*started = true;
}

static void print_ratios(struct bench_ctx *ctx)
{
	struct bench_report *rep = &ctx->report;
	int w = rep->name_width;
	FILE *f = rep->out;
	bool started = false;
	double ratio;

	if (rep->edge.subject && w < (int)strlen("event_edge"))
		w = (int)strlen("event_edge");
	for (size_t i = 0; i < rep->nresults; i++) {
		const struct bench_result *x = &rep->results[i];

		for (size_t j = 0; j < rep->nresults; j++) {
			const struct bench_result *a = &rep->results[j];

			if (!ratio_of(x, a, &ratio))
				continue;
			ratios_start(rep, w, &started);
			fprintf(f, "%-8s %-10s %-*s %-*s %#10.3g\n", bench_workload_name(x->workload),
				x->param, w, x->subject->name, w, a->subject->name, ratio);
		}
		if (edge_ratio_of(rep, x, &ratio)) {
			ratios_start(rep, w, &started);
			fprintf(f, "%-8s %-10s %-*s %-*s %#10.3g\n", bench_workload_name(x->workload),
				x->param, w, x->subject->name, w, "event_edge", ratio);
		}
	}
}

/* Notes are one line each, the first after a blank line. */
static FILE *note(struct bench_report *rep, bool *started)
{
	if (!*started)
		fputc('\n', rep->out);
	*started = true;
	return rep->out;
}

/* The fragmentation figure of a random or replay row, where it has one. */
static void print_frag(struct bench_report *rep, const struct bench_result *r, bool *started)
{
	char asked[32], res[32];
	double frag;

	if (!frag_of(r, &frag))
		return;
	human_bytes(r->peak_asked_bytes, asked, sizeof(asked));
	human_bytes(r->peak_reserved_bytes, res, sizeof(res));
	fprintf(note(rep, started), "note: %s %s: peak reserved / peak live = %.3f (reserved %s, %llu; live as asked %s, %llu)\n",
		r->subject->name, bench_workload_name(r->workload), frag, res,
		(unsigned long long)r->peak_reserved_bytes, asked,
		(unsigned long long)r->peak_asked_bytes);
}

static void print_replay_note(struct bench_report *rep, bool *started)
{
	const struct bench_replay *rp = rep->replay;

	fprintf(note(rep, started), "note: replay %s: %llu rows of %llu thread%s, each thread's in file order, merged by time; %llu allocations and %llu frees replayed by one thread (stream: the logged one modulo the subject's count), %llu allocate_failure rows skipped, %llu blocks the log never freed freed after the clock\n",
		rp->path, (unsigned long long)rp->rows, (unsigned long long)rp->threads,
		rp->threads == 1 ? "" : "s", (unsigned long long)rp->allocs,
		(unsigned long long)rp->frees, (unsigned long long)rp->failures_skipped,
		(unsigned long long)rp->left_live);
}

/* --compare: what xdm2's stack adds to xdm's, in ns per operation. */
static void print_compare(struct bench_report *rep, const struct bench_result *x, bool *started)
{
	for (size_t j = 0; x->subject->compared && j < rep->nresults; j++) {
		const struct bench_result *a = &rep->results[j];
		double ratio;

		if (a->subject->compared || a->subject->anchor || !ratio_of(x, a, &ratio))
			continue;
		fprintf(note(rep, started), "note: %s - %s, %s %s: %+.1f ns per op (median %.1f - %.1f)\n",
			x->subject->name, a->subject->name, bench_workload_name(x->workload),
			x->param, x->median_ns - a->median_ns, x->median_ns, a->median_ns);
	}
}

static void print_notes(struct bench_ctx *ctx)
{
	struct bench_report *rep = &ctx->report;
	const struct bench_edge *e = &rep->edge;
	bool threads = false, streams = false, shares = false, started = false;
	double ratio;
	char b[32];

	for (size_t i = 0; i < rep->nresults; i++) {
		const struct bench_result *r = &rep->results[i];

		if (r->workload == BENCH_W_PAIR && r->ops != r->ops_requested)
			fprintf(note(rep, &started), "note: %s pair %s ran %llu pairs per run, not %llu: by default sizes above 1M run fewer (--iterations sets the count)\n",
				r->subject->name, r->param, (unsigned long long)r->ops,
				(unsigned long long)r->ops_requested);
		if (r->workload == BENCH_W_RANDOM || r->workload == BENCH_W_REPLAY) {
			human_bytes(r->peak_live_bytes, b, sizeof(b));
			fprintf(note(rep, &started), "note: %s %s: peak live bytes %s (%llu), peak live blocks %llu",
				r->subject->name, bench_workload_name(r->workload), b,
				(unsigned long long)r->peak_live_bytes,
				(unsigned long long)r->peak_live_blocks);
			if (r->workload == BENCH_W_RANDOM)
				fprintf(rep->out, "; sizes log-uniform 256 B to 4 MiB, seed %llu",
					(unsigned long long)ctx->opts.seed);
			fputc('\n', rep->out);
			print_frag(rep, r, &started);
		}
		if (r->workload == BENCH_W_CROSS) {
			fprintf(note(rep, &started), "note: %s cross: xdm_prepare_block_use + xdm_finish_block_use, READ_WRITE, on stream 1 of a block of stream 0: median %.1f ns, min %.1f ns per use",
				r->subject->name, r->median_ns, r->min_ns);
			if (edge_ratio_of(rep, r, &ratio))
				fprintf(rep->out, "; %.3g times event_edge's median\n", ratio);
			else
				fprintf(rep->out, "; no event_edge measured to compare with\n");
		}
		threads |= r->workload == BENCH_W_THREADS;
		streams |= r->workload == BENCH_W_STREAMS;
		shares |= r->nshares > 0;
		print_compare(rep, r, &started);
	}
	if (rep->replay)
		print_replay_note(rep, &started);
	if (threads)
		fprintf(note(rep, &started), "note: threads: ns/op is per 4K pair per thread; ops/s counts the pairs of all threads\n");
	if (shares)
		fprintf(note(rep, &started), "note: threads on %zu devices: thread i runs on the (i mod %zu)-th listed device, on a stream of that device's runtime; a row SUBJECT@N under a row is device N's share of it: its threads and their pairs (the shares' ops add up to the row's), timed from the first of them to start to the last to end, so ops/s is the device's own rate\n",
			ctx->ndevices, ctx->ndevices);
	if (streams)
		fprintf(note(rep, &started), "note: streams: one thread goes round the streams; on each it allocates 64K, queues a write into the block there (a memset on a GPU, a host function on the host platform) and frees it there; ns/op is per pair, ops/s counts the pairs of every stream\n");
	for (size_t i = 0; i < rep->nskips; i++) {
		const struct bench_skip *k = &rep->skips[i];

		fprintf(note(rep, &started), "note: %s %s: not run: %s\n", k->subject->name,
			bench_workload_name(k->workload), k->why);
	}
	if (e->subject)
		fprintf(note(rep, &started), "note: event_edge: one cuEventRecord on stream %u + cuStreamWaitEvent on stream %u of %s: median %.1f ns, min %.1f ns (%llu edges per run, %u runs)\n",
			e->from_stream, e->to_stream, e->subject->name, e->median_ns, e->min_ns,
			(unsigned long long)e->iters, e->runs);
}

static void print_counters(struct bench_ctx *ctx)
{
	struct bench_report *rep = &ctx->report;
	FILE *f = rep->out;

	if (rep->nrows == 0)
		return;
	fprintf(f, "\ncounters after each workload (streams synchronized, pending frees reaped)\n");
	fprintf(f, "%-*s %-8s %17s %18s %12s %10s %10s %8s %21s\n", rep->name_width, "subject",
		"after", "bytes_outstanding", "blocks_outstanding", "bytes_peak", "allocs",
		"frees", "failures", "xdm_bytes_outstanding");
	for (size_t i = 0; i < rep->nrows; i++) {
		const struct bench_counter_row *row = &rep->rows[i];
		const struct bench_counters *c = &row->c;

		if (!row->valid) {
			fprintf(f, "%-*s %-8s (keeps no counters)\n", rep->name_width,
				row->subject->name, bench_workload_name(row->after));
			continue;
		}
		fprintf(f, "%-*s %-8s %17llu %18llu %12llu %10llu %10llu %8llu %21llu\n",
			rep->name_width, row->subject->name, bench_workload_name(row->after),
			(unsigned long long)c->bytes_outstanding,
			(unsigned long long)c->blocks_outstanding,
			(unsigned long long)c->bytes_peak, (unsigned long long)c->allocs,
			(unsigned long long)c->frees, (unsigned long long)c->failures,
			(unsigned long long)c->stack_bytes_outstanding);
	}
}

/* ---- JSON -------------------------------------------------------------- */

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* JSON has no NaN or infinity: a number that is not finite becomes null. */
static void json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.3f", v);
	else
		fputs("null", f);
}

static void json_u64(FILE *f, const char *key, uint64_t v, bool comma)
{
	fprintf(f, "\"%s\": %llu%s", key, (unsigned long long)v, comma ? ", " : "");
}

static void json_counters(FILE *f, const struct bench_counters *c)
{
	json_u64(f, "bytes_outstanding", c->bytes_outstanding, true);
	json_u64(f, "blocks_outstanding", c->blocks_outstanding, true);
	json_u64(f, "bytes_peak", c->bytes_peak, true);
	json_u64(f, "allocs", c->allocs, true);
	json_u64(f, "frees", c->frees, true);
	json_u64(f, "failures", c->failures, true);
	json_u64(f, "xdm_bytes_outstanding", c->stack_bytes_outstanding, false);
}

/* --devices: each device as "device" shows the first; null without. */
static void json_devices(FILE *f, const struct bench_ctx *ctx)
{
	fprintf(f, "  \"devices\": ");
	if (!ctx->ndevices) {
		fputs("null,\n", f);
		return;
	}
	fputc('[', f);
	for (size_t i = 0; i < ctx->ndevices; i++) {
		const struct bench_device *d = &ctx->devices[i];

		fprintf(f, "%s\n    {\"ordinal\": %u, \"name\": ", i ? "," : "", d->ordinal);
		json_str(f, d->info.name);
		fprintf(f, ", \"platform\": ");
		json_str(f, d->info.platform);
		fprintf(f, ", \"uuid\": ");
		json_str(f, d->info.uuid);
		fprintf(f, ", \"total_bytes\": %llu, \"stack\": ",
			(unsigned long long)d->info.total_bytes);
		json_str(f, d->stack);
		fputc('}', f);
	}
	fprintf(f, "\n  ],\n");
}

static void json_header(FILE *f, struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	const struct xdm_device_info *d = &ctx->dev;

	fprintf(f, "{\n  \"program\": \"xdm-bench\", \"version\": ");
	json_str(f, PACKAGE_VERSION);
	fprintf(f, ", \"libxdm\": ");
	json_str(f, xdm_version());
	fprintf(f, ",\n  \"device\": {\"ordinal\": %u, \"name\": ", o->ordinal);
	json_str(f, d->name);
	fprintf(f, ", \"platform\": ");
	json_str(f, d->platform);
	fprintf(f, ", \"uuid\": ");
	json_str(f, d->uuid);
	fprintf(f, ", \"total_bytes\": %llu},\n  \"stack\": ", (unsigned long long)d->total_bytes);
	json_str(f, ctx->stack);
	fprintf(f, ",\n  \"options\": {\"workload\": ");
	json_str(f, o->workload_name);
	fprintf(f, ", \"iterations\": ");
	if (o->iterations_set)
		fprintf(f, "%llu", (unsigned long long)o->iterations);
	else
		fputs("null", f);
	fprintf(f, ", \"repeat\": %u, \"seed\": %llu, \"anchors\": \"%s\", \"sizes\": [",
		o->repeat, (unsigned long long)o->seed, bench_anchors_name(o->anchors));
	for (size_t i = 0; i < o->nsizes; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)o->sizes[i]);
	fprintf(f, "], \"threads\": [");
	for (size_t i = 0; i < o->nthreads; i++)
		fprintf(f, "%s%u", i ? ", " : "", o->threads[i]);
	fprintf(f, "], \"streams\": ");
	if (o->streams_set)
		fprintf(f, "%u", o->streams);
	else
		fputs("null", f);
	fprintf(f, ", \"replay\": ");
	if (o->replay)
		json_str(f, o->replay);
	else
		fputs("null", f);
	fprintf(f, ", \"devices\": ");
	if (ctx->ndevices) {
		for (size_t i = 0; i < ctx->ndevices; i++)
			fprintf(f, "%s%u", i ? ", " : "[", ctx->devices[i].ordinal);
		fputc(']', f);
	} else {
		fputs("null", f);
	}
	fprintf(f, "},\n");
	json_devices(f, ctx);
	fprintf(f, "  \"subjects\": [");
	for (size_t i = 0; i < ctx->nsubjects; i++) {
		const struct bench_subject *s = &ctx->subjects[i];

		fprintf(f, "%s{\"name\": ", i ? ", " : "");
		json_str(f, s->name);
		fprintf(f, ", \"description\": ");
		json_str(f, s->desc);
		fprintf(f, ", \"anchor\": %s", s->anchor ? "true" : "false");
		for (size_t p = 0; p < s->nparts; p++) {
			fprintf(f, "%s", p ? ", " : ", \"parts\": [");
			json_str(f, s->parts[p].name);
		}
		fprintf(f, "%s}", s->nparts ? "]" : "");
	}
	fprintf(f, "],\n");
}

/* A ratio keeps its significant digits; not finite is null. */
static void json_ratio(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

/* A time that was not measured (a device without threads) is null. */
static void json_num_if(FILE *f, bool measured, double v)
{
	if (measured)
		json_num(f, v);
	else
		fputs("null", f);
}

/* --devices: a threads row's shares, one object per device. */
static void json_shares(FILE *f, const struct bench_result *r)
{
	fprintf(f, ", \"per_device\": [");
	for (size_t d = 0; d < r->nshares; d++) {
		const struct bench_share *sh = &r->shares[d];
		char name[64];

		share_name(r->subject, sh->ordinal, name, sizeof(name));
		fprintf(f, "%s{\"subject\": ", d ? ", " : "");
		json_str(f, name);
		fprintf(f, ", \"ordinal\": %u, \"threads\": %u, ", sh->ordinal, sh->threads);
		json_u64(f, "ops", sh->ops, true);
		fprintf(f, "\"share\": ");
		json_ratio(f, r->ops ? (double)sh->ops / (double)r->ops : 0);
		fprintf(f, ", \"median_ns\": ");
		json_num_if(f, sh->threads, sh->median_ns);
		fprintf(f, ", \"min_ns\": ");
		json_num_if(f, sh->threads, sh->min_ns);
		fprintf(f, ", \"ops_per_s\": ");
		json_num_if(f, sh->threads, sh->ops_per_s);
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_result(FILE *f, const struct bench_report *rep, const struct bench_result *r)
{
	double ratio;

	fprintf(f, "{\"subject\": ");
	json_str(f, r->subject->name);
	fprintf(f, ", \"workload\": \"%s\", \"param\": ", bench_workload_name(r->workload));
	json_str(f, r->param);
	fprintf(f, ", ");
	json_u64(f, "bytes", r->bytes, true);
	json_u64(f, "threads", r->threads, true);
	json_u64(f, "ops", r->ops, true);
	json_u64(f, "ops_requested", r->ops_requested, true);
	json_u64(f, "runs", r->runs, true);
	fprintf(f, "\"median_ns\": ");
	json_num(f, r->median_ns);
	fprintf(f, ", \"min_ns\": ");
	json_num(f, r->min_ns);
	fprintf(f, ", \"ops_per_s\": ");
	json_num(f, r->ops_per_s);
	if (r->workload == BENCH_W_RANDOM || r->workload == BENCH_W_REPLAY) {
		fprintf(f, ", ");
		json_u64(f, "peak_live_bytes", r->peak_live_bytes, true);
		json_u64(f, "peak_live_blocks", r->peak_live_blocks, true);
		json_u64(f, "peak_asked_bytes", r->peak_asked_bytes, true);
		fprintf(f, "\"peak_reserved_bytes\": ");
		if (r->has_reserved)
			fprintf(f, "%llu", (unsigned long long)r->peak_reserved_bytes);
		else
			fputs("null", f);
		fprintf(f, ", \"peak_reserved_over_live\": ");
		if (frag_of(r, &ratio))
			json_ratio(f, ratio);
		else
			fputs("null", f);
	}
	if (r->workload == BENCH_W_STREAMS)
		fprintf(f, ", \"streams\": %u", r->streams);
	if (r->nshares)
		json_shares(f, r);
	if (r->workload == BENCH_W_CROSS) {
		fprintf(f, ", \"from_stream\": 0, \"to_stream\": 1, \"event_edge_ratio\": ");
		if (edge_ratio_of(rep, r, &ratio))
			json_ratio(f, ratio);
		else
			fputs("null", f);
	}
	fputc('}', f);
}

static void json_counter_row(FILE *f, const struct bench_subject *s, const char *after,
			     bool valid, const struct bench_counters *c)
{
	fprintf(f, "{\"subject\": ");
	json_str(f, s->name);
	if (after)
		fprintf(f, ", \"after\": \"%s\"", after);
	if (valid) {
		fprintf(f, ", ");
		json_counters(f, c);
	} else {
		fprintf(f, ", \"counters\": null");
	}
	fputc('}', f);
}

static void json_ratio_line(FILE *f, const struct bench_result *x, const char *anchor,
			    double ratio, bool *any)
{
	fprintf(f, "%s\n    {\"workload\": \"%s\", \"param\": ", *any ? "," : "",
		bench_workload_name(x->workload));
	json_str(f, x->param);
	fprintf(f, ", \"subject\": ");
	json_str(f, x->subject->name);
	fprintf(f, ", \"anchor\": ");
	json_str(f, anchor);
	fprintf(f, ", \"ratio\": ");
	json_ratio(f, ratio);
	fputc('}', f);
	*any = true;
}

/* A ratio may be far below 1: keep its significant digits, not 3 decimals. */
static void json_ratios(FILE *f, const struct bench_report *rep)
{
	bool any = false;
	double ratio;

	fprintf(f, "  \"ratios\": [");
	for (size_t i = 0; i < rep->nresults; i++) {
		const struct bench_result *x = &rep->results[i];

		for (size_t j = 0; j < rep->nresults; j++) {
			const struct bench_result *a = &rep->results[j];

			if (ratio_of(x, a, &ratio))
				json_ratio_line(f, x, a->subject->name, ratio, &any);
		}
		if (edge_ratio_of(rep, x, &ratio))
			json_ratio_line(f, x, "event_edge", ratio, &any);
	}
	fprintf(f, "%s],\n", any ? "\n  " : "");
}

static void json_skips(FILE *f, const struct bench_report *rep)
{
	fprintf(f, "  \"skipped\": [");
	for (size_t i = 0; i < rep->nskips; i++) {
		const struct bench_skip *k = &rep->skips[i];

		fprintf(f, "%s\n    {\"subject\": ", i ? "," : "");
		json_str(f, k->subject->name);
		fprintf(f, ", \"workload\": \"%s\", \"reason\": ", bench_workload_name(k->workload));
		json_str(f, k->why);
		fputc('}', f);
	}
	fprintf(f, "%s],\n", rep->nskips ? "\n  " : "");
}

static void json_replay(FILE *f, const struct bench_replay *rp)
{
	fprintf(f, "  \"replay\": ");
	if (!rp) {
		fputs("null,\n", f);
		return;
	}
	fprintf(f, "{\"file\": ");
	json_str(f, rp->path);
	fprintf(f, ", ");
	json_u64(f, "rows", rp->rows, true);
	json_u64(f, "threads", rp->threads, true);
	json_u64(f, "allocations", rp->allocs, true);
	json_u64(f, "frees", rp->frees, true);
	json_u64(f, "allocate_failures_skipped", rp->failures_skipped, true);
	json_u64(f, "left_live", rp->left_live, true);
	json_u64(f, "peak_asked_bytes", rp->peak_bytes, true);
	json_u64(f, "peak_blocks", rp->peak_blocks, false);
	fprintf(f, "},\n");
}

static void json_edge(FILE *f, const struct bench_edge *e)
{
	fprintf(f, "  \"event_edge\": ");
	if (!e->subject) {
		fputs("null,\n", f);
		return;
	}
	fprintf(f, "{\"subject\": ");
	json_str(f, e->subject->name);
	fprintf(f, ", \"from_stream\": %u, \"to_stream\": %u, ", e->from_stream, e->to_stream);
	json_u64(f, "iterations", e->iters, true);
	json_u64(f, "runs", e->runs, true);
	fprintf(f, "\"median_ns\": ");
	json_num(f, e->median_ns);
	fprintf(f, ", \"min_ns\": ");
	json_num(f, e->min_ns);
	fprintf(f, "},\n");
}

static void print_json(struct bench_ctx *ctx, bool leak)
{
	struct bench_report *rep = &ctx->report;
	FILE *f = rep->out;

	json_header(f, ctx);
	fprintf(f, "  \"results\": [");
	for (size_t i = 0; i < rep->nresults; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_result(f, rep, &rep->results[i]);
	}
	fprintf(f, "\n  ],\n");
	json_ratios(f, rep);
	json_edge(f, &rep->edge);
	json_skips(f, rep);
	json_replay(f, rep->replay);
	fprintf(f, "  \"counters\": [");
	for (size_t i = 0; i < rep->nrows; i++) {
		const struct bench_counter_row *row = &rep->rows[i];

		fprintf(f, "%s\n    ", i ? "," : "");
		json_counter_row(f, row->subject, bench_workload_name(row->after), row->valid,
				 &row->c);
	}
	/* "final": each runtime's last counters (a group's per part), what the
	 * leak check judged. */
	fprintf(f, "\n  ],\n  \"final\": [");
	for (size_t i = 0, n = 0; i < ctx->nsubjects; i++) {
		struct bench_subject *g = &ctx->subjects[i];

		/* xdm+tree borrows xdm's runtime: a group's parts are listed as xdm's. */
		if (g->borrowed && g->nparts)
			continue;
		for (size_t d = 0; d < bench_nparts(g); d++) {
			const struct bench_subject *s = bench_part(g, d);

			fprintf(f, "%s\n    ", n++ ? "," : "");
			json_counter_row(f, s, NULL, s->has_last, &s->last);
		}
	}
	fprintf(f, "\n  ],\n  \"leak\": %s\n}\n", leak ? "true" : "false");
}

void bench_report_finish(struct bench_ctx *ctx, bool leak)
{
	if (ctx->report.json) {
		print_json(ctx, leak);
	} else {
		print_ratios(ctx);
		print_notes(ctx);
		print_counters(ctx);
	}
	fflush(ctx->report.out);
}

void bench_report_free(struct bench_report *rep)
{
	for (size_t i = 0; i < rep->nresults; i++)
		free((void *)rep->results[i].shares);
	free(rep->results);
	free(rep->rows);
	free(rep->skips);
	rep->results = NULL;
	rep->rows = NULL;
	rep->skips = NULL;
	rep->nresults = rep->nrows = rep->nskips = 0;
}
