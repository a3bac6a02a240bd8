/* SPDX-License-Identifier: MIT */
/*
 * runtime.c - the runtime's calls: each forwards to the top of the stack and
 * keeps the live-block registry and the counters that introspection reads.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static enum xdm_status null_runtime(const char *fn)
{
	return xdm_error_set(XDM_E_INVALID, "%s: runtime is NULL", fn);
}

/* A block names its device: another device's runtime refuses it by that name. */
static enum xdm_status other_device(struct xdm_runtime *rt, uint32_t ordinal, const char *fn)
{
	return xdm_error_set(XDM_E_INVALID, "%s: block of device %u given to the runtime of "
			     "device %u", fn, ordinal, rt->ordinal);
}

/*
 * The stack's top, called directly: the layer that serves it was found
 * when the stack was built (xdm_layer_resolve), and a stack always ends in
 * a backend, which has both methods (module_table.c checks).
 */
static inline enum xdm_status top_allocate(struct xdm_runtime *rt, size_t bytes,
					   xdm_stream_id stream, struct xdm_block *out)
{
	struct xdm_layer *l = rt->layers[0].serves_allocate;

	return l->ops->allocate(l, bytes, stream, out->tag, out);
}

static inline enum xdm_status top_deallocate(struct xdm_runtime *rt, struct xdm_block *b)
{
	struct xdm_layer *l = rt->layers[0].serves_deallocate;

	return l->ops->deallocate(l, b);
}

/* Why an allocation is refused before the stack is asked (out of line: cold). */
static __attribute__((noinline, cold)) enum xdm_status refuse_allocate(struct xdm_runtime *rt,
								     const char *fn,
								     size_t bytes,
								     xdm_stream_id stream)
{
	enum xdm_status st;

	if (bytes == 0)
		st = xdm_error_set(XDM_E_INVALID, "%s: zero bytes requested", fn);
	else
		st = xdm_error_set(XDM_E_INVALID, "%s: stream %u is not in the pool", fn, stream);
	atomic_fetch_add_explicit(&rt->counters.failures, 1, memory_order_relaxed);
	return st;
}

/* The registry refused the block (out of line: cold). */
static __attribute__((noinline, cold)) enum xdm_status unregistered(struct xdm_runtime *rt,
								  struct xdm_block *out,
								  enum xdm_status st)
{
	struct xdm_error saved = *xdm_last_error();

	/*
	 * Out of host memory: hand the block back.  But an address that is
	 * already live belongs to another block; freeing it would free that
	 * one, so the stack's mistake is only reported.
	 */
	if (st != XDM_E_INVALID)
		xdm_up_deallocate(&rt->layers[0], out);
	*(struct xdm_error *)xdm_last_error() = saved;
	atomic_fetch_add_explicit(&rt->counters.failures, 1, memory_order_relaxed);
	return st;
}

/* Layers see the block's identity before they fill in the memory. */
static inline void new_block(struct xdm_runtime *rt, size_t bytes, xdm_stream_id stream,
			     const char *tag, struct xdm_block *out)
{
	*out = (struct xdm_block){
		.ordinal = rt->ordinal,
		.stream = stream,
		.bytes = bytes,
		.align = XDM_DEFAULT_ALIGN,
		.tag = tag ? tag : "untagged",
		.state = XDM_BLOCK_LIVE,
	};
}

/* The stack handed out *out for requested bytes: into the registry, and counted. */
static inline enum xdm_status registered(struct xdm_runtime *rt, struct xdm_block *out,
					 size_t requested)
{
	enum xdm_status st = xdm_registry_insert(&rt->registry, out, requested);

	if (__builtin_expect(st != XDM_OK, 0))
		return unregistered(rt, out, st);
	xdm_count_alloc(&rt->counters, out->bytes);
	return XDM_OK;
}

enum xdm_status xdm_allocate(struct xdm_runtime *rt, size_t bytes, xdm_stream_id stream,
			     const char *tag, struct xdm_block *out)
{
	enum xdm_status st;

	if (!rt || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_allocate: NULL runtime or result");
	if (__builtin_expect(bytes == 0 || !xdm_stream_native(rt, stream), 0))
		return refuse_allocate(rt, "xdm_allocate", bytes, stream);
	new_block(rt, bytes, stream, tag, out);
	st = top_allocate(rt, bytes, stream, out);
	if (__builtin_expect(st != XDM_OK, 0)) {
		atomic_fetch_add_explicit(&rt->counters.failures, 1, memory_order_relaxed);
		return st;
	}
	return registered(rt, out, bytes);
}

enum xdm_status xdm_allocate_at(struct xdm_runtime *rt, uint64_t ptr, size_t bytes,
				xdm_stream_id stream, const char *tag, struct xdm_block *out)
{
	enum xdm_status st;

	if (!rt || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_allocate_at: NULL runtime or result");
	if (bytes == 0 || !xdm_stream_native(rt, stream))
		return refuse_allocate(rt, "xdm_allocate_at", bytes, stream);
	if (!ptr || ptr % XDM_DEFAULT_ALIGN) {
		atomic_fetch_add_explicit(&rt->counters.failures, 1, memory_order_relaxed);
		return xdm_error_set(XDM_E_INVALID, "xdm_allocate_at: 0x%llx is not a multiple "
				     "of %u", (unsigned long long)ptr, (unsigned int)XDM_DEFAULT_ALIGN);
	}
	new_block(rt, bytes, stream, tag, out);
	st = xdm_up_allocate_at(&rt->layers[0], ptr, bytes, stream, out->tag, out);
	if (st) {
		atomic_fetch_add_explicit(&rt->counters.failures, 1, memory_order_relaxed);
		return st;
	}
	return registered(rt, out, bytes);
}

/* The generation now live at ptr, or 0: a stale id's message says so. */
static xdm_generation live_generation(struct xdm_runtime *rt, uint64_t ptr)
{
	struct xdm_reg_shard *shard = xdm_registry_shard(&rt->registry, ptr);
	struct xdm_reg_entry *e;
	xdm_generation g;

	xdm_spin_lock(&shard->lock);
	e = xdm_registry_find_locked(shard, ptr);
	g = e ? e->block.generation : 0;
	xdm_spin_unlock(&shard->lock);
	return g;
}

static enum xdm_status not_live(struct xdm_runtime *rt, const char *fn, uint64_t ptr,
				xdm_generation generation)
{
	xdm_generation now = live_generation(rt, ptr);

	if (now)
		return xdm_error_set_block(XDM_E_USE_AFTER_FREE, generation, XDM_SIDE_NONE,
					   "%s: block 0x%llx generation %llu is not live (freed, "
					   "and its address reissued as generation %llu)", fn,
					   (unsigned long long)ptr, (unsigned long long)generation,
					   (unsigned long long)now);
	return xdm_error_set_block(XDM_E_USE_AFTER_FREE, generation, XDM_SIDE_NONE,
				   "%s: block 0x%llx generation %llu is not live (double free or "
				   "stale handle)", fn, (unsigned long long)ptr,
				   (unsigned long long)generation);
}

/*
 * A free that waits for uses on other streams, or whose block another
 * process may hold: out of line, so that the common free saves no
 * registers for it.
 */
static __attribute__((noinline)) enum xdm_status free_tracked(struct xdm_runtime *rt,
							      struct xdm_block *block,
							      struct xdm_block *b,
							      struct xdm_use_track *uses)
{
	enum xdm_status st, st_wait = XDM_OK;
	bool tracked, crossed;
	uint64_t cap = 0;

	/* The registry's copy is authoritative: the caller's may be damaged. */
	tracked = !xdm_use_track_empty(uses);
	crossed = tracked && xdm_use_track_crosses(uses, b->stream);
	/* Asked once (a driver call on cuda); uses on the block's own stream need no capture. */
	if (crossed)
		cap = xdm_stream_capture(rt, b->stream);
	/* Inside a capture, after work outside it: held until that work is done. */
	if (crossed && xdm_capture_free_must_hold(cap, b, uses) &&
	    xdm_capture_free_hold(rt, b, uses)) {
		block->state = XDM_BLOCK_FREED;
		return XDM_OK;
	}
	if (tracked) {
		st_wait = xdm_track_release(rt, b, uses, cap);
		xdm_use_track_free(uses);
	}
	/* A block another process holds goes to its stack when it lets go. */
	if (xdm_ipc_hold_free(&rt->ipc, b)) {
		block->state = XDM_BLOCK_FREED;
		return st_wait;
	}
	st = xdm_up_deallocate(&rt->layers[0], b);
	if (crossed && st == XDM_OK)
		xdm_pending_free_mark(rt, b->stream);
	block->state = b->state == XDM_BLOCK_LIVE ? XDM_BLOCK_FREED : b->state;
	/* Outside a capture, earlier holds may go now (queries are safe here). */
	if (crossed && !cap)
		(void)xdm_capture_frees_release(rt, false);
	return st ? st : st_wait;
}

enum xdm_status xdm_deallocate(struct xdm_runtime *rt, struct xdm_block *block)
{
	struct xdm_use_track uses;
	enum xdm_status st;
	struct xdm_block b;

	if (!rt || !block)
		return xdm_error_set(XDM_E_INVALID, "xdm_deallocate: NULL runtime or block");
	if (block->ordinal != rt->ordinal)
		return other_device(rt, block->ordinal, "xdm_deallocate");
	if (!xdm_registry_take(&rt->registry, block->ptr, block->generation, &b, &uses))
		return not_live(rt, "xdm_deallocate", block->ptr, block->generation);
	xdm_count_free(&rt->counters, b.bytes);
	if (__builtin_expect(!xdm_use_track_empty(&uses) ||
			     atomic_load_explicit(&rt->ipc.exp.exports_made, memory_order_acquire),
			     0))
		return free_tracked(rt, block, &b, &uses);
	/* The registry's copy is authoritative: the caller's may be damaged. */
	st = top_deallocate(rt, &b);
	block->state = b.state == XDM_BLOCK_LIVE ? XDM_BLOCK_FREED : b.state;
	return st;
}

size_t xdm_bytes_outstanding(struct xdm_runtime *rt)
{
	return rt ? xdm_up_bytes_outstanding(&rt->layers[0]) : 0;
}

enum xdm_status xdm_reap_pending(struct xdm_runtime *rt)
{
	enum xdm_status held, st;

	if (!rt)
		return null_runtime("xdm_reap_pending");
	held = xdm_capture_frees_release(rt, false);
	st = xdm_up_reap_pending(&rt->layers[0]);
	return st ? st : held;
}

enum xdm_status xdm_release_capture_frees(struct xdm_runtime *rt)
{
	return rt ? xdm_capture_frees_release(rt, false) : null_runtime("xdm_release_capture_frees");
}

bool xdm_supports_block_use_tracking(struct xdm_runtime *rt)
{
	return rt && xdm_up_supports_block_use_tracking(&rt->layers[0]);
}

enum xdm_status xdm_record_block_use(struct xdm_runtime *rt, const struct xdm_block *block,
				     xdm_stream_id use_stream)
{
	if (!rt || !block)
		return xdm_error_set(XDM_E_INVALID, "xdm_record_block_use: NULL runtime or block");
	if (block->ordinal != rt->ordinal)
		return other_device(rt, block->ordinal, "xdm_record_block_use");
	return xdm_up_record_block_use(&rt->layers[0], block, use_stream);
}

enum xdm_status xdm_prepare_block_use(struct xdm_runtime *rt, struct xdm_block_id id,
				      xdm_stream_id use_stream, enum xdm_access access)
{
	if (!rt)
		return null_runtime("xdm_prepare_block_use");
	if (id.ordinal != rt->ordinal)
		return other_device(rt, id.ordinal, "xdm_prepare_block_use");
	return xdm_up_prepare_block_use(&rt->layers[0], id, use_stream, access);
}

enum xdm_status xdm_finish_block_use(struct xdm_runtime *rt, struct xdm_block_id id,
				     xdm_stream_id use_stream, enum xdm_access access)
{
	if (!rt)
		return null_runtime("xdm_finish_block_use");
	if (id.ordinal != rt->ordinal)
		return other_device(rt, id.ordinal, "xdm_finish_block_use");
	return xdm_up_finish_block_use(&rt->layers[0], id, use_stream, access);
}

/*
 * What a peer use needs: both runtimes, the block of the owner's device,
 * one platform (a stream of one may wait on an event of the other), and an
 * owner whose stack tracks uses (its frees are queued behind them).
 */
static enum xdm_status check_peer(struct xdm_runtime *owner, struct xdm_block_id id,
				  struct xdm_runtime *user, const char *fn)
{
	if (!owner || !user)
		return xdm_error_set(XDM_E_INVALID, "%s: NULL runtime", fn);
	if (id.ordinal != owner->ordinal)
		return xdm_error_set(XDM_E_INVALID,
				     "%s: block of device %u given as a block of device %u", fn,
				     id.ordinal, owner->ordinal);
	if (user->platform.ops != owner->platform.ops)
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "%s: device %u is served by platform '%s' and device %u by "
				     "'%s': work of one cannot be ordered against the other", fn,
				     owner->ordinal, owner->device.platform, user->ordinal,
				     user->device.platform);
	if (!xdm_supports_block_use_tracking(owner))
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "%s: the stack of device %u does not track block uses, so its "
				     "frees cannot wait for another device's work", fn,
				     owner->ordinal);
	return XDM_OK;
}

/* Before the work (prepare) or after it (finish): the checks are the same. */
static enum xdm_status peer_use(struct xdm_runtime *owner, struct xdm_block_id id,
				struct xdm_runtime *user, xdm_stream_id user_stream,
				enum xdm_access access, bool finish)
{
	const char *fn = finish ? "xdm_finish_peer_use" : "xdm_prepare_peer_use";
	enum xdm_status st = check_peer(owner, id, user, fn);

	if (st)
		return st;
	if (user == owner)
		return finish ? xdm_finish_block_use(owner, id, user_stream, access)
			      : xdm_prepare_block_use(owner, id, user_stream, access);
	return finish ? xdm_track_peer_finish(owner, id, user, user_stream, access)
		      : xdm_track_peer_prepare(owner, id, user, user_stream, access);
}

enum xdm_status xdm_prepare_peer_use(struct xdm_runtime *owner, struct xdm_block_id id,
				     struct xdm_runtime *user, xdm_stream_id user_stream,
				     enum xdm_access access)
{
	return peer_use(owner, id, user, user_stream, access, false);
}

enum xdm_status xdm_finish_peer_use(struct xdm_runtime *owner, struct xdm_block_id id,
				    struct xdm_runtime *user, xdm_stream_id user_stream,
				    enum xdm_access access)
{
	return peer_use(owner, id, user, user_stream, access, true);
}

/* The live entry of id copied out: its block, or (block NULL) its request. */
static enum xdm_status lookup_entry(struct xdm_runtime *rt, struct xdm_block_id id,
				    const char *fn, struct xdm_block *block, size_t *requested)
{
	struct xdm_reg_shard *shard;
	struct xdm_reg_entry *e;
	bool live;

	if (!rt || (!block && !requested))
		return xdm_error_set(XDM_E_INVALID, "%s: NULL runtime or result", fn);
	if (id.ordinal != rt->ordinal)
		return other_device(rt, id.ordinal, fn);
	shard = xdm_registry_shard(&rt->registry, id.ptr);
	xdm_spin_lock(&shard->lock);
	e = xdm_registry_find_locked(shard, id.ptr);
	live = e && e->block.generation == id.generation;
	if (live && block)
		*block = e->block;
	if (live && requested)
		*requested = e->requested;
	xdm_spin_unlock(&shard->lock);
	if (!live)
		return not_live(rt, fn, id.ptr, id.generation);
	return XDM_OK;
}

enum xdm_status xdm_block_lookup(struct xdm_runtime *rt, struct xdm_block_id id,
				 struct xdm_block *out)
{
	return lookup_entry(rt, id, "xdm_block_lookup", out, NULL);
}

enum xdm_status xdm_block_requested(struct xdm_runtime *rt, struct xdm_block_id id,
				    size_t *bytes)
{
	return lookup_entry(rt, id, "xdm_block_requested", NULL, bytes);
}

struct block_visit {
	void (*fn)(const struct xdm_block *b, void *arg);
	void *arg;
};

static void visit_entry(const struct xdm_reg_entry *e, void *arg)
{
	const struct block_visit *v = arg;

	v->fn(&e->block, v->arg);
}

enum xdm_status xdm_runtime_for_each_block(struct xdm_runtime *rt,
					   void (*fn)(const struct xdm_block *b, void *arg),
					   void *arg)
{
	struct block_visit v = { fn, arg };

	if (!rt || !fn)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_for_each_block: NULL argument");
	xdm_registry_for_each(&rt->registry, visit_entry, &v);
	return XDM_OK;
}

void xdm_runtime_stats(struct xdm_runtime *rt, struct xdm_stats *out)
{
	struct xdm_counters *c;
	struct xdm_counts_sum sum, base;

	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!rt)
		return;
	c = &rt->counters;
	xdm_counters_sum(c, &sum, &base);
	/*
	 * The totals count from the last reset.  Read together with the
	 * baseline, a sum is never below it (the reset's own sum came first),
	 * and a difference modulo 2^64 stays exact past a wrap.
	 */
	out->allocs = sum.allocs - base.allocs;
	out->frees = sum.frees - base.frees;
	out->bytes_allocated = sum.allocated - base.allocated;
	out->bytes_freed = sum.freed - base.freed;
	out->failures = sum.failures - base.failures;
	/* Exact at quiescence; meanwhile a free seen before its allocation
	 * would read negative, and reads 0.  No reset touches these. */
	out->blocks_outstanding = xdm_counts_blocks_held(&sum);
	out->bytes_outstanding = xdm_counts_bytes_held(&sum);
	/* A total a reader sees is a total the runtime held: a sample of the
	 * peaks too (counters.h). */
	xdm_counters_raise_peaks(c, out->bytes_outstanding, out->blocks_outstanding);
	out->bytes_peak = atomic_load_explicit(&c->peak, memory_order_relaxed);
	out->blocks_peak = atomic_load_explicit(&c->blocks_peak, memory_order_relaxed);
	out->waits_queued = atomic_load_explicit(&c->waits, memory_order_relaxed);
	out->events_recorded = atomic_load_explicit(&c->events, memory_order_relaxed);
}

enum xdm_status xdm_runtime_reset_peak(struct xdm_runtime *rt)
{
	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_reset_peak: no runtime");
	xdm_counters_reset_peaks(&rt->counters);
	return XDM_OK;
}

enum xdm_status xdm_runtime_reset_totals(struct xdm_runtime *rt)
{
	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_reset_totals: no runtime");
	xdm_counters_reset_totals(&rt->counters);
	return XDM_OK;
}

uint32_t xdm_runtime_ordinal(const struct xdm_runtime *rt)
{
	return rt ? rt->ordinal : UINT32_MAX;
}

/* Named when published, before the builder returns it, and never renamed. */
const char *xdm_runtime_name(const struct xdm_runtime *rt)
{
	return rt ? rt->name : "";
}

enum xdm_status xdm_runtime_device(struct xdm_runtime *rt, struct xdm_device_info *out)
{
	if (!rt || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_device: NULL argument");
	*out = rt->device;
	return XDM_OK;
}

uint32_t xdm_runtime_layer_count(struct xdm_runtime *rt)
{
	return rt ? rt->nlayers : 0;
}

const char *xdm_runtime_layer_name(struct xdm_runtime *rt, uint32_t index)
{
	return rt && index < rt->nlayers ? rt->layers[index].ops->name : NULL;
}

enum xdm_status xdm_runtime_stack_spec(struct xdm_runtime *rt, char *buf, size_t len)
{
	size_t used = 0;

	if (!rt || !buf || !len)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_stack_spec: bad argument");
	buf[0] = '\0';
	for (uint32_t i = 0; i < rt->nlayers; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? " | " : "",
				 rt->layers[i].spec);

		if (n < 0 || (size_t)n >= len - used)
			return xdm_error_set(XDM_E_INVALID, "xdm_runtime_stack_spec: buffer of %zu "
					     "bytes is too small", len);
		used += (size_t)n;
	}
	return XDM_OK;
}

/* A store's refusal, with the handler's own sentence when it left one. */
static enum xdm_status store_refused(const char *attr, const char *value, int n)
{
	const struct xdm_error *e = xdm_last_error();
	char why[sizeof(e->message)];

	if (e->code == XDM_OK)
		return xdm_error_set(XDM_E_INVALID, "attribute '%s': '%s' rejected: %s", attr,
				     value, strerror(-n));
	snprintf(why, sizeof(why), "%s", e->message);
	return xdm_error_set(XDM_E_INVALID, "attribute '%s': '%s' rejected: %s (%s)", attr, value,
			     strerror(-n), why);
}

static enum xdm_status find_attr(struct xdm_runtime *rt, uint32_t index, const char *name,
				 const struct xdm_attr **out)
{
	const struct xdm_attr *a;

	if (!rt || !name || index >= rt->nlayers)
		return xdm_error_set(XDM_E_INVALID, "no layer %u in this runtime", index);
	for (a = rt->layers[index].ops->attrs; a && a->name; a++) {
		if (strcmp(a->name, name) == 0) {
			*out = a;
			return XDM_OK;
		}
	}
	return xdm_error_set(XDM_E_INVALID, "layer %u (%s) has no attribute '%s'", index,
			     rt->layers[index].ops->name, name);
}

enum xdm_status xdm_layer_attr_show(struct xdm_runtime *rt, uint32_t index, const char *attr,
				    char *buf, size_t len)
{
	const struct xdm_attr *a;
	enum xdm_status st;
	int n;

	st = find_attr(rt, index, attr, &a);
	if (st)
		return st;
	if (!a->show || !buf || !len)
		return xdm_error_set(XDM_E_INVALID, "attribute '%s' cannot be shown here", attr);
	n = a->show(&rt->layers[index], buf, len);
	if (n < 0)
		return xdm_error_set(XDM_E_INVALID, "attribute '%s': %s", attr, strerror(-n));
	return XDM_OK;
}

enum xdm_status xdm_layer_attr_store(struct xdm_runtime *rt, uint32_t index, const char *attr,
				     const char *value)
{
	struct xdm_error saved;
	const struct xdm_attr *a;
	enum xdm_status st;
	int n;

	st = find_attr(rt, index, attr, &a);
	if (st)
		return st;
	if (!a->store || !(a->mode & 0200))
		return xdm_error_set(XDM_E_NOT_SUPPORTED, "attribute '%s' is read-only", attr);
	if (!value)
		return xdm_error_set(XDM_E_INVALID, "attribute '%s': NULL value", attr);
	/*
	 * A handler may say why in the thread's error: start it clean to
	 * tell its sentence from an older one, which a success puts back.
	 */
	saved = *xdm_last_error();
	xdm_error_clear();
	n = a->store(&rt->layers[index], value, strlen(value));
	if (n < 0)
		return store_refused(attr, value, n);
	xdm_error_restore(&saved);
	return XDM_OK;
}

/* The layers that own memory a peer needs a grant for offer `peers`, writable. */
static bool grants_peers(struct xdm_runtime *rt, uint32_t index)
{
	const struct xdm_attr *a;

	for (a = rt->layers[index].ops->attrs; a && a->name; a++)
		if (!strcmp(a->name, "peers"))
			return a->store && (a->mode & 0200);
	return false;
}

enum xdm_status xdm_runtime_grant_peer(struct xdm_runtime *rt, uint32_t peer)
{
	enum xdm_status st;
	char value[16];

	if (!rt)
		return null_runtime("xdm_runtime_grant_peer");
	if (peer >= XDM_MAX_DEVICES)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_grant_peer: device %u is past the "
				     "largest ordinal xdm serves, %d", peer, XDM_MAX_DEVICES - 1);
	snprintf(value, sizeof(value), "%u", peer);
	for (uint32_t i = 0; i < rt->nlayers; i++) {
		if (!grants_peers(rt, i))
			continue;
		st = xdm_layer_attr_store(rt, i, "peers", value);
		if (st)
			return st;
	}
	/* None: the stack's memory needs no grant of xdm's (xdm.h says why). */
	return XDM_OK;
}
