// SPDX-License-Identifier: MIT
/*
 * resource.cpp - the rmm backend's C++ side: RMM's resources, built from a
 * stack line and called on xdm's streams.
 *
 * What the stack line names is built as RMM builds it (a pool, an arena or
 * a binning resource over cuda_async or cuda, or a resource a program's
 * factory returns), then wrapped in RMM's statistics adaptor, whose
 * counters the tree shows: the figures are RMM's own, not a second count.
 * RMM's resources use the CUDA runtime's current device, so every call
 * runs with the layer's device current and puts the caller's back after.
 * Nothing thrown crosses into C: RMM's out_of_memory becomes OUT_OF_MEMORY
 * with RMM's sentence, any other error DRIVER.
 */
#include "config.h"

#include <dlfcn.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>

#if __has_include(<rmm/mr/device_memory_resource.hpp>)
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/device_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>
#else
#include <rmm/mr/device/arena_memory_resource.hpp>
#include <rmm/mr/device/binning_memory_resource.hpp>
#include <rmm/mr/device/cuda_async_memory_resource.hpp>
#include <rmm/mr/device/cuda_memory_resource.hpp>
#include <rmm/mr/device/device_memory_resource.hpp>
#include <rmm/mr/device/pool_memory_resource.hpp>
#include <rmm/mr/device/statistics_resource_adaptor.hpp>
#endif
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>

#include "resource.h"
#include "rmm_calls.hpp"

namespace {

using base_resource = rmm::mr::device_memory_resource;
using statistics = rmm::mr::statistics_resource_adaptor<base_resource>;

/* The device current for the life of a call, the caller's back after. */
class device_guard {
public:
	explicit device_guard(int device) : previous(-1)
	{
		/* Already current (the common case): nothing to switch or put back. */
		if (cudaGetDevice(&previous) == cudaSuccess && previous == device) {
			previous = -1;
			return;
		}
		ok = cudaSetDevice(device) == cudaSuccess;
	}
	~device_guard()
	{
		if (previous >= 0)
			cudaSetDevice(previous);
	}
	device_guard(const device_guard &) = delete;
	device_guard &operator=(const device_guard &) = delete;
	bool ok = true;

private:
	int previous;	/* the caller's device to put back; -1: none */
};

/* An error with RMM's (or the runtime's) sentence, as xdm's error. */
enum xdm_status fail(enum xdm_status code, const std::string &what)
{
	return xdm_error_set(code, "%s", what.c_str());
}

} // namespace

struct rmm_backend {
	int device;
	std::string description;
	std::unique_ptr<base_resource> upstream;	/* under pool, arena, binning */
	std::unique_ptr<base_resource> owned;		/* what we built, if we did */
	base_resource *top = nullptr;			/* owned, or the factory's */
	rmm::mr::pool_memory_resource<base_resource> *pool = nullptr;
	std::unique_ptr<statistics> stats;
};

namespace {

std::unique_ptr<base_resource> make_base(const std::string &name)
{
	if (name == "cuda_async")
		return std::make_unique<rmm::mr::cuda_async_memory_resource>();
	if (name == "cuda")
		return std::make_unique<rmm::mr::cuda_memory_resource>();
	return nullptr;
}

/* Build what the choice names into b; false with xdm's error set. */
bool build(const rmm_choice &c, rmm_backend &b)
{
	std::string resource = c.resource ? c.resource : "cuda_async";
	std::string upstream = c.upstream ? c.upstream : "cuda_async";

	if (resource == "factory") {
		if (!c.factory || !*c.factory) {
			xdm_error_set(XDM_E_CONFIG, "rmm: resource=factory needs factory=SYMBOL");
			return false;
		}
		void *sym = dlsym(RTLD_DEFAULT, c.factory);
		if (!sym) {
			xdm_error_set(XDM_E_CONFIG, "rmm: factory %s is not a symbol of this process "
				      "(export it: -rdynamic, or a shared library)", c.factory);
			return false;
		}
		auto make = reinterpret_cast<xdm_rmm_factory_fn>(sym);
		b.top = static_cast<base_resource *>(make(b.device));
		if (!b.top) {
			xdm_error_set(XDM_E_CONFIG, "rmm: factory %s returned no resource for "
				      "device %d", c.factory, b.device);
			return false;
		}
		b.description = std::string("factory ") + c.factory;
		return true;
	}
	if (resource == "cuda_async" || resource == "cuda") {
		b.owned = make_base(resource);
		b.top = b.owned.get();
		b.description = resource;
		return true;
	}
	b.upstream = make_base(upstream);
	if (!b.upstream) {
		xdm_error_set(XDM_E_CONFIG, "rmm: upstream=%s: not cuda_async or cuda",
			      upstream.c_str());
		return false;
	}
	if (resource == "pool") {
		std::optional<std::size_t> max;

		if (c.max)
			max = c.max;
		auto pool = std::make_unique<rmm::mr::pool_memory_resource<base_resource>>(
			b.upstream.get(), c.initial, max);
		b.pool = pool.get();
		b.owned = std::move(pool);
	} else if (resource == "arena") {
		std::optional<std::size_t> size;

		if (c.arena)
			size = c.arena;
		b.owned = std::make_unique<rmm::mr::arena_memory_resource<base_resource>>(
			b.upstream.get(), size);
	} else if (resource == "binning") {
		/* Bins of 256 B to 4 MiB over fixed-size resources, as RMM's own. */
		b.owned = std::make_unique<rmm::mr::binning_memory_resource<base_resource>>(
			b.upstream.get(), static_cast<int8_t>(8), static_cast<int8_t>(22));
	} else {
		xdm_error_set(XDM_E_CONFIG, "rmm: resource=%s: not cuda_async, cuda, pool, arena, "
			      "binning or factory", resource.c_str());
		return false;
	}
	b.top = b.owned.get();
	b.description = resource + " over " + upstream;
	return true;
}

} // namespace

extern "C" {

enum xdm_status rmm_backend_new(const struct rmm_choice *c, struct rmm_backend **out)
{
	std::unique_ptr<rmm_backend> b;

	try {
		b = std::make_unique<rmm_backend>();
		b->device = static_cast<int>(c->ordinal);
		device_guard on(b->device);

		if (!on.ok)
			return xdm_error_set(XDM_E_NO_DEVICE, "rmm: cannot make CUDA device %d "
					     "current", b->device);
		if (!build(*c, *b))
			return xdm_last_error()->code;
		b->stats = std::make_unique<statistics>(b->top);
	} catch (const rmm::out_of_memory &e) {
		return fail(XDM_E_OUT_OF_MEMORY, std::string("rmm: ") + e.what());
	} catch (const std::bad_alloc &) {
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "rmm: no host memory for the resource");
	} catch (const std::exception &e) {
		return fail(XDM_E_DRIVER, std::string("rmm: building the resource: ") + e.what());
	}
	*out = b.release();
	return XDM_OK;
}

void rmm_backend_free(struct rmm_backend *b)
{
	if (!b)
		return;
	try {
		device_guard on(b->device);

		/* Top down: each resource goes before the one it draws on. */
		b->stats.reset();
		b->owned.reset();
		b->upstream.reset();
	} catch (...) {
		std::fprintf(stderr, "xdm: rmm: an error while releasing the resource\n");
	}
	delete b;
}

enum xdm_status rmm_backend_allocate(struct rmm_backend *b, size_t bytes, void *stream,
				     uint64_t *ptr)
{
	try {
		device_guard on(b->device);
		rmm::cuda_stream_view view(static_cast<cudaStream_t>(stream));
		void *p = xdm_rmm::allocate(*b->stats, bytes, view);

		*ptr = reinterpret_cast<uintptr_t>(p);
		return XDM_OK;
	} catch (const rmm::out_of_memory &e) {
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "rmm (%s): %zu bytes: %s",
				     b->description.c_str(), bytes, e.what());
	} catch (const std::exception &e) {
		return xdm_error_set(XDM_E_DRIVER, "rmm (%s): %zu bytes: %s",
				     b->description.c_str(), bytes, e.what());
	}
}

void rmm_backend_deallocate(struct rmm_backend *b, uint64_t ptr, size_t bytes, void *stream)
{
	device_guard on(b->device);
	rmm::cuda_stream_view view(static_cast<cudaStream_t>(stream));

	xdm_rmm::deallocate(*b->stats, reinterpret_cast<void *>(static_cast<uintptr_t>(ptr)), bytes,
			    view);
}

bool rmm_backend_figure(struct rmm_backend *b, enum rmm_figure which, uint64_t *out)
{
	auto bytes = b->stats->get_bytes_counter();
	auto allocations = b->stats->get_allocations_counter();

	switch (which) {
	case RMM_BYTES_CURRENT:
		*out = static_cast<uint64_t>(bytes.value);
		return true;
	case RMM_BYTES_PEAK:
		*out = static_cast<uint64_t>(bytes.peak);
		return true;
	case RMM_BYTES_TOTAL:
		*out = static_cast<uint64_t>(bytes.total);
		return true;
	case RMM_ALLOCATIONS_CURRENT:
		*out = static_cast<uint64_t>(allocations.value);
		return true;
	case RMM_ALLOCATIONS_PEAK:
		*out = static_cast<uint64_t>(allocations.peak);
		return true;
	case RMM_ALLOCATIONS_TOTAL:
		*out = static_cast<uint64_t>(allocations.total);
		return true;
	case RMM_POOL_SIZE:
		if (!b->pool)
			return false;
		*out = static_cast<uint64_t>(b->pool->pool_size());
		return true;
	}
	return false;
}

const char *rmm_backend_describe(struct rmm_backend *b)
{
	return b->description.c_str();
}

const char *rmm_backend_version(void)
{
	return XDM_RMM_VERSION;
}

} // extern "C"
