/* SPDX-License-Identifier: MIT */
/*
 * error.c - typed errors and the per-thread last-error detail.
 *
 * Like errno and dlerror(), the detail of a failure lives in thread-local
 * storage: a call returns its status, and the caller who wants the payload
 * or the sentence asks xdm_last_error() on the same thread.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static _Thread_local struct xdm_error last_error;

static const char *const status_names[XDM_STATUS_COUNT] = {
	[XDM_OK] = "success",
	[XDM_E_OUT_OF_BUDGET] = "out of budget",
	[XDM_E_DRIVER] = "driver error",
	[XDM_E_STREAM_MISUSE] = "stream-ordered contract violated",
	[XDM_E_USE_AFTER_FREE] = "use after free",
	[XDM_E_OUT_OF_BOUNDS] = "out-of-bounds write",
	[XDM_E_INVALID] = "invalid argument",
	[XDM_E_NO_DEVICE] = "no such device",
	[XDM_E_NOT_SUPPORTED] = "not supported",
	[XDM_E_CONFIG] = "configuration error",
	[XDM_E_MODULE] = "module error",
	[XDM_E_OUT_OF_MEMORY] = "out of memory",
};

const char *xdm_strerror(enum xdm_status status)
{
	if ((unsigned int)status >= XDM_STATUS_COUNT)
		return "unknown status";
	return status_names[status];
}

const struct xdm_error *xdm_last_error(void)
{
	return &last_error;
}

const char *xdm_last_error_message(void)
{
	if (last_error.code == XDM_OK)
		return "no error";
	return last_error.message;
}

void xdm_error_clear(void)
{
	memset(&last_error, 0, sizeof(last_error));
}

void xdm_error_restore(const struct xdm_error *saved)
{
	last_error = *saved;
}

/* Every setter starts from a clean record so no stale payload survives. */
static void set_message(enum xdm_status code, const char *fmt, va_list ap)
{
	memset(&last_error, 0, sizeof(last_error));
	last_error.code = code;
	vsnprintf(last_error.message, sizeof(last_error.message), fmt, ap);
}

enum xdm_status xdm_error_set(enum xdm_status code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(code, fmt, ap);
	va_end(ap);
	return code;
}

enum xdm_status xdm_error_set_budget(size_t requested, size_t remaining, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(XDM_E_OUT_OF_BUDGET, fmt, ap);
	va_end(ap);
	last_error.requested = requested;
	last_error.remaining = remaining;
	return XDM_E_OUT_OF_BUDGET;
}

enum xdm_status xdm_error_set_block(enum xdm_status code, xdm_generation generation,
				    enum xdm_bounds_side side, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(code, fmt, ap);
	va_end(ap);
	last_error.generation = generation;
	last_error.side = side;
	return code;
}

enum xdm_status xdm_error_set_driver(int driver_code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(XDM_E_DRIVER, fmt, ap);
	va_end(ap);
	last_error.driver_code = driver_code;
	return XDM_E_DRIVER;
}

/*
 * Put "where: " in front of the thread's current message, keeping its code
 * and payload: a loader error found while building a configured stack then
 * also says which file, line and column named the module.
 */
void xdm_error_locate(const char *source, unsigned int line, unsigned int col)
{
	char old[sizeof(last_error.message)];
	int n;

	memcpy(old, last_error.message, sizeof(old));
	n = snprintf(last_error.message, sizeof(last_error.message), "%s:%u:%u: ", source, line,
		     col);
	if (n > 0 && (size_t)n < sizeof(last_error.message)) {
		size_t room = sizeof(last_error.message) - (size_t)n - 1;
		size_t len = strnlen(old, room);

		memcpy(last_error.message + n, old, len);
		last_error.message[(size_t)n + len] = '\0';
	}
}
