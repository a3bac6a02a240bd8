/* SPDX-License-Identifier: MIT */
/* xdmctl_segments.c - placeholder. */
#include "config.h"

#include "xdmctl.h"
