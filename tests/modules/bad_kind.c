/* SPDX-License-Identifier: MIT */
/*
 * bad_kind.c - a test module whose table is of no kind the core knows.
 */
#include "config.h"

#include <xdm/module.h>

static const struct xdm_ops bad_kind_ops = {
	XDM_OPS_HEADER("bad_kind", (enum xdm_module_kind)7),
	.description = "test: an ops table of unknown kind 7",
};

XDM_MODULE(&bad_kind_ops)
