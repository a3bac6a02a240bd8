/* SPDX-License-Identifier: MIT */
/* xdmctl_mounts.c - placeholder. */
#include "config.h"

#include "xdmctl.h"
