// SPDX-License-Identifier: MIT
/*
 * install.cpp - the C entry points python/xdm/torch.py calls through
 * ctypes: make xdm torch's CUDA allocator, and read the glue's state.
 *
 * xdm is installed the way torch's change_current_allocator installs an
 * allocator: torch's exported slot is swapped before torch initializes
 * CUDA, and c10's allocator registry points at it too, so that both
 * torch.cuda.* and torch.accelerator.* reach it.  The module is tied to
 * the torch whose headers it was compiled against (the C++ ABI of
 * CUDAAllocator); xdm_torch_built_for() names that torch and the Python
 * side refuses any other.
 */
#include "config.h"

#include <string>

#include <c10/core/Allocator.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include "glue.hpp"

#define XDM_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

/* Why the last install failed: read by the one thread that installs. */
std::string install_error;

/* Kept alive for the process: torch holds a raw pointer to it. */
std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> installed;

/* Above the priority torch registers its own allocator with. */
constexpr uint8_t registry_priority = 1;

} // namespace

/* The torch version this module was compiled against ("2.11.0+cu130"). */
XDM_TORCH_API const char *xdm_torch_built_for(void)
{
	return XDM_TORCH_VERSION;
}

/*
 * Make xdm torch's CUDA allocator.  0 when it is (or was already), -1 when
 * torch refused (its allocator is initialized: CUDA memory was allocated
 * already); xdm_torch_install_error() says why.
 */
XDM_TORCH_API int xdm_torch_install(void) noexcept
{
	if (installed)
		return 0;
	try {
		auto allocator = xdm_torch::make_allocator();

		torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
		c10::SetAllocator(c10::DeviceType::CUDA, allocator.get(), registry_priority);
		installed = allocator;
		return 0;
	} catch (const std::exception &e) {
		install_error = e.what();
	} catch (...) {
		install_error = "an unknown exception";
	}
	return -1;
}

XDM_TORCH_API const char *xdm_torch_install_error(void)
{
	return install_error.c_str();
}

/* torch.cuda.empty_cache(): the runtimes give idle memory back. */
XDM_TORCH_API void xdm_torch_empty_cache(void) noexcept
{
	try {
		xdm_torch::empty_cache({0, 0});
	} catch (...) {
	}
}

/* Frees that failed so far (each was a block kept or a pointer unknown). */
XDM_TORCH_API uint64_t xdm_torch_free_failures(void)
{
	return xdm_torch::free_failures();
}

/* Streams that record_stream named for blocks not yet freed. */
XDM_TORCH_API uint64_t xdm_torch_recorded_uses(void)
{
	return xdm_torch::recorded_uses();
}
