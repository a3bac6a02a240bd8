/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - giving back what dead processes held (liveness.c tells them
 * from live ones).
 *
 * A process may die anywhere, also between the atomics of a change of its
 * share (its slot, its group's usage and the shared usage).  segment.h's
 * begun and done tell: a dead slot that is not inside a change gives back
 * its used; one that is, is settled from a quiet moment of the live slots,
 * which says exactly how much the usage (and each group's) holds beyond
 * them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

void budget_sub_clamped(_Atomic uint64_t *counter, uint64_t n)
{
	uint64_t cur = atomic_load_explicit(counter, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(counter, &cur, cur > n ? cur - n : 0,
						      memory_order_release, memory_order_relaxed))
		;
}

uint64_t budget_slot_empty(struct budget_shm *s, struct budget_slot *slot, enum budget_step first)
{
	struct budget_group *g = budget_group_of(s, slot);
	uint64_t n;

	budget_slot_begin(slot);
	BUDGET_STEP(first);
	n = atomic_exchange_explicit(&slot->used, 0, memory_order_release);
	BUDGET_STEP(first + 1);
	if (g)
		budget_sub_clamped(&g->used, n);
	BUDGET_STEP(first + 2);
	budget_sub_clamped(&s->used, n);
	BUDGET_STEP(first + 3);
	budget_slot_end(slot);
	return n;
}

void budget_group_leave(struct budget_shm *s, struct budget_slot *slot)
{
	struct budget_group *g = budget_group_of(s, slot);

	slot->group = 0;
	if (!g || !g->members || --g->members)
		return;
	/* The last member out: the entry is free for another name. */
	memset(g->name, 0, sizeof(g->name));
	atomic_store_explicit(&g->used, 0, memory_order_relaxed);
	atomic_store_explicit(&g->peak, 0, memory_order_relaxed);
	atomic_store_explicit(&g->refusals, 0, memory_order_relaxed);
	budget_set_group_limit_locked(g, 0);
}

static void slot_free(struct budget_shm *s, struct budget_slot *slot)
{
	budget_group_leave(s, slot);
	slot->attach = 0;
	slot->start_time = 0;
	atomic_store_explicit(&slot->pid, 0, memory_order_release);
}

static bool slot_inside_change(const struct budget_slot *slot)
{
	return atomic_load_explicit(&slot->begun, memory_order_relaxed) !=
	       atomic_load_explicit(&slot->done, memory_order_relaxed);
}

/*
 * One attempt at a moment when no live slot is inside a change: the
 * seqlock reading of segment.h's begun and done.  Each live slot's done is
 * read before its begun (an equal pair means every change it began is
 * finished, and done's acquire makes them visible); then the usages and
 * the used of every live slot, with acquire (the changes are releases);
 * then begun again, so a change that began meanwhile and was seen in any
 * of those reads is seen in begun too.
 */
bool budget_quiet_usage(struct budget_shm *s, const bool *alive, struct budget_quiet *q)
{
	uint64_t begun[BUDGET_SLOTS];

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		const struct budget_slot *slot = &s->slots[i];
		uint64_t done;

		if (!alive[i])
			continue;
		done = atomic_load_explicit(&slot->done, memory_order_acquire);
		begun[i] = atomic_load_explicit(&slot->begun, memory_order_relaxed);
		if (begun[i] != done)
			return false;
	}
	q->used = atomic_load_explicit(&s->used, memory_order_acquire);
	q->live = 0;
	for (unsigned int g = 0; g < BUDGET_GROUPS; g++) {
		q->group_used[g] = atomic_load_explicit(&s->groups[g].used, memory_order_acquire);
		q->group_live[g] = 0;
	}
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		const struct budget_slot *slot = &s->slots[i];
		const struct budget_group *g;
		uint64_t used;

		if (!alive[i])
			continue;
		used = atomic_load_explicit(&slot->used, memory_order_acquire);
		q->live += used;
		g = budget_group_of(s, slot);
		if (g)
			q->group_live[g - s->groups] += used;
	}
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		if (alive[i] &&
		    atomic_load_explicit(&s->slots[i].begun, memory_order_relaxed) != begun[i])
			return false;
	return true;
}

/*
 * Settle the dead slots that died inside a change: give back the excess of
 * a quiet moment, the device's and each group's, and free them.  Giving
 * back an excess is idempotent (a second settlement finds none), so a
 * settler that dies half way leaves work for the next one and no error.
 * The live processes run on, so a quiet moment may not come at once:
 * after BUDGET_SETTLE_NS the dead slots stay, still counted, for the next
 * scan.
 */
static uint64_t settle(struct budget_shm *s, const bool *alive)
{
	uint64_t start = budget_now_ns(), excess;
	struct budget_quiet q;

	while (!budget_quiet_usage(s, alive, &q)) {
		if (budget_now_ns() - start >= BUDGET_SETTLE_NS)
			return 0;
		sched_yield();
	}
	/* The dead slots change no more: what a usage holds beyond the live
	 * ones is theirs (and below them only if garbage got in). */
	for (unsigned int g = 0; g < BUDGET_GROUPS; g++)
		if (q.group_used[g] > q.group_live[g])
			budget_sub_clamped(&s->groups[g].used, q.group_used[g] - q.group_live[g]);
	excess = q.used > q.live ? q.used - q.live : 0;
	budget_sub_clamped(&s->used, excess);
	BUDGET_STEP(BUDGET_STEP_SETTLE_SHARED);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];

		if (!alive[i] && atomic_load_explicit(&slot->pid, memory_order_relaxed))
			slot_free(s, slot);
	}
	atomic_store_explicit(&s->unsettled, 0, memory_order_relaxed);
	return excess;
}

void budget_slots_alive(struct budget_shm *s, int fd, const struct budget_slot *own,
			bool alive[BUDGET_SLOTS])
{
	uint64_t pidns = budget_pidns_of(0);

	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		const struct budget_slot *slot = &s->slots[i];

		alive[i] = atomic_load_explicit(&slot->pid, memory_order_acquire) &&
			   (slot == own || budget_slot_alive(s, fd, i, pidns));
	}
}

uint64_t budget_reclaim_locked(struct budget_shm *s, int fd, const struct budget_slot *own,
			       unsigned int *live, unsigned int *dead)
{
	unsigned int nlive = 0, ndead = 0, inside = 0;
	bool alive[BUDGET_SLOTS];
	uint64_t total = 0;

	atomic_fetch_add_explicit(&s->scans, 1, memory_order_relaxed);
	atomic_store_explicit(&s->last_scan_ns, budget_now_ns(), memory_order_relaxed);
	budget_slots_alive(s, fd, own, alive);
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++) {
		struct budget_slot *slot = &s->slots[i];

		if (!atomic_load_explicit(&slot->pid, memory_order_relaxed))
			continue;
		if (alive[i]) {
			nlive++;
			continue;
		}
		if (slot_inside_change(slot)) {
			inside++;
			continue;
		}
		/*
		 * Died between changes: its used is exactly its share.
		 * Emptied as its own process would, so that a reclaimer
		 * that dies half way leaves a slot inside a change, which
		 * the next one settles.
		 */
		total += budget_slot_empty(s, slot, BUDGET_STEP_RECLAIM_BEGUN);
		slot_free(s, slot);
		ndead++;
	}
	if (inside) {
		uint64_t excess;

		atomic_store_explicit(&s->unsettled, inside, memory_order_relaxed);
		excess = settle(s, alive);
		if (!atomic_load_explicit(&s->unsettled, memory_order_relaxed)) {
			total += excess;
			ndead += inside;
		}
	}
	if (live)
		*live = nlive;
	if (dead)
		*dead = ndead;
	return total;
}

/*
 * The slow path of a refusal: dead processes may hold what is missing.
 * A scan reads /proc for every attached process under the lock, tens of
 * microseconds, and a budget under pressure refuses all the time; so a
 * refusal scans only when no scan has started in the last
 * BUDGET_RESCAN_NS, and a thread that queued on the lock behind a scan that
 * started after it was refused (that scan saw every process dead by then)
 * does not scan again.  A process that dies is thus reclaimed by the first
 * refusal that comes a millisecond after the latest scan, or by the next
 * attach.
 */
void budget_member_reclaim_dead(struct budget_member *m)
{
	struct budget_shm *s = m->shm;
	uint64_t scans = atomic_load_explicit(&s->scans, memory_order_relaxed);
	uint64_t last = atomic_load_explicit(&s->last_scan_ns, memory_order_relaxed);
	int lock;

	if (budget_now_ns() - last < BUDGET_RESCAN_NS)
		return;
	lock = budget_lock(s, m->fd);
	if (lock < 0)
		return;
	if (atomic_load_explicit(&s->scans, memory_order_relaxed) == scans)
		budget_reclaim_locked(s, m->fd, m->slot, NULL, NULL);
	budget_unlock(s, lock);
}
