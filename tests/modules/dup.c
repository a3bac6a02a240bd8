/* SPDX-License-Identifier: MIT */
/*
 * dup.c - a test module registering two adaptors, "dup" and "example".
 *
 * Loaded after examples/example.so, its second table clashes by name, and
 * the loader must refuse the whole file, naming both files.
 */
#include "config.h"

#include <xdm/module.h>

/* Both forward every call: only their names matter here. */
static const struct xdm_ops dup_ops = {
	XDM_OPS_HEADER("dup", XDM_KIND_ADAPTOR),
	.description = "test: the innocent first table of dup.so",
};

static const struct xdm_ops dup_example_ops = {
	XDM_OPS_HEADER("example", XDM_KIND_ADAPTOR),
	.description = "test: a second adaptor named like the example module",
};

XDM_MODULE(&dup_ops, &dup_example_ops)
