/* SPDX-License-Identifier: MIT */
/*
 * module.c - the guard adaptor: canaries around every block, poison on
 * free, and a quarantine that delays reuse.  See xdm-guard(7).
 *
 *	stack = guard canary=256 quarantine_bytes=64M | cuda_async
 *
 * allocate asks the upstream for room for two canaries around the caller's
 * bytes and fills them on the block's stream; deallocate reads them back
 * (synchronizing the stream: this is a debug layer), poisons the block and
 * queues it in the quarantine instead of freeing it.  Everything the guard
 * learns is reported as a typed error with the block's generation, from the
 * call that found it.  The tracking methods, bytes_outstanding and
 * reap_pending are left to the upstream: the caller's block lies inside the
 * upstream's, on the same stream, and quarantined blocks are memory the
 * stack still holds.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/guard/guard.h"

/* Larger canaries catch nothing a debug build needs and cost every block. */
#define GUARD_CANARY_MAX ((uint64_t)1 << 20)

static enum xdm_status byte_param(const struct xdm_params *params, const char *name,
				  uint8_t *out)
{
	uint64_t v = xdm_params_uint(params, name);

	if (v > 0xff)
		return xdm_error_set(XDM_E_CONFIG, "guard: %s must be a byte, 0 to 255, not %llu",
				     name, (unsigned long long)v);
	*out = (uint8_t)v;
	return XDM_OK;
}

static enum xdm_status guard_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint64_t canary = xdm_params_size(params, "canary");
	uint8_t canary_pattern = 0, poison = 0;
	enum xdm_status st;
	struct guard *g;

	if (canary > GUARD_CANARY_MAX)
		return xdm_error_set(XDM_E_CONFIG, "guard: canary=%llu is more than the %llu bytes "
				     "allowed", (unsigned long long)canary,
				     (unsigned long long)GUARD_CANARY_MAX);
	st = byte_param(params, "canary_pattern", &canary_pattern);
	if (!st)
		st = byte_param(params, "poison", &poison);
	if (st)
		return st;

	g = calloc(1, sizeof(*g));
	if (!g)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: no memory for its state");
	g->canary = (size_t)canary;
	/* The caller's pointer keeps the upstream's alignment. */
	g->front = (g->canary + XDM_DEFAULT_ALIGN - 1) & ~(size_t)(XDM_DEFAULT_ALIGN - 1);
	g->canary_pattern = canary_pattern;
	g->poison = poison;
	g->quarantine_bytes = xdm_params_size(params, "quarantine_bytes");
	g->quarantine_count = xdm_params_uint(params, "quarantine_count");
	snprintf(g->last_violation, sizeof(g->last_violation), "none");
	snprintf(g->last_check, sizeof(g->last_check), "unchecked");

	if (pthread_mutex_init(&g->lock, NULL) != 0) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: cannot create its lock");
		goto free_state;
	}
	if (pthread_cond_init(&g->unpinned, NULL) != 0) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: cannot create its condition");
		goto destroy_lock;
	}
	if (guard_table_init(&g->live)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: no memory for its block table");
		goto destroy_cond;
	}
	xdm_layer_set_priv(self, g);
	return XDM_OK;

destroy_cond:
	pthread_cond_destroy(&g->unpinned);
destroy_lock:
	pthread_mutex_destroy(&g->lock);
free_state:
	free(g);
	return st;
}

static void guard_fini(struct xdm_layer *self)
{
	struct guard *g = guard_of(self);
	enum xdm_status st;

	if (!g)
		return;
	st = guard_quarantine_flush(self);
	/*
	 * Nobody is left to return an error to, and a write after free found
	 * at teardown is still a bug the user must hear about.
	 */
	if (st == XDM_E_USE_AFTER_FREE)
		fprintf(stderr, "xdm: device %u: emptying the guard's quarantine at teardown: %s\n",
			xdm_layer_ordinal(self), xdm_last_error_message());

	/*
	 * Blocks still live were leaked by the caller; their memory is the
	 * upstream's to account for.  Only the records go.
	 */
	for (size_t i = 0; i < g->live.nbuckets; i++) {
		struct guard_block *b = g->live.buckets[i], *next;

		for (; b; b = next) {
			next = b->hash_next;
			free(b);
		}
	}
	guard_table_destroy(&g->live);
	pthread_cond_destroy(&g->unpinned);
	pthread_mutex_destroy(&g->lock);
	xdm_layer_set_priv(self, NULL);
	free(g);
}

/* Tags go into one-line reports: keep them one line, and quotable. */
static void copy_tag(char *dst, const char *tag)
{
	size_t i = 0;

	if (!tag)
		tag = "untagged";
	for (; tag[i] && i < GUARD_TAG_MAX - 1; i++) {
		unsigned char c = (unsigned char)tag[i];

		dst[i] = c < 0x20 || c == 0x7f || c == '"' ? '?' : (char)c;
	}
	dst[i] = '\0';
}

/* The largest power of two that divides both the upstream's alignment and
 * the front's size: the caller's pointer is aligned to it. */
static size_t inner_align(size_t up_align, size_t front)
{
	size_t a = up_align ? up_align : 1;

	while (front % a)
		a >>= 1;
	return a;
}

static enum xdm_status guard_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				      const char *tag, struct xdm_block *out)
{
	struct guard *g = guard_of(self);
	struct xdm_layer *up = xdm_layer_upstream(self);
	struct xdm_error saved;
	struct guard_block *b;
	enum xdm_status st;

	if (bytes > SIZE_MAX - g->front - g->canary)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: %zu bytes and their canaries "
				     "do not fit in a size_t", bytes);
	b = calloc(1, sizeof(*b));
	if (!b)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: no memory for a block record");

	/* The runtime filled the block's identity; the upstream fills the rest. */
	b->up = *out;
	st = xdm_up_allocate(up, g->front + bytes + g->canary, stream, tag, &b->up);
	if (st)
		goto free_record;
	b->ptr = b->up.ptr + g->front;
	b->bytes = bytes;
	copy_tag(b->tag, tag);
	st = guard_canary_fill(self, b);
	if (st)
		goto free_upstream;

	pthread_mutex_lock(&g->lock);
	b->where = GUARD_LIVE;
	guard_table_insert(&g->live, b);
	pthread_mutex_unlock(&g->lock);

	*out = b->up;
	out->ptr = b->ptr;
	out->bytes = bytes;
	out->align = inner_align(b->up.align, g->front);
	out->state = XDM_BLOCK_LIVE;
	return XDM_OK;

free_upstream:
	/* Queued after the fill on the same stream: never freed under it. */
	saved = *xdm_last_error();
	xdm_up_deallocate(up, &b->up);
	st = guard_error_restore(&saved);
free_record:
	free(b);
	return st;
}

static enum xdm_status guard_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct guard *g = guard_of(self);
	struct xdm_error saved = { .code = XDM_OK };
	char report[GUARD_REPORT_MAX];
	enum xdm_block_state state;
	enum xdm_status st, first;
	struct guard_block *b;

	pthread_mutex_lock(&g->lock);
	b = guard_table_remove(&g->live, block->ptr);
	if (b)
		b->where = GUARD_DEALLOCATING;
	pthread_mutex_unlock(&g->lock);
	if (!b)
		return xdm_error_set(XDM_E_INVALID, "guard: block 0x%llx was not allocated through "
				     "this layer", (unsigned long long)block->ptr);

	/* The generation exists from here on; the upstream sees its own shape
	 * of the block, named by the guard's copy of the tag. */
	b->generation = block->generation;
	b->up.generation = block->generation;
	b->up.tag = b->tag;

	/* Whatever the canaries say, the block is consumed below. */
	first = guard_canary_check(self, b, report, sizeof(report));
	if (first == XDM_E_OUT_OF_BOUNDS)
		guard_note_violation(g, b, first, report);
	if (first)
		saved = *xdm_last_error();

	st = guard_poison_fill(self, b);
	if (st) {
		/* Unpoisoned memory would read as a use after free later: free
		 * it now instead of holding it back. */
		if (!first) {
			first = st;
			saved = *xdm_last_error();
		}
		st = guard_release(self, b, &state);
	} else {
		b->poisoned = true;
		st = guard_quarantine_put(self, b, &state);
	}
	if (st && !first) {
		first = st;
		saved = *xdm_last_error();
	}
	block->state = state;
	return first ? guard_error_restore(&saved) : XDM_OK;
}

static const struct xdm_param_spec guard_params[] = {
	{ "canary", XDM_PARAM_SIZE, "256",
	  "bytes of canary after each block; the one before is this rounded up to 256 bytes "
	  "so that blocks stay 256-aligned; 0 turns canaries off (at most 1M)" },
	{ "canary_pattern", XDM_PARAM_UINT, "0xca",
	  "the byte the canaries hold, 0 to 255 (0x.. for hex)" },
	{ "poison", XDM_PARAM_UINT, "0xdd",
	  "the byte a freed block is filled with, 0 to 255 (0x.. for hex)" },
	{ "quarantine_bytes", XDM_PARAM_SIZE, "64M",
	  "most upstream bytes held back by freed blocks before the oldest go (K/M/G/T, %)" },
	{ "quarantine_count", XDM_PARAM_UINT, "1024",
	  "most freed blocks held back before the oldest go" },
	{ NULL },
};

static const struct xdm_ops guard_ops = {
	XDM_OPS_HEADER("guard", XDM_KIND_ADAPTOR),
	.description = "canaries around blocks, poison on free, a quarantine before reuse",
	.params = guard_params,
	.attrs = guard_attrs,
	.init = guard_init,
	.fini = guard_fini,
	.allocate = guard_allocate,
	.deallocate = guard_deallocate,
};

XDM_MODULE(&guard_ops)
