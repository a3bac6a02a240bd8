/* SPDX-License-Identifier: MIT */
/*
 * budget.h - what the files of the budget adaptor share: the layer's state
 * and the accounting on the allocation path.
 */
#ifndef XDM_BUDGET_H
#define XDM_BUDGET_H

#include <limits.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <xdm/module.h>

#include "lib/budget_segment/segment.h"

/*
 * The state of one budget layer; nothing of it lives in globals.  The
 * accounting (segment, slot, group, the threads' credit) is
 * lib/budget_segment's, shared with the preload shim.
 */
struct budget {
	struct xdm_layer *upstream;	/* fixed at init: no call to ask per pair */
	struct budget_account acct;
};

static inline struct budget *budget_of(const struct xdm_layer *self)
{
	return xdm_layer_priv_inline(self);
}

/* ---- attrs.c ------------------------------------------------------------ */

extern const struct xdm_attr budget_attrs[];

#endif /* XDM_BUDGET_H */
