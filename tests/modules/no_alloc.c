/* SPDX-License-Identifier: MIT */
/*
 * no_alloc.c - a test backend without an allocate method.
 *
 * An adaptor's NULL method forwards, but a backend has nothing below it, so
 * the loader must refuse this table when it is registered.
 */
#include "config.h"

#include <xdm/module.h>

static enum xdm_status no_alloc_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	return xdm_error_set(XDM_E_INVALID, "no_alloc: it never handed out a block");
}

static const struct xdm_ops no_alloc_ops = {
	XDM_OPS_HEADER("no_alloc", XDM_KIND_BACKEND),
	.description = "test: a backend lacking allocate",
	.deallocate = no_alloc_deallocate,
};

XDM_MODULE(&no_alloc_ops)
