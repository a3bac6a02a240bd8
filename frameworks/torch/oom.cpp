// SPDX-License-Identifier: MIT
/*
 * oom.cpp - how a refusal reads to torch's users.
 *
 * Training scripts, notebooks' retry loops and torch's own tests match the
 * text of torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate
 * 2.00 GiB. GPU 0 has a total capacity of ..."), so a refusal under xdm
 * opens with the same words and sizes, written the way torch writes them
 * (bytes up to 1 KiB, then KiB, MiB and GiB with two decimals), and then
 * says what xdm refused and why: the budget, a pool's max or the device.
 */
#include "config.h"

#include <cstdio>

#include <cuda_runtime_api.h>

#include <c10/cuda/CUDAGuard.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

std::string format_size(uint64_t bytes)
{
	const uint64_t kib = uint64_t{1} << 10, mib = kib << 10, gib = mib << 10;
	char buf[64];

	if (bytes <= kib)
		std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(bytes));
	else if (bytes <= mib)
		std::snprintf(buf, sizeof(buf), "%.2f KiB", static_cast<double>(bytes) / kib);
	else if (bytes <= gib)
		std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / mib);
	else
		std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / gib);
	return buf;
}

/* The device's free and total bytes, as the driver tells them. */
bool device_memory(int device, size_t *free, size_t *total)
{
	c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));

	if (cudaMemGetInfo(free, total) == cudaSuccess)
		return true;
	(void)cudaGetLastError();	/* inside a capture the query may be refused */
	return false;
}

} // namespace

std::string oom_message(int device, size_t size, const std::string &why)
{
	c10::CachingDeviceAllocator::DeviceStats st = device_stats(device);
	size_t free = 0, total = 0;
	std::string text = "CUDA out of memory. Tried to allocate " + format_size(size) + ". GPU " +
			   std::to_string(device);
	const size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
	int64_t allocated = st.allocated_bytes[all].current;
	int64_t reserved = st.reserved_bytes[all].current;

	if (device_memory(device, &free, &total))
		text += " has a total capacity of " + format_size(total) + " of which " +
			format_size(free) + " is free";
	text += ". Of the allocated memory " + format_size(static_cast<uint64_t>(allocated)) +
		" is allocated by PyTorch, and " +
		format_size(static_cast<uint64_t>(reserved > allocated ? reserved - allocated : 0)) +
		" is reserved by PyTorch but unallocated. " + why;
	return text;
}

bool beyond_device(int device, size_t size)
{
	size_t free = 0, total = 0;

	return device_memory(device, &free, &total) && size > total;
}

} // namespace xdm_torch
