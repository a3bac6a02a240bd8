/* SPDX-License-Identifier: MIT */
/* xdmctl_segments.h - placeholder. */
