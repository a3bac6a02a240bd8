/* SPDX-License-Identifier: MIT */
/*
 * timeline_model.c - replays a log into what a timeline draws: per key
 * (tag or stream) its maximum, its bytes at the peak and its counts, and
 * time cut into columns.
 *
 * The replay is the order of xdm-logging(7), on the clock of logcsv.h,
 * which never goes back.
 *
 * A million rows become about a thousand columns.  Each column keeps the
 * state of the moment its total is highest (the state on entering it
 * counts: memory live then is live in the column), so the drawing is an
 * upper envelope of the true curve, and the column of the peak holds the
 * peak itself, exactly.  Two passes: the first checks the log on the live
 * set and finds each key's maximum (which decides the series) and the
 * peak; the second, which needs no live set any more, fills the columns
 * and takes every key's bytes at the peak.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "timeline.h"

/* The key of an allocate or allocate_failure row; a free has its block's. */
static uint32_t key_of(const struct timeline *tl, const uint32_t *streams,
		       const struct logcsv_row *r)
{
	uint32_t lo = 0, hi = tl->nkeys;

	if (tl->by == TIMELINE_BY_TAG)
		return r->tag;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (streams[mid] < r->stream)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The keys: the log's tags, or its distinct streams in increasing order. */
static int make_keys(struct timeline *tl, uint32_t **streams_out)
{
	const struct logcsv *log = tl->log;
	uint32_t *streams = NULL;
	size_t n = 0;

	if (tl->by == TIMELINE_BY_TAG) {
		n = log->tags.n;
	} else {
		streams = malloc((log->nrows ? log->nrows : 1) * sizeof(*streams));
		if (!streams)
			goto nomem;
		for (size_t i = 0; i < log->nrows; i++)
			streams[i] = log->rows[i].stream;
		qsort(streams, log->nrows, sizeof(*streams), by_u32);
		for (size_t i = 0; i < log->nrows; i++) {
			if (i == 0 || streams[i] != streams[n - 1])
				streams[n++] = streams[i];
		}
		tl->stream_names = malloc((n ? n : 1) * sizeof(*tl->stream_names));
		if (!tl->stream_names)
			goto nomem;
	}
	tl->nkeys = (uint32_t)n;
	tl->keys = calloc(n ? n : 1, sizeof(*tl->keys));
	tl->rank = malloc((n ? n : 1) * sizeof(*tl->rank));
	if (!tl->keys || !tl->rank)
		goto nomem;
	for (uint32_t i = 0; i < tl->nkeys; i++) {
		if (tl->by == TIMELINE_BY_TAG) {
			tl->keys[i].name = logcsv_tag(log, i);
		} else {
			snprintf(tl->stream_names[i], sizeof(tl->stream_names[i]), "%u",
				 streams[i]);
			tl->keys[i].name = tl->stream_names[i];
		}
	}
	*streams_out = streams;
	return LOGCSV_OK;
nomem:
	free(streams);
	logcsv_say(log, 0, "out of memory for the keys of the timeline");
	return LOGCSV_NOMEM;
}

/*
 * The first pass: every row checked on the live set, each row's key into
 * row_key[], the keys' maxima and counts, and the first moment of the
 * peak into *peak_k.
 */
static int replay(struct timeline *tl, const uint32_t *streams, uint32_t *row_key,
		  size_t *peak_k)
{
	const struct logcsv *log = tl->log;
	struct logcsv_live m;
	uint64_t *live, total = 0, t = 0;
	int rc;

	live = calloc(tl->nkeys ? tl->nkeys : 1, sizeof(*live));
	if (!live) {
		logcsv_say(log, 0, "out of memory for the keys of the timeline");
		return LOGCSV_NOMEM;
	}
	rc = logcsv_live_init(log, &m);
	if (rc)
		goto out;
	for (size_t k = 0; k < log->nrows; k++) {
		const struct logcsv_row *r = logcsv_at(log, k);
		bool allocates = r->action == LOGCSV_ALLOCATE ||
				 r->action == LOGCSV_ALLOCATE_FAILURE;
		uint32_t key = allocates ? key_of(tl, streams, r) : 0;
		struct timeline_key *kp;
		struct logcsv_block gone;

		t = logcsv_clock(log, k, t);
		if (k == 0)
			tl->t0 = t;
		rc = logcsv_live_step(log, &m, r, key, &gone);
		if (rc)
			goto out;
		if (r->action == LOGCSV_FREE || r->action == LOGCSV_FREE_FAILURE)
			key = gone.value;
		row_key[k] = key;
		kp = &tl->keys[key];
		switch (r->action) {
		case LOGCSV_ALLOCATE_FAILURE:
			kp->failures++;
			tl->failures++;
			break;
		case LOGCSV_ALLOCATE:
			if (total + r->bytes < total) {
				rc = logcsv_say(log, r->line, "more than 2^64 bytes live at once");
				goto out;
			}
			live[key] += r->bytes;
			total += r->bytes;
			kp->allocs++;
			tl->allocs++;
			if (live[key] > kp->max)
				kp->max = live[key];
			if (total > tl->peak_bytes) {
				tl->has_peak = true;
				tl->peak_bytes = total;
				tl->peak_time = t;
				tl->peak_line = r->line;
				*peak_k = k;
			}
			break;
		case LOGCSV_FREE_FAILURE:
			tl->free_failures++;
			/* fall through - it ends the block's life all the same */
		case LOGCSV_FREE:
			live[key] -= r->bytes;
			total -= r->bytes;
			kp->frees++;
			tl->frees++;
			break;
		}
	}
	tl->t1 = t;
	tl->left_blocks = m.n;
	tl->left_bytes = total;
out:
	logcsv_live_fini(&m);
	free(live);
	return rc;
}

static int by_rank(const void *a, const void *b)
{
	const struct timeline_key *x = *(const struct timeline_key *const *)a;
	const struct timeline_key *y = *(const struct timeline_key *const *)b;

	if (x->max != y->max)
		return x->max > y->max ? -1 : 1;
	if (x->allocs != y->allocs)
		return x->allocs > y->allocs ? -1 : 1;
	/* The order of the keys: first seen (tags), increasing (streams). */
	return (x > y) - (x < y);
}

/* Ranks the keys and gives each a series; past the last, "other". */
static int make_series(struct timeline *tl)
{
	const struct timeline_key **order;
	uint32_t taken[TIMELINE_MAX_SERIES];
	uint32_t alone = tl->nkeys;

	order = malloc((tl->nkeys ? tl->nkeys : 1) * sizeof(*order));
	if (!order) {
		logcsv_say(tl->log, 0, "out of memory for the keys of the timeline");
		return LOGCSV_NOMEM;
	}
	for (uint32_t i = 0; i < tl->nkeys; i++)
		order[i] = &tl->keys[i];
	qsort(order, tl->nkeys, sizeof(*order), by_rank);
	if (tl->nkeys > TIMELINE_MAX_SERIES)
		alone = TIMELINE_MAX_SERIES - 1;
	for (uint32_t i = 0; i < tl->nkeys; i++) {
		uint32_t key = (uint32_t)(order[i] - tl->keys);
		struct timeline_series *s;

		tl->rank[i] = key;
		if (i < alone) {
			s = &tl->series[tl->nseries++];
			s->key = key;
			s->color = timeline_color(tl->keys[key].name, taken, i);
			taken[i] = s->color;
		} else {
			s = &tl->series[alone];
			if (i == alone) {
				tl->nseries++;
				s->key = TIMELINE_OTHER;
				s->color = TIMELINE_OTHER_COLOR;
			}
		}
		tl->keys[key].series = (uint32_t)(s - tl->series);
		s->members++;
		s->allocs += tl->keys[key].allocs;
		s->frees += tl->keys[key].frees;
		s->failures += tl->keys[key].failures;
	}
	free(order);
	return LOGCSV_OK;
}

uint32_t timeline_bin(const struct timeline *tl, uint64_t t)
{
	double span = (double)(tl->t1 - tl->t0) + 1.0;
	double x = (double)(t - tl->t0) / span * tl->nbins;

	/* Rounding is monotonic: a later time never gets an earlier column. */
	return x >= tl->nbins ? tl->nbins - 1 : (uint32_t)x;
}

/* The second pass: the columns, the series' maxima and the keys at the peak. */
static int fill_bins(struct timeline *tl, const uint32_t *row_key, size_t peak_k)
{
	const struct logcsv *log = tl->log;
	const size_t ns = tl->nseries;
	uint64_t *cur, *live, total = 0, t = 0;
	uint32_t cb = 0;

	tl->bins = calloc((size_t)tl->nbins * (ns ? ns : 1), sizeof(*tl->bins));
	tl->bin_total = calloc(tl->nbins, sizeof(*tl->bin_total));
	tl->bin_failures = calloc(tl->nbins, sizeof(*tl->bin_failures));
	cur = calloc(ns ? ns : 1, sizeof(*cur));
	live = calloc(tl->nkeys ? tl->nkeys : 1, sizeof(*live));
	if (!tl->bins || !tl->bin_total || !tl->bin_failures || !cur || !live) {
		free(cur);
		free(live);
		logcsv_say(log, 0, "out of memory for %u columns", tl->nbins);
		return LOGCSV_NOMEM;
	}
	/* Column 0 is entered with nothing live: calloc's zeros. */
	for (size_t k = 0; k < log->nrows; k++) {
		const struct logcsv_row *r = logcsv_at(log, k);
		uint32_t key = row_key[k], b;
		struct timeline_series *s = &tl->series[tl->keys[key].series];

		t = logcsv_clock(log, k, t);
		b = timeline_bin(tl, t);
		while (cb < b) {
			cb++;
			memcpy(&tl->bins[cb * ns], cur, ns * sizeof(*cur));
			tl->bin_total[cb] = total;
		}
		switch (r->action) {
		case LOGCSV_ALLOCATE_FAILURE:
			tl->bin_failures[cb]++;
			continue;
		case LOGCSV_ALLOCATE:
			cur[s - tl->series] += r->bytes;
			live[key] += r->bytes;
			total += r->bytes;
			break;
		default:
			cur[s - tl->series] -= r->bytes;
			live[key] -= r->bytes;
			total -= r->bytes;
			break;
		}
		if (cur[s - tl->series] > s->max)
			s->max = cur[s - tl->series];
		if (total > tl->bin_total[cb]) {
			memcpy(&tl->bins[cb * ns], cur, ns * sizeof(*cur));
			tl->bin_total[cb] = total;
		}
		if (tl->has_peak && k == peak_k) {
			for (uint32_t i = 0; i < tl->nkeys; i++) {
				tl->keys[i].at_peak = live[i];
				tl->series[tl->keys[i].series].at_peak += live[i];
			}
		}
	}
	while (cb + 1 < tl->nbins) {
		cb++;
		memcpy(&tl->bins[cb * ns], cur, ns * sizeof(*cur));
		tl->bin_total[cb] = total;
	}
	free(cur);
	free(live);
	return LOGCSV_OK;
}

int timeline_build(struct timeline *tl, const struct logcsv *log, enum timeline_by by,
		   uint32_t nbins)
{
	uint32_t *streams = NULL, *row_key = NULL;
	size_t peak_k = 0;
	int rc;

	memset(tl, 0, sizeof(*tl));
	tl->log = log;
	tl->by = by;
	tl->nbins = nbins ? nbins : 1;
	rc = make_keys(tl, &streams);
	if (rc)
		goto out;
	row_key = malloc((log->nrows ? log->nrows : 1) * sizeof(*row_key));
	if (!row_key) {
		logcsv_say(log, 0, "out of memory for the timeline of %zu rows", log->nrows);
		rc = LOGCSV_NOMEM;
		goto out;
	}
	rc = replay(tl, streams, row_key, &peak_k);
	if (rc == LOGCSV_OK)
		rc = make_series(tl);
	if (rc == LOGCSV_OK)
		rc = fill_bins(tl, row_key, peak_k);
out:
	free(row_key);
	free(streams);
	if (rc)
		timeline_free(tl);
	return rc;
}

void timeline_free(struct timeline *tl)
{
	free(tl->keys);
	free(tl->rank);
	free(tl->stream_names);
	free(tl->bins);
	free(tl->bin_total);
	free(tl->bin_failures);
	memset(tl, 0, sizeof(*tl));
}
