/* SPDX-License-Identifier: MIT */
/* args.c - the command line of the commands that read a log (args.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xdmctl.h"
#include "args.h"

int xdmctl_arg_value(const char *cmd, int argc, char **argv, int *i, const char *name,
		     const char *alias, const char **value)
{
	const char *arg = argv[*i];
	size_t len = strlen(name);

	if (strncmp(arg, name, len) == 0 && arg[len] == '=') {
		*value = arg + len + 1;
		return 1;
	}
	if (strcmp(arg, name) != 0 && !(alias && strcmp(arg, alias) == 0))
		return 0;
	if (*i + 1 >= argc) {
		xdmctl_fail(XDMCTL_EXIT_USAGE, cmd, "%s needs a value", arg);
		return -1;
	}
	*value = argv[++*i];
	return 1;
}

int xdmctl_arg_uint(const char *cmd, const char *name, const char *text, unsigned long min,
		    unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(text, &end, 10);
	/* strtoul takes "-1" and leading blanks; a count is digits only. */
	if (text[0] < '0' || text[0] > '9' || *end || errno || v < min || v > max) {
		xdmctl_fail(XDMCTL_EXIT_USAGE, cmd, "%s '%s' is not a whole number from %lu to %lu",
			    name, text, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

bool xdmctl_arg_help(const char *arg)
{
	return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int xdmctl_arg_log(const char *cmd, const char *arg, const char **log)
{
	/* "-" alone is a name (a file called -), not an option. */
	if (arg[0] == '-' && arg[1])
		return xdmctl_fail(-1, cmd, "unknown option '%s' (xdmctl %s --help lists them)",
				   arg, cmd);
	if (*log)
		return xdmctl_fail(-1, cmd, "one log at a time: '%s', then '%s'", *log, arg);
	*log = arg;
	return 0;
}

int xdmctl_arg_log_given(const char *cmd, const char *log, const char *usage)
{
	if (log)
		return 0;
	return xdmctl_fail(-1, cmd, "which log? %s", usage);
}
