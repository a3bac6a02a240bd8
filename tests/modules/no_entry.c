/* SPDX-License-Identifier: MIT */
/*
 * no_entry.c - a test module that exports a function, but not the entry
 * symbol: the mistake of misspelling it, or of forgetting XDM_MODULE().
 */
#include "config.h"

#include <xdm/module.h>

/* Visible on purpose, so that the file exports something. */
XDM_MODULE_EXPORT int xdm_module_entry_misspelt(void);

int xdm_module_entry_misspelt(void)
{
	return 0;
}
