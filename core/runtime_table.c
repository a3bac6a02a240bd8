/* SPDX-License-Identifier: MIT */
/*
 * runtime_table.c - the process's one table: a runtime per device ordinal,
 * the registered modules, and the configuration the singletons were built
 * from.  Nothing else in libxdm is global (but the per-thread error detail).
 *
 * A later xdm_runtime_get() is one acquire load.  The first ones for an
 * ordinal serialise on the table lock and build once; a failed build stores
 * nothing, so a later call may try again (after the config is fixed).
 */
#include "config.h"

#include <stdlib.h>

#include "core/internal.h"

static struct xdm_runtime_table table = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.modules = { .lock = PTHREAD_MUTEX_INITIALIZER },
	.tree_lock = PTHREAD_RWLOCK_INITIALIZER,
	.mount = { .lock = PTHREAD_MUTEX_INITIALIZER },
	.tags = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

struct xdm_runtime_table *xdm_table(void)
{
	return &table;
}

uint64_t xdm_runtime_serial(void)
{
	return atomic_fetch_add_explicit(&table.serials, 1, memory_order_relaxed) + 1;
}

static enum xdm_status build_singleton(uint32_t ordinal, struct xdm_runtime **out)
{
	struct xdm_config *cfg = table.config;
	enum xdm_status st;

	if (!cfg) {
		st = xdm_config_load(&cfg);
		if (st)
			return st;
	}
	st = xdm_runtime_build(ordinal, cfg, NULL, NULL, true, out);
	if (st == XDM_OK)
		table.config = cfg;	/* kept: it describes the live runtimes */
	else if (cfg != table.config)
		xdm_config_free(cfg);
	return st;
}

enum xdm_status xdm_runtime_get(uint32_t ordinal, struct xdm_runtime **out)
{
	struct xdm_runtime *rt;
	enum xdm_status st = XDM_OK;

	if (!out)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_get: result is NULL");
	if (ordinal >= XDM_MAX_DEVICES)
		return xdm_error_set(XDM_E_NO_DEVICE, "device ordinal %u is past the maximum of %d",
				     ordinal, XDM_MAX_DEVICES - 1);
	rt = atomic_load_explicit(&table.runtimes[ordinal], memory_order_acquire);
	if (rt) {
		*out = rt;
		return XDM_OK;
	}
	pthread_mutex_lock(&table.lock);
	rt = atomic_load_explicit(&table.runtimes[ordinal], memory_order_relaxed);
	if (!rt) {
		st = build_singleton(ordinal, &rt);
		if (st == XDM_OK) {
			xdm_tree_publish(rt);
			atomic_store_explicit(&table.runtimes[ordinal], rt, memory_order_release);
		}
	}
	pthread_mutex_unlock(&table.lock);
	if (st)
		return st;
	/* Outside the table lock: the server's first requests may need it. */
	xdm_mount_configured(table.config);
	*out = rt;
	return XDM_OK;
}

enum xdm_status xdm_runtime_create(uint32_t ordinal, const char *platform, const char *stack,
				   struct xdm_runtime **out)
{
	struct xdm_config *cfg;
	enum xdm_status st;

	if (!out)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_create: result is NULL");
	/* Read afresh: a private runtime follows the config as it is now. */
	st = xdm_config_load(&cfg);
	if (st)
		return st;
	st = xdm_runtime_build(ordinal, cfg, platform, stack, false, out);
	if (st == XDM_OK) {
		xdm_tree_publish(*out);
		xdm_mount_configured(cfg);
	}
	xdm_config_free(cfg);
	return st;
}

enum xdm_status xdm_runtime_destroy(struct xdm_runtime *rt)
{
	if (!rt)
		return xdm_error_set(XDM_E_INVALID, "xdm_runtime_destroy: runtime is NULL");
	if (rt->singleton)
		return xdm_error_set(XDM_E_INVALID,
				     "xdm_runtime_destroy: the runtime of device %u is the "
				     "process singleton and lives until exit", rt->ordinal);
	/* Their frees would hand the events back to a runtime that is gone. */
	if (atomic_load_explicit(&rt->peer_uses, memory_order_acquire))
		return xdm_error_set(XDM_E_INVALID,
				     "xdm_runtime_destroy: %llu uses recorded on the streams of "
				     "device %u are still kept by blocks of other devices; free "
				     "those blocks first (a free held for a graph capture keeps "
				     "its uses until xdm_reap_pending() of the block's device)",
				     (unsigned long long)atomic_load(&rt->peer_uses), rt->ordinal);
	xdm_tree_unpublish(rt);
	xdm_runtime_teardown(rt);
	return XDM_OK;
}
