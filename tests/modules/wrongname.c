/* SPDX-License-Identifier: MIT */
/*
 * wrongname.c - a test module, wrongname.so, whose only table is named
 * "somethingelse": the file a stack names must register that name.
 */
#include "config.h"

#include <xdm/module.h>

static enum xdm_status wrongname_allocate(struct xdm_layer *self, size_t bytes,
					  xdm_stream_id stream, const char *tag,
					  struct xdm_block *out)
{
	return xdm_error_set(XDM_E_NOT_SUPPORTED, "wrongname: never meant to allocate");
}

static enum xdm_status wrongname_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	return xdm_error_set(XDM_E_NOT_SUPPORTED, "wrongname: never meant to free");
}

static const struct xdm_ops wrongname_ops = {
	XDM_OPS_HEADER("somethingelse", XDM_KIND_BACKEND),
	.description = "test: a backend registered under another name than its file",
	.allocate = wrongname_allocate,
	.deallocate = wrongname_deallocate,
};

XDM_MODULE(&wrongname_ops)
