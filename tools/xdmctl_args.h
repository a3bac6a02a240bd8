/* SPDX-License-Identifier: MIT */
/*
 * xdmctl_args.h - the pieces of a command line that the commands reading
 * a log (timeline, snapshot) take alike: options with a value, written
 * "--name VALUE" or "--name=VALUE", and bounded numbers.
 */
#ifndef XDM_TOOLS_XDMCTL_ARGS_H
#define XDM_TOOLS_XDMCTL_ARGS_H

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

#endif /* XDM_TOOLS_XDMCTL_ARGS_H */
