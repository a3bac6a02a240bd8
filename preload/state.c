/* SPDX-License-Identifier: MIT */
/*
 * state.c - the shim's life in the process: what it does when loaded, in
 * a fork child and at exit, and how it speaks.
 *
 * Loading does nothing a program could notice: the C library's dlsym is
 * looked up (dlsym.c needs it before any lookup it is asked for) and a
 * fork handler registered.  No device is touched until the program
 * allocates: a program that never uses CUDA never maps a segment.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "preload/preload.h"

void preload_say(const char *fmt, ...)
{
	char line[768];
	va_list ap;
	int n, head;

	head = snprintf(line, sizeof(line), PRELOAD_WHO ": ");
	va_start(ap, fmt);
	n = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += head;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write: lines of several processes on one terminal stay whole. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

static void forked_child(void)
{
	preload_devices_forked();
}

__attribute__((constructor)) static void preload_load(void)
{
	preload_next_dlsym_get();
	pthread_atfork(NULL, NULL, forked_child);
}

__attribute__((destructor)) static void preload_unload(void)
{
	preload_devices_leave();
}
