/* SPDX-License-Identifier: MIT */
/*
 * cuda_driver.c - the CUDA driver as the anchors reach it: libcuda.so.1
 * opened at run time, its error names, the calling thread's last failure
 * and the primary context made current where a thread lacks it.
 *
 * Nothing links libcuda, so xdm-bench still runs where there is none; the
 * library is opened when an anchor is, never from a constructor.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include "cuda_anchors.h"

/* "CUDA_ERROR_X: the driver's sentence", whatever the driver knows of rc. */
void cu_text(const struct cu_driver *d, CUresult rc, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;

	if (d->cuGetErrorName && d->cuGetErrorName(rc, &name) != CUDA_SUCCESS)
		name = NULL;
	if (d->cuGetErrorString && d->cuGetErrorString(rc, &text) != CUDA_SUCCESS)
		text = NULL;
	if (name)
		snprintf(buf, len, "%s: %s", name, text ? text : "no description");
	else
		snprintf(buf, len, "CUresult %d: not an error this driver knows", (int)rc);
}

/* Records why the calling thread failed; returns -1 for the caller's return. */
int cu_fail(struct cu_anchor *a, const char *call, CUresult rc)
{
	/* A setspecific that fails leaves strerror() saying nothing was recorded. */
	pthread_setspecific(a->err_call, (void *)(uintptr_t)call);
	pthread_setspecific(a->err_rc, (void *)(uintptr_t)rc);
	return -1;
}

/*
 * Opens libcuda.so.1 and fills the table.  Once cuInit has run the handle
 * is never closed: the driver starts threads of its own that may outlive
 * our last call, and its code must not be unmapped under them; the process
 * ends soon after anyway.
 */
int cu_driver_open(struct cu_driver *d, char *why, size_t len)
{
	const char *err;

	dlerror();
	d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!d->lib) {
		err = dlerror();
		snprintf(why, len, "cannot open the CUDA driver library libcuda.so.1 (%s); the anchors call the driver's own allocators and need the NVIDIA driver installed",
			 err ? err : "no reason given");
		return -1;
	}
#define CU_RESOLVE(fn)							\
	do {								\
		d->fn = (__typeof__(d->fn))dlsym(d->lib, CU_STR(fn));	\
		if (!d->fn) {						\
			err = dlerror();				\
			snprintf(why, len, "the CUDA driver libcuda.so.1 has no %s, which the anchors call; is the driver older than the toolkit headers xdm-bench was built with (CUDA %d.%d)? (%s)", \
				 CU_STR(fn), CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, \
				 err ? err : "no reason given");	\
			dlclose(d->lib);	/* safe: no call made yet */ \
			d->lib = NULL;					\
			return -1;					\
		}							\
	} while (0);
	CU_CALLS(CU_RESOLVE)
#undef CU_RESOLVE
	return 0;
}

/*
 * Any thread may call a subject, but a thread starts with no current
 * context.  One cuCtxGetCurrent when ours is current already; otherwise it
 * is made current and stays so, as after a thread's first CUDA call.
 */
int cu_make_current(struct cu_anchor *a)
{
	CUcontext cur = NULL;
	CUresult rc = a->drv.cuCtxGetCurrent(&cur);

	if (rc != CUDA_SUCCESS)
		return cu_fail(a, "cuCtxGetCurrent", rc);
	if (cur == a->ctx)
		return 0;
	rc = a->drv.cuCtxSetCurrent(a->ctx);
	return rc == CUDA_SUCCESS ? 0 : cu_fail(a, "cuCtxSetCurrent", rc);
}

/* For calls whose failure leaves nothing to do but say so, at the end of a run. */
void cu_warn(const struct cu_anchor *a, const char *name, const char *call, CUresult rc)
{
	char text[256];

	cu_text(&a->drv, rc, text, sizeof(text));
	fprintf(stderr, "xdm-bench: warning: %s: %s at the end failed: %s\n", name, call, text);
}
