/* SPDX-License-Identifier: MIT */
/*
 * timeline_html.c - a timeline as one HTML page: a sentence of facts, the
 * SVG inline and a table with a row per key.  Like the drawing it needs
 * nothing from elsewhere, and it is well-formed XML as well as HTML, so
 * that a test or a script can read it with an XML parser.
 */
#include "config.h"

#include "markup.h"
#include "timeline.h"

static const char style[] =
	"body { font-family: sans-serif; margin: 1.5em; color: #222222; }\n"
	"table { border-collapse: collapse; margin-top: 1em; }\n"
	"th, td { padding: 3px 10px; border-bottom: 1px solid #dddddd; text-align: right; }\n"
	"th.key, td.key { text-align: left; }\n"
	"span.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.4em; }\n"
	"tr.total td { font-weight: bold; }\n";

static void cell_bytes(FILE *f, uint64_t bytes)
{
	char human[32];

	xdmctl_human(bytes, human, sizeof(human));
	fprintf(f, "<td data-bytes=\"%llu\">%s</td>", (unsigned long long)bytes, human);
}

static void cell_count(FILE *f, uint64_t n)
{
	fprintf(f, "<td>%llu</td>", (unsigned long long)n);
}

static void facts(FILE *f, const struct timeline *tl)
{
	char bytes[32], since[32];

	fprintf(f, "<p>%llu rows of %llu thread%s: %llu allocations, %llu frees",
		(unsigned long long)tl->log->nrows, (unsigned long long)tl->log->threads,
		tl->log->threads == 1 ? "" : "s", (unsigned long long)tl->allocs,
		(unsigned long long)tl->frees);
	if (tl->free_failures)
		fprintf(f, " (%llu of them free_failure)", (unsigned long long)tl->free_failures);
	fprintf(f, ", %llu allocate failures.", (unsigned long long)tl->failures);
	if (tl->has_peak) {
		xdmctl_human(tl->peak_bytes, bytes, sizeof(bytes));
		timeline_duration(since, sizeof(since), tl->peak_time - tl->t0);
		fprintf(f, " The peak, %s live, came %s after the first row (line %llu).", bytes,
			since, (unsigned long long)tl->peak_line);
		xdmctl_human(tl->left_bytes, bytes, sizeof(bytes));
		fprintf(f, " After the last row %llu block%s (%s) were still live.",
			(unsigned long long)tl->left_blocks, tl->left_blocks == 1 ? "" : "s",
			bytes);
	} else {
		fputs(" No block was allocated: there is nothing to draw.", f);
	}
	if (tl->nseries && tl->series[tl->nseries - 1].key == TIMELINE_OTHER)
		fprintf(f, " The %u largest %ss have a band each; the other %u share the grey one.",
			tl->nseries - 1, tl->by == TIMELINE_BY_TAG ? "tag" : "stream",
			tl->series[tl->nseries - 1].members);
	fputs("</p>\n", f);
}

static void table(FILE *f, const struct timeline *tl)
{
	fprintf(f, "<table>\n<tr><th class=\"key\">%s</th><th>at the peak</th>"
		"<th>own maximum</th><th>allocations</th><th>frees</th>"
		"<th>allocate failures</th></tr>\n",
		tl->by == TIMELINE_BY_TAG ? "tag" : "stream");
	for (uint32_t i = 0; i < tl->nkeys; i++) {
		const struct timeline_key *k = &tl->keys[tl->rank[i]];
		const struct timeline_series *se = &tl->series[k->series];

		fputs("<tr class=\"key\" data-key=\"", f);
		markup_text(f, k->name, 0, false);
		fprintf(f, "\"%s><td class=\"key\">"
			"<span class=\"swatch\" style=\"background: #%06x\"></span>",
			se->key == TIMELINE_OTHER ? " data-other=\"1\"" : "", se->color);
		markup_text(f, k->name, 0, true);
		fputs("</td>", f);
		cell_bytes(f, k->at_peak);
		cell_bytes(f, k->max);
		cell_count(f, k->allocs);
		cell_count(f, k->frees);
		cell_count(f, k->failures);
		fputs("</tr>\n", f);
	}
	fputs("<tr class=\"total\"><td class=\"key\">all</td>", f);
	cell_bytes(f, tl->peak_bytes);
	cell_bytes(f, tl->peak_bytes);
	cell_count(f, tl->allocs);
	cell_count(f, tl->frees);
	cell_count(f, tl->failures);
	fputs("</tr>\n</table>\n", f);
}

int timeline_html(FILE *f, const struct timeline *tl, const struct timeline_view *v)
{
	struct timeline_view inline_view = *v;

	inline_view.in_html = true;
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
	      "<title>Memory over time: ", f);
	markup_text(f, v->title, 0, true);
	fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>Memory over time: ", style);
	markup_text(f, v->title, 0, true);
	fputs("</h1>\n", f);
	facts(f, tl);
	if (timeline_svg(f, tl, &inline_view))
		return -1;
	table(f, tl);
	fputs("</body>\n</html>\n", f);
	return 0;
}
