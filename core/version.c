/* SPDX-License-Identifier: MIT */
/* version.c - the library's version string. */
#include "config.h"

#include <xdm/xdm.h>

const char *xdm_version(void)
{
	return PACKAGE_VERSION;
}
