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
#include <time.h>

#include "budget.h"

/* The kernel's largest pid (PID_MAX_LIMIT on 64-bit). */
#define BUDGET_PID_MAX (4 * 1024 * 1024)
/* Changes one process can have in flight at once: one per thread. */
#define BUDGET_INFLIGHT_MAX (1ull << 31)
/* A limit store writes two words under the lock: how long to wait for one. */
#define BUDGET_CHECK_WAIT_NS 10000000ull

/* The refusal: what is wrong, as a printf format, in the sentence. */
__attribute__((format(printf, 2, 3)))
static enum xdm_status corrupt(const struct budget *b, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return xdm_error_set(XDM_E_CONFIG,
			     "budget: the shared segment %s is corrupt: %s; it is not used. "
			     "Remove /dev/shm%s once no process uses it",
			     b->name, what, b->name);
}

static enum xdm_status validate_slot(const struct budget *b, const struct budget_slot *slot,
				     unsigned int i)
{
	int32_t pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
	uint64_t begun = atomic_load_explicit(&slot->begun, memory_order_relaxed);
	uint64_t done = atomic_load_explicit(&slot->done, memory_order_relaxed);

	/* A free slot's fields are reset by whoever claims it. */
	if (pid == 0)
		return XDM_OK;
	if (pid < 0 || pid > BUDGET_PID_MAX)
		return corrupt(b, "slot %u holds pid %" PRId32, i, pid);
	/* attach and start_time may be 0: a detach that died half way. */
	if (begun - done >= BUDGET_INFLIGHT_MAX)
		return corrupt(b, "slot %u of pid %" PRId32 " began %" PRIu64 " changes and "
			       "finished %" PRIu64, i, pid, begun, done);
	return XDM_OK;
}

/* The limit against its check word, allowing a store in flight elsewhere. */
static enum xdm_status validate_limit(const struct budget *b, struct budget_shm *s)
{
	uint64_t start = budget_now_ns(), limit, check;

	for (;;) {
		limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
		check = atomic_load_explicit(&s->limit_check, memory_order_relaxed);
		if (check == ~limit)
			return XDM_OK;
		if (budget_now_ns() - start >= BUDGET_CHECK_WAIT_NS)
			return corrupt(b, "the limit %" PRIu64 " does not match its check word "
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
static enum xdm_status validate_usage(const struct budget *b, struct budget_shm *s)
{
	uint64_t start = budget_now_ns(), used, sum;
	bool alive[BUDGET_SLOTS];

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		const struct budget_slot *slot = &s->slots[i];
		pid_t pid = atomic_load_explicit(&slot->pid, memory_order_acquire);

		alive[i] = pid && budget_slot_alive(pid, slot->start_time);
	}
	while (!budget_quiet_usage(s, alive, &used, &sum)) {
		if (budget_now_ns() - start >= BUDGET_SETTLE_NS)
			return XDM_OK;
		sched_yield();
	}
	if (used < sum)
		return corrupt(b, "its usage %" PRIu64 " is below the %" PRIu64 " bytes its live "
			       "processes hold", used, sum);
	return XDM_OK;
}

enum xdm_status budget_validate_locked(const struct budget *b, struct budget_shm *s)
{
	enum xdm_status st;

	if (s->unlinked > 1)
		return corrupt(b, "its unlinked mark is %" PRIu32, s->unlinked);
	if (atomic_load_explicit(&s->unsettled, memory_order_relaxed) > BUDGET_SLOTS)
		return corrupt(b, "it counts %" PRIu32 " unsettled slots of %u",
			       atomic_load_explicit(&s->unsettled, memory_order_relaxed),
			       BUDGET_SLOTS);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		st = validate_slot(b, &s->slots[i], i);
		if (st)
			return st;
	}
	st = validate_limit(b, s);
	if (st)
		return st;
	return validate_usage(b, s);
}
