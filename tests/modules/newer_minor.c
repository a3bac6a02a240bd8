/* SPDX-License-Identifier: MIT */
/*
 * newer_minor.c - a test module built for the next ABI minor version.
 *
 * Such a module may read what this libxdm does not promise yet (a layer's
 * layout, say): the loader must refuse it, naming both versions.
 */
#include "config.h"

#include <xdm/module.h>

static const struct xdm_ops newer_minor_ops = {
	/* XDM_OPS_HEADER() spelt out, with the one field it must get wrong. */
	.abi_major = XDM_ABI_MAJOR,
	.abi_minor = XDM_ABI_MINOR + 1,
	.size = sizeof(struct xdm_ops),
	.name = "newer_minor",
	.kind = XDM_KIND_ADAPTOR,
	.description = "test: an ops table of a future ABI minor version",
};

XDM_MODULE(&newer_minor_ops)
