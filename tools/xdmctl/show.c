/* SPDX-License-Identifier: MIT */
/*
 * show.c - a budget as text and as JSON, the same for ps and
 * budget, so that the two commands never describe one segment two ways.
 */
#include "config.h"

#include <inttypes.h>

#include "segments.h"

static const char *percent_of(uint64_t part, uint64_t whole, char *buf, size_t len)
{
	if (whole == 0 || whole == UINT64_MAX)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * (double)part / (double)whole);
	return buf;
}

void xdmctl_segment_text(FILE *f, const struct xdmctl_segment *seg)
{
	char a[32], b[32], c[32], pct[16];

	if (seg->unreadable[0]) {
		fprintf(f, "budget %s: /%s %s (owner uid %u)\n", seg->key, seg->name,
			seg->unreadable, (unsigned int)seg->owner);
		return;
	}
	fprintf(f, "budget %s: limit %s, used %s (%s), peak %s, refusals %" PRIu64 "\n", seg->key,
		seg->limit == UINT64_MAX ? "none" : xdmctl_human(seg->limit, a, sizeof(a)),
		xdmctl_human(seg->used, b, sizeof(b)), percent_of(seg->used, seg->limit, pct, sizeof(pct)),
		xdmctl_human(seg->peak, c, sizeof(c)), seg->refusals);
	if (seg->unsettled)
		fprintf(f, "  %u dead process%s stopped inside a change: too much is counted until a "
			"quiet moment (xdm-budget(7), budget/unsettled)\n",
			seg->unsettled, seg->unsettled == 1 ? "" : "es");
}

static void json_u64(FILE *f, const char *name, uint64_t v, bool comma)
{
	fprintf(f, "\"%s\": %" PRIu64 "%s", name, v, comma ? ", " : "");
}

void xdmctl_segment_json(FILE *f, const struct xdmctl_segment *seg, bool with_procs)
{
	char name[sizeof(seg->name) + 1];

	snprintf(name, sizeof(name), "/%s", seg->name);
	fputs("{\"key\": ", f);
	xdmctl_json_string(f, seg->key);
	fputs(", \"segment\": ", f);
	xdmctl_json_string(f, name);
	fputs(", \"path\": ", f);
	xdmctl_json_string(f, seg->path);
	fprintf(f, ", \"owner_uid\": %u, ", (unsigned int)seg->owner);
	if (seg->unreadable[0]) {
		fputs("\"error\": ", f);
		xdmctl_json_string(f, seg->unreadable);
		fputc('}', f);
		return;
	}
	json_u64(f, "limit", seg->limit, true);
	json_u64(f, "used", seg->used, true);
	json_u64(f, "remaining", seg->used < seg->limit ? seg->limit - seg->used : 0, true);
	json_u64(f, "peak", seg->peak, true);
	json_u64(f, "refusals", seg->refusals, true);
	fputs("\"device\": ", f);
	xdmctl_json_string(f, seg->device_uuid);
	fputs(", ", f);
	json_u64(f, "device_total", seg->device_total, true);
	json_u64(f, "unsettled", seg->unsettled, true);
	fputs("\"groups\": [", f);
	for (size_t i = 0; i < seg->ngroups; i++) {
		fputs(i ? ", {" : "{", f);
		xdmctl_group_json(f, &seg->groups[i]);
		fputc('}', f);
	}
	fputs("], ", f);
	json_u64(f, "nprocesses", seg->nprocs, with_procs);
	if (with_procs) {
		fputs("\"processes\": [", f);
		for (size_t i = 0; i < seg->nprocs; i++) {
			const struct xdmctl_proc *p = &seg->procs[i];

			fprintf(f, "%s{\"pid\": %d, \"here\": %s, \"pid_here\": ", i ? ", " : "",
				(int)p->pid, p->here ? "true" : "false");
			if (p->pid_here)
				fprintf(f, "%d", (int)p->pid_here);
			else
				fputs("null", f);
			fprintf(f, ", \"pidns\": %" PRIu64 ", \"state\": \"%s\", \"via\": \"%s\", "
				"\"command\": ", p->pidns, xdmctl_proc_state_name(p->state),
				xdmctl_proc_via(p));
			xdmctl_json_string(f, p->comm);
			fputs(", \"container\": ", f);
			xdmctl_json_string(f, p->container);
			fputs(", \"group\": ", f);
			if (p->group[0])
				xdmctl_json_string(f, p->group);
			else
				fputs("null", f);
			fprintf(f, ", \"bytes\": %" PRIu64 ", \"mount\": ", p->used);
			if (p->mount)
				xdmctl_json_string(f, p->mount->path);
			else
				fputs("null", f);
			fputc('}', f);
		}
		fputc(']', f);
	}
	fputc('}', f);
}

void xdmctl_group_json(FILE *f, const struct xdmctl_group *g)
{
	fputs("\"name\": ", f);
	xdmctl_json_string(f, g->name);
	fputs(", ", f);
	json_u64(f, "members", g->members, true);
	json_u64(f, "limit", g->limit, true);
	json_u64(f, "used", g->used, true);
	json_u64(f, "remaining", g->used < g->limit ? g->limit - g->used : 0, true);
	json_u64(f, "peak", g->peak, true);
	json_u64(f, "refusals", g->refusals, false);
}
