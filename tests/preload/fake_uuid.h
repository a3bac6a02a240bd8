/* SPDX-License-Identifier: MIT */
/*
 * fake_uuid.h - the UUID of the fake driver's physical device p (fake_cuda.c),
 * shared by the fake NVMLs (tests/preload, tests/k8s) so that a device one
 * names is the device the other shows: fa ce p, then p + 1 thirteen times.
 */
#ifndef XDM_TESTS_FAKE_UUID_H
#define XDM_TESTS_FAKE_UUID_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static inline void fake_uuid_bytes(int p, unsigned char b[16])
{
	b[0] = 0xfa;
	b[1] = 0xce;
	b[2] = (unsigned char)p;
	memset(b + 3, p + 1, 13);
}

/* As NVML and CUDA_VISIBLE_DEVICES write it; false when len is too short. */
static inline int fake_uuid_text(int p, char *buf, size_t len)
{
	unsigned char b[16];
	int n;

	fake_uuid_bytes(p, b);
	n = snprintf(buf, len,
		     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		     b[12], b[13], b[14], b[15]);
	return n > 0 && (size_t)n < len;
}

#endif
