/* SPDX-License-Identifier: MIT */
/*
 * budget_agent.h - agents for the budget's credit suites: threads that
 * each run the test's calls one at a time, on request, and live until told
 * to exit, so that every step is ordered by the test and none depends on
 * scheduling (check_budget_credit.c, check_budget_auto.c).
 */
#ifndef XDM_TESTS_BUDGET_AGENT_H
#define XDM_TESTS_BUDGET_AGENT_H

#include "tests/lib/budget_util.h"

enum agent_op { AGENT_IDLE, AGENT_ALLOC, AGENT_FREE, AGENT_EXIT };

struct agent {
	struct xdm_runtime *rt;
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum agent_op op;		/* AGENT_IDLE once the call is done */
	size_t bytes;
	struct xdm_block *block;
	enum xdm_status st;		/* the call's result */
	size_t requested, remaining;	/* its thread's last error, on a refusal */
};

static inline void *agent_run(void *arg)
{
	struct agent *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (a->op == AGENT_IDLE)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->op == AGENT_EXIT)
			break;
		if (a->op == AGENT_ALLOC)
			a->st = xdm_allocate(a->rt, a->bytes, 0, "agent", a->block);
		else
			a->st = xdm_deallocate(a->rt, a->block);
		if (a->st == XDM_E_OUT_OF_BUDGET) {
			a->requested = xdm_last_error()->requested;
			a->remaining = xdm_last_error()->remaining;
		}
		a->op = AGENT_IDLE;
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

static inline void agent_start(struct agent *a, struct xdm_runtime *rt)
{
	*a = (struct agent){ .rt = rt, .op = AGENT_IDLE };
	ck_assert_int_eq(pthread_mutex_init(&a->lock, NULL), 0);
	ck_assert_int_eq(pthread_cond_init(&a->cond, NULL), 0);
	ck_assert_int_eq(pthread_create(&a->tid, NULL, agent_run, a), 0);
}

/* Run one call on the agent's thread and wait for it. */
static inline enum xdm_status agent_call(struct agent *a, enum agent_op op, size_t bytes,
				  struct xdm_block *block)
{
	enum xdm_status st;

	pthread_mutex_lock(&a->lock);
	a->op = op;
	a->bytes = bytes;
	a->block = block;
	pthread_cond_broadcast(&a->cond);
	while (a->op != AGENT_IDLE)
		pthread_cond_wait(&a->cond, &a->lock);
	st = a->st;
	pthread_mutex_unlock(&a->lock);
	return st;
}

static inline void agent_alloc(struct agent *a, size_t bytes, struct xdm_block *block)
{
	TU_OK(agent_call(a, AGENT_ALLOC, bytes, block));
	ck_assert_uint_eq(block->bytes, bytes);
}

static inline void agent_free(struct agent *a, struct xdm_block *block)
{
	TU_OK(agent_call(a, AGENT_FREE, 0, block));
}

/* The thread exits (its key destructors run) and is joined. */
static inline void agent_exit(struct agent *a)
{
	pthread_mutex_lock(&a->lock);
	a->op = AGENT_EXIT;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	ck_assert_int_eq(pthread_join(a->tid, NULL), 0);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
}

#endif /* XDM_TESTS_BUDGET_AGENT_H */
