// SPDX-License-Identifier: MIT
/*
 * alloc.cpp - torch's CUDA allocator, served by xdm.
 *
 * torch.cuda.memory.CUDAPluggableAllocator loads xdm_torch_malloc and
 * xdm_torch_free from this module by name (python/xdm/torch.py does it);
 * every tensor's memory is then a block of the xdm runtime of its device, on
 * torch's own stream, so the budget, the registry, the tree and the log see
 * it like any other.  The calling thread's tag (xdm.tag()) goes with it.
 *
 * The module is C++ for one reason: torch uses the pointer alloc returns
 * without checking it, so a refusal must reach torch as a thrown
 * c10::OutOfMemoryError (which Python sees as torch.OutOfMemoryError).
 * libc10 exports no type_info for that class; this unit, compiled against
 * the installed torch's headers, emits its own, and the C++ runtime matches
 * the two by name.  Nothing is held (no lock, no half-made block) when it
 * throws.
 *
 * Three more hooks of torch's pluggable allocator are reachable only from
 * C++ (torch 2.11's Python object has no methods): record_stream,
 * empty_cache and the per-process memory fraction.  xdm_torch_install_hooks()
 * sets them on the allocator just installed, where configure found them
 * exported by libtorch_cuda (HAVE_TORCH_HOOKS).
 */
#include "config.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <c10/util/Exception.h>
#ifdef HAVE_TORCH_HOOKS
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#endif

#include <xdm/xdm.h>

#define XDM_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

/*
 * The runtime of each device torch has allocated on.  xdm_runtime_get() is
 * lock-free after its first call already; the table is here for the hooks,
 * which are handed a pointer or a stream but no device, and must not build
 * a runtime (and a CUDA context) on a device torch never used.  It caches
 * what libxdm's runtime table owns, and those runtimes live until exit, so
 * a pointer read here is never stale.  torch has one allocator per process:
 * so has this module.
 */
std::atomic<xdm_runtime *> runtimes[XDM_MAX_DEVICES];

/* Frees that failed: a deleter cannot throw, so they are counted. */
std::atomic<uint64_t> free_failures;
std::atomic<bool> free_failure_told;

/*
 * torch's record_stream promises that a block is not reused before the
 * work queued on the recorded stream by the time of its free has run; xdm
 * records the use when asked, which covers the work queued so far only.
 * So the streams are kept, per pointer, and recorded once more at the free.
 * The map is made once and never destroyed: torch frees tensors during
 * exit, after this module's static destructors may have run.
 */
struct recorded_uses {
	std::mutex lock;
	std::unordered_multimap<void *, cudaStream_t> uses;
};

recorded_uses &recorded()
{
	static recorded_uses *r = new recorded_uses;
	return *r;
}

/* Entries in recorded().uses: lets a free skip the lock when there are none. */
std::atomic<size_t> recorded_count;

/* A refusal of memory, which torch's callers may catch and retry after. */
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

/*
 * Throw the calling thread's xdm error into torch: a refusal of memory as
 * c10::OutOfMemoryError, anything else (a bad config, a stream xdm cannot
 * order) as c10::Error, torch's RuntimeError.
 */
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

/* The runtime of a device, built on first use; throws if it cannot be. */
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

/* why: what went wrong, or NULL for the calling thread's xdm error. */
void tell_free_failure(void *ptr, size_t size, int device, const char *why)
{
	free_failures.fetch_add(1, std::memory_order_relaxed);
	if (free_failure_told.exchange(true))
		return;
	std::fprintf(stderr, "xdm: torch's free of %p (%zu bytes on %s) failed: %s (later "
		     "failures are only counted: xdm.torch.free_failures())\n", ptr, size,
		     device_name(device).c_str(), why ? why : xdm_last_error_message());
}

/* The streams record_stream named for ptr, taken out of the map. */
std::vector<cudaStream_t> take_recorded(void *ptr)
{
	std::vector<cudaStream_t> streams;

	if (recorded_count.load(std::memory_order_acquire) == 0)
		return streams;
	recorded_uses &r = recorded();
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

#ifdef HAVE_TORCH_HOOKS
/* The built runtime whose registry holds the live block at ptr, or NULL. */
xdm_runtime *owner_of(void *ptr)
{
	for (auto &slot : runtimes) {
		xdm_runtime *rt = slot.load(std::memory_order_acquire);
		xdm_block b;

		if (rt && xdm_native_lookup(rt, ptr, &b) == XDM_OK)
			return rt;
	}
	return nullptr;
}

std::string hex(const void *ptr)
{
	char buf[24];

	std::snprintf(buf, sizeof(buf), "%p", ptr);
	return buf;
}

void remember_use(void *ptr, cudaStream_t stream)
{
	recorded_uses &r = recorded();
	std::lock_guard<std::mutex> hold(r.lock);
	auto range = r.uses.equal_range(ptr);

	for (auto it = range.first; it != range.second; ++it)
		if (it->second == stream)
			return;
	r.uses.emplace(ptr, stream);
	recorded_count.fetch_add(1, std::memory_order_release);
}

/* tensor.record_stream(s): the free of ptr waits for the work on s. */
void record_stream(void *ptr, cudaStream_t stream)
{
	xdm_runtime *rt = owner_of(ptr);

	TORCH_CHECK(rt, "xdm: record_stream: ", ptr, " is not the address of a live block of an "
		    "xdm runtime");
	if (xdm_native_record_use(rt, ptr, stream) != XDM_OK)
		throw_xdm_error("record_stream of the tensor memory at " + hex(ptr));
	remember_use(ptr, stream);
}

/* The topmost pool of the stack, or -1. */
int pool_layer(xdm_runtime *rt)
{
	uint32_t n = xdm_runtime_layer_count(rt);

	for (uint32_t i = 0; i < n; i++) {
		const char *name = xdm_runtime_layer_name(rt, i);

		if (name && std::string(name) == "pool")
			return static_cast<int>(i);
	}
	return -1;
}

std::atomic<bool> fraction_told;

/*
 * torch.cuda.set_per_process_memory_fraction(f, device): the pool may
 * reserve f of the device's memory.  A bound below what it holds stops its
 * growth only.  A stack without a pool has nothing of this kind to bound
 * (its budget's limit is what bounds a process there): said once, on stderr.
 */
void memory_fraction(double fraction, int device)
{
	xdm_runtime *rt = runtime_of(device);
	xdm_device_info info;
	char value[32];
	int pool = pool_layer(rt);

	if (pool < 0) {
		char spec[256] = "";

		if (!fraction_told.exchange(true)) {
			xdm_runtime_stack_spec(rt, spec, sizeof(spec));
			std::fprintf(stderr, "xdm: set_per_process_memory_fraction(%g) has no effect "
				     "on %s: its stack '%s' has no pool whose max it could set\n",
				     fraction, device_name(device).c_str(), spec);
		}
		return;
	}
	if (xdm_runtime_device(rt, &info) != XDM_OK)
		throw_xdm_error("set_per_process_memory_fraction on " + device_name(device));
	uint64_t bytes = static_cast<uint64_t>(fraction * static_cast<double>(info.total_bytes));
	/* The pool reads max=0 as "no bound"; a fraction of nothing allows nothing. */
	std::snprintf(value, sizeof(value), "%" PRIu64, bytes ? bytes : 1);
	if (xdm_layer_attr_store(rt, static_cast<uint32_t>(pool), "max", value) != XDM_OK)
		throw_xdm_error("set_per_process_memory_fraction(" + std::to_string(fraction) +
				") on " + device_name(device));
}
#endif /* HAVE_TORCH_HOOKS */

} // namespace

/* torch's alloc: size bytes on device, ordered on stream (0: the legacy stream). */
XDM_TORCH_API void *xdm_torch_malloc(size_t size, int device, cudaStream_t stream)
{
	xdm_runtime *rt = runtime_of(device);
	void *ptr = nullptr;

	if (xdm_native_allocate(rt, size, stream, nullptr, &ptr) != XDM_OK)
		throw_xdm_error("torch asked for " + std::to_string(size) + " bytes on " +
				device_name(device));
	return ptr;
}

/*
 * torch's free, from a tensor's deleter: it must not throw.  stream is the
 * one ptr was allocated on; the streams record_stream named are ordered
 * first.  A failure is told once on stderr and counted.
 */
XDM_TORCH_API void xdm_torch_free(void *ptr, size_t size, int device, cudaStream_t stream) noexcept
{
	xdm_runtime *rt = nullptr;

	if (!ptr)
		return;
	if (device >= 0 && device < XDM_MAX_DEVICES)
		rt = runtimes[device].load(std::memory_order_acquire);
	if (!rt) {
		tell_free_failure(ptr, size, device, "xdm never allocated on that device");
		return;
	}
	try {
		for (cudaStream_t s : take_recorded(ptr))
			if (xdm_native_record_use(rt, ptr, s) != XDM_OK)
				tell_free_failure(ptr, size, device, nullptr);
	} catch (...) {
		/* No host memory for the list: the uses recorded when asked still hold. */
	}
	if (xdm_native_free(rt, ptr, stream) != XDM_OK)
		tell_free_failure(ptr, size, device, nullptr);
}

/*
 * torch.cuda.empty_cache() with the hooks, xdm.torch.empty_cache() without:
 * reap every runtime torch allocated on, which gives the pools' idle
 * chunks back to the memory below them.
 */
XDM_TORCH_API void xdm_torch_empty_cache(void) noexcept
{
	for (auto &slot : runtimes) {
		xdm_runtime *rt = slot.load(std::memory_order_acquire);

		if (rt && xdm_reap_pending(rt) != XDM_OK)
			std::fprintf(stderr, "xdm: emptying the cache of device %u: %s\n",
				     xdm_runtime_ordinal(rt), xdm_last_error_message());
	}
}

/*
 * Set the record_stream, empty_cache and memory-fraction hooks on torch's
 * current allocator, which must be the pluggable one just installed.
 * Returns 1 when they are set, 0 when this build has no access to them,
 * -1 when torch's current allocator is not a pluggable one.
 */
XDM_TORCH_API int xdm_torch_install_hooks(void) noexcept
{
#ifdef HAVE_TORCH_HOOKS
	namespace pluggable = torch::cuda::CUDAPluggableAllocator;
	try {
		auto current = pluggable::getCurrentAllocator();

		if (!current || current->name() != "pluggable")
			return -1;
		auto *a = static_cast<pluggable::CUDAPluggableAllocator *>(current.get());
		a->set_record_stream_fn(record_stream);
		a->set_reset_fn(xdm_torch_empty_cache);
		a->set_memory_fraction_fn(memory_fraction);
		return 1;
	} catch (...) {
		return -1;
	}
#else
	return 0;
#endif
}

/* Frees that failed so far (each was a block kept or a pointer unknown). */
XDM_TORCH_API uint64_t xdm_torch_free_failures(void)
{
	return free_failures.load(std::memory_order_relaxed);
}

/* Streams that record_stream named for blocks not yet freed. */
XDM_TORCH_API uint64_t xdm_torch_recorded_uses(void)
{
	return recorded_count.load(std::memory_order_relaxed);
}
