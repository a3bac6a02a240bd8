/* SPDX-License-Identifier: MIT */
/*
 * attrs.c - the budget's files in the introspection tree.
 *
 * Every value is read from the segment's atomics without its lock: the
 * lock is held across syscalls by a reclaim, and a reader must never wait
 * on that (doc/design.md, "Serving the tree from inside the process").
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "budget.h"

/* Longest value a limit write may carry: "18446744073709551615\n" and then some. */
#define LIMIT_TEXT_MAX 64

static int show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int show_text(char *buf, size_t len, const char *text)
{
	int n = snprintf(buf, len, "%s\n", text);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static uint64_t load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static int limit_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&budget_of(self)->acct.m.shm->limit));
}

/*
 * Lowering below the usage refuses new allocations until enough is freed;
 * raising admits at once: the allocation path reads the limit every time.
 * Under the segment's lock, so that the limit and its check word change
 * together: stores race only with each other, and the last one wins.
 */
/* A written size, as xdm_parse_size reads it; -EINVAL for anything else. */
static int parse_limit(const struct budget *b, const char *buf, size_t len, uint64_t *v)
{
	char text[LIMIT_TEXT_MAX];

	if (len == 0 || len >= sizeof(text) || memchr(buf, '\0', len))
		return -EINVAL;
	memcpy(text, buf, len);
	text[len] = '\0';
	return xdm_parse_size(text, b->acct.m.device_total, v) == XDM_OK ? 0 : -EINVAL;
}

static int limit_store(struct xdm_layer *self, const char *buf, size_t len)
{
	struct budget *b = budget_of(self);
	uint64_t v;
	int err = parse_limit(b, buf, len, &v), lock;

	if (err)
		return err;
	lock = budget_lock(b->acct.m.shm, b->acct.m.fd);
	if (lock < 0)
		return -EBUSY;
	budget_set_limit_locked(b->acct.m.shm, v);
	budget_unlock(b->acct.m.shm, lock);
	return 0;
}

static int configured_limit_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, budget_of(self)->acct.m.configured_limit);
}

static int used_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&budget_of(self)->acct.m.shm->used));
}

/* "auto", or the fixed size in bytes (0: none). */
static int credit_show(struct xdm_layer *self, char *buf, size_t len)
{
	const struct budget *b = budget_of(self);

	if (b->acct.credit_auto)
		return show_text(buf, len, "auto");
	return show_u64(buf, len, b->acct.credit_max);
}

static int credit_held_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, budget_credit_held(&budget_of(self)->acct));
}

static int remaining_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct budget_shm *s = budget_of(self)->acct.m.shm;
	uint64_t used = load(&s->used), limit = load(&s->limit);

	return show_u64(buf, len, used < limit ? limit - used : 0);
}

static int peak_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&budget_of(self)->acct.m.shm->peak));
}

static int refusals_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, load(&budget_of(self)->acct.m.shm->refusals));
}

static int reset_stale_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, budget_of(self)->acct.m.reset_stale);
}

static int unsettled_show(struct xdm_layer *self, char *buf, size_t len)
{
	const struct budget_shm *s = budget_of(self)->acct.m.shm;

	return show_u64(buf, len, atomic_load_explicit(&s->unsettled, memory_order_relaxed));
}

static int segment_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, budget_of(self)->acct.m.name);
}

static int dir_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, budget_of(self)->acct.m.dir);
}

/*
 * The process's group: its name ("" in none) and its figures (0 in none,
 * where a write of group_limit is EINVAL: there is no group to limit).
 */
static int group_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_text(buf, len, budget_of(self)->acct.m.group_name);
}

static uint64_t group_load(struct xdm_layer *self, size_t offset)
{
	struct budget_group *g = budget_of(self)->acct.m.group;

	return g ? load((_Atomic uint64_t *)((char *)g + offset)) : 0;
}

static int group_limit_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, group_load(self, offsetof(struct budget_group, limit)));
}

/* As limit_store, for the group: every member sees the new limit at once. */
static int group_limit_store(struct xdm_layer *self, const char *buf, size_t len)
{
	struct budget *b = budget_of(self);
	uint64_t v;
	int err, lock;

	if (!b->acct.m.group)
		return -EINVAL;
	err = parse_limit(b, buf, len, &v);
	if (err)
		return err;
	lock = budget_lock(b->acct.m.shm, b->acct.m.fd);
	if (lock < 0)
		return -EBUSY;
	budget_set_group_limit_locked(b->acct.m.group, v);
	budget_unlock(b->acct.m.shm, lock);
	return 0;
}

static int group_used_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, group_load(self, offsetof(struct budget_group, used)));
}

static int group_remaining_show(struct xdm_layer *self, char *buf, size_t len)
{
	uint64_t used = group_load(self, offsetof(struct budget_group, used));
	uint64_t limit = group_load(self, offsetof(struct budget_group, limit));

	return show_u64(buf, len, used < limit ? limit - used : 0);
}

static int group_peak_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, group_load(self, offsetof(struct budget_group, peak)));
}

static int group_refusals_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, group_load(self, offsetof(struct budget_group, refusals)));
}

/* One row per attached process, "pid used_bytes"; a snapshot, slot by slot. */
static int processes_show(struct xdm_layer *self, char *buf, size_t len)
{
	struct budget_shm *s = budget_of(self)->acct.m.shm;
	size_t off = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];
		int32_t pid = atomic_load_explicit(&slot->pid, memory_order_acquire);
		int n;

		if (!pid)
			continue;
		n = snprintf(buf + off, len - off, "%" PRId32 " %" PRIu64 "\n", pid,
			     load(&slot->used));
		if (n < 0 || (size_t)n >= len - off)
			return -EOVERFLOW;
		off += (size_t)n;
	}
	return (int)off;
}

const struct xdm_attr budget_attrs[] = {
	{
		.name = "limit",
		.mode = 0644,
		.help = "bytes the device's processes may hold together; write a size "
			"(K/M/G/T, %, max) to change it for all of them",
		.show = limit_show,
		.store = limit_store,
	},
	{
		.name = "configured_limit",
		.mode = 0444,
		.help = "bytes, the limit this layer was configured with (the first "
			"process's limit stands)",
		.show = configured_limit_show,
	},
	{
		.name = "used",
		.mode = 0444,
		.help = "bytes held by every process on the device, their threads' "
			"credit included",
		.show = used_show,
	},
	{
		.name = "credit",
		.mode = 0444,
		.help = "the credit parameter: auto (each thread's credit follows its "
			"demand), or the bytes a thread draws ahead (0: none)",
		.show = credit_show,
	},
	{
		.name = "credit_held",
		.mode = 0444,
		.help = "bytes this layer's threads have drawn and not handed out, summed "
			"over their records: a sample while they run, exact when they are quiet",
		.show = credit_held_show,
	},
	{
		.name = "remaining",
		.mode = 0444,
		.help = "bytes, limit minus used, or 0",
		.show = remaining_show,
	},
	{
		.name = "peak",
		.mode = 0444,
		.help = "bytes, the highest used since the segment was created",
		.show = peak_show,
	},
	{
		.name = "refusals",
		.mode = 0444,
		.help = "allocations refused for the budget, by every process",
		.show = refusals_show,
	},
	{
		.name = "processes",
		.mode = 0444,
		.help = "one row per attached process: pid and the bytes it holds",
		.show = processes_show,
	},
	{
		.name = "reset_stale",
		.mode = 0444,
		.help = "1 if this layer found the segment left by processes that all died, "
			"and reset it",
		.show = reset_stale_show,
	},
	{
		.name = "unsettled",
		.mode = 0444,
		.help = "dead processes that died inside a change of their share, still "
			"counted in used until a scan finds a moment when no live process is "
			"inside one",
		.show = unsettled_show,
	},
	{
		.name = "segment",
		.mode = 0444,
		.help = "the shared segment's name (in dir)",
		.show = segment_show,
	},
	{
		.name = "dir",
		.mode = 0444,
		.help = "the directory of the shared segment (dir=, $XDM_BUDGET_DIR, the "
			"machine's shared budget directory, or /dev/shm)",
		.show = dir_show,
	},
	{
		.name = "group",
		.mode = 0444,
		.help = "the group this process is in (group=, $XDM_BUDGET_GROUP), or an empty "
			"line",
		.show = group_show,
	},
	{
		.name = "group_limit",
		.mode = 0644,
		.help = "bytes the group's processes may hold together; write a size "
			"(K/M/G/T, %, max) to change it for all of them (0 in no group)",
		.show = group_limit_show,
		.store = group_limit_store,
	},
	{
		.name = "group_used",
		.mode = 0444,
		.help = "bytes held by the group's processes, their threads' credit included",
		.show = group_used_show,
	},
	{
		.name = "group_remaining",
		.mode = 0444,
		.help = "bytes, group_limit minus group_used, or 0",
		.show = group_remaining_show,
	},
	{
		.name = "group_peak",
		.mode = 0444,
		.help = "bytes, the highest group_used since the group was made",
		.show = group_peak_show,
	},
	{
		.name = "group_refusals",
		.mode = 0444,
		.help = "allocations the group's limit refused (counted in refusals too)",
		.show = group_refusals_show,
	},
	{ .name = NULL },
};
