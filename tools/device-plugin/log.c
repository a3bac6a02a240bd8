/* SPDX-License-Identifier: MIT */
/*
 * log.c - the plugin's log: one line per event on standard error, where
 * the kubelet's DaemonSet (or journald) collects it, with the UTC time.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "tools/device-plugin/dp.h"

void xdm_dp_log(const char *fmt, ...)
{
	char line[1024], stamp[32];
	struct timespec now;
	struct tm tm;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line, so that threads' lines never interleave. */
	fprintf(stderr, "%s xdm-device-plugin: %s\n", stamp, line);
}
