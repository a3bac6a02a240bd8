// SPDX-License-Identifier: MIT
/*
 * allocator.cpp - torch's CUDAAllocator over xdm: allocation, frees,
 * streams, peers and the rest of the interface (glue.hpp says how the
 * units divide it).
 *
 * Every tensor's memory is a block of an xdm runtime: the device's, or a
 * private pool's while torch routes allocations there (pools.cpp).  The
 * block is allocated on torch's current stream, with the calling thread's
 * tag, so the budget, the registry, the tree and the log see it like any
 * other.  A refusal reaches torch as c10::OutOfMemoryError (Python's
 * torch.OutOfMemoryError): torch uses what allocate returns unchecked.
 */
#include "config.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

/*
 * The runtime of each device torch has used.  xdm_runtime_get() is
 * lock-free after its first call already; the table lets the frees and
 * the hooks, handed a pointer but no device, look only at runtimes torch
 * built, never build one (and a CUDA context) on a device torch never
 * used.  libxdm owns these runtimes and keeps them until exit.
 */
std::atomic<xdm_runtime *> runtimes[XDM_MAX_DEVICES];

std::atomic<uint64_t> failed_frees;
std::atomic<bool> failed_free_told;

/*
 * torch's record_stream promises that a block is not reused before the
 * work queued on the stream by the time of its free has run; xdm records
 * the use when asked, which covers the work queued so far only.  So the
 * streams are kept, per pointer, and recorded once more at the free.
 * Made once and never destroyed: torch frees tensors during exit, after
 * static destructors may have run.
 */
struct recorded_streams {
	std::mutex lock;
	std::unordered_multimap<void *, cudaStream_t> uses;
};

recorded_streams &recorded()
{
	static recorded_streams *r = new recorded_streams;
	return *r;
}

/* Entries in recorded().uses: a free skips the lock when there are none. */
std::atomic<size_t> recorded_count;

void tell_failed_free(void *ptr, const char *why)
{
	failed_frees.fetch_add(1, std::memory_order_relaxed);
	if (failed_free_told.exchange(true))
		return;
	std::fprintf(stderr, "xdm: torch's free of %p failed: %s (later failures are only "
		     "counted: xdm.torch.free_failures())\n", ptr, why ? why : xdm_last_error_message());
}

/* The streams record_stream named for ptr, taken out of the map. */
std::vector<cudaStream_t> take_recorded(void *ptr)
{
	std::vector<cudaStream_t> streams;

	if (recorded_count.load(std::memory_order_acquire) == 0)
		return streams;
	recorded_streams &r = recorded();
	std::lock_guard<std::mutex> hold(r.lock);
	auto range = r.uses.equal_range(ptr);
	for (auto it = range.first; it != range.second; ++it)
		streams.push_back(it->second);
	if (!streams.empty()) {
		r.uses.erase(range.first, range.second);
		recorded_count.fetch_sub(streams.size(), std::memory_order_relaxed);
	}
	return streams;
}

void remember_use(void *ptr, cudaStream_t stream)
{
	recorded_streams &r = recorded();
	std::lock_guard<std::mutex> hold(r.lock);
	auto range = r.uses.equal_range(ptr);

	for (auto it = range.first; it != range.second; ++it)
		if (it->second == stream)
			return;
	r.uses.emplace(ptr, stream);
	recorded_count.fetch_add(1, std::memory_order_release);
}

int current_device()
{
	return static_cast<int>(c10::cuda::current_device());
}

/*
 * Allocate on (device, stream): the route torch opened, else the device.
 * A refusal gives every idle chunk of the device's runtimes back and is
 * tried once more (torch's caching allocator frees its cache and retries
 * the same way); still refused, the OOM observers hear of it and torch
 * gets OutOfMemoryError.  A retry is never made inside a capture, where
 * giving memory back could free what the graph uses.
 */
void *allocate_on(int device, size_t size, cudaStream_t stream)
{
	MempoolId_t pool{0, 0};
	relaxed_capture relaxed;
	xdm_runtime *rt;
	void *ptr = nullptr;

	/* torch's own bound, refused before anything is asked of xdm. */
	TORCH_CHECK_WITH(OutOfMemoryError, size < (uint64_t{1} << 60),
			 "CUDA out of memory. Tried to allocate more than 1EB memory.");
	runtime_of(device);
	rt = route(device, stream, &pool);
	share_fraction(device, rt);
	if (xdm_native_allocate(rt, size, stream, nullptr, &ptr) != XDM_OK) {
		if (!is_refusal(xdm_last_error()) || routes_open())
			goto refused;
		empty_cache({0, 0});
		/* What the others reserve went down: the fraction's share is read again. */
		share_fraction(device, rt);
		if (xdm_native_allocate(rt, size, stream, nullptr, &ptr) != XDM_OK)
			goto refused;
		count_retry(device);
	}
	if (tracing())
		trace_alloc(device, ptr, size, stream, pool);
	profile_memory(device, ptr, static_cast<int64_t>(size));
	return ptr;

refused:
	/* A request past the whole device is torch's OOM too, whatever the
	 * layer that turned it away called it (a pool: too large to split). */
	if (is_refusal(xdm_last_error()) || beyond_device(device, size)) {
		/* Taken first: reading the figures below may set the thread's error. */
		std::string why = std::string("xdm: ") + xdm_strerror(xdm_last_error()->code) +
				  ": " + xdm_last_error_message();

		trace_oom(device, size, stream, pool);
		tell_oom_observers(device);
		/* One string: no number goes through torch's stream formatting. */
		TORCH_CHECK_WITH(OutOfMemoryError, false, oom_message(device, size, why));
	}
	throw_xdm_error("torch asked for " + std::to_string(size) + " bytes on " +
			device_name(device));
}

/*
 * Free ptr, a live block of rt (of torch pool `pool`), after the streams
 * record_stream named for it; a trace records the free.  Never throws: a
 * refusal is told (and counted) as a failed free.
 */
void release_in(xdm_runtime *rt, MempoolId_t pool, void *ptr,
		const std::vector<cudaStream_t> &streams) noexcept
{
	bool traced = tracing(), profiled = c10::memoryProfilingEnabled();
	int device = static_cast<int>(xdm_runtime_ordinal(rt));
	bool known;
	xdm_block b;

	for (cudaStream_t s : streams)
		if (xdm_native_record_use(rt, ptr, s) != XDM_OK)
			tell_failed_free(ptr, nullptr);
	/* The block, read before it goes, for the trace and the profiler only. */
	known = (traced || profiled) && xdm_native_lookup(rt, ptr, &b) == XDM_OK;
	if (known && traced) {
		void *handle = nullptr;

		xdm_stream_handle(rt, b.stream, &handle);
		trace_free(device, ptr, b.bytes, static_cast<cudaStream_t>(handle), pool, b.tag);
	}
	if (xdm_native_release(rt, ptr) != XDM_OK)
		tell_failed_free(ptr, nullptr);
	if (known && profiled)
		profile_memory(device, ptr, -static_cast<int64_t>(b.bytes));
}

} // namespace

void free_block_in(xdm_runtime *rt, MempoolId_t pool, void *ptr) noexcept
{
	release_in(rt, pool, ptr, take_recorded(ptr));
}

/*
 * torch's deleter, handed the pointer alone: it must not throw.  The
 * block is freed on its own stream in whichever runtime holds it; only a
 * block with streams recorded, or a trace on, needs its owner found first.
 */
void delete_block(void *ptr) noexcept
{
	if (!ptr)
		return;
	try {
		relaxed_capture relaxed;
		xdm_block b;
		MempoolId_t pool{0, 0};
		xdm_runtime *rt;
		std::vector<cudaStream_t> streams = take_recorded(ptr);

		if (!streams.empty() || tracing()) {
			rt = owner_of(ptr, &b, &pool);
			if (!rt) {
				tell_failed_free(ptr, "no xdm runtime torch used holds it");
				return;
			}
			release_in(rt, pool, ptr, streams);
			return;
		}
		if (!release_anywhere(ptr, -1))
			tell_failed_free(ptr, "no xdm runtime torch used holds it");
	} catch (...) {
		tell_failed_free(ptr, "an exception inside the free");
	}
}

namespace {

/* Per device: the devices torch granted its memory (bit d: device d). */
std::atomic<uint64_t> peers_granted[XDM_MAX_DEVICES];

/*
 * Grant dev the pools and mappings of dev_to_access's stack (and of its
 * private pools over cuda_vmm); cuda_direct's memory needs no grant.
 */
void grant_peer(int dev, int dev_to_access)
{
	runtime_of(dev_to_access);
	/* First, so that a private pool made while the grants run gets it when made (pools.cpp). */
	if (dev >= 0 && dev < 64 && dev_to_access >= 0 && dev_to_access < XDM_MAX_DEVICES)
		peers_granted[dev_to_access].fetch_or(uint64_t{1} << dev, std::memory_order_acq_rel);
	for (const owned_runtime &o : device_runtimes(dev_to_access))
		if (xdm_runtime_grant_peer(o.rt, static_cast<uint32_t>(dev)) != XDM_OK)
			throw_xdm_error("granting " + device_name(dev) + " access to the memory of " +
					device_name(dev_to_access));
}

} // namespace

uint64_t granted_peers(int device)
{
	if (device < 0 || device >= XDM_MAX_DEVICES)
		return 0;
	return peers_granted[device].load(std::memory_order_acquire);
}

namespace {

/* The topmost pool layer of the device's stack, or -1. */
int pool_layer(xdm_runtime *rt)
{
	return layer_index(rt, "pool");
}

class allocator final : public cca::CUDAAllocator {
public:
	c10::DataPtr allocate(size_t size) override
	{
		int device = current_device();
		c10::Device where(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));

		if (size == 0)
			return {nullptr, nullptr, &delete_block, where};
		cudaStream_t stream = c10::cuda::getCurrentCUDAStream(
			static_cast<c10::DeviceIndex>(device)).stream();
		void *ptr = allocate_on(device, size, stream);
		return {ptr, ptr, &delete_block, where};
	}

	c10::DeleterFnPtr raw_deleter() const override
	{
		return &delete_block;
	}

	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
	}

	void *raw_alloc(size_t size) override
	{
		int device = current_device();

		if (size == 0)
			return nullptr;
		return allocate_on(device, size, c10::cuda::getCurrentCUDAStream(
			static_cast<c10::DeviceIndex>(device)).stream());
	}

	void *raw_alloc_with_stream(size_t size, cudaStream_t stream) override
	{
		if (size == 0)
			return nullptr;
		return allocate_on(current_device(), size, stream);
	}

	void raw_delete(void *ptr) override
	{
		delete_block(ptr);
	}

	void init(int device_count) override
	{
		devices.store(device_count, std::memory_order_release);
	}

	bool initialized() override
	{
		return devices.load(std::memory_order_acquire) >= 0;
	}

	/*
	 * The fraction set, else the pool's max as a fraction of the device
	 * (xdm.conf's max); 1 when it has no bound.
	 */
	double getMemoryFraction(c10::DeviceIndex device) override
	{
		xdm_runtime *rt = runtime_of(device);
		xdm_device_info info;
		uint64_t max = fraction_bytes(device);
		int pool = pool_layer(rt);

		if (max == 0 && (pool < 0 || !layer_number(rt, pool, "max", &max) || max == 0))
			return 1.0;
		if (xdm_runtime_device(rt, &info) != XDM_OK || info.total_bytes == 0)
			throw_xdm_error("the memory fraction of " + device_name(device));
		return static_cast<double>(max) / static_cast<double>(info.total_bytes);
	}

	/*
	 * The device's pools may reserve fraction of the device in all: the
	 * runtime's pool gets it as its max, shared with the private pools
	 * while they live (fraction.cpp); a bound below what they hold stops
	 * their growth only.  A stack without a pool has nothing of
	 * this kind to bound (its budget's limit bounds it): refused, naming
	 * the stack.
	 */
	void setMemoryFraction(double fraction, c10::DeviceIndex device) override
	{
		xdm_runtime *rt = runtime_of(device);
		xdm_device_info info;
		char value[32];
		int pool = pool_layer(rt);

		TORCH_CHECK(fraction >= 0 && fraction <= 1, "xdm: a memory fraction is within "
			    "[0, 1], not " + std::to_string(fraction));
		if (pool < 0) {
			char spec[256] = "";

			xdm_runtime_stack_spec(rt, spec, sizeof(spec));
			TORCH_CHECK(false, "xdm: set_per_process_memory_fraction has nothing to "
				    "bound on ", device_name(device), ": its stack '", spec,
				    "' has no pool (a budget's limit bounds it)");
		}
		if (xdm_runtime_device(rt, &info) != XDM_OK)
			throw_xdm_error("set_per_process_memory_fraction on " + device_name(device));
		uint64_t bytes = static_cast<uint64_t>(fraction * static_cast<double>(info.total_bytes));
		/* The pool reads max=0 as "no bound"; a fraction of nothing allows nothing. */
		std::snprintf(value, sizeof(value), "%" PRIu64, bytes ? bytes : 1);
		if (xdm_layer_attr_store(rt, static_cast<uint32_t>(pool), "max", value) != XDM_OK)
			throw_xdm_error("set_per_process_memory_fraction(" +
					std::to_string(fraction) + ") on " + device_name(device));
		set_fraction_bytes(device, bytes ? bytes : 1);
	}

	/* torch's expandable segments are its own; cuda_vmm is xdm's (xdm-torch(7)). */
	std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex) override
	{
		return {};
	}

	/*
	 * torch's caching_allocator_enable: off, each allocation no route takes
	 * is a block of the stack's base with no pool above it, and its free
	 * gives the memory back at once; the budget counts both ways.
	 */
	void enable(bool value) override
	{
		set_caching(value);
	}

	bool isEnabled() const override
	{
		return caching_enabled();
	}

	void cacheInfo(c10::DeviceIndex device, size_t *largest) override
	{
		*largest = largest_block_now(device, *largest);
	}

	/* xdm's blocks are their own segments: a block is its own base. */
	void *getBaseAllocation(void *ptr, size_t *size) override
	{
		xdm_block b;

		TORCH_CHECK(owner_of(ptr, &b, nullptr), "xdm: getBaseAllocation: " + hex_address(ptr) +
			    " is not the address of a live block of an xdm runtime");
		if (size)
			*size = b.bytes;
		return ptr;
	}

	/* The device allocator's c10::Stream overload stays reachable. */
	using cca::CUDAAllocator::recordStream;

	void recordStream(const c10::DataPtr &data, c10::cuda::CUDAStream stream) override
	{
		void *ptr = data.get();
		xdm_block b;
		xdm_runtime *rt;

		if (!ptr)
			return;
		rt = owner_of(ptr, &b, nullptr);
		TORCH_CHECK(rt, "xdm: record_stream: " + hex_address(ptr) + " is not the address of a "
			    "live block of an xdm runtime");
		relaxed_capture relaxed;
		/* Over cuda_direct (caching off) the core records nothing: its
		 * cuMemFree waits for the device's work, as torch's cudaFree does. */
		if (xdm_native_record_use(rt, ptr, stream.stream()) != XDM_OK)
			throw_xdm_error("record_stream of the tensor memory at " + hex_address(ptr));
		remember_use(ptr, stream.stream());
	}

	void emptyCache(MempoolId_t id) override
	{
		empty_cache(id);
	}

	c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override
	{
		return device_stats(device);
	}

	void resetAccumulatedStats(c10::DeviceIndex device) override
	{
		reset_totals(device);
	}

	void resetPeakStats(c10::DeviceIndex device) override
	{
		reset_peaks(device);
	}

	cca::SnapshotInfo snapshot(MempoolId_t id, bool include_traces) override
	{
		return xdm_torch::snapshot(id, include_traces);
	}

	void beginAllocateToPool(c10::DeviceIndex device, MempoolId_t id,
				 std::function<bool(cudaStream_t)> filter) override
	{
		begin_allocate_to_pool(device, id, std::move(filter));
	}

	void endAllocateToPool(c10::DeviceIndex device, MempoolId_t id) override
	{
		end_allocate_to_pool(device, id);
	}

	void releasePool(c10::DeviceIndex device, MempoolId_t id) override
	{
		release_pool(device, id);
	}

	int getPoolUseCount(c10::DeviceIndex device, MempoolId_t id) override
	{
		return pool_use_count(device, id);
	}

	void createOrIncrefPool(c10::DeviceIndex device, MempoolId_t id,
				std::shared_ptr<cca::CUDAAllocator> custom) override
	{
		create_or_incref_pool(device, id, std::move(custom));
	}

	void setUseOnOOM(c10::DeviceIndex, MempoolId_t, bool use_on_oom) override
	{
		TORCH_CHECK(!use_on_oom, "xdm: a MemPool's use_on_oom is not served: a refusal "
			    "by xdm's budget is final");
	}

	/*
	 * Not served: xdm's pool splits its chunks by its own rules, with no
	 * switch per torch pool, so the request is accepted and changes
	 * nothing (xdm-torch(7), NOT AVAILABLE).
	 */
	void setNoSplit(c10::DeviceIndex, MempoolId_t) override
	{
	}

	bool checkPoolLiveAllocations(c10::DeviceIndex device, MempoolId_t id,
				      const std::unordered_set<void *> &expected) override
	{
		return pool_live_allocations_are(device, id, expected);
	}

	cca::ShareableHandle shareIpcHandle(void *ptr) override
	{
		return share_ipc_handle(ptr);
	}

	std::shared_ptr<void> getIpcDevPtr(std::string handle) override
	{
		return open_ipc_handle(handle);
	}

	bool isHistoryEnabled() override
	{
		return history_enabled();
	}

	/* record_function's annotations, kept with the history (history.cpp). */
	void recordAnnotation(const std::vector<std::pair<std::string, std::string>> &md) override
	{
		record_annotation(current_device(), md);
	}

	void pushCompileContext(std::string &md) override
	{
		push_compile_context(md);
	}

	void popCompileContext() override
	{
		pop_compile_context();
	}

	void recordHistory(bool enabled, cca::CreateContextFn recorder, size_t max_entries,
			   cca::RecordContext when, bool clear,
			   const std::vector<std::string> &skip_actions) override
	{
		record_history(enabled, recorder, max_entries, when, clear, skip_actions);
	}

	void setUserMetadata(const std::string &metadata) override
	{
		set_user_metadata(metadata);
	}

	std::string getUserMetadata() override
	{
		return get_user_metadata();
	}

	void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override
	{
		attach_oom_observer(std::move(observer));
	}

	void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override
	{
		attach_trace_tracker(std::move(tracker));
	}

	/*
	 * torch's get_p2p_access asks this once per pair: dev's context may
	 * then reach dev_to_access's cudaMalloc memory, and xdm grants dev the
	 * pools and mappings of dev_to_access's stack, which that call does
	 * not reach.
	 */
	void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override
	{
		c10::cuda::CUDAGuard guard(dev);
		cudaError_t err = cudaDeviceEnablePeerAccess(dev_to_access, 0);

		if (err == cudaErrorPeerAccessAlreadyEnabled)
			(void)cudaGetLastError();
		else
			C10_CUDA_CHECK(err);
		grant_peer(dev, dev_to_access);
	}

	/* Without peer access, a pool's or a mapping's memory needs a peer copy. */
	cudaError_t memcpyAsync(void *dst, int dst_device, const void *src, int src_device,
				size_t count, cudaStream_t stream, bool p2p_enabled) override
	{
		if (p2p_enabled || dst_device == src_device)
			return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
		return cudaMemcpyPeerAsync(dst, dst_device, src, src_device, count, stream);
	}

	std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex device,
								 MempoolId_t id) override
	{
		return pool_checkpoint(device, id);
	}

	cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
						    std::shared_ptr<cca::AllocatorState> as) override
	{
		return pool_restore(device, as);
	}

	std::string name() override
	{
		return "xdm";
	}

private:
	/* -1 until torch's lazy CUDA init calls init(). */
	std::atomic<int> devices{-1};
};

} // namespace

bool is_refusal(const xdm_error *e)
{
	switch (e->code) {
	case XDM_E_OUT_OF_BUDGET:
	case XDM_E_OUT_OF_MEMORY:
		return true;
	case XDM_E_DRIVER:
		return e->driver_code == CUDA_ERROR_OUT_OF_MEMORY;
	default:
		return false;
	}
}

void throw_xdm_error(const std::string &what)
{
	const xdm_error *e = xdm_last_error();
	std::string msg = "xdm: " + what + ": " + xdm_strerror(e->code) + ": " +
			  xdm_last_error_message();

	if (is_refusal(e))
		TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
	TORCH_CHECK(false, msg);
}

std::string device_name(int device)
{
	return "cuda:" + std::to_string(device);
}

std::string hex_address(uint64_t ptr)
{
	char buf[24];

	std::snprintf(buf, sizeof(buf), "0x%" PRIx64, ptr);
	return buf;
}

xdm_runtime *runtime_of(int device)
{
	xdm_runtime *rt = nullptr;

	if (device >= 0 && device < XDM_MAX_DEVICES) {
		rt = runtimes[device].load(std::memory_order_acquire);
		if (rt)
			return rt;
	}
	/* An ordinal out of range is refused here, as NO_DEVICE. */
	if (xdm_runtime_get(static_cast<uint32_t>(device), &rt) != XDM_OK)
		throw_xdm_error("the runtime of " + device_name(device) + " cannot be built");
	runtimes[device].store(rt, std::memory_order_release);
	return rt;
}

xdm_runtime *built_runtime(int device)
{
	if (device < 0 || device >= XDM_MAX_DEVICES)
		return nullptr;
	return runtimes[device].load(std::memory_order_acquire);
}

int layer_index(xdm_runtime *rt, const char *name)
{
	uint32_t n = xdm_runtime_layer_count(rt);

	for (uint32_t i = 0; i < n; i++) {
		const char *layer = xdm_runtime_layer_name(rt, i);

		if (layer && std::string(layer) == name)
			return static_cast<int>(i);
	}
	return -1;
}

bool layer_number(xdm_runtime *rt, int layer, const char *attr, uint64_t *out)
{
	char text[64];
	char *end;

	if (layer < 0 || xdm_layer_attr_show(rt, static_cast<uint32_t>(layer), attr, text,
					     sizeof(text)) != XDM_OK)
		return false;
	*out = std::strtoull(text, &end, 10);
	return end != text;
}

uint64_t free_failures()
{
	return failed_frees.load(std::memory_order_relaxed);
}

uint64_t recorded_uses()
{
	return recorded_count.load(std::memory_order_relaxed);
}

std::shared_ptr<cca::CUDAAllocator> make_allocator()
{
	return std::make_shared<allocator>();
}

} // namespace xdm_torch
