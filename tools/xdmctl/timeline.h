/* SPDX-License-Identifier: MIT */
/*
 * timeline.h - xdmctl timeline: a logging adaptor's CSV as memory over
 * time.  timeline_model.c replays the log into what is drawn,
 * timeline_svg.c draws it, timeline_html.c wraps the drawing and a table
 * in a page, timeline_format.c writes numbers for people; markup.h writes
 * text into either.
 */
#ifndef XDM_TOOLS_TIMELINE_H
#define XDM_TOOLS_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/common/logcsv.h"
#include "xdmctl.h"

/* Series drawn at most: past it the smallest keys share one, "other". */
#define TIMELINE_MAX_SERIES 16
#define TIMELINE_OTHER UINT32_MAX	/* the key of the "other" series */

enum timeline_by { TIMELINE_BY_TAG, TIMELINE_BY_STREAM };

/* One tag, or one stream: what the table has a row for. */
struct timeline_key {
	const char *name;	/* the tag, or the stream id in decimal */
	uint64_t max;		/* its own highest live bytes */
	uint64_t at_peak;	/* its live bytes at the total's peak */
	uint64_t allocs;
	uint64_t frees;		/* free_failure rows included */
	uint64_t failures;	/* allocate_failure rows */
	uint32_t series;	/* where it is drawn */
};

/* One band of the stacked chart: a key, or the keys folded into "other". */
struct timeline_series {
	uint32_t key;		/* or TIMELINE_OTHER */
	uint32_t members;	/* keys drawn in it */
	uint32_t color;		/* 0xrrggbb */
	uint64_t max, at_peak, allocs, frees, failures;
};

struct timeline {
	const struct logcsv *log;
	enum timeline_by by;
	struct timeline_key *keys;
	uint32_t nkeys;
	uint32_t *rank;		/* key indexes, largest own maximum first */
	char (*stream_names)[12];	/* by stream: the keys' names */
	struct timeline_series series[TIMELINE_MAX_SERIES];
	uint32_t nseries;	/* bottom of the stack first; "other" last */

	/* The replay clock: row times, never going back (see timeline_model.c). */
	uint64_t t0, t1;	/* of the first and the last row */
	uint64_t allocs, frees, free_failures, failures;
	uint64_t left_blocks, left_bytes;	/* live after the last row */

	/* The peak of the total live bytes: its first moment. */
	bool has_peak;		/* false when no block was ever live */
	uint64_t peak_bytes, peak_time, peak_line;

	/* Time in nbins equal columns: each keeps the moment its total is highest. */
	uint32_t nbins;
	uint64_t *bins;		/* [bin * nseries + series]: live bytes then */
	uint64_t *bin_total;
	uint32_t *bin_failures;	/* allocate_failure rows in the column */
};

/* timeline_model.c: 0, or an enum logcsv_err said. */
int timeline_build(struct timeline *tl, const struct logcsv *log, enum timeline_by by,
		   uint32_t nbins);
void timeline_free(struct timeline *tl);
/* The column of time t (ns since the epoch, within [t0, t1]). */
uint32_t timeline_bin(const struct timeline *tl, uint64_t t);

/* timeline_svg.c */
struct timeline_view {
	unsigned int width, height;	/* of the whole drawing, in px */
	unsigned int top;		/* keys named at the peak */
	const char *title;		/* the log's path */
	bool in_html;			/* inline: no XML declaration */
};

/* The columns of a drawing width px wide: one per pixel of its plot. */
uint32_t timeline_plot_width(unsigned int width);
/* 0, or -1: out of memory, nothing written. */
int timeline_svg(FILE *f, const struct timeline *tl, const struct timeline_view *v);

/* timeline_html.c: the page, the drawing inline, then the table. */
int timeline_html(FILE *f, const struct timeline *tl, const struct timeline_view *v);

/* timeline_format.c: numbers for people (bytes: xdmctl_human()). */
/* A tick's label: "512 MiB", "1.5 GiB", as few decimals as it needs. */
void timeline_bytes_tick(char *buf, size_t len, uint64_t bytes);
void timeline_duration(char *buf, size_t len, uint64_t ns);
/* Tick steps: a power of two of bytes, {1, 2, 5} x 10^n of ns; about n ticks. */
uint64_t timeline_bytes_step(uint64_t top, unsigned int n);
/* The least multiple of step at or above v, or UINT64_MAX past it. */
uint64_t timeline_round_up(uint64_t v, uint64_t step);
uint64_t timeline_time_step(uint64_t span, unsigned int n);
/* A tick's label: value in the unit that fits span, with the decimals step needs. */
void timeline_time_tick(char *buf, size_t len, uint64_t value, uint64_t span, uint64_t step);
/* A key's colour, the same for a name in every chart where it is alone on it. */
uint32_t timeline_color(const char *name, const uint32_t *taken, uint32_t ntaken);
#define TIMELINE_OTHER_COLOR 0x9a9a9a

#endif /* XDM_TOOLS_TIMELINE_H */
