/* SPDX-License-Identifier: MIT */
/*
 * xdm_like_module.c - a shared object that looks like one of xdm's own
 * modules to the preload shim, and allocates through the driver as they
 * do.
 *
 * xdm's cuda backend, loaded into a program that runs under the shim,
 * charges its own blocks to the budget; the shim must not charge them a
 * second time.  It tells xdm's modules from the program by their
 * xdm_module_entry symbol, which this object exports (returning no
 * tables: nothing loads it as a module).  module_alloc(n) then reaches
 * the driver by the same road as the cuda backend: its own dlopen of
 * libcuda.so.1, cuGetProcAddress_v2 by dlsym, cuMemAlloc through that.
 * preload_user's module:SIZE calls it.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include <xdm/module.h>

#include "preload/cuda_abi.h"

/* The CUDA version the module says it was built for. */
#define MODULE_CUDA_VERSION 13000

XDM_MODULE_EXPORT const struct xdm_ops *const *xdm_module_entry(void);
XDM_MODULE_EXPORT int module_alloc(size_t n);

/* What the module allocated last; it frees nothing, holding it until exit. */
static CUdeviceptr module_last;

XDM_MODULE_EXPORT const struct xdm_ops *const *xdm_module_entry(void)
{
	return NULL;
}

static void *module_entry_point(cu_get_proc_address_fn gpa, const char *name)
{
	CUdriverProcAddressQueryResult status = 0;
	void *p = NULL;

	if (gpa(name, &p, MODULE_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
	    CUDA_SUCCESS)
		return NULL;
	return p;
}

/* n bytes by cuMemAlloc; the driver's code, or NOT_INITIALIZED without one. */
XDM_MODULE_EXPORT int module_alloc(size_t n)
{
	typedef CUresult (*init_fn)(unsigned int flags);
	cu_get_proc_address_fn gpa;
	cu_mem_alloc_fn alloc;
	CUdeviceptr p;
	init_fn init;
	CUresult rc;
	void *h;

	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		goto no_driver;
	gpa = (cu_get_proc_address_fn)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa)
		goto no_driver;
	init = (init_fn)module_entry_point(gpa, "cuInit");
	alloc = (cu_mem_alloc_fn)module_entry_point(gpa, "cuMemAlloc");
	if (!init || !alloc)
		goto no_driver;
	rc = init(0);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = alloc(&p, n);
	if (rc == CUDA_SUCCESS)
		module_last = p;
	return rc;

no_driver:
	fprintf(stderr, "xdm_like_module: no driver: %s\n", h ? "an entry point is missing"
							       : dlerror());
	return CUDA_ERROR_NOT_INITIALIZED;
}
