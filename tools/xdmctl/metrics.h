/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - the budgets, their groups and their processes in the text
 * format Prometheus scrapes (version 0.0.4): what xdmctl metrics prints
 * and xdmctl serve answers.
 */
#ifndef XDM_TOOLS_XDMCTL_METRICS_H
#define XDM_TOOLS_XDMCTL_METRICS_H

#include <stdio.h>

#include "xdmctl.h"

/* The Content-Type of the format, as an HTTP header's value. */
#define XDMCTL_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * Reads every budget of ctx->shm_dir and writes them to f.  A segment
 * that cannot be read is a comment line, not an error.  0, or an exit
 * code with the reason said (the directory cannot be listed) and nothing
 * written.
 */
int xdmctl_metrics_write(const struct xdmctl_ctx *ctx, const char *cmd, FILE *f);

#endif /* XDM_TOOLS_XDMCTL_METRICS_H */
