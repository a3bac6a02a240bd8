/* SPDX-License-Identifier: MIT */
/*
 * uuid.c - how xdm writes a device's UUID (xdm_uuid_format, xdm(3)).
 */
#include "config.h"

#include <stdio.h>

#include <xdm/xdm.h>

void xdm_uuid_format(const unsigned char b[16], char *out, size_t len)
{
	snprintf(out, len,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}
