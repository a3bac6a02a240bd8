/* SPDX-License-Identifier: MIT */
/*
 * module.c - the entry symbol of host.so: its only export.
 */
#include "config.h"

#include <xdm/module.h>

#include "host.h"

XDM_MODULE(&host_platform_ops, &host_backend_ops, &host_vmm_ops)
