/* SPDX-License-Identifier: MIT */
/*
 * bad_abi.c - a test module built for the next ABI major version.
 *
 * The loader must refuse it, naming the module, its file and both versions,
 * rather than call methods whose layout it cannot know.
 */
#include "config.h"

#include <xdm/module.h>

static const struct xdm_ops bad_abi_ops = {
	/* XDM_OPS_HEADER() spelt out, with the one field it must get wrong. */
	.abi_major = XDM_ABI_MAJOR + 1,
	.abi_minor = 0,
	.size = sizeof(struct xdm_ops),
	.name = "bad_abi",
	.kind = XDM_KIND_ADAPTOR,
	.description = "test: an ops table of a future ABI major version",
};

XDM_MODULE(&bad_abi_ops)
