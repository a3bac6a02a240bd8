/* SPDX-License-Identifier: MIT */
/*
 * module.c - the entry symbol of cuda.so: its only export.
 *
 * One file carries the platform and its three backends, because the
 * backends use the platform's driver table and context.  The loader finds
 * cuda_direct, cuda_async and cuda_vmm here by their family name (the part
 * before the first underscore), so no per-backend file or symlink is
 * installed.
 */
#include "config.h"

#include <xdm/module.h>

#include "cuda_priv.h"

XDM_MODULE(&cuda_platform_ops, &cuda_direct_ops, &cuda_async_ops, &cuda_vmm_ops)
