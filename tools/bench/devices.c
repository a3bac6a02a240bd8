/* SPDX-License-Identifier: MIT */
/*
 * devices.c - --devices: the threads workload spread over several
 * devices, each with its own runtime.
 *
 * xdm keeps one runtime per device ordinal, so a program that uses two GPUs
 * talks to two runtimes.  Under --devices every subject becomes a group:
 * the same subject once per listed device (the runtime built from the same
 * --stack, --platform or configuration on that ordinal; --compare's and the
 * driver anchors likewise), its parts named "xdm@0", "xdm@1".  The group
 * stands in the subject table where the one-device subject would, so the
 * measuring loop, the ratios and the report treat it as one subject; the
 * threads workload hands thread i to part i mod n, and whatever reads a
 * runtime (settling, counters, the leak check) goes part by part.
 *
 * "all" finds the devices by building the runtime of ordinal 0, 1, ...
 * until the platform answers XDM_E_NO_DEVICE, which every platform does
 * (the cuda platform from cuDeviceGetCount, the host platform from its
 * devices= parameter); so "all" means what the runtime itself can serve,
 * through the same configuration, and needs no platform's own count here.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* What a group keeps beside its parts. */
struct bench_group {
	size_t failed;		/* the part whose settle failed, for strerror */
};

/*
 * A group is never asked to allocate: only the threads workload runs on
 * it, and it calls the parts.  Should a new workload forget, it fails with
 * a sentence instead of allocating on some device of the list.
 */
static int group_allocate(struct bench_subject *s, size_t bytes, uint32_t stream,
			  struct xdm_block *out)
{
	return -1;
}

static int group_deallocate(struct bench_subject *s, struct xdm_block *blk)
{
	return -1;
}

/* The first device's count; each thread asks its own part for its own. */
static uint32_t group_stream_count(struct bench_subject *s)
{
	return s->parts[0].ops->stream_count(&s->parts[0]);
}

static int group_settle(struct bench_subject *s)
{
	struct bench_group *g = s->priv;

	for (size_t d = 0; d < s->nparts; d++) {
		if (s->parts[d].ops->settle(&s->parts[d])) {
			g->failed = d;
			return -1;
		}
	}
	return 0;
}

/* Never read: the counters are each part's, read part by part. */
static bool group_counters(struct bench_subject *s, struct bench_counters *out)
{
	return false;
}

/* After a failed settle, the part's reason; after anything else, why not. */
static void group_strerror(struct bench_subject *s, char *buf, size_t len)
{
	struct bench_group *g = s->priv;
	struct bench_subject *p = &s->parts[g->failed];
	char why[BENCH_ERR_LEN];

	p->ops->strerror(p, why, sizeof(why));
	snprintf(buf, len, "%s: %s", p->name, why);
}

static int group_ready(struct bench_subject *s, enum bench_workload w, char *why, size_t len)
{
	if (w == BENCH_W_THREADS)
		return 0;
	snprintf(why, len, "a subject spread over --devices runs only the threads workload");
	return -1;
}

static void group_destroy(struct bench_subject *s)
{
	for (size_t d = 0; d < s->nparts; d++)
		if (s->parts[d].ops)
			s->parts[d].ops->destroy(&s->parts[d]);
	free(s->parts);
	free(s->priv);
	s->parts = NULL;
	s->nparts = 0;
	s->priv = NULL;
}

static const struct bench_subject_ops group_ops = {
	.allocate = group_allocate,
	.deallocate = group_deallocate,
	.stream_count = group_stream_count,
	.settle = group_settle,
	.counters = group_counters,
	.strerror = group_strerror,
	.destroy = group_destroy,
	.ready = group_ready,
};

int bench_group_init(struct bench_subject *g, const char *name, size_t n)
{
	memset(g, 0, sizeof(*g));
	g->parts = calloc(n, sizeof(*g->parts));
	g->priv = calloc(1, sizeof(struct bench_group));
	if (!g->parts || !g->priv) {
		fprintf(stderr, "xdm-bench: out of memory for the subjects of %zu devices\n", n);
		free(g->parts);
		free(g->priv);
		g->parts = NULL;
		g->priv = NULL;
		return -1;
	}
	/* Parts are counted as they open, so a failure destroys only those. */
	g->ops = &group_ops;
	snprintf(g->name, sizeof(g->name), "%s", name);
	return 0;
}

/* Group names are short ("cuMemAllocAsync" is the longest): 20 bytes, '@', 10 digits fit. */
void bench_group_name_part(struct bench_subject *g, size_t d, uint32_t ordinal)
{
	snprintf(g->parts[d].name, sizeof(g->parts[d].name), "%.20s@%u", g->name, ordinal);
}

/*
 * The runtime of every listed device, or of every device "all" finds.  A
 * listed device that cannot be served is the runtime's error, said, exit
 * 1, as --device with that ordinal would be.
 */
static int open_runtimes(struct bench_ctx *ctx, struct bench_subject *g)
{
	struct bench_opts *o = &ctx->opts;
	size_t n = o->devices_all ? XDM_MAX_DEVICES : o->ndevices;

	ctx->devices = calloc(n, sizeof(*ctx->devices));
	if (!ctx->devices || bench_group_init(g, "xdm", n)) {
		if (!ctx->devices)
			fprintf(stderr, "xdm-bench: out of memory for %zu devices\n", n);
		return BENCH_EXIT_FAIL;
	}
	for (size_t d = 0; d < n; d++) {
		struct bench_device *dev = &ctx->devices[d];
		uint32_t ordinal = o->devices_all ? (uint32_t)d : o->devices[d];
		int rc;

		/* Probing: the first ordinal without a device ends the list, but
		 * the first of all must exist. */
		rc = bench_subject_xdm_open_on(o, ordinal, o->devices_all && d > 0, &g->parts[d],
					       &dev->info, dev->stack, sizeof(dev->stack));
		if (rc == BENCH_NO_DEVICE)
			break;
		if (rc)
			return rc;
		g->nparts++;
		dev->ordinal = ordinal;
		bench_group_name_part(g, d, ordinal);
		if (o->devices_all)
			o->devices[o->ndevices++] = ordinal;
	}
	ctx->ndevices = g->nparts;
	snprintf(g->desc, sizeof(g->desc), "%s", ctx->devices[0].stack);
	/* The header's and the JSON's "device" are the first device's. */
	o->ordinal = ctx->devices[0].ordinal;
	ctx->dev = ctx->devices[0].info;
	snprintf(ctx->stack, sizeof(ctx->stack), "%s", ctx->devices[0].stack);
	return 0;
}

static int open_compare(struct bench_ctx *ctx, struct bench_subject *g)
{
	if (bench_group_init(g, "xdm2", ctx->ndevices))
		return BENCH_EXIT_FAIL;
	g->compared = true;
	for (size_t d = 0; d < ctx->ndevices; d++) {
		int rc = bench_subject_compare_open(&ctx->opts, ctx->devices[d].ordinal,
						    &g->parts[d]);

		if (rc)
			return rc;
		g->nparts++;
		bench_group_name_part(g, d, ctx->devices[d].ordinal);
	}
	snprintf(g->desc, sizeof(g->desc), "%s", g->parts[0].desc);
	return 0;
}

/* On failure the groups opened so far are in ctx->subjects, for main to destroy. */
int bench_devices_open(struct bench_ctx *ctx)
{
	int rc;

	ctx->nsubjects = 1;
	rc = open_runtimes(ctx, &ctx->subjects[0]);
	if (rc || !ctx->opts.compare)
		return rc;
	ctx->nsubjects = 2;
	return open_compare(ctx, &ctx->subjects[1]);
}
