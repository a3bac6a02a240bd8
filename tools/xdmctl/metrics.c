/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - xdmctl metrics: every budget, group and process of the
 * machine in Prometheus's text exposition format, version 0.0.4.
 *
 * It reads the segments as ps does (segments.c: mapped read-only, no
 * lock taken) and changes nothing.  The format wants every sample of a
 * metric after its one HELP and TYPE, so each metric is a pass over all
 * the budgets.  Names are xdm_ and the thing and its base unit (bytes;
 * counters end in _total).  A budget is labelled by gpu (its device's
 * UUID) and key, which alone tell budgets apart; a group adds group; a
 * process adds pid and pidns (a pid is one process only inside its pid
 * namespace: two containers each have a pid 1), container, group and
 * command.  A limit of max, no limit at all, is +Inf.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "segments.h"
#include "utf8.h"

enum scope { BUDGET, GROUP, PROCESS };

/* How a metric's value is read from its thing. */
enum reading {
	FIELD_U64,	/* the uint64_t at offset */
	FIELD_U32,	/* the uint32_t at offset */
	LIMIT,		/* the uint64_t at offset, UINT64_MAX (no limit) as +Inf */
	LIVE,		/* 1 for a process that is not dead, else 0 */
};

struct metric {
	const char *name, *type, *help;
	enum scope scope;
	enum reading reading;
	size_t offset;
};

#define SEG(field) offsetof(struct xdmctl_segment, field)
#define GRP(field) offsetof(struct xdmctl_group, field)
#define PROC(field) offsetof(struct xdmctl_proc, field)

static const struct metric metrics[] = {
	{ "xdm_budget_limit_bytes", "gauge",
	  "Bytes the processes of a device's budget may hold together (+Inf: no limit).", BUDGET,
	  LIMIT, SEG(limit) },
	{ "xdm_budget_used_bytes", "gauge",
	  "Bytes held by the processes of a device's budget, their threads' credit included.",
	  BUDGET, FIELD_U64, SEG(used) },
	{ "xdm_budget_peak_bytes", "gauge",
	  "The highest used bytes of a budget since its segment was made.", BUDGET, FIELD_U64,
	  SEG(peak) },
	{ "xdm_budget_refusals_total", "counter",
	  "Allocations a budget refused, in every process, since its segment was made.", BUDGET,
	  FIELD_U64, SEG(refusals) },
	{ "xdm_budget_group_limit_bytes", "gauge",
	  "Bytes the processes of a group may hold together inside their budget (+Inf: no "
	  "limit of the group's own).",
	  GROUP, LIMIT, GRP(limit) },
	{ "xdm_budget_group_used_bytes", "gauge",
	  "Bytes held by the processes of a group, their threads' credit included.", GROUP,
	  FIELD_U64, GRP(used) },
	{ "xdm_budget_group_peak_bytes", "gauge",
	  "The highest used bytes of a group since it was made.", GROUP, FIELD_U64, GRP(peak) },
	{ "xdm_budget_group_refusals_total", "counter",
	  "Allocations a group's limit refused (counted in the budget's refusals too).", GROUP,
	  FIELD_U64, GRP(refusals) },
	{ "xdm_budget_group_members", "gauge", "Processes in a group.", GROUP, FIELD_U32,
	  GRP(members) },
	{ "xdm_process_held_bytes", "gauge",
	  "Bytes a process holds in a budget, as its slot of the segment says; a dead process's "
	  "until a reclaim gives them back.",
	  PROCESS, FIELD_U64, PROC(used) },
	{ "xdm_process_live", "gauge",
	  "1 while a process of a budget runs (or is stopped), 0 when it is dead and its bytes "
	  "still counted.",
	  PROCESS, LIVE, 0 },
};

#define NMETRICS (sizeof(metrics) / sizeof(metrics[0]))

/*
 * A label value: backslash, double quote and newline escaped, as the
 * format asks, and a byte that is not UTF-8 as U+FFFD (the format is
 * UTF-8; names and cgroups are bytes a process chose).
 */
static void label(FILE *f, const char *name, const char *value, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	while (*value) {
		unsigned char c = (unsigned char)*value;
		uint32_t cp;
		size_t n;

		if (c == '\\' || c == '"') {
			fprintf(f, "\\%c", c);
			value++;
		} else if (c == '\n') {
			fputs("\\n", f);
			value++;
		} else if (c < 0x80) {
			fputc(c, f);
			value++;
		} else if ((n = utf8_char(value, &cp)) != 0) {
			fwrite(value, 1, n, f);
			value += n;
		} else {
			fputs(UTF8_REPLACEMENT, f);
			value++;
		}
	}
	fputc('"', f);
}

static void sample(FILE *f, const struct metric *m, const void *thing)
{
	const char *at = (const char *)thing + m->offset;
	uint64_t v;
	uint32_t v32;

	switch (m->reading) {
	case FIELD_U32:
		memcpy(&v32, at, sizeof(v32));
		v = v32;
		break;
	case LIVE:
		v = ((const struct xdmctl_proc *)thing)->state != XDMCTL_PROC_DEAD;
		break;
	default:
		memcpy(&v, at, sizeof(v));
		break;
	}
	if (m->reading == LIMIT && v == UINT64_MAX)
		fputs("} +Inf\n", f);
	else
		fprintf(f, "} %" PRIu64 "\n", v);
}

static void budget_labels(FILE *f, const struct metric *m, const struct xdmctl_segment *seg)
{
	fprintf(f, "%s{", m->name);
	label(f, "gpu", seg->device_uuid, true);
	label(f, "key", seg->key, false);
}

static void write_metric(FILE *f, const struct metric *m, const struct xdmctl_segment *segs,
			 size_t n)
{
	char pid[16], pidns[24];

	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
	for (size_t i = 0; i < n; i++) {
		const struct xdmctl_segment *seg = &segs[i];

		if (seg->unreadable[0])
			continue;
		if (m->scope == BUDGET) {
			budget_labels(f, m, seg);
			sample(f, m, seg);
			continue;
		}
		if (m->scope == GROUP) {
			for (size_t k = 0; k < seg->ngroups; k++) {
				budget_labels(f, m, seg);
				label(f, "group", seg->groups[k].name, false);
				sample(f, m, &seg->groups[k]);
			}
			continue;
		}
		for (size_t k = 0; k < seg->nprocs; k++) {
			const struct xdmctl_proc *p = &seg->procs[k];

			snprintf(pid, sizeof(pid), "%d", (int)p->pid);
			snprintf(pidns, sizeof(pidns), "%" PRIu64, p->pidns);
			budget_labels(f, m, seg);
			label(f, "pid", pid, false);
			label(f, "pidns", pidns, false);
			label(f, "container", p->container, false);
			label(f, "group", p->group, false);
			label(f, "command", p->comm, false);
			label(f, "via", xdmctl_proc_via(p), false);
			sample(f, m, p);
		}
	}
}

/* A comment is one line: a newline in a path or a reason would end it. */
static void comment_text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
}

int xdmctl_metrics_write(const struct xdmctl_ctx *ctx, const char *cmd, FILE *f)
{
	struct xdmctl_segment *segs = NULL;
	size_t n = 0;
	int rc = xdmctl_segments_read(ctx, cmd, &segs, &n);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!segs[i].unreadable[0])
			continue;
		fputs("# skipped ", f);
		comment_text(f, segs[i].path);
		fputs(": ", f);
		comment_text(f, segs[i].unreadable);
		fputc('\n', f);
	}
	for (size_t i = 0; i < NMETRICS; i++)
		write_metric(f, &metrics[i], segs, n);
	free(segs);
	return XDMCTL_EXIT_OK;
}

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--dir DIR] metrics\n"
	      "\n"
	      "Every budget, group and process of this machine as Prometheus metrics\n"
	      "(the text format, version 0.0.4), on standard output; xdmctl serve\n"
	      "answers the same over HTTP.  Reads what ps reads, changes nothing.\n"
	      "\n"
	      "  --dir DIR  the directory of the budgets' segments\n",
	      f);
}

int xdmctl_metrics(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int rc;

	optind = 1;
	while (xdmctl_next_option(ctx, argc, argv, "h", longopts, usage, &rc) != -1)
		;
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (ctx->json)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "metrics",
				   "has no --json: it writes Prometheus's text format");
	if (optind < argc)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "metrics", "takes no argument ('%s')",
				   argv[optind]);
	rc = xdmctl_metrics_write(ctx, "metrics", stdout);
	if (rc)
		return rc;
	if (fflush(stdout) != 0 || ferror(stdout))
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "metrics", "cannot write standard output");
	return XDMCTL_EXIT_OK;
}
