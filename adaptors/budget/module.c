/* SPDX-License-Identifier: MIT */
/*
 * module.c - the budget adaptor: one byte limit per physical device, drawn
 * on by every process that stacks budget on it.  See xdm-budget(7).
 *
 *	stack = budget limit=80% | pool | cuda_async
 *
 * allocate reserves in the shared segment before it asks the upstream and
 * gives the reservation back if the upstream fails; deallocate asks the
 * upstream first and then gives back exactly the bytes of the block.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"

/* ---- lifetime ------------------------------------------------------------ */

/*
 * The key names a file in /dev/shm: "%u" stands for the device's UUID and
 * "%%" for '%', so that one [device *] line gives every device a budget of
 * its own; then anything but [A-Za-z0-9_-] becomes '_'.
 */
static enum xdm_status make_name(struct budget *b, const char *key)
{
	size_t pre = strlen(BUDGET_NAME_PREFIX), len = 0;
	char expanded[BUDGET_KEY_MAX + 1];

	for (const char *k = key; *k; k++) {
		const char *piece = k;
		size_t n = 1;

		if (k[0] == '%' && k[1] == 'u') {
			piece = b->uuid;
			n = strlen(b->uuid);
			k++;
		} else if (k[0] == '%' && k[1] == '%') {
			k++;
		} else if (k[0] == '%') {
			return xdm_error_set(XDM_E_CONFIG, "budget: in key '%s', '%%' must be "
					     "followed by 'u' (the device's UUID) or '%%'", key);
		}
		if (len + n > BUDGET_KEY_MAX)
			return xdm_error_set(XDM_E_CONFIG, "budget: key must be 1 to %d characters "
					     "(after %%u is replaced), not '%s'", BUDGET_KEY_MAX,
					     key);
		memcpy(expanded + len, piece, n);
		len += n;
	}
	if (len == 0)
		return xdm_error_set(XDM_E_CONFIG, "budget: key must be 1 to %d characters",
				     BUDGET_KEY_MAX);
	memcpy(b->name, BUDGET_NAME_PREFIX, pre);
	for (size_t i = 0; i < len; i++) {
		char c = expanded[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-';

		b->name[pre + i] = ok ? c : '_';
	}
	b->name[pre + len] = '\0';
	return XDM_OK;
}

static enum xdm_status budget_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const struct xdm_device_info *dev = xdm_layer_device(self);
	const char *key = xdm_params_string(params, "key");
	struct budget *b;
	enum xdm_status st;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "budget: no memory for its state");
	snprintf(b->uuid, sizeof(b->uuid), "%s", dev->uuid);
	b->device_total = dev->total_bytes;
	b->configured_limit = xdm_params_size(params, "limit");
	b->credit_max = xdm_params_size(params, "credit");
	if (b->credit_max > BUDGET_CREDIT_MAX) {
		st = xdm_error_set(XDM_E_CONFIG, "budget: credit must be at most 1G, not %" PRIu64,
				   b->credit_max);
		goto fail;
	}
	b->pid = getpid();

	st = make_name(b, key && *key ? key : dev->uuid);
	if (st)
		goto fail;
	err = budget_proc_identity(b->pid, &b->start_time, NULL);
	if (err) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED,
				   "budget: cannot read this process's start time from "
				   "/proc/self/stat (%s): it is how dead processes are told from "
				   "live ones",
				   strerror(-err));
		goto fail;
	}
	st = budget_credit_init(b);
	if (st)
		goto fail;
	st = budget_attach(b);
	if (st)
		goto fail_credit;
	xdm_layer_set_priv(self, b);
	return XDM_OK;

fail_credit:
	budget_credit_fini(b);
fail:
	free(b);
	return st;
}

static void budget_fini(struct xdm_layer *self)
{
	struct budget *b = budget_of(self);

	if (!b)
		return;
	xdm_layer_set_priv(self, NULL);
	budget_credit_fini(b);
	budget_detach(b);
	free(b);
}

/* ---- the allocation path ----------------------------------------------- */

/*
 * The slow path of a refusal: dead processes may hold what is missing, so
 * reclaim them and ask once more.  The answer of that second ask is final.
 *
 * A scan reads /proc for every attached process under the lock, tens of
 * microseconds, and a budget under pressure refuses all the time; so a
 * refusal scans only when no scan has started in the last
 * BUDGET_RESCAN_NS, and a thread that queued on the lock behind a scan that
 * started after it was refused (that scan saw every process dead by then)
 * does not scan again.  A process that dies is thus reclaimed by the first
 * refusal that comes a millisecond after the latest scan, or by the next
 * attach.
 */
static bool reserve_after_reclaim(struct budget *b, uint64_t n, uint64_t *remaining)
{
	struct budget_shm *s = b->shm;
	uint64_t scans = atomic_load_explicit(&s->scans, memory_order_relaxed);
	uint64_t last = atomic_load_explicit(&s->last_scan_ns, memory_order_relaxed);

	if (budget_now_ns() - last >= BUDGET_RESCAN_NS && budget_lock(s) == 0) {
		if (atomic_load_explicit(&s->scans, memory_order_relaxed) == scans)
			budget_reclaim_locked(s, NULL, NULL);
		budget_unlock(s);
	}
	return budget_charge(b, n, remaining);
}

static enum xdm_status refuse(struct budget *b, size_t requested, uint64_t remaining,
			      const char *why)
{
	uint64_t limit = atomic_load_explicit(&b->shm->limit, memory_order_relaxed);

	atomic_fetch_add_explicit(&b->shm->refusals, 1, memory_order_relaxed);
	return xdm_error_set_budget(requested, remaining,
				    "budget: %s%zu bytes requested, %" PRIu64 " remaining of "
				    "limit %" PRIu64 " on device %s",
				    why, requested, remaining, limit, b->uuid);
}

/* Charge, then allocate from the upstream: anywhere, or at exactly at. */
static enum xdm_status charge_and_allocate(struct xdm_layer *self, bool placed, uint64_t at,
					   size_t bytes, xdm_stream_id stream, const char *tag,
					   struct xdm_block *out)
{
	struct budget *b = budget_of(self);
	struct xdm_layer *up = xdm_layer_upstream(self);
	uint64_t remaining;
	enum xdm_status st;

	if (!budget_charge(b, bytes, &remaining) && !reserve_after_reclaim(b, bytes, &remaining))
		return refuse(b, bytes, remaining, "");

	st = placed ? xdm_up_allocate_at(up, at, bytes, stream, tag, out) :
		      xdm_up_allocate(up, bytes, stream, tag, out);
	if (st) {
		budget_uncharge(b, bytes);
		return st;
	}
	if (out->bytes == bytes)
		return XDM_OK;

	/* Count exactly what the block holds, so deallocate gives back
	 * exactly what was reserved. */
	if (out->bytes < bytes) {
		budget_uncharge(b, bytes - out->bytes);
		return XDM_OK;
	}
	if (budget_charge(b, out->bytes - bytes, &remaining))
		return XDM_OK;
	xdm_up_deallocate(up, out);
	budget_uncharge(b, bytes);
	return refuse(b, out->bytes, remaining + bytes, "the layer below rounds up: ");
}

static enum xdm_status budget_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				       const char *tag, struct xdm_block *out)
{
	return charge_and_allocate(self, false, 0, bytes, stream, tag, out);
}

static enum xdm_status budget_allocate_at(struct xdm_layer *self, uint64_t ptr, size_t bytes,
					  xdm_stream_id stream, const char *tag,
					  struct xdm_block *out)
{
	return charge_and_allocate(self, true, ptr, bytes, stream, tag, out);
}

/*
 * The budget keeps a count of bytes, not a record per block, so under a
 * pool it can pass a virtual-memory upstream's granularity up: a range
 * given back in parts uncharges exactly the bytes of each part.
 */
static uint64_t budget_granularity(struct xdm_layer *self)
{
	return xdm_up_granularity(xdm_layer_upstream(self));
}

/*
 * The core consumes a block whatever the layers below report (see
 * xdm_deallocate), so its bytes come back whatever the upstream says.
 */
static enum xdm_status budget_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct budget *b = budget_of(self);
	size_t bytes = block->bytes;
	enum xdm_status st;

	st = xdm_up_deallocate(xdm_layer_upstream(self), block);
	budget_uncharge(b, bytes);
	return st;
}

/* ---- the ops table ------------------------------------------------------- */

static const struct xdm_param_spec budget_params[] = {
	{
		.name = "limit",
		.type = XDM_PARAM_SIZE,
		.default_value = "100%",
		.help = "bytes every process on the device may hold together (K/M/G/T, % of "
			"the device's memory, max); the first process to attach sets it",
	},
	{
		.name = "key",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "the name of the shared segment, /xdm-budget-<key>; default: the "
			"device's UUID",
	},
	{
		.name = "credit",
		.type = XDM_PARAM_SIZE,
		.default_value = "0",
		.help = "bytes each thread may draw from the limit ahead of its allocations, "
			"so that threads do not meet on the shared counter (credit is counted "
			"as used); 0: every allocation and free updates the shared counter",
	},
	{ .name = NULL },
};

static const struct xdm_ops budget_ops = {
	XDM_OPS_HEADER("budget", XDM_KIND_ADAPTOR),
	.description = "one byte limit per physical device, shared by every process on it",
	.params = budget_params,
	.attrs = budget_attrs,
	.init = budget_init,
	.fini = budget_fini,
	.allocate = budget_allocate,
	.allocate_at = budget_allocate_at,
	.granularity = budget_granularity,
	.deallocate = budget_deallocate,
	/* Everything else is forwarded to the upstream by the core. */
	.attr_group = "budget",
};

XDM_MODULE(&budget_ops)
