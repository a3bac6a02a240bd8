/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the core's own structures.  Modules never see this file:
 * they reach the core through <xdm/module.h> only.
 */
#ifndef XDM_CORE_INTERNAL_H
#define XDM_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xdm/module.h>

#include "core/conf.h"
#include "core/spinlock.h"

#define XDM_HIDDEN __attribute__((visibility("hidden")))

#include "core/counters.h"
#include "core/ipc.h"

/* ---- errors (error.c) ---------------------------------------------- */

/*
 * Put back a copy of the thread's error taken before a call that must
 * leave it alone (a module's attribute handler may set one).
 */
XDM_HIDDEN void xdm_error_restore(const struct xdm_error *saved);
/* Prefix the thread's error message with "source:line:col: ". */
XDM_HIDDEN void xdm_error_locate(const char *source, unsigned int line, unsigned int col);

/* ---- module table (module_table.c, loader.c) ------------------------- */

/* One registered ops table, copied so that a shorter (older) table reads
 * as NULL past its end. */
struct xdm_module_rec {
	struct xdm_ops ops;
	char *path;			/* the file, or "<in-process>" */
};

struct xdm_module_file {
	char *path;			/* as found in the module path */
	void *handle;			/* dlopen handle, never closed */
};

struct xdm_module_table {
	pthread_mutex_t lock;
	struct xdm_module_rec **recs;
	size_t nrecs, caprecs;
	struct xdm_module_file *files;
	size_t nfiles, capfiles;
};

/* Which kinds a lookup accepts. */
#define XDM_KIND_BIT(k) (1u << (k))
#define XDM_KINDS_RESOURCE (XDM_KIND_BIT(XDM_KIND_BACKEND) | XDM_KIND_BIT(XDM_KIND_ADAPTOR))

XDM_HIDDEN const char *xdm_kind_name(enum xdm_module_kind kind);
/* Check a table and add it; who names it in messages, path is recorded.
 * Caller holds the table lock. */
XDM_HIDDEN enum xdm_status xdm_modules_add(struct xdm_module_table *t, const struct xdm_ops *ops,
					   const char *who, const char *path);
/* Find a registered table by name among kinds; NULL if none. */
XDM_HIDDEN const struct xdm_module_rec *xdm_modules_lookup(struct xdm_module_table *t,
							   const char *name, unsigned int kinds);
/*
 * Find name among kinds, loading NAME.so from the module path if it is not
 * registered yet.  On failure sets the thread error (XDM_E_CONFIG for "no
 * such file", XDM_E_MODULE otherwise) without any position prefix.
 */
XDM_HIDDEN enum xdm_status xdm_modules_resolve(struct xdm_module_table *t, const char *name,
					       unsigned int kinds, const char *module_dir,
					       const struct xdm_module_rec **out);

/* Find NAME.so in the module path; searched gets the path for messages. */
XDM_HIDDEN bool xdm_module_path_find(const char *module_dir, const char *name, char *out,
				     size_t len, char *searched, size_t searched_len);

/* ---- parameters (params.c) ------------------------------------------ */

struct xdm_param_value {
	const struct xdm_param_spec *spec;
	char *text;			/* given or default; NULL if neither */
	uint64_t number;		/* SIZE, UINT, BOOL (0/1) */
	bool given;
};

struct xdm_params {
	size_t n;
	struct xdm_param_value *v;
};

/* Type-check layer's params against spec.  Errors carry source:line:col. */
XDM_HIDDEN enum xdm_status xdm_params_build(const struct xdm_module_rec *mod,
					    const struct xdm_conf_layer *layer,
					    const char *source, uint64_t percent_base,
					    struct xdm_params **out);
XDM_HIDDEN void xdm_params_free(struct xdm_params *p);

/* ---- layers (layer.c) ------------------------------------------------ */

struct xdm_runtime;

struct xdm_layer {
	/* First, in this order: struct xdm_layer_head (module.h, ABI 1.5). */
	void *priv;
	uint64_t serial;		/* xdm_layer_serial() */
	const struct xdm_ops *ops;	/* points into a module record */
	/*
	 * Who answers xdm_up_allocate(this) and xdm_up_deallocate(this): this
	 * layer, or the first below it past adaptors that leave the method
	 * NULL.  Found once, when the stack is built (xdm_layer_resolve), so
	 * that a call down the stack is one load, not a walk.
	 */
	struct xdm_layer *serves_allocate;
	struct xdm_layer *serves_deallocate;
	const struct xdm_module_rec *mod;
	struct xdm_layer *upstream;	/* NULL for a backend and a platform */
	struct xdm_runtime *rt;
	struct xdm_params *params;
	char *spec;			/* "name k=v ..." as configured */
	bool inited;
};

/* Fill in serves_*; upstream's must be filled in already. */
XDM_HIDDEN void xdm_layer_resolve(struct xdm_layer *l);

/* ---- streams (stream_pool.c) ----------------------------------------- */

/*
 * A free that had to wait on another stream's use records an event after it
 * on its stream; the stream's introspection counts those not yet reached.
 * The list owns its events: they go back to the event pool once complete.
 */
struct xdm_pending_free {
	void *event;
	uint64_t seq;			/* tells a reused event from its last use */
};

struct xdm_pending_frees {
	struct xdm_spinlock lock;	/* never held across a platform call */
	struct xdm_pending_free *v;
	uint32_t n, cap;
	uint32_t prune_at;		/* a mark prunes once n reaches it */
	uint64_t next_seq;
};

struct xdm_stream_slot {
	void *handle;
	bool owned;
	struct xdm_pending_frees pending;
	/* Use events recorded on this stream that live blocks still hold;
	 * kept by tracking.c, off the allocation path. */
	_Atomic int64_t events_held;
};

struct xdm_stream_pool {
	pthread_mutex_t lock;		/* serialises imports only */
	_Atomic uint32_t count;
	uint32_t owned;
	struct xdm_stream_slot slots[XDM_MAX_STREAMS];
};

/*
 * Native handles a framework has named (native.c), found without a lock: a
 * value is written before its key is published with release order, and
 * entries are never removed.  Handles 0..2 (NULL and CUDA's two special
 * handles) have slots of their own; the rest are hashed.  A value packs
 * (flags << 16) | (stream id + 1); 0 means not seen yet.
 */
#define XDM_NATIVE_SPECIAL 3
#define XDM_NATIVE_SLOTS (2 * XDM_MAX_STREAMS)

struct xdm_native_entry {
	_Atomic uintptr_t key;		/* 0: empty */
	_Atomic uint32_t value;
};

struct xdm_native_map {
	_Atomic uint32_t special[XDM_NATIVE_SPECIAL];
	struct xdm_native_entry slots[XDM_NATIVE_SLOTS];
};

XDM_HIDDEN enum xdm_status xdm_stream_pool_init(struct xdm_runtime *rt, uint32_t count);
XDM_HIDDEN void xdm_stream_pool_fini(struct xdm_runtime *rt);
/* The native handle of a stream id, or NULL (after struct xdm_runtime: inline). */
static inline void *xdm_stream_native(struct xdm_runtime *rt, xdm_stream_id stream);

/*
 * The graph capture stream is part of (ops.stream_capture): 0 for none, the
 * same number for every stream of one capture.  Unknown streams and
 * platform errors read as UINT64_MAX, a capture: nothing is then queried.
 */
XDM_HIDDEN uint64_t xdm_stream_capture(struct xdm_runtime *rt, xdm_stream_id stream);

/* Count use events a block's track takes (+1) or lets go of (-1). */
static inline void xdm_stream_events_held(struct xdm_stream_pool *pool, xdm_stream_id stream,
					  int64_t delta)
{
	if (stream < XDM_MAX_STREAMS)
		atomic_fetch_add_explicit(&pool->slots[stream].events_held, delta,
					  memory_order_relaxed);
}

/* ---- pending frees (stream_frees.c) ----------------------------------- */

/* After a free that waited on another stream was queued on stream. */
XDM_HIDDEN void xdm_pending_free_mark(struct xdm_runtime *rt, xdm_stream_id stream);
/* Frees marked on stream that the stream has not reached yet. */
XDM_HIDDEN uint32_t xdm_pending_free_count(struct xdm_runtime *rt, xdm_stream_id stream);
XDM_HIDDEN void xdm_pending_frees_fini(struct xdm_runtime *rt);

/* ---- events (event_pool.c) ------------------------------------------- */

/* Platform events are recycled: never created on the hot path once warm. */
struct xdm_event_pool {
	pthread_mutex_t lock;
	void **free;
	size_t nfree, cap;
	_Atomic uint64_t created;
};

XDM_HIDDEN enum xdm_status xdm_event_get(struct xdm_runtime *rt, void **event);
XDM_HIDDEN void xdm_event_put(struct xdm_runtime *rt, void *event);
XDM_HIDDEN void xdm_event_pool_fini(struct xdm_runtime *rt);

/* ---- live-block registry (registry.c) -------------------------------- */

/*
 * A recorded use: an event of a stream.  rt is NULL for the block's own
 * runtime; a peer use (work of another device, xdm_finish_peer_use) names
 * the runtime whose stream recorded it and whose pool the event goes back to.
 */
struct xdm_use_event {
	void *event;
	xdm_stream_id stream;
	struct xdm_runtime *rt;
	uint64_t capture;	/* the graph capture it was recorded in; 0: none */
};

#define XDM_INLINE_READS 4

/* The cross-stream state of one block (DESIGN: the stream-ordered contract). */
struct xdm_use_track {
	bool has_write;
	struct xdm_use_event last_write;
	uint32_t nreads, capreads;
	struct xdm_use_event *reads;	/* inline_reads or heap */
	struct xdm_use_event inline_reads[XDM_INLINE_READS];
};

struct xdm_reg_entry {
	struct xdm_block block;
	size_t requested;		/* the bytes asked for; block.bytes may be more */
	struct xdm_use_track track;
	struct xdm_reg_entry *next;
};

#define XDM_REG_SHARDS 256

/*
 * A shard counts only what numbers its generations: the runtime's counts of
 * allocations, frees and bytes are per thread (counters.h).
 */
struct xdm_reg_shard {
	struct xdm_spinlock lock;
	struct xdm_reg_entry **buckets;
	size_t nbuckets, count;
	struct xdm_reg_entry *spare;	/* recycled entries */
	uint64_t inserts;		/* numbers the shard's generations */
} __attribute__((aligned(64)));

/*
 * A block's generation is its shard's count of inserts, shifted, with the
 * shard index below: unique in the runtime without a global counter, and
 * increasing for any one address, because an address always hashes to the
 * same shard.  Never 0.
 */
#define XDM_REG_SHARD_BITS 8

struct xdm_registry {
	struct xdm_reg_shard shards[XDM_REG_SHARDS];
};

XDM_HIDDEN void xdm_registry_init(struct xdm_registry *reg);
XDM_HIDDEN void xdm_registry_fini(struct xdm_runtime *rt);
XDM_HIDDEN struct xdm_reg_shard *xdm_registry_shard(struct xdm_registry *reg, uint64_t ptr);
/* Insert a copy of block, asked for as requested bytes, and give it its
 * generation (block->generation is set).  INVALID if its ptr is already live. */
XDM_HIDDEN enum xdm_status xdm_registry_insert(struct xdm_registry *reg,
					       struct xdm_block *block, size_t requested);
/* Find a live entry; caller holds the shard lock. NULL if none. */
XDM_HIDDEN struct xdm_reg_entry *xdm_registry_find_locked(struct xdm_reg_shard *shard,
							  uint64_t ptr);
/*
 * Remove the entry of ptr whose generation matches, in one lock hold,
 * copying its block to *out and moving its uses to *uses (which is left
 * empty when there were none: the common case copies nothing more).  The
 * moved reads point into *uses, or at a heap array the caller frees with
 * xdm_use_track_free().  False if no such entry.
 */
XDM_HIDDEN bool xdm_registry_take(struct xdm_registry *reg, uint64_t ptr,
				  xdm_generation generation, struct xdm_block *out,
				  struct xdm_use_track *uses);
XDM_HIDDEN void xdm_use_track_free(struct xdm_use_track *t);
/* Move a track (its reads may be inline): src is left empty. */
XDM_HIDDEN void xdm_use_track_move(struct xdm_use_track *dst, struct xdm_use_track *src);
/*
 * True if a use was recorded outside any graph capture on a stream other
 * than own (tracking.c).
 */
XDM_HIDDEN bool xdm_track_has_uncaptured(const struct xdm_use_track *t, xdm_stream_id own);
/*
 * True once every use recorded outside a capture has completed; with wait,
 * the host waits for them first.  A failed query counts as not done.
 */
XDM_HIDDEN bool xdm_track_uncaptured_done(struct xdm_runtime *rt, const struct xdm_use_track *t,
					  bool wait);
/* capture_frees.c */
struct xdm_capture_frees;
XDM_HIDDEN void xdm_capture_frees_init(struct xdm_capture_frees *h);
XDM_HIDDEN void xdm_capture_frees_fini(struct xdm_capture_frees *h);
XDM_HIDDEN bool xdm_capture_free_must_hold(uint64_t cap, const struct xdm_block *b,
					   const struct xdm_use_track *uses);
/* Hold a free (uses moved into the hold); false without memory for it. */
XDM_HIDDEN bool xdm_capture_free_hold(struct xdm_runtime *rt, const struct xdm_block *b,
				      struct xdm_use_track *uses);
/*
 * Let go of the holds that may go now; with wait, of all (teardown).  The
 * first error of a free let go.
 */
XDM_HIDDEN enum xdm_status xdm_capture_frees_release(struct xdm_runtime *rt, bool wait);
/* Unlink every live entry and hand each to fn (without the shard lock);
 * the runtime's counters do not see it (teardown only). */
XDM_HIDDEN void xdm_registry_drain(struct xdm_registry *reg,
				   void (*fn)(struct xdm_reg_entry *e, void *arg), void *arg);
/* Visit every live block under each shard lock in turn (for snapshots). */
XDM_HIDDEN void xdm_registry_for_each(struct xdm_registry *reg,
				      void (*fn)(const struct xdm_reg_entry *e, void *arg),
				      void *arg);
/* Call fn on the live entry of (ptr, generation) under its shard lock;
 * false if there is none. */
XDM_HIDDEN bool xdm_registry_with_block(struct xdm_registry *reg, uint64_t ptr,
					xdm_generation generation,
					void (*fn)(const struct xdm_reg_entry *e, void *arg),
					void *arg);
/* Call fn on the live entry of generation under its shard lock; false if
 * there is none.  Scans the whole shard: prefer xdm_registry_with_block(). */
XDM_HIDDEN bool xdm_registry_with_generation(struct xdm_registry *reg, xdm_generation generation,
					     void (*fn)(const struct xdm_reg_entry *e, void *arg),
					     void *arg);

/* ---- tracking (tracking.c) ------------------------------------------- */

/*
 * Before the free: make the block's stream wait on every recorded use and
 * hand the events back to the pool.  cap: the capture the block's stream
 * is in (xdm_stream_capture), asked by the caller, which may know it is 0.
 */
XDM_HIDDEN enum xdm_status xdm_track_release(struct xdm_runtime *rt, const struct xdm_block *b,
					     struct xdm_use_track *uses, uint64_t cap);
/* Hand one recorded use's event back to the runtime it came from. */
XDM_HIDDEN void xdm_use_put(struct xdm_runtime *rt, const struct xdm_use_event *use);
/* A use of owner's block on a stream of user, another device's runtime. */
XDM_HIDDEN enum xdm_status xdm_track_peer_prepare(struct xdm_runtime *owner,
						  struct xdm_block_id id,
						  struct xdm_runtime *user, xdm_stream_id stream,
						  enum xdm_access access);
XDM_HIDDEN enum xdm_status xdm_track_peer_finish(struct xdm_runtime *owner,
						 struct xdm_block_id id,
						 struct xdm_runtime *user, xdm_stream_id stream,
						 enum xdm_access access);

static inline bool xdm_use_track_empty(const struct xdm_use_track *t)
{
	return !t->has_write && t->nreads == 0;
}

/* True if the use was on a stream other than own (the block's). */
static inline bool xdm_use_crosses(const struct xdm_use_event *use, xdm_stream_id own)
{
	/* A peer use is on another device's stream: always a crossing. */
	return use->stream != own || use->rt;
}

/* True if a use of the block was recorded on a stream other than its own. */
static inline bool xdm_use_track_crosses(const struct xdm_use_track *t, xdm_stream_id own)
{
	if (t->has_write && xdm_use_crosses(&t->last_write, own))
		return true;
	for (uint32_t i = 0; i < t->nreads; i++)
		if (xdm_use_crosses(&t->reads[i], own))
			return true;
	return false;
}

/* ---- runtime (runtime.c, runtime_table.c) ---------------------------- */

/* The longest name of a runtime in the tree: "15" or "15.4294967295". */
#define XDM_RUNTIME_NAME_MAX 16

/*
 * Where the blocks of the last blocks/ listing live, by generation: a file
 * of blocks/<generation>/ is then found in one bucket of one shard instead
 * of a scan of the shard's every bucket (tree_blocks.c).
 */
struct xdm_gen_ptr {
	uint64_t generation, ptr;
};

struct xdm_block_index {
	pthread_mutex_t lock;
	struct xdm_gen_ptr *v;		/* sorted by generation */
	size_t n;
};

/*
 * Frees made inside a graph capture that must follow work outside it,
 * held until that work completes (capture_frees.c).
 */
struct xdm_capture_free;
struct xdm_capture_frees {
	pthread_mutex_t lock;
	struct xdm_capture_free *head;
	_Atomic uint32_t count;		/* a sample while frees come and go */
	_Atomic uint64_t bytes;
};

struct xdm_runtime {
	uint32_t ordinal;
	bool singleton;
	char name[XDM_RUNTIME_NAME_MAX];	/* its directory in the tree */
	struct xdm_runtime *published_next;
	struct xdm_layer platform;
	struct xdm_device_info device;
	struct xdm_layer *layers;	/* [0] is the top */
	uint32_t nlayers;
	struct xdm_stream_pool streams;
	struct xdm_native_map native;
	struct xdm_event_pool events;
	struct xdm_registry registry;
	struct xdm_counters counters;
	struct xdm_block_index tree_index;
	/*
	 * Events of this runtime held in blocks of other runtimes (peer uses):
	 * it may not be destroyed while any is, since their frees give them back here.
	 */
	_Atomic uint64_t peer_uses;
	/* Blocks shared with other processes, both ways (ipc.h). */
	struct xdm_ipc ipc;
	struct xdm_capture_frees capture_frees;
};

/*
 * Inline: the allocation path asks it for every block.  Slots are written
 * once, before count is published with release order (stream_pool.c).
 */
static inline void *xdm_stream_native(struct xdm_runtime *rt, xdm_stream_id stream)
{
	if (!rt || stream >= atomic_load_explicit(&rt->streams.count, memory_order_acquire))
		return NULL;
	return rt->streams.slots[stream].handle;
}

/* The front end that serves the tree as files (mount.c). */
struct xdm_frontend;

struct xdm_mount_state {
	pthread_mutex_t lock;		/* serialises mount and unmount */
	void *dl;			/* fusefs.so, never closed */
	const struct xdm_frontend *fe;
	void *server;			/* NULL when nothing is mounted */
	char *dir;
	bool created_dir;		/* rmdir it at unmount */
	bool auto_tried;		/* the configured mount was attempted */
	bool hooks;			/* atexit and atfork are registered */
};

/* Interned tags (tags.c): a hash set of strings that live as long as the
 * process. */
struct xdm_tag_table {
	pthread_mutex_t lock;
	char **slots;			/* cap slots, NULL where empty */
	size_t n, cap;
};

/* The one piece of process-wide state: runtimes, modules, the config. */
struct xdm_runtime_table {
	pthread_mutex_t lock;		/* serialises first builds */
	struct xdm_runtime *_Atomic runtimes[XDM_MAX_DEVICES];
	struct xdm_config *_Atomic config;	/* the singletons' configuration */
	struct xdm_module_table modules;
	/*
	 * Every live runtime, as the tree shows them.  Tree readers hold it
	 * shared for a whole operation; publishing and unpublishing hold it
	 * exclusive, so a runtime is never torn down under a reader.
	 */
	pthread_rwlock_t tree_lock;
	struct xdm_runtime *published;
	uint32_t published_seq;
	struct xdm_mount_state mount;
	struct xdm_tag_table tags;
	_Atomic uint64_t serials;	/* the last serial a runtime took */
};

XDM_HIDDEN struct xdm_runtime_table *xdm_table(void);
/* A number no runtime or layer of this process had before: never 0, never reused. */
XDM_HIDDEN uint64_t xdm_runtime_serial(void);

/* Build a runtime from a parsed config (and optional spec override). */
XDM_HIDDEN enum xdm_status xdm_runtime_build(uint32_t ordinal, const struct xdm_config *cfg,
					     const char *platform, const char *stack,
					     bool singleton, struct xdm_runtime **out);
XDM_HIDDEN void xdm_runtime_teardown(struct xdm_runtime *rt);

/* Name a new runtime and show it in the tree (tree.c). */
XDM_HIDDEN void xdm_tree_publish(struct xdm_runtime *rt);
/* Take it out of the tree, waiting for readers that use it. */
XDM_HIDDEN void xdm_tree_unpublish(struct xdm_runtime *rt);

/* Mount the configured tree once per process, if one is configured; a
 * failure is reported on stderr and does not fail the caller (mount.c). */
XDM_HIDDEN void xdm_mount_configured(const struct xdm_config *cfg);

/* Layer calls used by the runtime itself. */
XDM_HIDDEN const struct xdm_ops *xdm_platform_ops(struct xdm_runtime *rt);

#endif /* XDM_CORE_INTERNAL_H */
