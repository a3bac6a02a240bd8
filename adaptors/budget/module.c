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

/*
 * The directory of the segment: an absolute path to a directory that
 * nobody but root and this user can change, or a sticky one like
 * /dev/shm.  Anyone else who can write there could put a file of their
 * own under the segment's name between our checks.
 */
static enum xdm_status use_dir(struct budget *b, const char *dir)
{
	struct stat st;

	if (dir[0] != '/')
		return xdm_error_set(XDM_E_CONFIG, "budget: dir must be an absolute path, not '%s'",
				     dir);
	if (stat(dir, &st) != 0)
		return xdm_error_set(XDM_E_CONFIG, "budget: dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return xdm_error_set(XDM_E_CONFIG, "budget: dir %s is not a directory", dir);
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: dir %s belongs to uid %u, who could replace the "
				     "segment: use a directory of root's or of uid %u",
				     dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: dir %s is writable by others (mode %03o) without the "
				     "sticky bit: any of them could replace the segment",
				     dir, (unsigned)(st.st_mode & 0777));
	if (strlen(dir) + strlen(b->name) >= sizeof(b->path))
		return xdm_error_set(XDM_E_CONFIG, "budget: dir %s is too long", dir);
	memcpy(b->dir, dir, strlen(dir) + 1);
	memcpy(b->path, dir, strlen(dir));
	memcpy(b->path + strlen(dir), b->name, strlen(b->name) + 1);
	return XDM_OK;
}

/* The group this process joins, and its limit (see join_group). */
static enum xdm_status use_group(struct budget *b, const struct xdm_params *params)
{
	const char *name = param_or_env(params, "group", "XDM_BUDGET_GROUP");
	const char *limit = param_or_env(params, "group_limit", "XDM_BUDGET_GROUP_LIMIT");

	b->group_limit = UINT64_MAX;
	if (!name) {
		if (limit)
			return xdm_error_set(XDM_E_CONFIG, "budget: group_limit without a group: "
					     "name one with group= or XDM_BUDGET_GROUP");
		return XDM_OK;
	}
	if (strlen(name) >= sizeof(b->group_name) || strchr(name, '\n'))
		return xdm_error_set(XDM_E_CONFIG, "budget: a group name is one line of at most %d "
				     "bytes, not '%s'", BUDGET_GROUP_NAME_MAX - 1, name);
	snprintf(b->group_name, sizeof(b->group_name), "%s", name);
	if (limit && xdm_parse_size(limit, b->device_total, &b->group_limit) != XDM_OK)
		return xdm_error_set(XDM_E_CONFIG, "budget: group_limit '%s' is not a size "
				     "(K/M/G/T, %% of the device, max)", limit);
	return XDM_OK;
}

/*
 * credit=auto (the default), credit=0 (none: every call is exact in the
 * segment) or credit=SIZE (a fixed credit per thread); credit.c has the
 * rules.
 */
static enum xdm_status use_credit(struct budget *b, const char *text)
{
	uint64_t size;

	if (!text || !*text || strcmp(text, "auto") == 0) {
		b->credit_auto = true;
		b->credit_max = BUDGET_CREDIT_AUTO_MAX;
		return XDM_OK;
	}
	if (xdm_parse_size(text, b->device_total, &size) != XDM_OK)
		return xdm_error_set(XDM_E_CONFIG, "budget: credit must be auto, 0 or a size "
				     "(like 64K or 1M), not '%s'", text);
	if (size > BUDGET_CREDIT_MAX)
		return xdm_error_set(XDM_E_CONFIG,
				     "budget: credit must be at most 1G, not %" PRIu64, size);
	b->credit_max = size;
	return XDM_OK;
}

static enum xdm_status budget_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const struct xdm_device_info *dev = xdm_layer_device(self);
	const char *key = xdm_params_string(params, "key");
	const char *dir = param_or_env(params, "dir", "XDM_BUDGET_DIR");
	struct budget *b;
	enum xdm_status st;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "budget: no memory for its state");
	b->fd = -1;
	b->serial = xdm_layer_serial(self);
	b->upstream = xdm_layer_upstream(self);
	snprintf(b->uuid, sizeof(b->uuid), "%s", dev->uuid);
	b->device_total = dev->total_bytes;
	b->configured_limit = xdm_params_size(params, "limit");
	st = use_credit(b, xdm_params_string(params, "credit"));
	if (st)
		goto fail;
	b->pid = getpid();

	st = make_name(b, key && *key ? key : dev->uuid);
	if (!st)
		st = use_dir(b, dir ? dir : BUDGET_DEFAULT_DIR);
	if (!st)
		st = use_group(b, params);
	if (st)
		goto fail;
	err = budget_self_identity(param_or_env(params, "container", "XDM_BUDGET_CONTAINER"),
				   &b->start_time, &b->pidns, b->comm, b->container);
	if (err) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED,
				   "budget: cannot read this process's start time from "
				   "/proc/self/stat (%s): with its pid it names the process's "
				   "slot",
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
			budget_reclaim_locked(s, b->fd, b->slot, NULL, NULL);
		budget_unlock(s);
	}
	return budget_charge(b, n, remaining);
}

static uint64_t room(_Atomic uint64_t *used, _Atomic uint64_t *limit)
{
	uint64_t u = atomic_load_explicit(used, memory_order_relaxed);
	uint64_t l = atomic_load_explicit(limit, memory_order_relaxed);

	return u < l ? l - u : 0;
}

/*
 * The sentence names who refused: the device's limit, or the group's.  A
 * process in a group is told both figures, read as the refusal saw them
 * (the group refused when it has less room than was asked).  Every refusal
 * counts in the device's refusals; the group's count its own.
 */
static enum xdm_status refuse(struct budget *b, size_t requested, uint64_t remaining,
			      const char *why)
{
	struct budget_shm *s = b->shm;
	struct budget_group *g = b->group;
	uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
	uint64_t device_room = room(&s->used, &s->limit), group_room, group_limit;

	atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
	if (!g)
		return xdm_error_set_budget(requested, remaining,
					    "budget: %s%zu bytes requested, %" PRIu64 " remaining of "
					    "limit %" PRIu64 " on device %s",
					    why, requested, remaining, limit, b->uuid);
	group_room = room(&g->used, &g->limit);
	group_limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
	if (group_room < requested && group_room <= device_room) {
		atomic_fetch_add_explicit(&g->refusals, 1, memory_order_relaxed);
		return xdm_error_set_budget(requested, remaining,
					    "budget: %sgroup '%s' refused: %zu bytes requested, "
					    "%" PRIu64 " remaining of the group's limit %" PRIu64
					    " (the device %s has %" PRIu64 " remaining of %" PRIu64
					    ")",
					    why, b->group_name, requested, group_room, group_limit,
					    b->uuid, device_room, limit);
	}
	return xdm_error_set_budget(requested, remaining,
				    "budget: %sthe device refused: %zu bytes requested, %" PRIu64
				    " remaining of limit %" PRIu64 " on device %s (group '%s' has "
				    "%" PRIu64 " remaining of %" PRIu64 ")",
				    why, requested, device_room, limit, b->uuid, b->group_name,
				    group_room, group_limit);
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

	if (reserve_after_reclaim(b, bytes, &remaining))
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
		budget_uncharge(b, bytes);
		return st;
	}
	if (out->bytes < bytes) {
		budget_uncharge(b, bytes - out->bytes);
		return XDM_OK;
	}
	if (budget_charge(b, out->bytes - bytes, &remaining))
		return XDM_OK;
	xdm_up_deallocate(xdm_layer_upstream(self), out);
	budget_uncharge(b, bytes);
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

	if (!budget_charge(b, bytes, &remaining)) {
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
		.name = "dir",
		.type = XDM_PARAM_STRING,
		.default_value = NULL,
		.help = "the directory of the shared segment, one that processes in other "
			"containers see too; default: $XDM_BUDGET_DIR, else /dev/shm",
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
