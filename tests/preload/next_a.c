/* SPDX-License-Identifier: MIT */
/*
 * next_a.c - an interposer preloaded after the shim, for the test of
 * dlsym(RTLD_NEXT): it defines xdm_next_probe and looks for the next
 * definition, which next_b.c has.  A dlsym that searched after the shim
 * instead of after this object would find this one's own.
 */
#include "config.h"

#include <dlfcn.h>

__attribute__((visibility("default"))) int xdm_next_probe(void);
__attribute__((visibility("default"))) int xdm_next_probe_after(void);

int xdm_next_probe(void)
{
	return 1;
}

/* The value of the next xdm_next_probe in the search order: 2 is right. */
int xdm_next_probe_after(void)
{
	int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "xdm_next_probe");

	return next ? next() : -1;
}
