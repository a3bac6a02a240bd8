/* SPDX-License-Identifier: MIT */
/*
 * units.c - bytes for people.  Binary units, as the sizes xdm
 * accepts (K is 1024): a value read here can be written back as a size.
 */
#include "config.h"

#include "xdmctl.h"

const char *xdmctl_human(unsigned long long bytes, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", bytes);
		return buf;
	}
	v /= 1024.0;
	while (v >= 1023.95 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
