/* SPDX-License-Identifier: MIT */
/*
 * xdm.h - the public API of libxdm, a stream-ordered device memory runtime.
 *
 * A program asks the runtime of a device ordinal for memory on a stream.  The
 * runtime answers through a stack of memory resources (modules, see
 * <xdm/module.h>) and keeps every live block in a registry.  Cross-stream use
 * of a block is made safe by prepare/finish calls that queue event waits.
 *
 * Every call that can fail returns an enum xdm_status.  On failure the
 * calling thread's last-error detail (xdm_last_error()) holds the payload and
 * a sentence, in the manner of errno and dlerror().
 */
#ifndef XDM_XDM_H
#define XDM_XDM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define XDM_API __attribute__((visibility("default")))
#else
#define XDM_API
#endif

/* Most device ordinals a process may hold a runtime for. */
#define XDM_MAX_DEVICES 64
/* Most streams (owned and imported) in one runtime's stream pool. */
#define XDM_MAX_STREAMS 256
/* Alignment of every block handed out, unless a layer reports more. */
#define XDM_DEFAULT_ALIGN 256

enum xdm_status {
	XDM_OK = 0,
	XDM_E_OUT_OF_BUDGET,	/* payload: requested, remaining */
	XDM_E_DRIVER,		/* payload: driver_code and the driver's message */
	XDM_E_STREAM_MISUSE,	/* payload: message says what was misused */
	XDM_E_USE_AFTER_FREE,	/* payload: generation */
	XDM_E_OUT_OF_BOUNDS,	/* payload: generation, side */
	XDM_E_INVALID,		/* a bad argument */
	XDM_E_NO_DEVICE,	/* no such device, or no driver for it */
	XDM_E_NOT_SUPPORTED,	/* the stack or platform cannot do this */
	XDM_E_CONFIG,		/* message: file:line:column: what is wrong */
	XDM_E_MODULE,		/* message: module, path, what failed */
	XDM_E_OUT_OF_MEMORY,	/* host memory, or a bounded resource, ran out */
	XDM_STATUS_COUNT
};

/* Which canary of a block an OUT_OF_BOUNDS error found damaged. */
enum xdm_bounds_side {
	XDM_SIDE_NONE = 0,
	XDM_SIDE_BEFORE,
	XDM_SIDE_AFTER,
};

/* The calling thread's detail of the last failed call. */
struct xdm_error {
	enum xdm_status code;
	size_t requested;		/* OUT_OF_BUDGET */
	size_t remaining;		/* OUT_OF_BUDGET */
	uint64_t generation;		/* USE_AFTER_FREE, OUT_OF_BOUNDS */
	enum xdm_bounds_side side;	/* OUT_OF_BOUNDS */
	int driver_code;		/* DRIVER */
	char message[512];
};

XDM_API const char *xdm_strerror(enum xdm_status status);
/* The calling thread's detail; never NULL.  code is XDM_OK if none. */
XDM_API const struct xdm_error *xdm_last_error(void);
XDM_API const char *xdm_last_error_message(void);
XDM_API void xdm_error_clear(void);

/* ---- blocks ---------------------------------------------------------- */

typedef uint32_t xdm_stream_id;
typedef uint64_t xdm_generation;

enum xdm_access {
	XDM_ACCESS_READ = 1,
	XDM_ACCESS_WRITE = 2,
	XDM_ACCESS_READ_WRITE = 3,
};

enum xdm_block_state {
	XDM_BLOCK_LIVE = 0,	/* handed out; usable on its stream */
	XDM_BLOCK_RETIRED,	/* freed, the free still queued on its stream */
	XDM_BLOCK_QUARANTINED,	/* held back from reuse by a guard layer */
	XDM_BLOCK_FREED,	/* gone; any use is a bug */
};

/* One allocation, owned by the caller until xdm_deallocate(). */
struct xdm_block {
	uint64_t ptr;			/* device (or host) address */
	uint32_t ordinal;		/* device ordinal of the runtime */
	xdm_stream_id stream;		/* allocation stream */
	size_t bytes;			/* usable bytes, >= the request */
	size_t align;			/* alignment of ptr */
	const char *tag;		/* caller's tag; must outlive the block */
	xdm_generation generation;	/* unique in the runtime, never 0; grows
					 * for each reuse of one address */
	enum xdm_block_state state;
};

/* A block's identity, cheap to copy; stale ids are caught by generation. */
struct xdm_block_id {
	uint64_t ptr;
	xdm_generation generation;
	xdm_stream_id stream;
	uint32_t ordinal;
};

static inline struct xdm_block_id xdm_block_id_of(const struct xdm_block *b)
{
	struct xdm_block_id id = { b->ptr, b->generation, b->stream, b->ordinal };
	return id;
}

/* ---- runtime --------------------------------------------------------- */

struct xdm_runtime;

/*
 * The process-wide runtime of a device ordinal, built on first call from the
 * configuration (XDM_CONFIG, else $(sysconfdir)/xdm.conf, else the embedded
 * default).  Concurrent first callers wait for one build; later calls are
 * lock-free.  A failed build leaves nothing behind and may be retried.
 */
XDM_API enum xdm_status xdm_runtime_get(uint32_t ordinal, struct xdm_runtime **out);

/*
 * A runtime that is not the singleton, around a caller-chosen stack.
 * platform: a platform module name, or NULL for the configured platform(s).
 * stack:    a stack spec in config syntax ("budget limit=1G | host"), or NULL
 *           for the configured stack of this ordinal.
 * Destroy it with xdm_runtime_destroy().
 */
XDM_API enum xdm_status xdm_runtime_create(uint32_t ordinal, const char *platform,
					   const char *stack, struct xdm_runtime **out);
/*
 * Destroys a runtime from xdm_runtime_create(); singletons are refused.  No
 * other thread may be using it, nor exiting after having used it (join
 * such threads first): a thread's exit hands its counts to the runtime.
 */
XDM_API enum xdm_status xdm_runtime_destroy(struct xdm_runtime *rt);

/* UINT32_MAX for a NULL runtime. */
XDM_API uint32_t xdm_runtime_ordinal(const struct xdm_runtime *rt);
/*
 * The runtime's directory in the introspection tree ("0", or "0.1" for a
 * second live runtime of ordinal 0), fixed for its life; "" for NULL.
 */
XDM_API const char *xdm_runtime_name(const struct xdm_runtime *rt);

XDM_API enum xdm_status xdm_allocate(struct xdm_runtime *rt, size_t bytes, xdm_stream_id stream,
				     const char *tag, struct xdm_block *out);
/*
 * Allocate bytes at exactly ptr, out of memory the stack holds free on
 * stream: how a framework puts a pool back as it was (torch's CUDA graph
 * trees restore a graph pool's blocks at their old addresses).  Served by
 * a pool (a free piece of its chunks on that stream) and by a virtual-memory
 * backend (an unmapped part of its range), through the budget and the log;
 * a layer that cannot (a guard) is NOT_SUPPORTED.  A place that is taken, or
 * that the stack does not hold, is OUT_OF_MEMORY.  Otherwise as
 * xdm_allocate: the block is live, registered and counted.
 */
XDM_API enum xdm_status xdm_allocate_at(struct xdm_runtime *rt, uint64_t ptr, size_t bytes,
					xdm_stream_id stream, const char *tag,
					struct xdm_block *out);
/*
 * Queues the free on the block's stream after every recorded use.  Whether
 * the block was consumed is told by block->state, not by the status: a
 * consumed block's state becomes RETIRED, QUARANTINED or FREED whatever a
 * layer reported (a guard's OUT_OF_BOUNDS, a driver error); a block the
 * runtime refused (not live, another device's) keeps the state it had.
 */
XDM_API enum xdm_status xdm_deallocate(struct xdm_runtime *rt, struct xdm_block *block);
/* Bytes the stack holds for live and not-yet-reaped retired blocks. */
XDM_API size_t xdm_bytes_outstanding(struct xdm_runtime *rt);
XDM_API enum xdm_status xdm_reap_pending(struct xdm_runtime *rt);
/*
 * Let go of the frees held for a graph capture whose uses outside it have
 * completed (xdm-cuda(7), "CUDA GRAPH CAPTURE"), and nothing else: no
 * backend's reap, no synchronize.  For a framework at a capture's edges;
 * xdm_reap_pending() does it too.  The first error of a free let go.
 */
XDM_API enum xdm_status xdm_release_capture_frees(struct xdm_runtime *rt);

XDM_API bool xdm_supports_block_use_tracking(struct xdm_runtime *rt);
/* An untyped use of block on stream: later writers and the free wait on it. */
XDM_API enum xdm_status xdm_record_block_use(struct xdm_runtime *rt, const struct xdm_block *block,
					     xdm_stream_id use_stream);
/* Before the work is queued on use_stream: queue the waits access needs. */
XDM_API enum xdm_status xdm_prepare_block_use(struct xdm_runtime *rt, struct xdm_block_id id,
					      xdm_stream_id use_stream, enum xdm_access access);
/* After the work is queued on use_stream: record its event. */
XDM_API enum xdm_status xdm_finish_block_use(struct xdm_runtime *rt, struct xdm_block_id id,
					     xdm_stream_id use_stream, enum xdm_access access);
/*
 * A use of owner's block by work of another runtime: user is the runtime
 * whose stream user_stream runs the work (another device's, or a second
 * runtime of the same device).  prepare queues on
 * user_stream the waits the access needs (the block's last write; for a
 * write, its reads too); finish records the work's event, which later uses
 * of the block on any device and its free wait for.  Whether the device
 * can reach the memory at all is the backend's grant (peers=, xdm-cuda(7));
 * these calls only order the work.  Both runtimes must be of one platform
 * and the owner's stack must track uses (NOT_SUPPORTED otherwise).  While
 * a block keeps such a use, user may not be destroyed (INVALID) until the
 * block is freed.  user == owner is the plain prepare/finish_block_use.
 */
XDM_API enum xdm_status xdm_prepare_peer_use(struct xdm_runtime *owner, struct xdm_block_id id,
					     struct xdm_runtime *user, xdm_stream_id user_stream,
					     enum xdm_access access);
XDM_API enum xdm_status xdm_finish_peer_use(struct xdm_runtime *owner, struct xdm_block_id id,
					    struct xdm_runtime *user, xdm_stream_id user_stream,
					    enum xdm_access access);
/*
 * The bytes a live block was asked for (xdm_allocate()'s bytes; the
 * block's own bytes may be more, as its stack rounded them): what a
 * framework's snapshot calls the requested size.  Errors as
 * xdm_block_lookup()'s.
 */
XDM_API enum xdm_status xdm_block_requested(struct xdm_runtime *rt, struct xdm_block_id id,
					    size_t *bytes);
/* Validate an id against the registry and copy the live block out. */
XDM_API enum xdm_status xdm_block_lookup(struct xdm_runtime *rt, struct xdm_block_id id,
					 struct xdm_block *out);

/*
 * Counters kept by the runtime itself, read without locks.  Each thread
 * counts its own allocations, frees and their bytes, and a read sums the
 * threads: every count but the peaks is exact once no thread is inside an
 * allocation or a free (at quiescence); a read meanwhile may miss calls in
 * flight, and an outstanding count that would be negative reads 0.  The
 * totals (allocs, frees, failures, bytes_allocated, bytes_freed) count from
 * the runtime's creation or its last xdm_runtime_reset_totals(); until the
 * first reset, bytes_outstanding = bytes_allocated - bytes_freed at
 * quiescence.
 */
struct xdm_stats {
	uint64_t bytes_outstanding;	/* bytes of live blocks (their usable size) */
	uint64_t blocks_outstanding;	/* live blocks: allocs - frees before any reset */
	/*
	 * The highest bytes_outstanding sampled.  When a thread's bytes pass
	 * the most that thread has ever held, the runtime sums every thread's
	 * bytes and keeps the highest sum; each read of these stats (and of
	 * the tree) keeps its sum the same way.  Exact when one thread makes
	 * every allocation and free.  With several threads it is a sample,
	 * the highest total seen at those moments: a peak reached by an
	 * allocation that takes no thread past its own high is missed, and
	 * a sum read while other threads allocate and free may be off by
	 * their blocks in flight.
	 */
	uint64_t bytes_peak;
	uint64_t allocs;		/* successful allocations */
	uint64_t frees;			/* blocks xdm_deallocate() consumed */
	uint64_t failures;		/* failed allocations */
	uint64_t waits_queued;		/* cross-stream event waits queued */
	uint64_t events_recorded;	/* events recorded for uses of blocks */
	uint64_t bytes_allocated;	/* usable bytes of the successful allocations */
	uint64_t bytes_freed;		/* usable bytes of the blocks freed */
	/*
	 * The highest blocks_outstanding sampled, as bytes_peak is: when a
	 * thread's blocks (its allocations less its frees) pass the most it
	 * has held, and at each read.  Exact when one thread makes every
	 * allocation and free; with several threads a sample, as bytes_peak.
	 */
	uint64_t blocks_peak;
};
XDM_API void xdm_runtime_stats(struct xdm_runtime *rt, struct xdm_stats *out);
/*
 * Start bytes_peak and blocks_peak again from bytes_outstanding and
 * blocks_outstanding now: what a test runner or a framework's
 * reset_peak_memory_stats() asks for, to read the peak of one piece of
 * work.  Every thread's own highs start again too, so the next allocation
 * of each samples the peaks.  XDM_E_INVALID for no runtime.
 */
XDM_API enum xdm_status xdm_runtime_reset_peak(struct xdm_runtime *rt);
/*
 * Start the totals again from 0: allocs, frees, failures, bytes_allocated
 * and bytes_freed count what comes after, as a framework's
 * reset_accumulated_memory_stats() asks; bytes_outstanding,
 * blocks_outstanding and the peaks are left as they are.  The runtime
 * keeps what the totals summed to at the reset and subtracts it at each
 * read; no thread's counts are rewritten.  Calls in flight during the
 * reset may be counted on either side of it (a sample); every call made
 * after it returns is counted.  XDM_E_INVALID for no runtime.
 */
XDM_API enum xdm_status xdm_runtime_reset_totals(struct xdm_runtime *rt);

/*
 * Visit every live block, a snapshot per registry shard taken under that
 * shard's short lock.  fn must not call into the runtime.  Blocks allocated
 * or freed meanwhile may or may not be seen.
 */
XDM_API enum xdm_status xdm_runtime_for_each_block(struct xdm_runtime *rt,
						   void (*fn)(const struct xdm_block *b,
							      void *arg),
						   void *arg);

/*
 * What the stack holds, in the shape memory viewers draw (PyTorch's
 * segments and blocks): each range of memory the stack took from below (a
 * chunk: a pool's chunk, over a virtual-memory backend a run of its
 * granules) with the pieces it is cut into, in address order, which tile
 * it with no gap and no overlap.
 */
enum xdm_chunk_piece_state {
	/* A live block of the runtime starts in it: handed to the user.  A
	 * layer that adds bytes around its blocks (a guard's canaries) makes
	 * the piece larger than the block. */
	XDM_PIECE_ACTIVE = 1,
	/*
	 * Held by the stack, no live block in it: free for reuse (a pool's
	 * free or cached piece, a block in a thread's cache), or kept back
	 * from reuse for a while (a guard's quarantine, a free held for an
	 * importer or for a graph capture).
	 */
	XDM_PIECE_INACTIVE = 2,
};

struct xdm_chunk_piece {
	uint64_t ptr;
	uint64_t bytes;
	uint32_t state;			/* enum xdm_chunk_piece_state */
};

struct xdm_chunk {
	uint64_t ptr;
	uint64_t bytes;
	xdm_stream_id stream;		/* the stream that owns it (its live block's) */
	uint32_t npieces;		/* at least 1 */
	const struct xdm_chunk_piece *pieces;
};

/*
 * Visit every chunk of the stack, in address order, with its pieces: fn
 * returns nonzero to stop (XDM_OK is returned then too).  Where no layer
 * of the stack can tell (a stack without a pool), each live block is a
 * chunk of its own with one ACTIVE piece; a live block that lies in no
 * chunk of the stack is such a chunk too, so every live block is in
 * exactly one chunk, in the one ACTIVE piece that holds its start.
 *
 * It is a sample: the live blocks are copied out of the registry first,
 * then each layer copies its chunks under its own short locks; blocks
 * allocated or freed meanwhile may or may not be seen, and a chunk the
 * stack moves between streams meanwhile may be missed.  Exact at
 * quiescence.  The chunk and its pieces are valid for the call only; fn
 * must not call into the runtime.  XDM_E_INVALID for a NULL rt or fn;
 * XDM_E_OUT_OF_MEMORY when the copies cannot be made; XDM_E_MODULE when
 * a layer hands a chunk its pieces do not tile (nothing is visited then).
 */
XDM_API enum xdm_status xdm_runtime_for_each_chunk(struct xdm_runtime *rt,
						   int (*fn)(const struct xdm_chunk *c,
							     void *arg),
						   void *arg);

/*
 * The calling thread's query id, which the logging adaptor writes on every
 * row (an engine sets it per query; 0 when unset).
 */
XDM_API void xdm_set_query_id(uint64_t id);
XDM_API uint64_t xdm_query_id(void);

/* ---- streams --------------------------------------------------------- */

/* Streams 0 .. count-1 exist from the start; imported ones follow. */
XDM_API uint32_t xdm_stream_count(struct xdm_runtime *rt);
/* The platform's native handle (a CUstream on cuda). */
XDM_API enum xdm_status xdm_stream_handle(struct xdm_runtime *rt, xdm_stream_id stream,
					  void **handle);
/*
 * Adopt a caller's native stream; the runtime never destroys it, but
 * synchronizes it when the runtime is destroyed, so it must outlive the
 * runtime.  It must be a real stream of the runtime's device and context
 * (on cuda: not CU_STREAM_LEGACY or CU_STREAM_PER_THREAD, whose meaning
 * changes with the calling thread).
 */
XDM_API enum xdm_status xdm_stream_import(struct xdm_runtime *rt, void *handle,
					  xdm_stream_id *out);
XDM_API enum xdm_status xdm_stream_synchronize(struct xdm_runtime *rt, xdm_stream_id stream);
/* Queue fn(arg) on the stream, ordered with everything else on it. */
XDM_API enum xdm_status xdm_stream_launch_host(struct xdm_runtime *rt, xdm_stream_id stream,
					       void (*fn)(void *arg), void *arg);

/* ---- frameworks: native streams, pointers and tags -------------------- */

/*
 * PyTorch, CuPy and Numba allocate by size on a stream of their own and free
 * by pointer.  These calls give them that, on top of the calls above: every
 * block they make is an ordinary block of the runtime (the stack, the budget,
 * the registry, the tree and the log see it like any other).
 *
 * A native stream is the platform's own handle (a CUstream on cuda).  It is
 * imported into the runtime's stream pool the first time it is seen and found
 * again without a lock afterwards.  On cuda:
 *  - NULL and CU_STREAM_LEGACY (0x1) are the device's legacy default stream,
 *    one stream of the pool ("legacy"), reached from any thread;
 *  - CU_STREAM_PER_THREAD (0x2), a different stream on every thread, is
 *    served through the legacy stream, which CUDA orders with every
 *    per-thread stream: its blocks belong to "legacy", and each
 *    xdm_native_free() and xdm_native_record_use() naming it queues on the
 *    legacy stream what orders later work after the calling thread's.  It
 *    has no id of its own: xdm_native_stream() refuses it (STREAM_MISUSE),
 *    since work ordered by that id would miss the calling thread's stream;
 *  - any other handle must be a stream of the runtime's device and context.
 * On host, NULL is the platform's default stream and any other handle must be
 * one of the platform's streams.  xdm(3) says what ordering each promises.
 */

/* The stream id of a native handle, importing it on first sight. */
XDM_API enum xdm_status xdm_native_stream(struct xdm_runtime *rt, void *native_stream,
					  xdm_stream_id *out);
/*
 * Allocate bytes on a native stream; *ptr is the block's address.  tag NULL
 * takes the calling thread's tag (xdm_set_thread_tag()).  Zero bytes give
 * *ptr = NULL and XDM_OK, which xdm_native_free() accepts: frameworks ask
 * for empty tensors.
 */
XDM_API enum xdm_status xdm_native_allocate(struct xdm_runtime *rt, size_t bytes,
					    void *native_stream, const char *tag, void **ptr);
/*
 * Free the live block at ptr.  native_stream is the stream the framework last
 * used it on: when it is not the block's own stream, the free waits for it
 * (a use recorded there first).  NULL ptr is a no-op.  A pointer that is no
 * live block of this runtime is INVALID, and nothing is freed.
 */
XDM_API enum xdm_status xdm_native_free(struct xdm_runtime *rt, void *ptr, void *native_stream);
/*
 * Free the live block at ptr on its own stream, after every use recorded:
 * for a framework's deleter, which is handed the pointer alone (torch's
 * DataPtr).  One registry lookup, as xdm_native_free() on the block's own
 * stream.  NULL ptr is a no-op; a pointer that is no live block of this
 * runtime is INVALID, and nothing is freed.
 */
XDM_API enum xdm_status xdm_native_release(struct xdm_runtime *rt, void *ptr);
/*
 * The block at ptr is used on native_stream (torch's record_stream): its
 * free waits for the work queued there so far.
 */
XDM_API enum xdm_status xdm_native_record_use(struct xdm_runtime *rt, void *ptr,
					      void *native_stream);
/* Copy out the live block whose address is ptr; INVALID if none. */
XDM_API enum xdm_status xdm_native_lookup(struct xdm_runtime *rt, void *ptr,
					  struct xdm_block *out);

/*
 * Tags.  A block's tag must outlive it; xdm_tag_intern() returns a copy that
 * lives as long as the process (one copy per distinct text), so a caller whose
 * strings come and go (Python) can tag safely.  NULL when out of memory or
 * past XDM_MAX_TAGS distinct tags (the thread's error says which).
 */
#define XDM_MAX_TAGS 65536
#define XDM_TAG_MAX 128		/* bytes of a tag, NUL excluded */
XDM_API const char *xdm_tag_intern(const char *tag);
/*
 * The calling thread's tag, given to every block it allocates with a NULL
 * tag through xdm_native_allocate() (NULL: "untagged").  Interned.
 */
XDM_API enum xdm_status xdm_set_thread_tag(const char *tag);
XDM_API const char *xdm_thread_tag(void);

/* ---- description ----------------------------------------------------- */

struct xdm_device_info {
	char name[128];
	char uuid[40];		/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
	uint64_t total_bytes;
	char platform[32];	/* the platform module's name */
};
XDM_API enum xdm_status xdm_runtime_device(struct xdm_runtime *rt, struct xdm_device_info *out);

/* Layers from the top (0) down; the platform is not a layer. */
XDM_API uint32_t xdm_runtime_layer_count(struct xdm_runtime *rt);
XDM_API const char *xdm_runtime_layer_name(struct xdm_runtime *rt, uint32_t index);
/* The stack as a spec string, top first, for display. */
XDM_API enum xdm_status xdm_runtime_stack_spec(struct xdm_runtime *rt, char *buf, size_t len);
/* Show or store one attribute of a layer, sysfs-style. */
XDM_API enum xdm_status xdm_layer_attr_show(struct xdm_runtime *rt, uint32_t index,
					    const char *attr, char *buf, size_t len);
XDM_API enum xdm_status xdm_layer_attr_store(struct xdm_runtime *rt, uint32_t index,
					     const char *attr, const char *value);
/*
 * Let device `peer` read and write the memory of rt's device from now on:
 * what a framework asks before it copies between two devices (PyTorch's
 * enablePeerAccess(peer, rt's device)).  Writes the ordinal to the
 * writable `peers` attribute of each layer of rt that has one: cuda_async
 * grants it on its memory pool, cuda_vmm on every mapping made and to come
 * (xdm-cuda(7)).  A grant is never taken back while memory is mapped.
 *
 * XDM_OK when the layers with `peers` granted, or when no layer has one:
 * such a stack owns no memory that needs a grant of xdm's.  cuda_direct's
 * memory (cuMemAlloc) is reached by a peer once the peer's context has
 * enabled peer access (cudaDeviceEnablePeerAccess, cuCtxEnablePeerAccess),
 * which is the caller's to do, as it is for any cudaMalloc memory; the
 * host platform has no peers.  A backend whose memory needs a grant offers
 * `peers`, writable.  peer == rt's own device: XDM_OK, nothing changes.
 * XDM_E_INVALID for a NULL rt, a peer past XDM_MAX_DEVICES - 1, or one a
 * layer refuses (the process has no such device, or the driver says it
 * cannot access rt's device), with the layer's sentence; a refused peer
 * changes nothing.
 */
XDM_API enum xdm_status xdm_runtime_grant_peer(struct xdm_runtime *rt, uint32_t peer);

/* ---- introspection tree ---------------------------------------------- */

/*
 * Every live runtime of the process as a tree of sysfs-style files: one value
 * per file, newline-terminated (xdm-fs(7) lists them).  The FUSE front end
 * serves this tree; a program may also read it directly.  A path is relative
 * to the root, components separated by '/' ("" is the root, "0/budget/limit"
 * a file).  Each function returns 0 or a negative errno: -ENOENT (no such
 * node), -ENOTDIR, -EISDIR, -EACCES (store to a read-only file, show of a
 * write-only one), -EINVAL (a value the file refuses; nothing changed),
 * -ENOMEM; or what a module's show or store said (-EOPNOTSUPP from a file
 * that does not apply to this instance, -EIO from a platform call).  The
 * tree's lock is held shared for the whole call, module calls included: a
 * callback must not fork, create or destroy a runtime.
 */
struct xdm_tree_node {
	bool dir;
	unsigned int mode;	/* 0555 for a directory; a file 0444, 0644, or 0200 when
				 * it can only be written (an action) */
};

XDM_API int xdm_tree_stat(const char *path, struct xdm_tree_node *out);
/* Call fn for each entry of the directory; a non-zero return stops the walk
 * and is returned. */
XDM_API int xdm_tree_list(const char *path,
			  int (*fn)(const char *name, const struct xdm_tree_node *node, void *arg),
			  void *arg);
/* Render a file: *text is malloc'ed, NUL-terminated, *len bytes long. */
XDM_API int xdm_tree_show(const char *path, char **text, size_t *len);
/* Store the whole value of a writable file; one trailing newline is allowed. */
XDM_API int xdm_tree_store(const char *path, const char *value, size_t len);

/*
 * Serve the tree as a FUSE filesystem at dir, from a thread of this process,
 * until xdm_unmount() or exit.  "%p" in dir becomes the pid; a missing last
 * component is created (and removed at unmount).  A stale mount left at dir
 * by a killed process is cleaned first.  NOT_SUPPORTED when libxdm was built
 * without FUSE (fusefs.so is not in the module path); INVALID when something
 * is mounted already.  The configured mount (`mount = DIR` or XDM_MOUNT) is
 * made by the first runtime built.
 */
XDM_API enum xdm_status xdm_mount(const char *dir);
XDM_API enum xdm_status xdm_unmount(void);
/* Copy the mounted directory into buf; false when nothing is mounted. */
XDM_API bool xdm_mount_point(char *buf, size_t len);

/* ---- sharing blocks with other processes ----------------------------- */

/*
 * A block made shareable: plain bytes of a fixed size that any channel can
 * carry (a pipe, a socket, a file, a framework's own messages).  Exporting
 * one block twice gives the same bytes.  It names the block, its device,
 * the exporting runtime and the memory the block lies in; it grants
 * nothing by itself: the importer gets the memory from the exporter over
 * a Unix socket that the exporting runtime serves (SCM_RIGHTS), so the
 * exporter must be alive and reachable when the importer opens it.
 */
#define XDM_IPC_HANDLE_SIZE 256
struct xdm_ipc_handle {
	unsigned char bytes[XDM_IPC_HANDLE_SIZE];
};

/*
 * Export block (live, of rt): fills *out.  Writes queued on the block's
 * stream before the call are done when it returns (the stream is
 * synchronized), so an importer sees them; later writes need the
 * exporter's own synchronization with the importer.  While an importer has
 * the block open, its free is held back: xdm_deallocate() returns at once,
 * the block is never handed out again, and the stack gets it back, in
 * stream order, when the last importer closes it or dies.
 * NOT_SUPPORTED for a stack whose memory cannot be shared (xdm(3), IPC).
 */
XDM_API enum xdm_status xdm_ipc_export(struct xdm_runtime *rt, const struct xdm_block *block,
				       struct xdm_ipc_handle *out);
/*
 * Map the block a handle names into this process, for rt's device: *ptr
 * and *bytes get it.  stream is where the importer will use it (its close
 * waits for the work queued there).  A handle that is not one (garbage, cut
 * short, another layout), of another device, of a block freed since, or
 * of an exporter that cannot be reached is a typed error with a sentence;
 * nothing is mapped then.  Opening one handle twice gives two mappings.
 */
XDM_API enum xdm_status xdm_ipc_open(struct xdm_runtime *rt, const struct xdm_ipc_handle *h,
				     xdm_stream_id stream, uint64_t *ptr, size_t *bytes);
/*
 * Unmap an opened block once the work queued on stream is done, and tell
 * its exporter.  INVALID for a pointer that xdm_ipc_open() did not give.
 */
XDM_API enum xdm_status xdm_ipc_close(struct xdm_runtime *rt, uint64_t ptr, xdm_stream_id stream);

/* ---- helpers --------------------------------------------------------- */

/*
 * Parse a size: "4096", "64K", "1.5G", "2T", "80%" (of percent_base), "max".
 * Suffixes are powers of 1024, case-insensitive, with an optional "B"/"iB".
 * Returns INVALID for anything else, for overflow, and for a % without base.
 */
XDM_API enum xdm_status xdm_parse_size(const char *text, uint64_t percent_base, uint64_t *out);

/*
 * A device's 16 UUID bytes as xdm writes a UUID everywhere (struct
 * xdm_device_info, the budget's segment names): lowercase hex in the
 * 8-4-4-4-12 form, NUL-terminated.  The cuda platform and the preload
 * shim both name a GPU so, and must agree to the byte: one budget per
 * GPU depends on it.  len: at least 37.
 */
XDM_API void xdm_uuid_format(const unsigned char bytes[16], char *out, size_t len);

XDM_API const char *xdm_version(void);

#ifdef __cplusplus
}
#endif
#endif /* XDM_XDM_H */
