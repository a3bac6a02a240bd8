// SPDX-License-Identifier: MIT
/*
 * fraction.cpp - torch's per-process memory fraction over every pool of a
 * device: the device's runtime and its private pools (graphs', MemPools')
 * together.
 *
 * torch's caching allocator counts what all its pools of a device hold
 * against the fraction.  Under xdm each pool is a runtime of its own, whose
 * pool layer has its own max.  So while private pools live, the runtime
 * about to allocate gets as its max what the fraction leaves after what the
 * device's other runtimes reserve; a growth past it is refused, as torch's
 * is.  Reserved bytes are read as samples: two runtimes growing at the same
 * moment may together pass the fraction by up to one growth each, which
 * xdm-torch(7) says.  Where no private pool lives, the device's runtime
 * keeps the whole fraction as its max and nothing is done per allocation.
 */
#include "config.h"

#include <cinttypes>
#include <cstdio>

#include "glue.hpp"

namespace xdm_torch {

namespace {

/* Bytes the fraction allows each device in all; 0: no fraction set. */
std::atomic<uint64_t> allowed[XDM_MAX_DEVICES];
/* Whether the device runtime's max was lowered for a private pool's sake. */
std::atomic<bool> lowered[XDM_MAX_DEVICES];

/* What rt holds from the device: its pool's reserved, or without a pool its live blocks. */
static uint64_t reserved_of(xdm_runtime *rt)
{
	uint64_t bytes = 0;
	int pool = layer_index(rt, "pool");
	xdm_stats s;

	if (pool >= 0) {
		layer_number(rt, pool, "reserved", &bytes);
		return bytes;
	}
	xdm_runtime_stats(rt, &s);
	return s.bytes_outstanding;
}

/* Set the max of rt's pool; false (the thread's error set) when refused. */
bool store_max(xdm_runtime *rt, uint64_t bytes)
{
	int pool = layer_index(rt, "pool");
	char value[32];

	if (pool < 0)
		return true;
	/* The pool reads max=0 as "no bound"; nothing left allows nothing. */
	std::snprintf(value, sizeof(value), "%" PRIu64, bytes ? bytes : 1);
	return xdm_layer_attr_store(rt, static_cast<uint32_t>(pool), "max", value) == XDM_OK;
}

bool valid(int device)
{
	return device >= 0 && device < XDM_MAX_DEVICES;
}

} // namespace

void set_fraction_bytes(int device, uint64_t bytes)
{
	if (!valid(device))
		return;
	allowed[device].store(bytes, std::memory_order_release);
	lowered[device].store(false, std::memory_order_release);
}

uint64_t fraction_bytes(int device)
{
	return valid(device) ? allowed[device].load(std::memory_order_acquire) : 0;
}

void share_fraction(int device, xdm_runtime *rt)
{
	uint64_t limit = fraction_bytes(device), others = 0;
	xdm_runtime *own;

	if (limit == 0)
		return;
	own = built_runtime(device);
	if (!private_pools_live()) {
		/* The device's runtime alone again: it gets the whole fraction back. */
		if (rt == own && lowered[device].exchange(false, std::memory_order_acq_rel))
			store_max(rt, limit);
		return;
	}
	/* Read under the pool table's lock: a pool released meanwhile is not freed under us. */
	others = reserved_by_others(device, rt, reserved_of);
	if (rt == own)
		lowered[device].store(true, std::memory_order_release);
	/* A failed store leaves the max as it was: the allocation is bounded as before. */
	store_max(rt, limit > others ? limit - others : 0);
}

} // namespace xdm_torch
