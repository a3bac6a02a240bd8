// SPDX-License-Identifier: MIT
/*
 * glue.hpp - torch's CUDA allocator, served by xdm: what the units of
 * frameworks/torch share.
 *
 * xdm implements torch's allocator interface (CUDAAllocator) and installs
 * itself the way torch's change_current_allocator does, so that the memory
 * questions torch asks (statistics, cuDNN's cache size, CUDA graphs'
 * private pools, MemPool, snapshots, peer access) are answered by xdm;
 * what it does not serve raises or is listed in xdm-torch(7), NOT
 * AVAILABLE.  Every fact comes from xdm's own state: the
 * runtimes' counters, the pool's attributes, the registry of live blocks.
 * What the glue keeps itself is only what torch tells it and xdm has no
 * notion of: which torch memory pool is which private runtime, which
 * allocations route to it, the streams record_stream named, and the
 * history torch asked to record.
 *
 * Units: allocator.cpp (allocation, frees, streams, peers), pools.cpp
 * (private pools, graph capture, caching off), mempool_allocator.cpp (a
 * MemPool's own allocator as a backend), fraction.cpp (torch's memory
 * fraction over all of them), stats.cpp (DeviceStats), history.cpp
 * (recordHistory, snapshots, OOM observers), ipc.cpp (tensors sent to
 * other processes), install.cpp (the C entry points python/xdm/torch.py
 * calls).
 */
#ifndef XDM_FRAMEWORKS_TORCH_GLUE_HPP
#define XDM_FRAMEWORKS_TORCH_GLUE_HPP

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <xdm/xdm.h>

namespace xdm_torch {

namespace cca = c10::cuda::CUDACachingAllocator;
using c10::MempoolId_t;

/* ---- errors (allocator.cpp) ---------------------------------------------- */

/* A refusal of memory (budget, pool max, the driver's OOM). */
bool is_refusal(const xdm_error *e);
/* Throw the thread's xdm error: OutOfMemoryError for a refusal, else c10::Error. */
[[noreturn]] void throw_xdm_error(const std::string &what);
std::string device_name(int device);
/* An address as messages write it: 0x and hex digits. */
std::string hex_address(uint64_t ptr);
inline std::string hex_address(const void *ptr)
{
	return hex_address(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)));
}

/* ---- refusals as torch words them (oom.cpp) ------------------------------ */

/* torch's OutOfMemoryError text for size bytes on device, then why. */
std::string oom_message(int device, size_t size, const std::string &why);
/* More than the device holds: a refusal whatever xdm's code says. */
bool beyond_device(int device, size_t size);

/* ---- runtimes (allocator.cpp) -------------------------------------------- */

/* The device's runtime, built on first use; throws if it cannot be. */
xdm_runtime *runtime_of(int device);
/* The device's runtime if built already, else NULL (never builds one). */
xdm_runtime *built_runtime(int device);
/* The index of the first layer of the stack named name, or -1. */
int layer_index(xdm_runtime *rt, const char *name);
/* An attribute of a layer as a number; false when it has none. */
bool layer_number(xdm_runtime *rt, int layer, const char *attr, uint64_t *out);
/* The devices torch granted device's memory so far (bit d: device d). */
uint64_t granted_peers(int device);

/* ---- private pools (pools.cpp) ------------------------------------------- */

/*
 * One torch memory pool (a MempoolId_t: a graph capture's, a MemPool's):
 * a private xdm runtime of the device, its stack the device's adaptors
 * over a pool that keeps its chunks (keep=true) on plain device memory, so
 * a graph replays into the addresses its capture was given.  Made by
 * createOrIncrefPool or beginAllocateToPool; use_count as torch counts it;
 * destroyed once released (use_count 0) and empty.
 */
struct private_pool {
	MempoolId_t id;
	int device;
	xdm_runtime *rt;
	int use_count;
};

/*
 * The runtime an allocation on (device, stream) goes to: a private pool's
 * when a route torch began (beginAllocateToPool) accepts the stream, else
 * the device's.  *pool gets the pool's id, or stays as it was.
 */
xdm_runtime *route(int device, cudaStream_t stream, MempoolId_t *pool);
/* Free ptr in whichever runtime holds it; false when none does. */
bool release_anywhere(void *ptr, int hint_device);
/* The runtime holding the live block at ptr, or NULL; *out gets the block. */
xdm_runtime *owner_of(void *ptr, xdm_block *out, MempoolId_t *pool);
/* A runtime of a device, and the torch pool it is ({0, 0}: the device's own). */
struct owned_runtime {
	xdm_runtime *rt;
	MempoolId_t pool;
};
/* Runtimes of the device: its own (if built) and its live private pools'. */
std::vector<owned_runtime> device_runtimes(int device);
/*
 * The sum of reserved(r) over the device's runtimes but except, read under
 * the pool table's lock, so that no pool is destroyed while it is read.
 */
uint64_t reserved_by_others(int device, xdm_runtime *except, uint64_t (*reserved)(xdm_runtime *));
/* The private runtime of a pool id, or NULL. */
xdm_runtime *pool_runtime(int device, MempoolId_t id);
/* True while any allocation route is open (a capture, a use_mem_pool). */
bool routes_open();
/* True while any private pool lives, on any device. */
bool private_pools_live();
/*
 * torch's caching_allocator_enable: while off, what no route takes goes to
 * a runtime of the device with its adaptors over its base and no pool.
 */
void set_caching(bool enabled);
bool caching_enabled();
/* Give idle memory back: every runtime (id {0,0}) or one released pool. */
void empty_cache(MempoolId_t id);

void begin_allocate_to_pool(int device, MempoolId_t id,
			    std::function<bool(cudaStream_t)> filter);
void end_allocate_to_pool(int device, MempoolId_t id);
void release_pool(int device, MempoolId_t id);
/* own: the MemPool's allocator of its own, or NULL (mempool_allocator.cpp). */
void create_or_incref_pool(int device, MempoolId_t id,
			   std::shared_ptr<cca::CUDAAllocator> own = nullptr);
int pool_use_count(int device, MempoolId_t id);
bool pool_live_allocations_are(int device, MempoolId_t id,
			       const std::unordered_set<void *> &expected);

/*
 * The live blocks of a pool (torch's CUDA graph trees keep one after each
 * recording, to restore the pool when they switch paths).
 */
std::shared_ptr<cca::AllocatorState> pool_checkpoint(int device, MempoolId_t id);
/*
 * Put a pool back as a checkpoint found it: every block live now is freed
 * (ptrs_freed), and every block live then is allocated again at its
 * address, on its stream (dataptrs_allocd, with torch's deleter).
 */
cca::CheckpointDelta pool_restore(int device, const std::shared_ptr<cca::AllocatorState> &as);

/*
 * Switches the calling thread to relaxed capture mode for its life when
 * a capture may be under way: torch captures in global mode, where a call
 * that may synchronize (a pool's cuMemAlloc growth) would otherwise break
 * the capture.
 */
class relaxed_capture {
public:
	relaxed_capture();
	~relaxed_capture();
	relaxed_capture(const relaxed_capture &) = delete;
	relaxed_capture &operator=(const relaxed_capture &) = delete;

private:
	bool switched;
	cudaStreamCaptureMode previous;
};

/* ---- MemPools with an allocator of their own (mempool_allocator.cpp) ---- */

/*
 * The base layer (a stack spec's text) whose memory comes from allocator,
 * which the layer holds from then on; forget_allocator_base drops it when
 * no runtime was made of it.
 */
std::string allocator_base(std::shared_ptr<cca::CUDAAllocator> allocator);
void forget_allocator_base(const std::string &base);

/* ---- torch's memory fraction over every pool (fraction.cpp) ------------ */

/* set_per_process_memory_fraction's bytes for the device (0: none), and what was set. */
void set_fraction_bytes(int device, uint64_t bytes);
uint64_t fraction_bytes(int device);
/*
 * Before an allocation in rt, a runtime of device: where a fraction is set
 * and private pools live, bound rt's pool by what the fraction leaves
 * after the device's other runtimes' reserved bytes.
 */
void share_fraction(int device, xdm_runtime *rt);

/* ---- statistics (stats.cpp) ---------------------------------------------- */

c10::CachingDeviceAllocator::DeviceStats device_stats(int device);
void reset_peaks(int device);
void reset_totals(int device);
/* Allocations that succeeded only after the runtimes gave idle memory back. */
void count_retry(int device);
/* cuDNN's workspace cap: the largest block the device could hand out now (stats.cpp). */
size_t largest_block_now(int device, size_t guess);

/* ---- history (history.cpp) ----------------------------------------------- */

void record_history(bool enabled, cca::CreateContextFn recorder, size_t max_entries,
		    cca::RecordContext when, bool clear, const std::vector<std::string> &skip);
/* torch.cuda.memory._set_memory_metadata: every later event's user metadata. */
void set_user_metadata(const std::string &metadata);
std::string get_user_metadata();
/* Tell torch's profiler of an allocation (delta > 0) or a free, when it records memory. */
void profile_memory(int device, void *ptr, int64_t delta);
bool history_enabled();
/* recordAnnotation (on device), pushCompileContext, popCompileContext. */
void record_annotation(int device, const std::vector<std::pair<std::string, std::string>> &md);
void push_compile_context(const std::string &md);
void pop_compile_context();
/* Trace an allocation, a free, an OOM (only while history or a tracker is on). */
void trace_alloc(int device, void *ptr, size_t size, cudaStream_t stream, MempoolId_t pool);
void trace_free(int device, void *ptr, size_t size, cudaStream_t stream, MempoolId_t pool,
		const char *tag);
void trace_oom(int device, size_t size, cudaStream_t stream, MempoolId_t pool);
bool tracing();
cca::SnapshotInfo snapshot(MempoolId_t pool, bool include_traces);
void attach_oom_observer(cca::OutOfMemoryObserver observer);
void attach_trace_tracker(cca::AllocatorTraceTracker tracker);
/* Tell every OOM observer of a refusal on device. */
void tell_oom_observers(int device);

/* ---- CUDA tensors sent to other processes (ipc.cpp) --------------------- */

/* The handle of the live block at ptr, and ptr's offset in it. */
cca::ShareableHandle share_ipc_handle(void *ptr);
/* Another process's block, open on the current device until the pointer goes. */
std::shared_ptr<void> open_ipc_handle(const std::string &handle);

/* ---- the allocator (allocator.cpp) --------------------------------------- */

/* torch's deleter of every block xdm hands it (raw_deleter()). */
void delete_block(void *ptr) noexcept;
/* Free ptr, a live block of rt (torch pool `pool`), as torch's deleter does. */
void free_block_in(xdm_runtime *rt, MempoolId_t pool, void *ptr) noexcept;

/* Frees torch handed xdm that xdm refused (told once on stderr). */
uint64_t free_failures();
/* Streams record_stream named for blocks not freed yet. */
uint64_t recorded_uses();

std::shared_ptr<cca::CUDAAllocator> make_allocator();

} // namespace xdm_torch

#endif
