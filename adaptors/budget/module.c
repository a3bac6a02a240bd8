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
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"

/* ---- lifetime ------------------------------------------------------------ */

/*
 * A parameter, else its environment variable, else NULL: the config names
 * what a deployment fixes, the environment what a launcher (a pod spec, a
 * test runner) gives each process.
 */
static const char *param_or_env(const struct xdm_params *params, const char *name,
				const char *env)
{
	const char *v = xdm_params_string(params, name);

	if (v && *v)
		return v;
	v = getenv(env);
	return v && *v ? v : NULL;
}

static enum xdm_status budget_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const struct xdm_device_info *dev = xdm_layer_device(self);
	const char *key = xdm_params_string(params, "key");
	const char *dir = param_or_env(params, "dir", "XDM_BUDGET_DIR");
	struct budget *b;
	enum xdm_status st;

	b = calloc(1, sizeof(*b));
	if (!b)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "budget: no memory for its state");
	b->acct.m.fd = -1;
	b->acct.m.kind = BUDGET_SLOT_LIBXDM;
	b->acct.serial = xdm_layer_serial(self);
	b->upstream = xdm_layer_upstream(self);
	snprintf(b->acct.m.uuid, sizeof(b->acct.m.uuid), "%s", dev->uuid);
	b->acct.m.device_total = dev->total_bytes;
	b->acct.m.configured_limit = xdm_params_size(params, "limit");
	st = budget_credit_use(&b->acct, "budget", xdm_params_string(params, "credit"));
	if (st)
		goto fail;
	st = budget_member_name(&b->acct.m, "budget", key && *key ? key : dev->uuid);
	if (!st)
		st = budget_member_dir(&b->acct.m, "budget", dir ? dir : budget_default_dir());
	if (!st)
		st = budget_member_group(&b->acct.m, "budget",
					 param_or_env(params, "group", "XDM_BUDGET_GROUP"),
					 param_or_env(params, "group_limit",
						      "XDM_BUDGET_GROUP_LIMIT"));
	if (!st)
		st = budget_member_identity(&b->acct.m, "budget",
					    param_or_env(params, "container",
							 "XDM_BUDGET_CONTAINER"));
	if (st)
		goto fail;
	st = budget_credit_init(&b->acct);
	if (st)
		goto fail;
	st = budget_member_attach(&b->acct.m);
	if (st)
		goto fail_credit;
	xdm_layer_set_priv(self, b);
	return XDM_OK;

fail_credit:
	budget_credit_fini(&b->acct);
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
	budget_credit_fini(&b->acct);
	budget_member_detach(&b->acct.m);
	free(b);
}

/* ---- the allocation path ----------------------------------------------- */

/*
 * A refusal in the sentence of the segment's library, as this thread's
 * error.
 */
static enum xdm_status refuse(struct budget *b, size_t requested, uint64_t remaining,
			      const char *why)
{
	char sentence[512];

	budget_member_refusal(&b->acct.m, "budget", requested, remaining, why, sentence,
			      sizeof(sentence));
	return xdm_error_set_budget(requested, remaining, "%s", sentence);
}

/*
 * A charge the thread's credit and the segment refused: reclaim the dead
 * and ask once more, or refuse.  Out of line, so that the allocation path
 * keeps only what a served charge needs.
 */
static __attribute__((noinline, cold)) enum xdm_status charge_again(struct budget *b,
								     size_t bytes)
{
	uint64_t remaining;

	budget_member_reclaim_dead(&b->acct.m);
	if (budget_charge(&b->acct, bytes, &remaining))
		return XDM_OK;
	return refuse(b, bytes, remaining, "");
}

/*
 * The upstream failed (st), or its block is not bytes long: give the
 * charge back, or count exactly what the block holds, so that deallocate
 * gives back exactly what was reserved.  Out of line, as charge_again.
 */
static __attribute__((noinline)) enum xdm_status settle(struct xdm_layer *self,
							enum xdm_status st, size_t bytes,
							struct xdm_block *out)
{
	struct budget *b = budget_of(self);
	uint64_t remaining;

	if (st) {
		budget_uncharge(&b->acct, bytes);
		return st;
	}
	if (out->bytes < bytes) {
		budget_uncharge(&b->acct, bytes - out->bytes);
		return XDM_OK;
	}
	if (budget_charge(&b->acct, out->bytes - bytes, &remaining))
		return XDM_OK;
	xdm_up_deallocate(xdm_layer_upstream(self), out);
	budget_uncharge(&b->acct, bytes);
	return refuse(b, out->bytes, remaining + bytes, "the layer below rounds up: ");
}

/*
 * Charge, then allocate from the upstream: anywhere, or at exactly at.
 * Inlined into both callers, so that placed is a constant in each.
 */
static inline __attribute__((always_inline)) enum xdm_status
charge_and_allocate(struct xdm_layer *self, bool placed, uint64_t at, size_t bytes,
		    xdm_stream_id stream, const char *tag, struct xdm_block *out)
{
	struct budget *b = budget_of(self);
	struct xdm_layer *up;
	uint64_t remaining;
	enum xdm_status st;

	if (!budget_charge(&b->acct, bytes, &remaining)) {
		st = charge_again(b, bytes);
		if (st)
			return st;
	}
	up = b->upstream;
	st = placed ? xdm_up_allocate_at(up, at, bytes, stream, tag, out) :
		      xdm_up_allocate_inline(up, bytes, stream, tag, out);
	if (!st && out->bytes == bytes)
		return XDM_OK;
	return settle(self, st, bytes, out);
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

	st = xdm_up_deallocate_inline(b->upstream, block);
	budget_uncharge(&b->acct, bytes);
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
		.name = "dir",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "the directory of the shared segment, one that processes in other "
			"containers see too; default: $XDM_BUDGET_DIR, else the budget "
			"directory the users of the machine share (" BUDGET_SHARED_DIR ") "
			"where it exists, else /dev/shm",
	},
	{
		.name = "group",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "a group inside the device's budget (a pod, a job, a test worker), "
			"with a limit of its own; default: $XDM_BUDGET_GROUP, else none",
	},
	{
		.name = "group_limit",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "bytes the group's processes may hold together (K/M/G/T, %, max); "
			"the group's first process sets it; default: "
			"$XDM_BUDGET_GROUP_LIMIT, else max",
	},
	{
		.name = "container",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "the name xdmctl ps shows for this process's container; default: "
			"$XDM_BUDGET_CONTAINER, else the process's cgroup",
	},
	{
		.name = "credit",
		.type = XDM_PARAM_STRING,
		.default_value = "auto",
		.help = "what each thread may draw from the limit ahead of its allocations, "
			"so that threads do not meet on the shared counter (credit is counted "
			"as used): auto, a size that follows the thread's demand (64K doubling "
			"to 16M, at most 1/16 of the room left, halved when frees overflow it); "
			"SIZE, a fixed size (at most 1G); 0: none, every allocation and free "
			"updates the shared counter exactly",
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
