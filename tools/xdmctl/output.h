/* SPDX-License-Identifier: MIT */
/*
 * output.h - where the commands that turn a log into a file write
 * it: -o FILE, or standard output.  A file that cannot be written whole
 * is removed (a plain file; a device is left alone), never left cut short.
 */
#ifndef XDM_TOOLS_XDMCTL_OUTPUT_H
#define XDM_TOOLS_XDMCTL_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

/* path, or standard output when NULL; NULL when it cannot be opened (said). */
FILE *xdmctl_output_open(const char *cmd, const char *path);

/*
 * Flushes and closes f; removes path when that fails or when written is
 * false (the caller could not write all of it, and said why).  An exit
 * code: XDMCTL_EXIT_OK, or XDMCTL_EXIT_FAIL.
 */
int xdmctl_output_close(const char *cmd, const char *path, FILE *f, bool written);

#endif /* XDM_TOOLS_XDMCTL_OUTPUT_H */
