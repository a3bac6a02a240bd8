/* SPDX-License-Identifier: MIT */
/* xdmctl_ps.c - placeholder until the command is written. */
#include "config.h"

#include "xdmctl.h"

int xdmctl_ps(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	return xdmctl_fail(XDMCTL_EXIT_FAIL, "ps", "not written yet");
}
