/* SPDX-License-Identifier: MIT */
/*
 * validate.c - what attach checks before it trusts a segment.
 *
 * A segment is a file any process of its owner can write: garbage, a
 * truncated copy or another xdm's layout must be refused with a sentence,
 * never followed into a crash or enforced as a limit nobody set.  join
 * checks the header before it maps the rest (segment.c); this file checks,
 * under the lock, what the processes keep in it: every slot's fields, the
 * limit against its check word, and a usage that covers what the live
 * processes hold.  Processes already attached are not watched: they trust
 * the segment they validated when they came.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "lib/budget_segment/segment.h"

/* The kernel's largest pid (PID_MAX_LIMIT on 64-bit). */
#define BUDGET_PID_MAX (4 * 1024 * 1024)
/* Changes one process can have in flight at once: one per thread. */
#define BUDGET_INFLIGHT_MAX (1ull << 31)
/* A limit store writes two words under the lock: how long to wait for one. */
#define BUDGET_CHECK_WAIT_NS 10000000ull

/* The refusal: what is wrong, as a printf format, in the sentence. */
__attribute__((format(printf, 2, 3)))
static enum xdm_status corrupt(const struct budget_member *m, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: the shared segment %s is corrupt: %s; it is not used. "
			     "Remove %s once no process uses it",
			     m->name, what, m->path);
}

static enum xdm_status validate_slot(const struct budget_member *m, const struct budget_slot *slot,
				     unsigned int i)
{
	int32_t pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
	uint64_t begun = atomic_load_explicit(&slot->begun, memory_order_relaxed);
	uint64_t done = atomic_load_explicit(&slot->done, memory_order_relaxed);

	/* A free slot's fields are reset by whoever claims it. */
	if (pid == 0)
		return XDM_OK;
	if (pid < 0 || pid > BUDGET_PID_MAX)
		return corrupt(m, "slot %u holds pid %" PRId32, i, pid);
	/* attach and start_time may be 0: a detach that died half way. */
	if (begun - done >= BUDGET_INFLIGHT_MAX)
		return corrupt(m, "slot %u of pid %" PRId32 " began %" PRIu64 " changes and "
			       "finished %" PRIu64, i, pid, begun, done);
	if (slot->group > BUDGET_GROUPS)
		return corrupt(m, "slot %u of pid %" PRId32 " is in group %" PRIu32 " of %u", i,
			       pid, slot->group, BUDGET_GROUPS);
	return XDM_OK;
}

/*
 * A group entry: its name, its limit against its check word, and as many
 * members as slots name it (both change together, under the lock).
 */
static enum xdm_status validate_group(const struct budget_member *m, struct budget_shm *s,
				      unsigned int g)
{
	const struct budget_group *e = &s->groups[g];
	uint64_t limit = atomic_load_explicit(&e->limit, memory_order_relaxed);
	uint64_t check = atomic_load_explicit(&e->limit_check, memory_order_relaxed);
	unsigned int members = 0;

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		members += atomic_load_explicit(&s->slots[i].pid, memory_order_relaxed) &&
			   s->slots[i].group == g + 1;
	if (members != e->members)
		return corrupt(m, "group entry %u counts %" PRIu32 " members, and %u slots are "
			       "in it", g, e->members, members);
	if (!e->members)
		return XDM_OK;
	if (!e->name[0] || memchr(e->name, '\0', sizeof(e->name)) == NULL)
		return corrupt(m, "group entry %u of %" PRIu32 " members has no name", g,
			       e->members);
	if (check != ~limit)
		return corrupt(m, "group '%.*s' has the limit %" PRIu64 " and the check word "
			       "%#" PRIx64, (int)strnlen(e->name, sizeof(e->name)), e->name,
			       limit, check);
	return XDM_OK;
}

/* The limit against its check word, allowing a store in flight elsewhere. */
static enum xdm_status validate_limit(const struct budget_member *m, struct budget_shm *s)
{
	uint64_t start = budget_now_ns(), limit, check;

	for (;;) {
		limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
		check = atomic_load_explicit(&s->limit_check, memory_order_relaxed);
		if (check == ~limit)
			return XDM_OK;
		if (budget_now_ns() - start >= BUDGET_CHECK_WAIT_NS)
			return corrupt(m, "the limit %" PRIu64 " does not match its check word "
				       "%#" PRIx64, limit, check);
		sched_yield();
	}
}

/*
 * Every live process's share is in the usage too (a reserve counts the
 * usage before the slot, a release the slot before the usage), so at a
 * quiet moment the usage is at least their sum.  No quiet moment within
 * the settle's time proves nothing either way: the check is skipped.
 */
static enum xdm_status validate_usage(const struct budget_member *m, struct budget_shm *s)
{
	uint64_t start = budget_now_ns();
	bool alive[BUDGET_SLOTS];
	struct budget_quiet q;

	budget_slots_alive(s, m->fd, NULL, alive);
	while (!budget_quiet_usage(s, alive, &q)) {
		if (budget_now_ns() - start >= BUDGET_SETTLE_NS)
			return XDM_OK;
		sched_yield();
	}
	if (q.used < q.live)
		return corrupt(m, "its usage %" PRIu64 " is below the %" PRIu64 " bytes its live "
			       "processes hold", q.used, q.live);
	for (unsigned int g = 0; g < BUDGET_GROUPS; g++)
		if (q.group_used[g] < q.group_live[g])
			return corrupt(m, "group '%.*s' uses %" PRIu64 ", below the %" PRIu64
				       " bytes its live processes hold",
				       (int)strnlen(s->groups[g].name, sizeof(s->groups[g].name)),
				       s->groups[g].name, q.group_used[g], q.group_live[g]);
	return XDM_OK;
}

enum xdm_status budget_validate_locked(const struct budget_member *m, struct budget_shm *s)
{
	enum xdm_status st;

	if (s->unlinked > 1)
		return corrupt(m, "its unlinked mark is %" PRIu32, s->unlinked);
	if (atomic_load_explicit(&s->unsettled, memory_order_relaxed) > BUDGET_SLOTS)
		return corrupt(m, "it counts %" PRIu32 " unsettled slots of %u",
			       atomic_load_explicit(&s->unsettled, memory_order_relaxed),
			       BUDGET_SLOTS);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		st = validate_slot(m, &s->slots[i], i);
		if (st)
			return st;
	}
	for (unsigned int g = 0; g < BUDGET_GROUPS; g++) {
		st = validate_group(m, s, g);
		if (st)
			return st;
	}
	st = validate_limit(m, s);
	if (st)
		return st;
	return validate_usage(m, s);
}
