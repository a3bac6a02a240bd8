/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h - the registry's shard lock.
 *
 * A shard is held for a few dozen instructions (a hash insert or unlink) or
 * across one non-blocking platform call (queuing an event wait).  For holds
 * that short a test-and-test-and-set lock costs one atomic exchange to take
 * and a plain release store to drop, about half of a pthread mutex on the
 * allocation path.  A waiter that spins too long yields its CPU, so a holder
 * that was preempted still gets to run.
 */
#ifndef XDM_CORE_SPINLOCK_H
#define XDM_CORE_SPINLOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

struct xdm_spinlock {
	atomic_bool held;
};

#define XDM_SPIN_BEFORE_YIELD 128

static inline void xdm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline void xdm_spin_init(struct xdm_spinlock *l)
{
	atomic_init(&l->held, false);
}

/* Out of line: the uncontended take inlines as one exchange and a branch. */
static __attribute__((noinline, cold, unused)) void xdm_spin_wait(struct xdm_spinlock *l)
{
	unsigned int spins = 0;

	do {
		/* Wait on a plain load: no cache-line ping-pong while it is held. */
		while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
			if (++spins < XDM_SPIN_BEFORE_YIELD)
				xdm_cpu_relax();
			else
				sched_yield();
		}
	} while (atomic_exchange_explicit(&l->held, true, memory_order_acquire));
}

static inline void xdm_spin_lock(struct xdm_spinlock *l)
{
	if (__builtin_expect(atomic_exchange_explicit(&l->held, true, memory_order_acquire), 0))
		xdm_spin_wait(l);
}

static inline void xdm_spin_unlock(struct xdm_spinlock *l)
{
	atomic_store_explicit(&l->held, false, memory_order_release);
}

#endif /* XDM_CORE_SPINLOCK_H */
