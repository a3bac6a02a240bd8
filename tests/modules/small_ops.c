/* SPDX-License-Identifier: MIT */
/*
 * small_ops.c - a test module whose ops table claims to be 16 bytes long:
 * shorter than the header alone, so no method could be read from it.
 */
#include "config.h"

#include <xdm/module.h>

static const struct xdm_ops small_ops_ops = {
	/* XDM_OPS_HEADER() spelt out, with the one field it must get wrong. */
	.abi_major = XDM_ABI_MAJOR,
	.abi_minor = XDM_ABI_MINOR,
	.size = 16,
	.name = "small_ops",
	.kind = XDM_KIND_ADAPTOR,
	.description = "test: an ops table too small for the ABI",
};

XDM_MODULE(&small_ops_ops)
