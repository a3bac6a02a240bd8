/* SPDX-License-Identifier: MIT */
/* next_b.c - the definition next_a.c's dlsym(RTLD_NEXT) must find. */
#include "config.h"

__attribute__((visibility("default"))) int xdm_next_probe(void);

int xdm_next_probe(void)
{
	return 2;
}
