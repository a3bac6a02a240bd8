/* SPDX-License-Identifier: MIT */
/*
 * faults.c - kill points for the tests, compiled only into the test build
 * of the module (tests/faults/budget.so, with XDM_BUDGET_FAULTS).
 *
 * At the step that $XDM_BUDGET_FAULT names, the process stops itself with
 * SIGSTOP.  The test that started it waits for the stop, reads the segment
 * in that half-changed state, and kills the process with SIGKILL: exactly
 * a death at that step, chosen rather than hoped for.  The variable is read
 * at every step so that the module keeps no state of its own for it.
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/budget_segment/segment.h"

static const char *const step_names[BUDGET_STEP_COUNT] = {
	[BUDGET_STEP_NONE] = "none",
	[BUDGET_STEP_RESERVE_BEGUN] = "reserve-begun",
	[BUDGET_STEP_RESERVE_SHARED] = "reserve-shared",
	[BUDGET_STEP_RESERVE_GROUP] = "reserve-group",
	[BUDGET_STEP_RESERVE_SLOT] = "reserve-slot",
	[BUDGET_STEP_RELEASE_BEGUN] = "release-begun",
	[BUDGET_STEP_RELEASE_SLOT] = "release-slot",
	[BUDGET_STEP_RELEASE_GROUP] = "release-group",
	[BUDGET_STEP_RELEASE_SHARED] = "release-shared",
	[BUDGET_STEP_DETACH_BEGUN] = "detach-begun",
	[BUDGET_STEP_DETACH_SLOT] = "detach-slot",
	[BUDGET_STEP_DETACH_GROUP] = "detach-group",
	[BUDGET_STEP_DETACH_SHARED] = "detach-shared",
	[BUDGET_STEP_RECLAIM_BEGUN] = "reclaim-begun",
	[BUDGET_STEP_RECLAIM_SLOT] = "reclaim-slot",
	[BUDGET_STEP_RECLAIM_GROUP] = "reclaim-group",
	[BUDGET_STEP_RECLAIM_SHARED] = "reclaim-shared",
	[BUDGET_STEP_SETTLE_SHARED] = "settle-shared",
};

void budget_fault_at(enum budget_step step)
{
	const char *want = getenv("XDM_BUDGET_FAULT");

	if (want && step < BUDGET_STEP_COUNT && strcmp(want, step_names[step]) == 0)
		raise(SIGSTOP);
}
