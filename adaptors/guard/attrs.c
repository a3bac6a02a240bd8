/* SPDX-License-Identifier: MIT */
/*
 * attrs.c - the guard's files in the introspection tree, and the check
 * that storing 1 into "check" runs.
 *
 * Shows copy values under the guard's lock, which is never held across a
 * platform call, so reading them never waits for a stream.  The check
 * itself does wait for streams (it reads canaries back), but holds no lock
 * while it does: the blocks it reads are pinned instead, so that a
 * concurrent free cannot give their memory back under it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/guard/guard.h"

static int show_text(char *buf, size_t len, const char *text)
{
	int n = snprintf(buf, len, "%s\n", text);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int show_u64(char *buf, size_t len, uint64_t v)
{
	int n = snprintf(buf, len, "%llu\n", (unsigned long long)v);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

/* Read one counter of the guard under its lock. */
#define GUARD_SHOW_LOCKED(fn, expr)						\
	static int fn(struct xdm_layer *self, char *buf, size_t len)		\
	{									\
		struct guard *g = guard_of(self);				\
		uint64_t v;							\
										\
		pthread_mutex_lock(&g->lock);					\
		v = (expr);							\
		pthread_mutex_unlock(&g->lock);					\
		return show_u64(buf, len, v);					\
	}

GUARD_SHOW_LOCKED(show_live_blocks, g->live.count)
/* Blocks waiting for their check are still held back from reuse. */
GUARD_SHOW_LOCKED(show_quarantined_blocks, g->q_count + g->out_count)
GUARD_SHOW_LOCKED(show_quarantined_bytes, g->q_bytes + g->out_bytes)
GUARD_SHOW_LOCKED(show_violations, g->violations)

static int show_copy(struct guard *g, const char *src, char *buf, size_t len)
{
	char text[GUARD_REPORT_MAX];

	pthread_mutex_lock(&g->lock);
	memcpy(text, src, sizeof(text));
	pthread_mutex_unlock(&g->lock);
	return show_text(buf, len, text);
}

static int show_last_violation(struct xdm_layer *self, char *buf, size_t len)
{
	struct guard *g = guard_of(self);

	return show_copy(g, g->last_violation, buf, len);
}

static int show_check(struct xdm_layer *self, char *buf, size_t len)
{
	struct guard *g = guard_of(self);

	return show_copy(g, g->last_check, buf, len);
}

/* ---- the check -------------------------------------------------------- */

struct pinned {
	struct guard_block *b;
	bool live;		/* canaries to check; else poison */
};

/* Pin every block the guard holds; caller frees the array, then unpins. */
static struct pinned *pin_all(struct guard *g, size_t *n)
{
	struct pinned *p;
	size_t k = 0;

	pthread_mutex_lock(&g->lock);
	p = calloc(g->live.count + g->q_count + 1, sizeof(*p));
	if (!p)
		goto out;
	for (size_t i = 0; i < g->live.nbuckets; i++)
		for (struct guard_block *b = g->live.buckets[i]; b; b = b->hash_next) {
			b->refs++;
			p[k++] = (struct pinned){ b, true };
		}
	/* Those that left the FIFO are the checker's to judge. */
	for (struct guard_block *b = g->q_head; b; b = b->q_next) {
		b->refs++;
		p[k++] = (struct pinned){ b, false };
	}
out:
	pthread_mutex_unlock(&g->lock);
	*n = k;
	return p;
}

static void unpin_all(struct guard *g, struct pinned *p, size_t n)
{
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < n; i++)
		p[i].b->refs--;
	pthread_cond_broadcast(&g->unpinned);
	pthread_mutex_unlock(&g->lock);
	free(p);
}

/*
 * A live block freed while its canaries were read is the checker's to
 * judge when it leaves the quarantine, and to report to a caller: only a
 * block still live after the read is judged here.
 */
static bool still_live(struct guard *g, struct guard_block *b)
{
	bool live;

	pthread_mutex_lock(&g->lock);
	live = b->where == GUARD_LIVE;
	pthread_mutex_unlock(&g->lock);
	return live;
}

static void check_all(struct xdm_layer *self, char *result, size_t len)
{
	struct guard *g = guard_of(self);
	char report[GUARD_REPORT_MAX];
	size_t n, damaged = 0;
	struct pinned *p;
	int used = 0;

	p = pin_all(g, &n);
	if (!p) {
		snprintf(result, len, "error: no memory to list the blocks");
		return;
	}
	snprintf(result, len, "ok");
	for (size_t i = 0; i < n; i++) {
		struct guard_block *b = p[i].b;
		enum xdm_status st;

		if (p[i].live) {
			st = guard_canary_check(self, b, report, sizeof(report));
			if (st == XDM_E_OUT_OF_BOUNDS && !still_live(g, b))
				continue;
			if (st == XDM_E_OUT_OF_BOUNDS)
				guard_note_violation(g, b, st, report);
		} else {
			/* Counted by the judge itself, both kinds. */
			st = guard_freed_check(self, b);
			if (st == XDM_E_OUT_OF_BOUNDS || st == XDM_E_USE_AFTER_FREE)
				snprintf(report, sizeof(report), "%s", xdm_last_error_message());
		}
		if (!st)
			continue;
		if (st != XDM_E_OUT_OF_BOUNDS && st != XDM_E_USE_AFTER_FREE)
			snprintf(report, sizeof(report), "error: %s", xdm_last_error_message());
		if (!damaged++)
			used = snprintf(result, len, "%s", report);
	}
	if (damaged > 1 && used >= 0 && (size_t)used < len)
		snprintf(result + used, len - used, " (and %zu more)", damaged - 1);
	unpin_all(g, p, n);
}

static int store_check(struct xdm_layer *self, const char *buf, size_t len)
{
	struct guard *g = guard_of(self);
	char result[GUARD_REPORT_MAX];

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len != 1 || buf[0] != '1')
		return -EINVAL;
	check_all(self, result, sizeof(result));
	pthread_mutex_lock(&g->lock);
	memcpy(g->last_check, result, sizeof(g->last_check));
	pthread_mutex_unlock(&g->lock);
	return 0;
}

const struct xdm_attr guard_attrs[] = {
	{ "check", 0644,
	  "write 1 to check the canaries of every live block and the poison of every "
	  "quarantined one now; reads the outcome of the last check: ok, or the first damage",
	  show_check, store_check },
	{ "live_blocks", 0444, "blocks handed out through this layer and not yet freed",
	  show_live_blocks, NULL },
	{ "quarantined_blocks", 0444,
	  "freed blocks held back from reuse, those waiting for their check included",
	  show_quarantined_blocks, NULL },
	{ "quarantined_bytes", 0444,
	  "upstream bytes held by quarantined blocks, canaries included; counted in "
	  "xdm_bytes_outstanding until a reap empties the quarantine",
	  show_quarantined_bytes, NULL },
	{ "violations", 0444,
	  "damages found: out-of-bounds writes and writes after free, once per block and kind",
	  show_violations, NULL },
	{ "last_violation", 0444, "the report of the latest damage found, or none",
	  show_last_violation, NULL },
	{ NULL },
};
