/* SPDX-License-Identifier: MIT */
/*
 * timeline_svg.c - draws a timeline (timeline_model.c) as one SVG: live
 * bytes stacked by series over time, the peak marked and named, the
 * allocate failures ticked under the time axis, axes and a legend.
 *
 * The drawing needs nothing but itself: no script, no style sheet, no
 * font or image from elsewhere.  Its size is bounded by the columns times
 * the series (plus a line per key for the keys folded into "other"),
 * never by the rows.  What a program may want to read back is in data-
 * attributes (xdmctl(1), TIMELINE): exact bytes and nanoseconds, where the
 * text shows rounded ones.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "markup.h"
#include "timeline.h"

/* The frame around the plot, in px. */
#define PLOT_LEFT 84
#define PLOT_TOP 56
#define PLOT_BOTTOM 52		/* under the plot: the time axis */
#define LEGEND_WIDTH 250	/* right of the plot */
#define GAP 16
#define LEGEND_ROW 18
#define LEGEND_NAME_CHARS 22	/* a longer name is cut; its <title> has it whole */

#define PEAK_LABEL_WIDTH 240	/* about, in the font of the labels */

#define FAILURE_COLOR "#d00000"

struct frame {
	double left, top, width, height;	/* the plot */
	uint64_t ytop;				/* bytes at its top edge */
	uint64_t ystep;
};

uint32_t timeline_plot_width(unsigned int width)
{
	return width - PLOT_LEFT - GAP - LEGEND_WIDTH;
}

static double y_of(const struct frame *fr, uint64_t bytes)
{
	return fr->top + fr->height - (double)bytes / (double)fr->ytop * fr->height;
}

/* A coordinate in tenths of a pixel, the precision the paths are written in. */
static long tenths(double v)
{
	return lround(v * 10.0);
}

static void put_tenths(FILE *f, long t)
{
	fprintf(f, "%s%ld.%ld", t < 0 ? "-" : "", labs(t) / 10, labs(t) % 10);
}

/* An attribute holding a name: data-key="..." */
static void attr_key(FILE *f, const char *name, const char *value)
{
	fprintf(f, " %s=\"", name);
	markup_text(f, value, 0, false);
	fputc('"', f);
}

static void attr_u64(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, " %s=\"%llu\"", name, (unsigned long long)v);
}

static const char *key_word(const struct timeline *tl)
{
	return tl->by == TIMELINE_BY_TAG ? "tag" : "stream";
}

static void head(FILE *f, const struct timeline *tl, const struct timeline_view *v)
{
	const struct logcsv *log = tl->log;
	char peak[32] = "", at[32] = "";

	if (!v->in_html)
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\""
		" viewBox=\"0 0 %u %u\" font-family=\"sans-serif\" font-size=\"12\"",
		v->width, v->height, v->width, v->height);
	fprintf(f, " data-by=\"%s\"", key_word(tl));
	attr_u64(f, "data-rows", log->nrows);
	attr_u64(f, "data-threads", log->threads);
	attr_u64(f, "data-allocations", tl->allocs);
	attr_u64(f, "data-frees", tl->frees);
	attr_u64(f, "data-free-failures", tl->free_failures);
	attr_u64(f, "data-failures", tl->failures);
	attr_u64(f, "data-left-bytes", tl->left_bytes);
	attr_u64(f, "data-left-blocks", tl->left_blocks);
	attr_u64(f, "data-columns", tl->nbins);
	if (log->nrows) {
		attr_u64(f, "data-start-ns", tl->t0);
		attr_u64(f, "data-end-ns", tl->t1);
	}
	fputs(">\n<title>Memory over time: ", f);
	markup_text(f, v->title, 0, true);
	fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", f);
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
		"Memory over time: ", PLOT_LEFT);
	markup_text(f, v->title, 80, true);
	fputs("</text>\n", f);
	if (tl->has_peak) {
		xdmctl_human(tl->peak_bytes, peak, sizeof(peak));
		timeline_duration(at, sizeof(at), tl->peak_time - tl->t0);
	}
	fprintf(f, "<text x=\"%d\" y=\"42\" fill=\"#555555\">"
		"live bytes by %s; %llu rows of %llu thread%s", PLOT_LEFT, key_word(tl),
		(unsigned long long)log->nrows, (unsigned long long)log->threads,
		log->threads == 1 ? "" : "s");
	if (tl->has_peak)
		fprintf(f, "; peak %s at %s", peak, at);
	fputs("</text>\n", f);
}

/* The byte axis: grid lines and their labels, 0 at the bottom. */
static void byte_axis(FILE *f, const struct frame *fr)
{
	char label[32];

	fputs("<g id=\"bytes-axis\" font-size=\"11\" text-anchor=\"end\">\n", f);
	for (uint64_t b = 0; b <= fr->ytop; b += fr->ystep) {
		double y = y_of(fr, b);

		timeline_bytes_tick(label, sizeof(label), b);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>",
			fr->left, y, fr->left + fr->width, y, b ? "#e4e4e4" : "#444444");
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" data-bytes=\"%llu\">%s</text>\n",
			fr->left - 6, y + 4, (unsigned long long)b, label);
		if (fr->ytop - b < fr->ystep)
			break;
	}
	fputs("</g>\n", f);
}

/* The time axis: ticks since the first row, and its name. */
static void time_axis(FILE *f, const struct timeline *tl, const struct frame *fr)
{
	uint64_t span = tl->t1 - tl->t0;
	uint64_t step = timeline_time_step(span, (unsigned int)(fr->width / 90) + 1);
	double bottom = fr->top + fr->height;
	char label[32];

	fprintf(f, "<g id=\"time-axis\" font-size=\"11\" text-anchor=\"middle\">\n");
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n",
		fr->left, fr->top, fr->left, bottom);
	/* No rows, no time: no ticks. */
	for (uint64_t t = 0; tl->log->nrows != 0; t += step) {
		double x = fr->left + (double)t / ((double)span + 1.0) * tl->nbins;

		timeline_time_tick(label, sizeof(label), t, span, step);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\""
			" stroke=\"#444444\"/>", x, bottom, x, bottom + 4);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" data-since-ns=\"%llu\">%s</text>\n", x,
			bottom + 28, (unsigned long long)t, label);
		/* Up to the last row; no step past it (nor past 2^64). */
		if (span - t < step)
			break;
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">time since the first row</text>\n",
		fr->left + fr->width / 2, bottom + 46);
	fputs("</g>\n", f);
}

/* A step to y at x, in tenths of a pixel: H to where the level changes, then V. */
static void step_to(FILE *f, long x, long y)
{
	fputc('H', f);
	put_tenths(f, x);
	fputc('V', f);
	put_tenths(f, y);
}

/*
 * A series' band: its top edge left to right, its bottom edge back, one
 * step where a column's level differs from its neighbour's, so that a flat
 * stretch costs nothing however many columns it spans.
 */
static void band(FILE *f, const struct timeline *tl, const struct frame *fr, uint32_t s,
		 const uint64_t *below)
{
	const size_t ns = tl->nseries;
	const uint32_t nb = tl->nbins;
	bool any = false;
	long y, prev;

	for (uint32_t b = 0; b < nb && !any; b++)
		any = tl->bins[(size_t)b * ns + s] != 0;
	if (!any)
		return;
	prev = tenths(y_of(fr, below[0] + tl->bins[s]));
	fputs("<path d=\"M", f);
	put_tenths(f, tenths(fr->left));
	fputc(',', f);
	put_tenths(f, prev);
	for (uint32_t b = 1; b < nb; b++) {
		y = tenths(y_of(fr, below[b] + tl->bins[(size_t)b * ns + s]));
		if (y != prev)
			step_to(f, tenths(fr->left + b), y);
		prev = y;
	}
	prev = tenths(y_of(fr, below[nb - 1]));
	step_to(f, tenths(fr->left + nb), prev);
	for (uint32_t b = nb - 1; b-- > 0;) {
		y = tenths(y_of(fr, below[b]));
		if (y != prev)
			step_to(f, tenths(fr->left + b + 1), y);
		prev = y;
	}
	fputc('H', f);
	put_tenths(f, tenths(fr->left));
	fputs("Z\"/>\n", f);
}

static void key_facts(FILE *f, const struct timeline_key *k)
{
	attr_key(f, "data-key", k->name);
	attr_u64(f, "data-peak-bytes", k->at_peak);
	attr_u64(f, "data-max-bytes", k->max);
	attr_u64(f, "data-allocations", k->allocs);
	attr_u64(f, "data-frees", k->frees);
	attr_u64(f, "data-failures", k->failures);
}

/*
 * Every series, bottom of the stack first; "other" lists its keys inside.
 * below: a column each, zeros, for the top of the bands drawn so far.
 */
static void series(FILE *f, const struct timeline *tl, const struct frame *fr, uint64_t *below)
{
	fputs("<g id=\"series\" stroke=\"none\">\n", f);
	for (uint32_t s = 0; s < tl->nseries; s++) {
		const struct timeline_series *se = &tl->series[s];

		fputs("<g class=\"series\"", f);
		if (se->key == TIMELINE_OTHER) {
			fputs(" data-key=\"other\"", f);
			attr_u64(f, "data-other", se->members);
			attr_u64(f, "data-peak-bytes", se->at_peak);
			attr_u64(f, "data-max-bytes", se->max);
			attr_u64(f, "data-allocations", se->allocs);
			attr_u64(f, "data-frees", se->frees);
			attr_u64(f, "data-failures", se->failures);
		} else {
			key_facts(f, &tl->keys[se->key]);
		}
		fprintf(f, " fill=\"#%06x\">\n", se->color);
		band(f, tl, fr, s, below);
		if (se->key == TIMELINE_OTHER) {
			for (uint32_t i = 0; i < tl->nkeys; i++) {
				const struct timeline_key *k = &tl->keys[tl->rank[i]];

				if (k->series != s)
					continue;
				fputs("<g class=\"member\"", f);
				key_facts(f, k);
				fputs("/>\n", f);
			}
		}
		fputs("</g>\n", f);
		for (uint32_t b = 0; b < tl->nbins; b++)
			below[b] += tl->bins[(size_t)b * tl->nseries + s];
	}
	fputs("</g>\n", f);
}

/* A short tick under the time axis for each column with allocate failures. */
static void failures(FILE *f, const struct timeline *tl, const struct frame *fr)
{
	double bottom = fr->top + fr->height;

	fprintf(f, "<g id=\"failures\" data-count=\"%llu\" stroke=\"%s\" stroke-width=\"1.5\">\n",
		(unsigned long long)tl->failures, FAILURE_COLOR);
	if (tl->failures) {
		fprintf(f, "<title>%llu allocate failure%s (ticks under the time axis)</title>\n",
			(unsigned long long)tl->failures, tl->failures == 1 ? "" : "s");
		fputs("<path d=\"", f);
		for (uint32_t b = 0; b < tl->nbins; b++) {
			if (tl->bin_failures[b])
				fprintf(f, "M%.1f,%.1fv8", fr->left + b + 0.5, bottom + 1);
		}
		fputs("\"/>\n", f);
	}
	fputs("</g>\n", f);
}

/* A label that reads on any band: a white halo under the letters. */
#define HALO "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\""

/* How many keys the peak names: the top ones that hold bytes at it. */
static unsigned int peak_labels(const struct timeline *tl, unsigned int top)
{
	unsigned int n = 0;

	for (uint32_t i = 0; i < tl->nkeys && n < top; i++)
		n += tl->keys[i].at_peak != 0;
	return n;
}

/*
 * The peak: a line at its column, its bytes, its time and its top keys.
 * shown: a flag for each key, false.
 */
static void peak(FILE *f, const struct timeline *tl, const struct frame *fr, unsigned int top,
		 bool *shown)
{
	uint32_t pb;
	double x, tx;
	char bytes[32], since[32];
	const char *anchor;

	if (!tl->has_peak) {
		fputs("<g id=\"peak\" data-bytes=\"0\"/>\n", f);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\""
			" fill=\"#555555\">%s</text>\n",
			fr->left + fr->width / 2, fr->top + fr->height / 2,
			tl->log->nrows ? "No block was allocated in this log: nothing to draw." :
					 "The log has no rows: nothing to draw.");
		return;
	}
	pb = timeline_bin(tl, tl->peak_time);
	x = fr->left + pb + 0.5;
	xdmctl_human(tl->peak_bytes, bytes, sizeof(bytes));
	timeline_duration(since, sizeof(since), tl->peak_time - tl->t0);
	fputs("<g id=\"peak\"", f);
	attr_u64(f, "data-bytes", tl->peak_bytes);
	attr_u64(f, "data-time-ns", tl->peak_time);
	attr_u64(f, "data-since-ns", tl->peak_time - tl->t0);
	attr_u64(f, "data-line", tl->peak_line);
	attr_u64(f, "data-column", pb);
	fputs(">\n", f);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222222\""
		" stroke-dasharray=\"4 3\"/>\n",
		x, fr->top - 4, x, fr->top + fr->height);
	/* The label goes right of the line where it fits, else where there is more room. */
	if (fr->left + fr->width - x >= PEAK_LABEL_WIDTH ||
	    fr->left + fr->width - x >= x - fr->left) {
		tx = x + 6;
		anchor = "start";
	} else {
		tx = x - 6;
		anchor = "end";
	}
	/*
	 * A pale card under the labels: the halo keeps them readable where
	 * paint-order is drawn, the card everywhere else (librsvg, printers).
	 */
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#ffffff\""
		" fill-opacity=\"0.8\"/>\n",
		anchor[0] == 's' ? tx - 3 : tx - PEAK_LABEL_WIDTH + 3, fr->top, PEAK_LABEL_WIDTH,
		18.0 + 14.0 * peak_labels(tl, top));
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-weight=\"bold\" %s>"
		"peak %s at %s</text>\n",
		tx, fr->top + 12, anchor, HALO, bytes, since);
	for (unsigned int n = 0; n < top; n++) {
		uint32_t best = UINT32_MAX;

		/* The n-th largest at the peak, by a scan: top is small. */
		for (uint32_t i = 0; i < tl->nkeys; i++) {
			uint32_t k = tl->rank[i];

			if (!shown[k] && tl->keys[k].at_peak &&
			    (best == UINT32_MAX || tl->keys[k].at_peak > tl->keys[best].at_peak))
				best = k;
		}
		if (best == UINT32_MAX)
			break;
		shown[best] = true;
		xdmctl_human(tl->keys[best].at_peak, bytes, sizeof(bytes));
		fprintf(f, "<text class=\"peak-key\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s",
			tx, fr->top + 28 + 14.0 * n, anchor, HALO);
		attr_key(f, "data-key", tl->keys[best].name);
		attr_u64(f, "data-bytes", tl->keys[best].at_peak);
		fputc('>', f);
		markup_text(f, tl->keys[best].name, LEGEND_NAME_CHARS, true);
		fprintf(f, ": %s</text>\n", bytes);
	}
	fputs("</g>\n", f);
}

/* The legend, right of the plot: the top band first, as stacked. */
static void legend(FILE *f, const struct timeline *tl, const struct frame *fr)
{
	double x = fr->left + fr->width + GAP, right = x + LEGEND_WIDTH - 8;
	char max[32];

	fprintf(f, "<g id=\"legend\">\n<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">%s</text>",
		x, fr->top, key_word(tl));
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555555\">"
		"own maximum</text>\n",
		right, fr->top);
	for (uint32_t i = 0; i < tl->nseries; i++) {
		const struct timeline_series *se = &tl->series[tl->nseries - 1 - i];
		double y = fr->top + LEGEND_ROW * (i + 1);

		xdmctl_human(se->max, max, sizeof(max));
		fputs("<g class=\"legend-item\"", f);
		if (se->key == TIMELINE_OTHER)
			fputs(" data-key=\"other\"", f);
		else
			attr_key(f, "data-key", tl->keys[se->key].name);
		fputs("><title>", f);
		/* The whole name, or the names "other" holds, one a line. */
		for (uint32_t k = 0, n = 0; k < tl->nkeys; k++) {
			const struct timeline_key *key = &tl->keys[tl->rank[k]];

			if (key->series != (uint32_t)(se - tl->series))
				continue;
			if (n++)
				fputs("&#10;", f);
			markup_text(f, key->name, 0, true);
		}
		fprintf(f, "</title><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\""
			" fill=\"#%06x\"/>",
			x, y - 10, se->color);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 18, y);
		if (se->key == TIMELINE_OTHER)
			fprintf(f, "other (%u %ss)", se->members, key_word(tl));
		else
			markup_text(f, tl->keys[se->key].name, LEGEND_NAME_CHARS, true);
		fprintf(f, "</text><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text></g>\n",
			right, y, max);
	}
	if (tl->failures) {
		double y = fr->top + LEGEND_ROW * (tl->nseries + 1.5);

		fprintf(f, "<g class=\"legend-item\"><path d=\"M%.1f,%.1fv10\" stroke=\"%s\""
			" stroke-width=\"1.5\"/>",
			x + 6, y - 10, FAILURE_COLOR);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">allocate failures: %llu</text></g>\n",
			x + 18, y, (unsigned long long)tl->failures);
	}
	fputs("</g>\n", f);
}

int timeline_svg(FILE *f, const struct timeline *tl, const struct timeline_view *v)
{
	uint64_t *below = calloc(tl->nbins, sizeof(*below));
	bool *shown = calloc(tl->nkeys ? tl->nkeys : 1, sizeof(*shown));
	struct frame fr = {
		.left = PLOT_LEFT,
		.top = PLOT_TOP,
		.width = tl->nbins,
		.height = v->height - PLOT_TOP - PLOT_BOTTOM,
	};

	/* About six grid lines; the top one at or above the peak. */
	fr.ystep = timeline_bytes_step(tl->peak_bytes, 6);
	fr.ytop = timeline_round_up(tl->peak_bytes, fr.ystep);
	if (fr.ytop == 0)
		fr.ytop = fr.ystep;
	if (!below || !shown) {
		free(below);
		free(shown);
		return -1;
	}
	head(f, tl, v);
	byte_axis(f, &fr);
	series(f, tl, &fr, below);
	time_axis(f, tl, &fr);
	failures(f, tl, &fr);
	peak(f, tl, &fr, v->top, shown);
	legend(f, tl, &fr);
	fputs("</svg>\n", f);
	free(below);
	free(shown);
	return 0;
}
