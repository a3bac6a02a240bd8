/* SPDX-License-Identifier: MIT */
/* xdmctl_timeline.c - placeholder until the command is written. */
#include "config.h"

#include "xdmctl.h"

int xdmctl_timeline(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	return xdmctl_fail(XDMCTL_EXIT_FAIL, "timeline", "not written yet");
}
