/* SPDX-License-Identifier: MIT */
/* xdmctl_snapshot.c - placeholder until the command is written. */
#include "config.h"

#include "xdmctl.h"

int xdmctl_snapshot(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	return xdmctl_fail(XDMCTL_EXIT_FAIL, "snapshot", "not written yet");
}
