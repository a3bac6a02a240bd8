/* SPDX-License-Identifier: MIT */
/*
 * module.h - the plugin ABI of xdm.
 *
 * A module is a shared object that exports one entry symbol,
 * XDM_MODULE_ENTRY_SYMBOL, returning a NULL-terminated array of ops tables.
 * Each table is one platform, backend or adaptor.  The core loads modules by
 * name from the module path, checks each table's ABI version and size, and
 * stacks instances of them ("layers") as the configuration says.
 *
 * Rules of the table:
 *  - abi_major must equal XDM_ABI_MAJOR; the core refuses anything else.
 *  - size is sizeof(struct xdm_ops) as the module was compiled; methods are
 *    only ever appended, so an older, shorter table reads as NULL past its end.
 *  - A NULL method in an adaptor forwards to its upstream layer.
 *  - A NULL tracking method in a backend answers XDM_E_STREAM_MISUSE:
 *    pretending to track cross-stream uses is worse than refusing.
 *  - Backends that queue their frees on the block's stream opt in to the
 *    core's block-use tracking by pointing the tracking methods at
 *    xdm_track_record/prepare/finish/supported below.
 */
#ifndef XDM_MODULE_H
#define XDM_MODULE_H

#include <xdm/xdm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XDM_ABI_MAJOR 1
#define XDM_ABI_MINOR 10

#define XDM_MODULE_ENTRY_SYMBOL "xdm_module_entry"

enum xdm_module_kind {
	XDM_KIND_PLATFORM = 1,	/* devices, streams, events, copies */
	XDM_KIND_BACKEND = 2,	/* the base resource at the bottom of a stack */
	XDM_KIND_ADAPTOR = 3,	/* a decorator over an upstream resource */
};

/* One instance of a module: a layer of a stack, or a runtime's platform. */
struct xdm_layer;

/* ---- parameters ------------------------------------------------------ */

enum xdm_param_type {
	XDM_PARAM_STRING = 1,
	XDM_PARAM_SIZE,		/* xdm_parse_size(), % of the device's memory */
	XDM_PARAM_UINT,
	XDM_PARAM_BOOL,		/* true/false, yes/no, on/off, 1/0 */
};

/* A parameter a module accepts; the core rejects any other key. */
struct xdm_param_spec {
	const char *name;
	enum xdm_param_type type;
	const char *default_value;	/* NULL: absent unless given */
	const char *help;
};

/* A layer's parsed and type-checked parameters. */
struct xdm_params;

XDM_API bool xdm_params_has(const struct xdm_params *p, const char *name);
/* Value or default; NULL if neither.  Types were checked at load. */
XDM_API const char *xdm_params_string(const struct xdm_params *p, const char *name);
XDM_API uint64_t xdm_params_size(const struct xdm_params *p, const char *name);
XDM_API uint64_t xdm_params_uint(const struct xdm_params *p, const char *name);
XDM_API bool xdm_params_bool(const struct xdm_params *p, const char *name);

/* ---- attributes ------------------------------------------------------ */

/*
 * One file of the introspection tree, sysfs-style: show writes one value and
 * a newline into buf and returns its length (or a negative errno); store
 * parses the whole value (a trailing newline is allowed) and returns 0, or
 * -EINVAL changing nothing.  store is NULL for read-only attributes.
 */
struct xdm_attr {
	const char *name;
	unsigned int mode;		/* 0444 or 0644; 0200 (show NULL) for an action */
	const char *help;		/* unit and meaning, for the docs */
	int (*show)(struct xdm_layer *self, char *buf, size_t len);
	int (*store)(struct xdm_layer *self, const char *buf, size_t len);
};

/* ---- sharing blocks with other processes (ABI 1.4) ------------------- */

/* How an object is passed to the importer. */
enum xdm_ipc_kind {
	XDM_IPC_NONE = 0,
	/* A file descriptor (a memfd, a driver's shareable handle): passed
	 * over the exporter's socket, mapped by the importer's platform. */
	XDM_IPC_FD = 1,
	/* Bytes alone (a driver's own IPC handle): in the handle's payload. */
	XDM_IPC_BYTES = 2,
	/*
	 * ABI 1.7: several descriptors, one per piece of the object, in the
	 * order the pieces lie in it (a driver's separately created granules):
	 * fds and nfds below.  The layer is asked again each time an importer
	 * opens the block, and the core closes what it gave once they are
	 * passed, so an exporter keeps none of them open in between.
	 */
	XDM_IPC_FDS = 3,
};

/* The most descriptors one XDM_IPC_FDS object may have (2 MiB pieces: 128 GiB). */
#define XDM_IPC_FDS_MAX 65536

#define XDM_IPC_PAYLOAD_MAX 96

/*
 * What a backend tells of the memory a block lies in.  kind and payload go
 * into the handle (the same for every export of one block); fd is passed
 * over the socket to each importer, and closed by the core after.
 */
struct xdm_ipc_object {
	uint32_t kind;			/* enum xdm_ipc_kind */
	uint32_t payload_len;
	int fd;				/* XDM_IPC_FD: a descriptor of the object */
	uint64_t offset;		/* where the block starts in the object */
	uint64_t object_bytes;		/* the object's size */
	unsigned char payload[XDM_IPC_PAYLOAD_MAX];	/* e.g. which driver object */
	/* ABI 1.7, XDM_IPC_FDS: the descriptors (malloc'd by the layer that
	 * answers; the core closes and frees them) and how many. */
	int *fds;
	uint32_t nfds;
	/* ABI 1.9: enum xdm_ipc_flags; 0 (what an older module leaves) claims nothing. */
	uint32_t flags;
};

/*
 * ABI 1.9: what a backend vouches for in an object it describes.  An
 * importer gets the whole object: a descriptor maps all of it, a driver's
 * handle opens all of it.  So the core passes an object that holds
 * anything besides the block (a pool's chunk, a guard's canaries, a
 * driver pool) only to processes of the exporter's own user, who could
 * read its memory anyway; another user, even one the exporter admits,
 * gets only objects marked ONLY_BLOCK.
 */
enum xdm_ipc_flags {
	/* The object holds this block and nothing else: every byte of it
	 * outside the block is the block's own padding, never another's. */
	XDM_IPC_ONLY_BLOCK = 1u << 0,
};

/* ---- what a layer holds (ABI 1.10) ------------------------------------ */

/*
 * How a layer's chunks method marks a piece of a chunk (the state of a
 * struct xdm_chunk_piece of <xdm/xdm.h> it hands to fn).  The runtime
 * turns them into XDM_PIECE_ACTIVE or XDM_PIECE_INACTIVE by its registry
 * of live blocks before a caller sees them (xdm_runtime_for_each_chunk).
 */
enum xdm_layer_piece_state {
	XDM_LAYER_PIECE_USED = 16,	/* handed to the layer above */
	XDM_LAYER_PIECE_FREE = 17,	/* free in the layer, merged with free neighbours */
	XDM_LAYER_PIECE_CACHED = 18,	/* free in the layer, kept apart for reuse by size */
};

/*
 * Called once per chunk; the chunk and its pieces are the layer's, valid
 * for the call only.  Nonzero stops the walk.
 */
typedef int (*xdm_chunk_fn)(const struct xdm_chunk *chunk, void *arg);

/* ---- the ops table --------------------------------------------------- */

struct xdm_ops {
	/* header: never reordered */
	uint32_t abi_major;
	uint32_t abi_minor;
	uint32_t size;			/* sizeof(struct xdm_ops) of the module */
	uint32_t reserved;
	const char *name;
	enum xdm_module_kind kind;
	const char *description;
	const struct xdm_param_spec *params;	/* {NULL}-terminated, or NULL */
	const struct xdm_attr *attrs;		/* {NULL}-terminated, or NULL */

	/* every kind */
	enum xdm_status (*init)(struct xdm_layer *self, const struct xdm_params *params);
	void (*fini)(struct xdm_layer *self);

	/* backend and adaptor */
	enum xdm_status (*allocate)(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				    const char *tag, struct xdm_block *out);
	enum xdm_status (*deallocate)(struct xdm_layer *self, struct xdm_block *block);
	size_t (*bytes_outstanding)(struct xdm_layer *self);
	enum xdm_status (*reap_pending)(struct xdm_layer *self);
	enum xdm_status (*record_block_use)(struct xdm_layer *self, const struct xdm_block *block,
					    xdm_stream_id use_stream);
	bool (*supports_block_use_tracking)(struct xdm_layer *self);
	enum xdm_status (*prepare_block_use)(struct xdm_layer *self, struct xdm_block_id id,
					     xdm_stream_id use_stream, enum xdm_access access);
	enum xdm_status (*finish_block_use)(struct xdm_layer *self, struct xdm_block_id id,
					    xdm_stream_id use_stream, enum xdm_access access);

	/* platform: native streams and events are opaque pointers */
	const char *default_stack;	/* stack spec when the config names none */
	enum xdm_status (*device_info)(struct xdm_layer *self, struct xdm_device_info *out);
	enum xdm_status (*stream_create)(struct xdm_layer *self, void **stream);
	void (*stream_destroy)(struct xdm_layer *self, void *stream);
	enum xdm_status (*stream_synchronize)(struct xdm_layer *self, void *stream);
	enum xdm_status (*event_create)(struct xdm_layer *self, void **event);
	void (*event_destroy)(struct xdm_layer *self, void *event);
	/* The event completes when the stream reaches this point. */
	enum xdm_status (*event_record)(struct xdm_layer *self, void *event, void *stream);
	/* The stream waits for the event's latest record as of this call. */
	enum xdm_status (*stream_wait_event)(struct xdm_layer *self, void *stream, void *event);
	enum xdm_status (*event_query)(struct xdm_layer *self, void *event, bool *done);
	enum xdm_status (*event_synchronize)(struct xdm_layer *self, void *event);
	enum xdm_status (*launch_host_func)(struct xdm_layer *self, void *stream,
					    void (*fn)(void *arg), void *arg);
	enum xdm_status (*memset_async)(struct xdm_layer *self, uint64_t ptr, int value,
					size_t bytes, void *stream);
	enum xdm_status (*memcpy_async)(struct xdm_layer *self, uint64_t dst, uint64_t src,
					size_t bytes, void *stream);

	/* ABI 1.1 */
	/*
	 * A directory of the runtime's introspection tree that also shows this
	 * layer's attributes ("budget" gives <runtime>/budget/limit), for a
	 * concept a reader should not have to find by layer number.  When
	 * layers of one stack share a group, the topmost one has it.  NULL: the
	 * attributes are under layers/<n>-<name>/ only.
	 */
	const char *attr_group;

	/* ABI 1.2: platform */
	/*
	 * A framework's native stream handle, as the runtime should keep it
	 * (xdm_native_stream() in <xdm/xdm.h>): sets *canonical to the handle
	 * the stream pool holds for it.  A handle that names no stream of this
	 * device is XDM_E_INVALID, one the platform cannot order blocks on
	 * XDM_E_STREAM_MISUSE, each with a sentence.  NULL: the core takes a
	 * non-NULL handle as it is and refuses NULL, which such a platform has
	 * no meaning for.
	 */
	enum xdm_status (*stream_resolve)(struct xdm_layer *self, void *handle, void **canonical);

	/* ABI 1.3: backends whose blocks are pieces of one reserved address range */
	/*
	 * The size of the piece (granule) such a backend maps memory in; 0 or
	 * NULL: its blocks are separate allocations.  A backend answering G > 0
	 * promises that every block it hands out starts and ends on a multiple
	 * of G; that blocks which are neighbours in the address space may be
	 * used as one range; and that deallocate takes any range of whole
	 * granules it handed out, as {ptr, bytes, stream}, whatever blocks
	 * they came from (the range is released after the work queued on that
	 * stream).  Unlike other methods, a NULL granularity in an adaptor
	 * answers 0: only an adaptor that keeps no record per block (a byte
	 * count, as the budget keeps) may pass the question down.
	 */
	uint64_t (*granularity)(struct xdm_layer *self);
	/*
	 * Map bytes (a multiple of the granularity) at exactly ptr, which must
	 * lie in the backend's range and be wholly unused: how a layer above
	 * grows a range it already holds in place.  XDM_E_OUT_OF_MEMORY when
	 * the place is taken or the memory is not there; NULL in any layer:
	 * XDM_E_NOT_SUPPORTED (the caller allocates anywhere instead).
	 * A suballocator (pool) answers it too, for any aligned size, out of
	 * its own free memory on stream (xdm_allocate_at); an adaptor that
	 * keeps a record per block implements it or leaves it NULL.
	 */
	enum xdm_status (*allocate_at)(struct xdm_layer *self, uint64_t ptr, size_t bytes,
				       xdm_stream_id stream, const char *tag,
				       struct xdm_block *out);

	/* ABI 1.4: sharing blocks with other processes (xdm_ipc_export) */
	/*
	 * Backend: the memory object a live block lies in, for another
	 * process to map (struct xdm_ipc_object).  An adaptor forwards when
	 * NULL (its blocks are its upstream's); one that carves blocks out of
	 * larger ones (the pool) answers with the larger block's object and
	 * the offset inside it.  NULL in a backend: XDM_E_NOT_SUPPORTED.
	 */
	enum xdm_status (*ipc_export)(struct xdm_layer *self, const struct xdm_block *block,
				      struct xdm_ipc_object *out);
	/*
	 * Platform: map bytes of an object another process exported (obj as
	 * its exporter described it, with the descriptor it passed) into this
	 * process; *ptr the first byte of the block, *cookie anything the
	 * platform needs at unmap.  The descriptor stays the caller's.
	 */
	enum xdm_status (*ipc_import)(struct xdm_layer *self, const struct xdm_ipc_object *obj,
				      size_t bytes, uint64_t *ptr, void **cookie);
	/* Platform: undo one ipc_import, once the work that used it is done. */
	void (*ipc_unmap)(struct xdm_layer *self, uint64_t ptr, size_t bytes, void *cookie);

	/* ABI 1.6: platform */
	/*
	 * Whether stream is being captured into a graph (CUDA's stream
	 * capture): *capture is 0 when it is not, else a number that is the
	 * same for every stream of one capture sequence and differs between
	 * sequences (UINT64_MAX where the platform cannot tell which).  While
	 * a capture is on, work queued on its streams does not run: the core
	 * then never queries or synchronizes what it records there, and never
	 * orders a stream after work of another capture.  An error reads as
	 * capturing.  NULL: the platform has no capture, every stream answers 0.
	 */
	enum xdm_status (*stream_capture)(struct xdm_layer *self, void *stream, uint64_t *capture);

	/* ABI 1.8: platform */
	/*
	 * For a native handle that stream_resolve answered with another
	 * stream, one the handle's work is ordered with only by what is queued
	 * there later (CUDA's per-thread default stream, served through the
	 * legacy stream): queue on canonical what makes its later work follow
	 * everything the calling thread has queued on handle.  The core calls
	 * it before each native free and record_use that names such a handle
	 * (any handle but NULL whose canonical differs), and refuses the
	 * handle in xdm_native_stream(), whose id would not carry the join.
	 * NULL: every handle is the stream stream_resolve answers.
	 */
	enum xdm_status (*stream_join)(struct xdm_layer *self, void *handle, void *canonical);

	/* ABI 1.10: backend and adaptor */
	/*
	 * What the layer holds from its upstream, for memory viewers: fn once
	 * per range it holds (a chunk: a pool's chunk, a run of a backend's
	 * granules), with its pieces in address order, which tile it with no
	 * gap and no overlap; each piece marked as enum xdm_layer_piece_state
	 * says.  stream is the stream whose arena owns the chunk.  A layer
	 * copies what it needs under its own locks and calls fn after
	 * releasing them (fn allocates, and may be slow); a chunk that moves
	 * meanwhile may be seen twice or not at all, which the core allows
	 * for.  A nonzero fn stops the walk, and the method returns XDM_OK.
	 * NULL in an adaptor forwards to its upstream (the adaptor hands out
	 * its upstream's blocks); NULL in a backend: XDM_E_NOT_SUPPORTED, and
	 * the runtime shows each live block as a chunk of its own.
	 */
	enum xdm_status (*chunks)(struct xdm_layer *self, xdm_chunk_fn fn, void *arg);
	/* append new members here, and bump XDM_ABI_MINOR */
};

/* The smallest table the core accepts: everything up to memcpy_async. */
#define XDM_OPS_MIN_SIZE \
	(offsetof(struct xdm_ops, memcpy_async) + sizeof(((struct xdm_ops *)0)->memcpy_async))

/* Fills the header of an ops table. */
#define XDM_OPS_HEADER(mod_name, mod_kind)                                  \
	.abi_major = XDM_ABI_MAJOR, .abi_minor = XDM_ABI_MINOR,             \
	.size = sizeof(struct xdm_ops), .name = (mod_name), .kind = (mod_kind)

#if defined(__GNUC__)
#define XDM_MODULE_EXPORT __attribute__((visibility("default")))
#else
#define XDM_MODULE_EXPORT
#endif

/*
 * XDM_MODULE(&a_ops, &b_ops) defines the entry symbol of a module.  Build
 * modules with -fvisibility=hidden so that this is their only export.
 */
#define XDM_MODULE(...)                                                      \
	XDM_MODULE_EXPORT const struct xdm_ops *const *xdm_module_entry(void); \
	XDM_MODULE_EXPORT const struct xdm_ops *const *xdm_module_entry(void)  \
	{                                                                    \
		static const struct xdm_ops *const tables[] = { __VA_ARGS__, NULL }; \
		return tables;                                               \
	}

typedef const struct xdm_ops *const *(*xdm_module_entry_fn)(void);

/* ---- what a layer may ask of the core -------------------------------- */

XDM_API void *xdm_layer_priv(const struct xdm_layer *self);
/*
 * ABI 1.5: a layer begins with these members, so that a module's allocation
 * path reads its state and calls the layer below with loads, not calls
 * into libxdm.  The rest of a layer is the core's.  A module that reads
 * them declares ABI 1.5 (XDM_OPS_HEADER does), and a libxdm older than its
 * ABI minor refuses to load it.
 */
struct xdm_layer_head {
	void *priv;			/* xdm_layer_priv() */
	uint64_t serial;		/* xdm_layer_serial() */
	const struct xdm_ops *ops;	/* the layer's table, as the core keeps it */
	/* Who answers xdm_up_allocate() and xdm_up_deallocate() of this layer:
	 * itself, or the first layer below past adaptors without the method. */
	struct xdm_layer *serves_allocate;
	struct xdm_layer *serves_deallocate;
};

static inline const struct xdm_layer_head *xdm_layer_head(const struct xdm_layer *self)
{
	return (const struct xdm_layer_head *)(const void *)self;
}

static inline void *xdm_layer_priv_inline(const struct xdm_layer *self)
{
	return xdm_layer_head(self)->priv;
}
/*
 * ABI 1.5: a number no other layer (nor runtime) of this process had, never
 * 0 and never reused.  A module keys a thread-local cache by it: an entry
 * left by a layer since destroyed then matches no later layer, even one
 * whose state lands at the same address.
 */
XDM_API uint64_t xdm_layer_serial(const struct xdm_layer *self);

/*
 * ABI 1.5: the answer a module's pthread key last gave the calling thread,
 * kept in a thread-local of the module's own, so that an allocation path
 * finds the thread's record with a load and a compare instead of a
 * pthread_getspecific call.  serial is the layer's: an entry left by a
 * layer since destroyed matches no later layer.  The key stays the truth:
 * its destructor still runs at the thread's exit, and forgets the entry
 * when it holds the record going away.  Only non-NULL records are kept.
 */
struct xdm_thread_last {
	uint64_t serial;
	void *record;
};

/* The record kept for the layer of serial, or NULL: ask the key. */
static inline void *xdm_thread_last_get(const struct xdm_thread_last *last, uint64_t serial)
{
	return __builtin_expect(last->serial == serial, 1) ? last->record : NULL;
}

static inline void xdm_thread_last_set(struct xdm_thread_last *last, uint64_t serial,
				       void *record)
{
	last->serial = serial;
	last->record = record;
}

/* What a lookup through the key found: kept when there is one, and returned. */
static inline void *xdm_thread_last_keep(struct xdm_thread_last *last, uint64_t serial,
					 void *record)
{
	if (record)
		xdm_thread_last_set(last, serial, record);
	return record;
}

/* A record goes (its thread exits): the entry forgets it if it held it. */
static inline void xdm_thread_last_forget(struct xdm_thread_last *last, const void *record)
{
	if (last->record == record)
		xdm_thread_last_set(last, 0, NULL);
}
XDM_API void xdm_layer_set_priv(struct xdm_layer *self, void *priv);
/* The layer below; NULL for a backend. */
XDM_API struct xdm_layer *xdm_layer_upstream(const struct xdm_layer *self);
XDM_API uint32_t xdm_layer_ordinal(const struct xdm_layer *self);
XDM_API const char *xdm_layer_name(const struct xdm_layer *self);
/* The runtime's device (name, uuid, total memory, platform). */
XDM_API const struct xdm_device_info *xdm_layer_device(const struct xdm_layer *self);
/*
 * The priv of the runtime's platform instance.  Only for a backend shipped in
 * the same module as its platform (cuda_async needs the cuda platform's
 * context); such a backend must first check xdm_layer_device()->platform.
 */
XDM_API void *xdm_layer_platform_priv(const struct xdm_layer *self);

/* Calls into the layer below, applying the NULL rules above. */
XDM_API enum xdm_status xdm_up_allocate(struct xdm_layer *up, size_t bytes, xdm_stream_id stream,
					const char *tag, struct xdm_block *out);
XDM_API enum xdm_status xdm_up_deallocate(struct xdm_layer *up, struct xdm_block *block);
XDM_API size_t xdm_up_bytes_outstanding(struct xdm_layer *up);
XDM_API enum xdm_status xdm_up_reap_pending(struct xdm_layer *up);
XDM_API enum xdm_status xdm_up_record_block_use(struct xdm_layer *up,
						const struct xdm_block *block,
						xdm_stream_id use_stream);
XDM_API bool xdm_up_supports_block_use_tracking(struct xdm_layer *up);
/* The upstream's granularity (0: whole blocks only), and its allocate_at. */
XDM_API uint64_t xdm_up_granularity(struct xdm_layer *up);
XDM_API enum xdm_status xdm_up_allocate_at(struct xdm_layer *up, uint64_t ptr, size_t bytes,
					   xdm_stream_id stream, const char *tag,
					   struct xdm_block *out);
XDM_API enum xdm_status xdm_up_prepare_block_use(struct xdm_layer *up, struct xdm_block_id id,
						 xdm_stream_id use_stream, enum xdm_access access);
/* The memory object of a block (ipc_export), down past adaptors that leave it NULL. */
XDM_API enum xdm_status xdm_up_ipc_export(struct xdm_layer *up, const struct xdm_block *block,
					  struct xdm_ipc_object *out);
XDM_API enum xdm_status xdm_up_finish_block_use(struct xdm_layer *up, struct xdm_block_id id,
						xdm_stream_id use_stream, enum xdm_access access);
/* ABI 1.10: what the stack below holds (chunks), down past adaptors that leave it NULL. */
XDM_API enum xdm_status xdm_up_chunks(struct xdm_layer *up, xdm_chunk_fn fn, void *arg);
/*
 * ABI 1.7: before a layer opens `need` descriptors for an XDM_IPC_FDS
 * answer: whether this process may open that many more, after raising the
 * soft limit of RLIMIT_NOFILE to the hard one where it is short (its 1024
 * is kept for select(), which xdm never uses).  The importer and the
 * exporter's server ask the same before they receive or send them.
 */
XDM_API bool xdm_ipc_fd_room(uint32_t need);

/*
 * ABI 1.5: xdm_up_allocate() and xdm_up_deallocate() inline, one indirect
 * call to the layer that serves them.  up must be a layer the core built
 * (xdm_layer_upstream() of an adaptor); NULL goes to the core's own
 * function for its error.
 */
static inline enum xdm_status xdm_up_allocate_inline(struct xdm_layer *up, size_t bytes,
						     xdm_stream_id stream, const char *tag,
						     struct xdm_block *out)
{
	struct xdm_layer *l = up ? xdm_layer_head(up)->serves_allocate : NULL;

	if (!l)
		return xdm_up_allocate(up, bytes, stream, tag, out);
	return xdm_layer_head(l)->ops->allocate(l, bytes, stream, tag, out);
}

static inline enum xdm_status xdm_up_deallocate_inline(struct xdm_layer *up,
						       struct xdm_block *block)
{
	struct xdm_layer *l = up ? xdm_layer_head(up)->serves_deallocate : NULL;

	if (!l)
		return xdm_up_deallocate(up, block);
	return xdm_layer_head(l)->ops->deallocate(l, block);
}

/* The runtime's platform, by stream id (INVALID for an unknown stream). */
XDM_API void *xdm_layer_stream(const struct xdm_layer *self, xdm_stream_id stream);
XDM_API uint32_t xdm_layer_stream_count(const struct xdm_layer *self);
XDM_API enum xdm_status xdm_layer_launch_host(struct xdm_layer *self, xdm_stream_id stream,
					      void (*fn)(void *arg), void *arg);
XDM_API enum xdm_status xdm_layer_stream_synchronize(struct xdm_layer *self, xdm_stream_id stream);
XDM_API enum xdm_status xdm_layer_memset(struct xdm_layer *self, uint64_t ptr, int value,
					 size_t bytes, xdm_stream_id stream);
XDM_API enum xdm_status xdm_layer_memcpy(struct xdm_layer *self, uint64_t dst, uint64_t src,
					 size_t bytes, xdm_stream_id stream);
/*
 * Make stream `waiter` wait for everything queued on `signaler` so far: one
 * event from the runtime's pool, recorded on signaler and waited on by
 * waiter, never a host synchronization.  Nothing is queued when the two are
 * the same stream.  A backend that hands memory from one stream to another
 * calls this before the new stream may touch it.  Two streams that are not
 * in the same graph capture (one captured and the other not, or two
 * captures) cannot be ordered so: XDM_E_STREAM_MISUSE, nothing queued.
 */
XDM_API enum xdm_status xdm_layer_stream_order(struct xdm_layer *self, xdm_stream_id waiter,
					       xdm_stream_id signaler);
/*
 * ABI 1.6: the graph capture stream is part of (ops.stream_capture): 0 for
 * none.  A layer must not give memory back on a captured stream (the
 * release would become part of the graph) nor ask it what it has run.
 */
XDM_API uint64_t xdm_layer_stream_capture(struct xdm_layer *self, xdm_stream_id stream);

/* The core's block-use tracking, for backends whose frees are stream-ordered. */
XDM_API enum xdm_status xdm_track_record(struct xdm_layer *self, const struct xdm_block *block,
					 xdm_stream_id use_stream);
XDM_API bool xdm_track_supported(struct xdm_layer *self);
XDM_API enum xdm_status xdm_track_prepare(struct xdm_layer *self, struct xdm_block_id id,
					  xdm_stream_id use_stream, enum xdm_access access);
XDM_API enum xdm_status xdm_track_finish(struct xdm_layer *self, struct xdm_block_id id,
					 xdm_stream_id use_stream, enum xdm_access access);

/* ---- errors ---------------------------------------------------------- */

/* Set the calling thread's error detail; each returns code for `return`. */
XDM_API enum xdm_status xdm_error_set(enum xdm_status code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
XDM_API enum xdm_status xdm_error_set_budget(size_t requested, size_t remaining,
					     const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
XDM_API enum xdm_status xdm_error_set_block(enum xdm_status code, xdm_generation generation,
					    enum xdm_bounds_side side, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
XDM_API enum xdm_status xdm_error_set_driver(int driver_code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- in-process modules ---------------------------------------------- */

/*
 * Register an ops table that lives in the calling program instead of a
 * shared object; stacks may then name it.  The same checks as for a loaded
 * module apply (ABI, size, kind, duplicate name).  The table must outlive
 * every runtime that uses it.
 */
XDM_API enum xdm_status xdm_module_register(const struct xdm_ops *ops);

#ifdef __cplusplus
}
#endif
#endif /* XDM_MODULE_H */
