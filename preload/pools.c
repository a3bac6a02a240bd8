/* SPDX-License-Identifier: MIT */
/*
 * pools.c - what the driver's memory pools keep.
 *
 * A stream-ordered allocation comes from a pool, and a pool with a release
 * threshold (torch's cudaMallocAsync backend sets it to the maximum, XLA's
 * async allocator too) keeps the memory of freed blocks for later ones.
 * The shim charges each allocation its request and gives it back at the
 * free, so what a pool keeps beyond its live blocks is memory the device
 * no longer has and the budget would not see.  So each device also
 * carries a charge for its pools' slack: the bytes a pool reserves minus
 * the bytes it lends, read from the driver's pool attributes.
 *
 * Reading them is two driver calls per pool, and the driver's attribute
 * reads are slow (looking every 64th call of a thread made an H200's
 * cuMemAllocAsync pair twice as slow), so it is done at a bounded rate:
 * at most once per PRELOAD_POOL_LOOK_NS per device, the clock itself read
 * only every PRELOAD_POOL_LOOK_EVERY stream-ordered calls of a thread;
 * and whenever the budget is about to refuse, when the pools are first
 * trimmed (cuMemPoolTrimTo) so that what they keep goes back to the
 * device and to the budget before anyone is refused.  Between two looks
 * the slack charged is a sample; a slack the budget has no room for even
 * after a trim stays uncharged until the next look (xdm-preload(7)).
 *
 * The pools known are a device's current pool, found at its first
 * stream-ordered allocation, and every pool cuMemAllocFromPoolAsync names,
 * up to PRELOAD_POOLS of them.
 */
#include "config.h"

#include "preload/preload.h"

typedef CUresult (*cu_mem_pool_trim_to_fn)(CUmemoryPool pool, size_t keep);
typedef CUresult (*cu_device_get_mem_pool_fn)(CUmemoryPool *pool, CUdevice dev);

/* The current pool of device ordinal: the one cuMemAllocAsync draws on. */
static CUmemoryPool current_pool(int ordinal)
{
	cu_device_get_mem_pool_fn get = (cu_device_get_mem_pool_fn)preload_driver_symbol(
		"cuDeviceGetMemPool");
	CUmemoryPool pool = NULL;

	if (!get)
		get = (cu_device_get_mem_pool_fn)preload_driver_symbol(
			"cuDeviceGetDefaultMemPool");
	if (!get || get(&pool, ordinal) != CUDA_SUCCESS)
		return NULL;
	return pool;
}

void preload_pool_seen(struct preload_device *d, CUmemoryPool pool)
{
	if (!pool) {
		if (atomic_load_explicit(&d->current_pool_known, memory_order_acquire))
			return;
		pool = current_pool((int)preload_device_index(d));
		atomic_store_explicit(&d->current_pool_known, true, memory_order_release);
		if (!pool)
			return;
	}
	for (unsigned int i = 0; i < PRELOAD_POOLS; i++) {
		CUmemoryPool seen = atomic_load_explicit(&d->pools[i], memory_order_acquire);

		if (seen == pool)
			return;
		if (!seen && atomic_compare_exchange_strong_explicit(&d->pools[i], &seen, pool,
								     memory_order_acq_rel,
								     memory_order_acquire))
			return;
		if (seen == pool)
			return;
	}
}

/* Bytes the known pools reserve beyond what they lend; trim them first. */
static uint64_t pools_slack(struct preload_device *d, bool trim)
{
	cu_mem_pool_get_attribute_fn get = (cu_mem_pool_get_attribute_fn)preload_driver_symbol(
		"cuMemPoolGetAttribute");
	cu_mem_pool_trim_to_fn trim_to = (cu_mem_pool_trim_to_fn)preload_driver_symbol(
		"cuMemPoolTrimTo");
	uint64_t slack = 0;

	if (!get)
		return 0;
	for (unsigned int i = 0; i < PRELOAD_POOLS; i++) {
		CUmemoryPool pool = atomic_load_explicit(&d->pools[i], memory_order_acquire);
		cuuint64_t reserved = 0, used = 0;

		if (!pool)
			break;
		if (trim && trim_to)
			trim_to(pool, 0);
		if (get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
		    get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
			continue;
		if (reserved > used)
			slack += reserved - used;
	}
	return slack;
}

/*
 * Charge the pools' slack as it is now, trimming them first if trim; one
 * thread at a time (another that finds a look under way goes on: the look
 * under way will do).  Returns whether the charge went down.
 */
static bool look(struct preload_device *d, bool trim)
{
	uint64_t slack, charged, remaining;
	bool lower = false;

	if (atomic_load_explicit(&d->state, memory_order_acquire) != PRELOAD_DEV_READY ||
	    !atomic_load_explicit(&d->pools[0], memory_order_acquire) ||
	    atomic_exchange_explicit(&d->looking, true, memory_order_acquire))
		return false;
	charged = atomic_load_explicit(&d->pool_slack, memory_order_relaxed);
	slack = pools_slack(d, trim);
	if (slack > charged && !budget_reserve(&d->acct.m, slack - charged, &remaining)) {
		/* No room for what the pools keep: have them give it back. */
		if (!trim)
			slack = pools_slack(d, true);
		/* Still no room: the rest is charged at a later look. */
		if (slack > charged &&
		    (trim || !budget_reserve(&d->acct.m, slack - charged, &remaining)))
			slack = charged;
	}
	if (slack < charged) {
		budget_release(&d->acct.m, charged - slack);
		lower = true;
	}
	atomic_store_explicit(&d->pool_slack, slack, memory_order_relaxed);
	atomic_store_explicit(&d->looking, false, memory_order_release);
	return lower;
}

void preload_pools_tick(struct preload_device *d)
{
	static _Thread_local unsigned int calls;
	uint64_t now, last;

	if (++calls % PRELOAD_POOL_LOOK_EVERY)
		return;
	now = budget_now_ns();
	last = atomic_load_explicit(&d->last_look_ns, memory_order_relaxed);
	if (last && now - last < PRELOAD_POOL_LOOK_NS)
		return;
	atomic_store_explicit(&d->last_look_ns, now, memory_order_relaxed);
	look(d, false);
}

bool preload_pools_give_back(struct preload_device *d)
{
	return look(d, true);
}
