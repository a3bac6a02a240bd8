/* SPDX-License-Identifier: MIT */
/*
 * module.c - the guard adaptor: canaries around every block, poison on
 * free, and a quarantine that delays reuse.  See xdm-guard(7).
 *
 *	stack = guard canary=256 quarantine_bytes=64M | cuda_async
 *
 * allocate asks the upstream for room for two canaries around the caller's
 * bytes and fills them on the block's stream; deallocate poisons the
 * caller's bytes on that stream and queues the block in the quarantine
 * instead of freeing it.  Neither reads anything back nor waits for a
 * stream: blocks leaving the quarantine are read back, judged and freed by
 * the guard's checker thread (checker.c), and what it finds is reported as
 * a typed error with the block's generation by the next deallocate or
 * reap_pending.  reap_pending empties the quarantine, as a pool's reap
 * gives its idle memory back, so a reap is where every finding so far
 * reaches the caller.  The tracking methods and bytes_outstanding are left
 * to the upstream: the caller's block lies inside the upstream's, on the
 * same stream, and quarantined blocks are memory the stack still holds.
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

/* Wake the checker once this many blocks wait for it, at most. */
#define GUARD_KICK_MAX 32

/*
 * The FIFO keeps 7/8 of each limit; the last eighth is room for blocks
 * that left it and wait for their check, so that a caller waits only when
 * the checker is that far behind.  The checker is woken when half of that
 * room is used (at most GUARD_KICK_MAX blocks), so that it works in
 * batches.  Small limits leave no room: then the blocks that leave are
 * checked before the free that pushed them out returns, as with a limit
 * of 0.
 */
static void set_watermarks(struct guard *g)
{
	uint64_t room_bytes = g->quarantine_bytes / 8, room_count = g->quarantine_count / 8;

	g->lo_bytes = g->quarantine_bytes - room_bytes;
	g->lo_count = g->quarantine_count - room_count;
	g->kick_bytes = room_bytes / 2 ? room_bytes / 2 : 1;
	g->kick_count = room_count / 2 ? room_count / 2 : 1;
	if (g->kick_count > GUARD_KICK_MAX)
		g->kick_count = GUARD_KICK_MAX;
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
	set_watermarks(g);
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
	if (pthread_cond_init(&g->work, NULL) != 0) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: cannot create its condition");
		goto destroy_unpinned;
	}
	if (pthread_cond_init(&g->room, NULL) != 0) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: cannot create its condition");
		goto destroy_work;
	}
	if (guard_table_init(&g->live)) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "guard: no memory for its block table");
		goto destroy_room;
	}
	xdm_layer_set_priv(self, g);
	/*
	 * Without its thread the guard still works: callers then check the
	 * blocks that leave the quarantine themselves, waiting for streams.
	 */
	guard_checker_start(self);
	return XDM_OK;

destroy_room:
	pthread_cond_destroy(&g->room);
destroy_work:
	pthread_cond_destroy(&g->work);
destroy_unpinned:
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
	guard_checker_stop(self);
	st = guard_quarantine_drain(self);
	/*
	 * Nobody is left to return an error to, and a damage found at
	 * teardown (or found earlier, and not yet returned) is still a bug
	 * the user must hear about.
	 */
	if (st == XDM_E_USE_AFTER_FREE || st == XDM_E_OUT_OF_BOUNDS)
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
	guard_free_buffers(g);
	pthread_cond_destroy(&g->room);
	pthread_cond_destroy(&g->work);
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

	/*
	 * Nothing is read back here: the canaries and the poison are checked
	 * together when the block leaves the quarantine (checker.c).  A block
	 * whose poison could not be queued is quarantined all the same, its
	 * canaries still to check; only its poison is not judged.
	 */
	if (guard_poison_fill(self, b)) {
		/* The platform's error comes first; a finding it hides is
		 * still counted. */
		struct xdm_error saved = *xdm_last_error();

		guard_quarantine_put(self, b, &block->state);
		return guard_error_restore(&saved);
	}
	b->poisoned = true;
	return guard_quarantine_put(self, b, &block->state);
}

/*
 * Empty the quarantine, every block checked, then let the upstream finish
 * its frees: like a pool's reap, this gives back what the layer keeps, and
 * it is the point by which every finding reaches a caller.
 */
static enum xdm_status guard_reap_pending(struct xdm_layer *self)
{
	struct xdm_error saved;
	enum xdm_status st, st_up;

	st = guard_quarantine_drain(self);
	if (st)
		saved = *xdm_last_error();
	st_up = xdm_up_reap_pending(xdm_layer_upstream(self));
	return st ? guard_error_restore(&saved) : st_up;
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
	  "most upstream bytes held back by freed blocks, those waiting for their check "
	  "included; the oldest go from 7/8 of it (K/M/G/T, %)" },
	{ "quarantine_count", XDM_PARAM_UINT, "1024",
	  "most freed blocks held back, those waiting for their check included; the oldest "
	  "go from 7/8 of it" },
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
	.reap_pending = guard_reap_pending,
};

XDM_MODULE(&guard_ops)
