/* SPDX-License-Identifier: MIT */
/*
 * cuda_edge.c - event_edge: what one cross-stream dependency costs the
 * driver, one cuEventRecord on a stream of the cuMemAllocAsync anchor and
 * one cuStreamWaitEvent on another.  It is the baseline that xdm's own
 * prepare and finish of a cross-stream use are to be held against, so it
 * is measured in the same run as everything else.
 */
#include "config.h"

#include <stdio.h>

#include "cuda_anchors.h"

struct edge_arg {
	struct bench_subject *s;
	CUevent ev;
	CUstream from, to;
	uint64_t iters;
};

static int edge_fail(struct edge_arg *e, const char *call, CUresult rc)
{
	struct cu_anchor *a = e->s->priv;
	char text[256];

	cu_text(&a->drv, rc, text, sizeof(text));
	fprintf(stderr, "xdm-bench: %s: event_edge: %s: %s\n", e->s->name, call, text);
	return -1;
}

/* One edge: what a cross-stream use costs the driver, recorded then waited. */
static int edge_once(void *arg, uint64_t *ns)
{
	struct edge_arg *e = arg;
	const struct cu_driver *d = &((struct cu_anchor *)e->s->priv)->drv;
	uint64_t t0 = bench_now_ns();

	for (uint64_t i = 0; i < e->iters; i++) {
		CUresult rc = d->cuEventRecord(e->ev, e->from);

		if (rc != CUDA_SUCCESS)
			return edge_fail(e, "cuEventRecord", rc);
		rc = d->cuStreamWaitEvent(e->to, e->ev, CU_EVENT_WAIT_DEFAULT);
		if (rc != CUDA_SUCCESS)
			return edge_fail(e, "cuStreamWaitEvent", rc);
	}
	*ns = bench_now_ns() - t0;
	return 0;
}

/*
 * The event is created once, outside every timing, without timing data (the
 * cheaper kind, which is what a runtime pools for ordering); re-recording it
 * is allowed, and each wait binds to the latest record.
 */
int bench_cuda_event_edge(struct bench_ctx *ctx, struct bench_subject *s)
{
	const struct bench_opts *o = &ctx->opts;
	struct cu_anchor *a = s->priv;
	struct bench_edge *out = &ctx->report.edge;
	struct edge_arg e = { .s = s };
	double samples[BENCH_MAX_REPEAT];
	char why[BENCH_ERR_LEN];
	CUresult rc;
	int ret;

	if (a->kind != BENCH_CUDA_ASYNC || a->nmade < 2) {
		fprintf(stderr, "xdm-bench: %s: event_edge needs two streams of the cuMemAllocAsync anchor\n",
			s->name);
		return BENCH_EXIT_FAIL;
	}
	if (cu_make_current(a)) {
		s->ops->strerror(s, why, sizeof(why));
		fprintf(stderr, "xdm-bench: %s: event_edge: %s\n", s->name, why);
		return BENCH_EXIT_FAIL;
	}
	rc = a->drv.cuEventCreate(&e.ev, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS) {
		edge_fail(&e, "cuEventCreate", rc);
		return BENCH_EXIT_FAIL;
	}
	e.from = a->streams[0];
	e.to = a->streams[1];
	e.iters = o->iterations_set ? o->iterations : BENCH_DEFAULT_EDGE_ITERS;
	/* bench_measure settles (synchronizes every stream) after each run. */
	ret = bench_measure(ctx, s, edge_once, &e, samples);
	if (ret == 0) {
		for (unsigned int i = 0; i < o->repeat; i++)
			samples[i] /= (double)e.iters;
		*out = (struct bench_edge){ .subject = s, .from_stream = 0, .to_stream = 1,
					    .iters = e.iters, .runs = o->repeat };
		bench_summarize(samples, o->repeat, &out->median_ns, &out->min_ns);
	}
	/* After a failure the streams may still hold the event: drain them first. */
	if (ret)
		cu_settle(s);
	rc = a->drv.cuEventDestroy(e.ev);
	if (rc != CUDA_SUCCESS)
		cu_warn(a, s->name, "cuEventDestroy", rc);
	return ret;
}
