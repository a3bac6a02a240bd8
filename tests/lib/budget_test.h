/* SPDX-License-Identifier: MIT */
/*
 * budget_test.h - the line protocol between tests/process/check_budget and the
 * worker processes it execs (tests/process/budget_worker).
 *
 *	budget_worker hold PLATFORM STACK BYTES
 *		allocates one block of BYTES, prints "ready\n", then waits
 *		(for SIGKILL, or EOF on its stdin, then frees and exits 0).
 *	budget_worker churn PLATFORM STACK LIMIT THREADS ROUNDS OPS SEED MAXSIZE
 *		THREADS threads allocate and free random sizes (1..MAXSIZE)
 *		for OPS operations a round.  At the end of each round every
 *		thread stops, and the worker prints its own tally
 *		"round R live BYTES refusals N bad M\n" and waits for "go\n"
 *		on its stdin.  After the last round it frees everything,
 *		destroys its runtime and exits 0.  bad counts refusals whose
 *		payload disagrees with the request or the limit, and any
 *		failure that is not OUT_OF_BUDGET.
 */
#ifndef XDM_BUDGET_TEST_H
#define XDM_BUDGET_TEST_H

#define BT_READY "ready\n"
#define BT_GO "go\n"
#define BT_REPORT_FMT "round %u live %llu refusals %llu bad %llu\n"

/* Exit codes of the worker besides 0. */
#define BT_EXIT_USAGE 2
#define BT_EXIT_RUNTIME 3	/* the runtime could not be built */
#define BT_EXIT_PROTOCOL 4	/* the parent went away or said something else */

#endif /* XDM_BUDGET_TEST_H */
