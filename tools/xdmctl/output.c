/* SPDX-License-Identifier: MIT */
/* output.c - -o FILE or standard output, whole or not at all (output.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xdmctl.h"
#include "output.h"

FILE *xdmctl_output_open(const char *cmd, const char *path)
{
	FILE *f;

	if (!path)
		return stdout;
	f = fopen(path, "wb");
	if (!f)
		xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "cannot write %s: %s", path, strerror(errno));
	return f;
}

int xdmctl_output_close(const char *cmd, const char *path, FILE *f, bool written)
{
	int err = 0;

	errno = 0;
	if (fflush(f) || ferror(f))
		err = errno ? errno : EIO;
	if (path && fclose(f) && !err)
		err = errno ? errno : EIO;
	if (err || !written) {
		struct stat st;

		/* Only a plain file is ours to remove: -o /dev/full stays. */
		if (path && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			unlink(path);
		if (!err)
			return XDMCTL_EXIT_FAIL;
		return xdmctl_fail(XDMCTL_EXIT_FAIL, cmd, "cannot write %s: %s",
				   path ? path : "standard output", strerror(err));
	}
	return XDMCTL_EXIT_OK;
}
