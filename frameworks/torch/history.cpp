// SPDX-License-Identifier: MIT
/*
 * history.cpp - torch's memory history and snapshots
 * (torch.cuda.memory._record_memory_history, _snapshot, _dump_snapshot,
 * which torch.cuda._memory_viz and pytorch.org/memory_viz read), the OOM
 * observers and the trace trackers, over xdm.
 *
 * A snapshot's segments are what each runtime's stack holds, read when
 * torch asks (xdm_runtime_for_each_chunk; the device's runtime and the
 * private pools'), never from a list kept here: a pool's chunks, each with
 * its live blocks and its free pieces as torch's blocks, so that
 * _memory_viz shows fragmentation; where the stack has no pool, each live
 * block is a segment of its own.  The events are the caching allocator's:
 *
 *	an allocation   alloc (the block's size, and the bytes asked for as
 *	                its requested size), after segment_alloc where the
 *	                block is a segment of its own
 *	a free          free_requested, free_completed, then segment_free
 *	                where the block was a segment of its own
 *	a refusal       oom (addr: the bytes the device has free)
 *
 * A pool's growths and trims are not in the trace (the glue does not see
 * them): a viewer takes the chunks it finds as made before the trace.  The
 * trace is the history torch asked to record, less the actions it asked
 * to skip, with the stack torch's context recorder gives, and as its user
 * metadata what torch set (torch.cuda.memory._set_memory_metadata), else
 * the block's xdm tag, with the thread's innermost torch.compile context;
 * record_function's annotations are kept beside the trace, as torch keeps
 * them.  torch's profiler hears of every allocation and
 * free while it records memory (profile_memory=True), with the device's
 * allocated and reserved bytes after it.
 */
#include "config.h"

#include <algorithm>
#include <deque>
#include <limits>

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/ApproximateClock.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

using trace_entry = c10::CachingDeviceAllocator::TraceEntry;
/* torch.cuda.memory._record_memory_history's annotations (record_function's names). */
using annotation_entry = decltype(cca::SnapshotInfo::external_annotations)::value_type;

struct history_state {
	std::mutex lock;
	bool enabled = false;
	cca::CreateContextFn recorder = nullptr;
	cca::RecordContext when = cca::RecordContext::NEVER;
	size_t max_entries = 0;
	unsigned skipped = 0;		/* 1 << action, for the actions not recorded */
	std::string user_metadata;
	std::vector<std::deque<trace_entry>> traces;
	std::deque<annotation_entry> annotations;
	/* The context of each live block allocated while stacks were kept. */
	std::unordered_map<void *, std::shared_ptr<c10::GatheredContext>> contexts;
	std::vector<cca::OutOfMemoryObserver> oom_observers;
	std::vector<cca::AllocatorTraceTracker> trackers;
};

/* Made once and never destroyed: torch frees tensors during exit. */
history_state &state()
{
	static history_state *h = new history_state;
	return *h;
}

/* enabled or a tracker: the allocation paths look only at this. */
std::atomic<bool> any_tracing;

void update_tracing(history_state &h)
{
	any_tracing.store(h.enabled || !h.trackers.empty(), std::memory_order_release);
}

/*
 * torch.compile's context of the calling thread (pushCompileContext): the
 * innermost one is every event's compile_context, "N/A" outside any, as
 * torch's allocator records it.
 */
thread_local std::vector<std::string> compile_contexts;

std::string compile_context()
{
	return compile_contexts.empty() ? "N/A" : compile_contexts.back();
}

/* Under the lock: what torch set, else the block's tag. */
std::string user_metadata(const history_state &h, const char *tag)
{
	if (!h.user_metadata.empty())
		return h.user_metadata;
	return std::string("xdm tag: ") + (tag ? tag : "untagged");
}

/* The actions xdm records, by the names a snapshot gives them. */
const struct {
	trace_entry::Action action;
	const char *name;
} action_names[] = {
	{ trace_entry::ALLOC, "alloc" },
	{ trace_entry::FREE_REQUESTED, "free_requested" },
	{ trace_entry::FREE_COMPLETED, "free_completed" },
	{ trace_entry::SEGMENT_ALLOC, "segment_alloc" },
	{ trace_entry::SEGMENT_FREE, "segment_free" },
	{ trace_entry::OOM, "oom" },
};

/* skip_actions as a mask; a name of an action xdm never records skips nothing. */
unsigned skip_mask(const std::vector<std::string> &skip)
{
	unsigned mask = 0;

	for (const std::string &name : skip)
		for (const auto &a : action_names)
			if (name == a.name)
				mask |= 1u << static_cast<unsigned>(a.action);
	return mask;
}

/* Under the lock: keep an event, and tell the trackers. */
void add_locked(history_state &h, trace_entry::Action action, int device, size_t addr,
		size_t size, cudaStream_t stream, MempoolId_t pool,
		std::shared_ptr<c10::GatheredContext> context, const char *tag)
{
	trace_entry e(action, static_cast<c10::DeviceIndex>(device), addr, size, stream, pool,
		      c10::getApproximateTime(), std::move(context), compile_context(),
		      user_metadata(h, tag));

	for (const auto &tracker : h.trackers)
		tracker(e);
	if (!h.enabled || h.max_entries == 0 || device < 0 ||
	    (h.skipped & (1u << static_cast<unsigned>(action))))
		return;
	if (h.traces.size() <= static_cast<size_t>(device))
		h.traces.resize(device + 1);
	auto &trace = h.traces[device];
	trace.push_back(std::move(e));
	while (trace.size() > h.max_entries)
		trace.pop_front();
}

/*
 * The context of an event, gathered before the history's lock is taken:
 * torch's recorder takes the GIL, and a thread that holds the GIL may be
 * waiting for this lock (a snapshot, record_history), so calling it under
 * the lock could deadlock.  The recorder is copied out under the lock and
 * called outside it.  Must be called without h.lock held.
 */
std::shared_ptr<c10::GatheredContext> gather(history_state &h, cca::RecordContext at_least)
{
	cca::CreateContextFn recorder;

	{
		std::lock_guard<std::mutex> hold(h.lock);

		if (!h.enabled || !h.recorder || h.when < at_least)
			return nullptr;
		recorder = h.recorder;
	}
	return recorder();
}

void collect(const xdm_block *b, void *arg)
{
	static_cast<std::vector<xdm_block> *>(arg)->push_back(*b);
}

/* A chunk copied out of the runtime's walk, to be read after it. */
struct chunk_copy {
	uint64_t ptr, bytes;
	xdm_stream_id stream;
	std::vector<xdm_chunk_piece> pieces;
};

int copy_chunk(const xdm_chunk *c, void *arg)
{
	auto *out = static_cast<std::vector<chunk_copy> *>(arg);

	out->push_back({c->ptr, c->bytes, c->stream,
			std::vector<xdm_chunk_piece>(c->pieces, c->pieces + c->npieces)});
	return 0;
}

/*
 * A runtime's chunks as torch's segments (xdm_runtime_for_each_chunk): a
 * pool's chunk with its live blocks and its free pieces, or where the
 * stack has no pool each live block as a segment of its own.
 */
void add_segments(history_state &h, xdm_runtime *rt, MempoolId_t pool,
		  std::vector<c10::CachingDeviceAllocator::SegmentInfo> &out)
{
	std::vector<xdm_block> blocks;
	std::vector<chunk_copy> chunks;
	int device = static_cast<int>(xdm_runtime_ordinal(rt));

	if (xdm_runtime_for_each_block(rt, collect, &blocks) != XDM_OK ||
	    xdm_runtime_for_each_chunk(rt, copy_chunk, &chunks) != XDM_OK)
		throw_xdm_error("listing the blocks of runtime " +
				std::string(xdm_runtime_name(rt)));
	std::sort(blocks.begin(), blocks.end(),
		  [](const xdm_block &a, const xdm_block &b) { return a.ptr < b.ptr; });
	for (const chunk_copy &c : chunks) {
		c10::CachingDeviceAllocator::SegmentInfo s;
		void *handle = nullptr;

		xdm_stream_handle(rt, c.stream, &handle);
		s.device = static_cast<c10::DeviceIndex>(device);
		s.address = static_cast<size_t>(c.ptr);
		s.total_size = c.bytes;
		s.stream = handle;
		/* torch's own line between its small and large pools. */
		s.is_large = c.bytes > (1u << 20);
		s.owner_private_pool_id = pool;
		for (const xdm_chunk_piece &piece : c.pieces) {
			c10::CachingDeviceAllocator::BlockInfo block;

			block.size = piece.bytes;
			block.requested_size = 0;
			block.allocated = block.active = false;
			/* The live block whose start lies in an active piece. */
			auto b = std::lower_bound(blocks.begin(), blocks.end(), piece.ptr,
						  [](const xdm_block &x, uint64_t p) { return x.ptr < p; });
			if (piece.state == XDM_PIECE_ACTIVE && b != blocks.end() &&
			    b->ptr < piece.ptr + piece.bytes) {
				size_t requested = b->bytes;
				void *ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(b->ptr));

				/* Freed since it was listed: its usable size stands in. */
				if (xdm_block_requested(rt, xdm_block_id_of(&*b), &requested) != XDM_OK)
					requested = b->bytes;
				block.requested_size = requested;
				block.allocated = block.active = true;
				s.allocated_size += piece.bytes;
				s.active_size += piece.bytes;
				s.requested_size += requested;
				auto ctx = h.contexts.find(ptr);
				if (ctx != h.contexts.end()) {
					block.context_when_allocated = ctx->second;
					if (!s.context_when_allocated)
						s.context_when_allocated = ctx->second;
				}
			}
			s.blocks.push_back(block);
		}
		out.push_back(std::move(s));
	}
}

/*
 * Whether the blocks of the torch pool's runtime are its segments too (a
 * stack without a pool): only then does an allocation or a free make or
 * end a segment, and the trace records it.
 */
bool blocks_are_segments(int device, MempoolId_t pool)
{
	xdm_runtime *rt = pool == MempoolId_t{0, 0} ? built_runtime(device) :
						      pool_runtime(device, pool);

	return rt && layer_index(rt, "pool") < 0;
}

} // namespace

bool tracing()
{
	return any_tracing.load(std::memory_order_acquire);
}

void record_history(bool enabled, cca::CreateContextFn recorder, size_t max_entries,
		    cca::RecordContext when, bool clear, const std::vector<std::string> &skip)
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	h.enabled = enabled;
	h.skipped = enabled ? skip_mask(skip) : 0;
	h.recorder = enabled ? recorder : nullptr;
	h.when = enabled ? when : cca::RecordContext::NEVER;
	h.max_entries = enabled ? max_entries : 0;
	if (clear || !enabled) {
		h.traces.clear();
		h.annotations.clear();
		h.contexts.clear();
	}
	for (auto &trace : h.traces)
		while (trace.size() > h.max_entries)
			trace.pop_front();
	while (h.annotations.size() > h.max_entries)
		h.annotations.pop_front();
	update_tracing(h);
}

void record_annotation(int device, const std::vector<std::pair<std::string, std::string>> &md)
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	if (!h.enabled || h.max_entries == 0)
		return;
	annotation_entry e(static_cast<c10::DeviceIndex>(device), c10::getApproximateTime());
	for (const auto &kv : md)
		e.metadata_[kv.first] = kv.second;
	h.annotations.push_back(std::move(e));
	while (h.annotations.size() > h.max_entries)
		h.annotations.pop_front();
}

void push_compile_context(const std::string &md)
{
	compile_contexts.push_back(md);
}

void pop_compile_context()
{
	if (!compile_contexts.empty())
		compile_contexts.pop_back();
}

bool history_enabled()
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	return h.enabled;
}

void trace_alloc(int device, void *ptr, size_t size, cudaStream_t stream, MempoolId_t pool)
{
	const char *tag = xdm_thread_tag();
	history_state &h = state();
	bool segments = blocks_are_segments(device, pool);
	auto context = gather(h, cca::RecordContext::STATE);
	std::lock_guard<std::mutex> hold(h.lock);
	auto logged = h.when >= cca::RecordContext::ALLOC ? context : nullptr;
	size_t addr = reinterpret_cast<size_t>(ptr);

	if (context)
		h.contexts[ptr] = context;
	if (segments)
		add_locked(h, trace_entry::SEGMENT_ALLOC, device, addr, size, stream, pool, logged,
			   tag);
	add_locked(h, trace_entry::ALLOC, device, addr, size, stream, pool, logged, tag);
}

void trace_free(int device, void *ptr, size_t size, cudaStream_t stream, MempoolId_t pool,
		const char *tag)
{
	history_state &h = state();
	bool segments = blocks_are_segments(device, pool);
	auto context = gather(h, cca::RecordContext::ALL);
	std::lock_guard<std::mutex> hold(h.lock);
	size_t addr = reinterpret_cast<size_t>(ptr);

	h.contexts.erase(ptr);
	add_locked(h, trace_entry::FREE_REQUESTED, device, addr, size, stream, pool, context, tag);
	add_locked(h, trace_entry::FREE_COMPLETED, device, addr, size, stream, pool, context, tag);
	if (segments)
		add_locked(h, trace_entry::SEGMENT_FREE, device, addr, size, stream, pool, context,
			   tag);
}

void trace_oom(int device, size_t size, cudaStream_t stream, MempoolId_t pool)
{
	history_state &h = state();
	size_t free_bytes = 0, total = 0;

	{
		c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));

		if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess)
			(void)cudaGetLastError();
	}
	auto context = gather(h, cca::RecordContext::STATE);
	std::lock_guard<std::mutex> hold(h.lock);
	add_locked(h, trace_entry::OOM, device, free_bytes, size, stream, pool,
		   std::move(context), xdm_thread_tag());
}

void set_user_metadata(const std::string &metadata)
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	h.user_metadata = metadata;
}

std::string get_user_metadata()
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	return h.user_metadata;
}

void profile_memory(int device, void *ptr, int64_t delta)
{
	constexpr size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

	if (!c10::memoryProfilingEnabled())
		return;
	auto stats = device_stats(device);
	c10::reportMemoryUsageToProfiler(ptr, delta,
					 static_cast<size_t>(stats.allocated_bytes[all].current),
					 static_cast<size_t>(stats.reserved_bytes[all].current),
					 c10::Device(c10::DeviceType::CUDA,
						     static_cast<c10::DeviceIndex>(device)));
}

void attach_oom_observer(cca::OutOfMemoryObserver observer)
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	h.oom_observers.push_back(std::move(observer));
}

void attach_trace_tracker(cca::AllocatorTraceTracker tracker)
{
	history_state &h = state();
	std::lock_guard<std::mutex> hold(h.lock);

	h.trackers.push_back(std::move(tracker));
	update_tracing(h);
}

/*
 * Observers run without the lock (torch's call Python); a budget refusal
 * reaches them as any other: "allocated" is what the device's runtimes
 * hold, the device's free and total are the driver's.
 */
void tell_oom_observers(int device)
{
	history_state &h = state();
	std::vector<cca::OutOfMemoryObserver> observers;
	size_t free_bytes = 0, total = 0;
	uint64_t held = 0;

	{
		std::lock_guard<std::mutex> hold(h.lock);
		observers = h.oom_observers;
	}
	if (observers.empty())
		return;
	for (const owned_runtime &o : device_runtimes(device)) {
		xdm_stats s;

		xdm_runtime_stats(o.rt, &s);
		held += s.bytes_outstanding;
	}
	{
		c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));

		if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess)
			(void)cudaGetLastError();
	}
	for (const auto &observer : observers)
		observer(device, held, total, free_bytes);
}

cca::SnapshotInfo snapshot(MempoolId_t pool, bool include_traces)
{
	history_state &h = state();
	cca::SnapshotInfo info;

	int devices = 0;

	for (int d = 0; d < XDM_MAX_DEVICES; d++) {
		std::vector<owned_runtime> runtimes = device_runtimes(d);

		if (runtimes.empty())
			continue;
		devices = d + 1;
		std::lock_guard<std::mutex> hold(h.lock);
		for (const owned_runtime &o : runtimes)
			if (pool == MempoolId_t{0, 0} || o.pool == pool)
				add_segments(h, o.rt, o.pool, info.segments);
	}
	std::lock_guard<std::mutex> hold(h.lock);
	/* One list per device below the last one used, as torch gives it. */
	if (include_traces) {
		for (auto &trace : h.traces)
			info.device_traces.emplace_back(trace.begin(), trace.end());
		info.external_annotations.assign(h.annotations.begin(), h.annotations.end());
		if (info.device_traces.size() < static_cast<size_t>(devices))
			info.device_traces.resize(devices);
	}
	/*
	 * Value-initialized first, so that fields this file does not name (they
	 * differ between torch releases) read zero, not stack garbage; the
	 * settings xdm has no equivalent for read as torch's defaults (no
	 * garbage-collection threshold, no split limit).
	 */
	info.config_metadata = decltype(info.config_metadata){};
	info.config_metadata.garbage_collection_threshold = 0.0;
	info.config_metadata.max_split_size = std::numeric_limits<size_t>::max();
	info.config_metadata.expandable_segments = false;
	info.config_metadata.last_allocator_settings = "xdm";
	return info;
}

} // namespace xdm_torch
