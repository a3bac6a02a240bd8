/* SPDX-License-Identifier: MIT */
/* xdmctl_top.c - placeholder until the command is written. */
#include "config.h"

#include "xdmctl.h"

int xdmctl_top(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	return xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "not written yet");
}
