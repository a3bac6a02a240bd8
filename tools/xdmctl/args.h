/* SPDX-License-Identifier: MIT */
/*
 * args.h - the pieces of a command line that the commands reading
 * a log (timeline, snapshot) take alike: --help, options with a value,
 * written "--name VALUE" or "--name=VALUE", bounded numbers, and the one
 * log they read.
 */
#ifndef XDM_TOOLS_XDMCTL_ARGS_H
#define XDM_TOOLS_XDMCTL_ARGS_H

#include <stdbool.h>

/*
 * Whether argv[*i] is the option name (or its short alias, NULL for
 * none), and its value: 1 with *value set and *i on the value's word, 0
 * when it is another word, or -1 when the value is missing (said, as
 * XDMCTL_EXIT_USAGE of command cmd).
 */
int xdmctl_arg_value(const char *cmd, int argc, char **argv, int *i, const char *name,
		     const char *alias, const char **value);

/* text as a decimal in [min, max] into *out: 0, or -1 said. */
int xdmctl_arg_uint(const char *cmd, const char *name, const char *text, unsigned long min,
		    unsigned long max, unsigned long *out);

/* Whether arg asks for the command's help: --help or -h. */
bool xdmctl_arg_help(const char *arg);

/*
 * A word that is none of the command's options: the log, into *log.  0,
 * or -1 said when it looks like an option or a log was named already.
 */
int xdmctl_arg_log(const char *cmd, const char *arg, const char **log);

/* After the last word: 0 when a log was named, else -1 said (usage shows how). */
int xdmctl_arg_log_given(const char *cmd, const char *log, const char *usage);

#endif /* XDM_TOOLS_XDMCTL_ARGS_H */
