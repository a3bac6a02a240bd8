// SPDX-License-Identifier: MIT
/*
 * stats.cpp - torch's DeviceStats (memory_stats, memory_allocated,
 * max_memory_reserved, memory_summary, ...) from xdm's own counters.
 *
 * A device's figures are the sums over its runtimes: the device's own and
 * the private pools' (pools.cpp).  What each of torch's keys is under xdm
 * (xdm-torch(7) has the table):
 *
 *  allocation, active       blocks: allocs, frees, blocks_outstanding and
 *                           blocks_peak of the runtimes (xdm_stats);
 *  allocated_bytes,         bytes of blocks: bytes_allocated, bytes_freed,
 *  active_bytes,            bytes_outstanding, bytes_peak;
 *  requested_bytes
 *  reserved_bytes           what the stacks' pools hold from below them
 *                           (their reserved and reserved_peak); a stack
 *                           without a pool holds exactly its live blocks;
 *  segment                  the pools' chunks (current; no peak is kept, so
 *                           the peak reads as current), growths (allocated),
 *                           trimmed (freed);
 *  inactive_split(_bytes)   the free pieces of the pools' chunks;
 *  num_ooms                 the runtimes' failed allocations;
 *  num_alloc_retries        allocations served after the glue gave idle
 *                           memory back (allocator.cpp);
 *  num_device_alloc/_free   the pools' growths and trimmed chunks.
 *
 * Only the aggregate is kept: xdm's pool has no separate small and large
 * pools to count apart, so those two rows stay zero.  xdm counts a block's
 * usable size, so requested equals allocated.  Peaks are xdm's (sampled
 * when several threads allocate: xdm.3), and a device's peak is the sum
 * of its runtimes' peaks, which is at or above the true peak of the sum
 * when private pools are alive.
 */
#include "config.h"

#include <algorithm>

#include <c10/cuda/CUDAGuard.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

constexpr size_t aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

std::atomic<int64_t> retries[XDM_MAX_DEVICES];

void set_stat(c10::CachingAllocator::Stat &s, uint64_t current, uint64_t peak,
	      uint64_t allocated, uint64_t freed)
{
	s.current = static_cast<int64_t>(current);
	s.peak = static_cast<int64_t>(std::max(peak, current));
	s.allocated = static_cast<int64_t>(allocated);
	s.freed = static_cast<int64_t>(freed);
}

struct pool_figures {
	uint64_t reserved = 0, reserved_peak = 0, chunks = 0, growths = 0, trimmed = 0;
	uint64_t free_blocks = 0, free_bytes = 0;
};

/* A runtime's pool figures; false when its stack has no pool. */
bool read_pool(xdm_runtime *rt, pool_figures *f)
{
	int pool = layer_index(rt, "pool");
	uint64_t v;

	if (pool < 0)
		return false;
	f->reserved += layer_number(rt, pool, "reserved", &v) ? v : 0;
	f->reserved_peak += layer_number(rt, pool, "reserved_peak", &v) ? v : 0;
	f->chunks += layer_number(rt, pool, "chunks", &v) ? v : 0;
	f->growths += layer_number(rt, pool, "growths", &v) ? v : 0;
	f->trimmed += layer_number(rt, pool, "trimmed", &v) ? v : 0;
	f->free_blocks += layer_number(rt, pool, "free_blocks", &v) ? v : 0;
	f->free_bytes += layer_number(rt, pool, "free_bytes", &v) ? v : 0;
	return true;
}

} // namespace

c10::CachingDeviceAllocator::DeviceStats device_stats(int device)
{
	c10::CachingDeviceAllocator::DeviceStats out;
	uint64_t blocks = 0, blocks_peak = 0, allocs = 0, frees = 0, failures = 0;
	uint64_t bytes = 0, bytes_peak = 0, bytes_in = 0, bytes_out = 0;
	pool_figures pools;

	for (const owned_runtime &o : device_runtimes(device)) {
		xdm_runtime *rt = o.rt;
		xdm_stats s;

		xdm_runtime_stats(rt, &s);
		blocks += s.blocks_outstanding;
		blocks_peak += s.blocks_peak;
		allocs += s.allocs;
		frees += s.frees;
		failures += s.failures;
		bytes += s.bytes_outstanding;
		bytes_peak += s.bytes_peak;
		bytes_in += s.bytes_allocated;
		bytes_out += s.bytes_freed;
		if (!read_pool(rt, &pools)) {
			/* Without a pool a stack holds exactly its live blocks. */
			pools.reserved += s.bytes_outstanding;
			pools.reserved_peak += s.bytes_peak;
		}
	}
	set_stat(out.allocation[aggregate], blocks, blocks_peak, allocs, frees);
	set_stat(out.active[aggregate], blocks, blocks_peak, allocs, frees);
	set_stat(out.allocated_bytes[aggregate], bytes, bytes_peak, bytes_in, bytes_out);
	set_stat(out.active_bytes[aggregate], bytes, bytes_peak, bytes_in, bytes_out);
	set_stat(out.requested_bytes[aggregate], bytes, bytes_peak, bytes_in, bytes_out);
	set_stat(out.reserved_bytes[aggregate], pools.reserved, pools.reserved_peak, 0, 0);
	set_stat(out.segment[aggregate], pools.chunks, pools.chunks, pools.growths, pools.trimmed);
	set_stat(out.inactive_split[aggregate], pools.free_blocks, pools.free_blocks, 0, 0);
	set_stat(out.inactive_split_bytes[aggregate], pools.free_bytes, pools.free_bytes, 0, 0);
	out.num_ooms = static_cast<int64_t>(failures);
	if (device >= 0 && device < XDM_MAX_DEVICES)
		out.num_alloc_retries = retries[device].load(std::memory_order_relaxed);
	out.num_device_alloc = static_cast<int64_t>(pools.growths);
	out.num_device_free = static_cast<int64_t>(pools.trimmed);
	return out;
}

void reset_peaks(int device)
{
	for (const owned_runtime &o : device_runtimes(device)) {
		xdm_runtime *rt = o.rt;
		int pool = layer_index(rt, "pool");

		if (xdm_runtime_reset_peak(rt) != XDM_OK)
			throw_xdm_error("reset_peak_memory_stats on " + device_name(device));
		if (pool >= 0 && xdm_layer_attr_store(rt, static_cast<uint32_t>(pool),
						      "reserved_peak", "0") != XDM_OK)
			throw_xdm_error("reset_peak_memory_stats on " + device_name(device));
	}
}

void reset_totals(int device)
{
	for (const owned_runtime &o : device_runtimes(device))
		if (xdm_runtime_reset_totals(o.rt) != XDM_OK)
			throw_xdm_error("reset_accumulated_memory_stats on " + device_name(device));
	if (device >= 0 && device < XDM_MAX_DEVICES)
		retries[device].store(0, std::memory_order_relaxed);
}

void count_retry(int device)
{
	if (device >= 0 && device < XDM_MAX_DEVICES)
		retries[device].fetch_add(1, std::memory_order_relaxed);
}

/*
 * cuDNN's benchmark mode caps the workspace of the algorithms it tries by
 * this (torch's getMaxWorkspaceSize asks with *largest 0).  torch's
 * allocator answers the device's free memory, or its largest cached block
 * where that is larger: an optimistic guess, since a workspace is allocated
 * at once and comes back to the cache.  xdm answers the same way, from its
 * own state: the larger of the pool's largest free piece and what the
 * device has free, both capped by what the budget leaves (a caller's
 * nonzero guess stands in for the device's free memory, as in torch).
 * Answering the pool's free piece alone, as xdm did first, held cuDNN to
 * small-workspace algorithms: a conv net's step took 2.7 times as long as
 * under torch's allocator on the H200 (BENCHMARKS.md).
 */
size_t largest_block_now(int device, size_t guess)
{
	xdm_runtime *rt = runtime_of(device);
	int pool = layer_index(rt, "pool");
	int budget = layer_index(rt, "budget");
	uint64_t largest = guess, piece = 0, remaining;

	if (!largest) {
		c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));
		size_t free_bytes = 0, total = 0;

		if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
			largest = free_bytes;
		else
			(void)cudaGetLastError();
	}
	if (pool >= 0 && layer_number(rt, pool, "largest_free", &piece))
		largest = std::max(largest, piece);
	if (budget >= 0 && layer_number(rt, budget, "remaining", &remaining))
		largest = std::min(largest, remaining);
	return static_cast<size_t>(largest);
}

} // namespace xdm_torch
