/* SPDX-License-Identifier: MIT */
/*
 * fake_nvml.c - a fake libnvidia-ml.so.1 for xdm-device-plugin's tests:
 * the GPUs of the preload tests' fake driver (tests/preload/fake_cuda.c),
 * seen as NVML sees them, from a process that has no driver loaded.
 *
 * FAKE_CUDA_DEVICES GPUs (default 1, at most 8) of FAKE_CUDA_TOTAL bytes
 * each (default 1 GiB; K, M, G binary), read as the fake driver reads
 * them, with the UUIDs the fake driver gives its devices, so that a
 * device ID of the plugin names the GPU that a pod's fake driver shows.
 *
 * A test makes GPUs disappear through FAKE_NVML_LOST, a file's path: the
 * physical indices listed in that file (digits, any separators), when it
 * exists, answer NVML_ERROR_GPU_IS_LOST as a GPU fallen off the bus does.
 * It is read at every call, so a test writes it while the plugin runs.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/preload/fake_uuid.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_GPU_IS_LOST 15

#define FAKE_MAX 8
#define EXPORT __attribute__((visibility("default")))

typedef struct fake_nvml_device *nvmlDevice_t;

struct nvml_memory {
	unsigned long long total, free, used;
};

/* What NVML exports, declared here: there is no header of ours for them. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, struct nvml_memory *memory);
const char *nvmlErrorString(int rc);

static unsigned long long env_size(const char *name, unsigned long long dflt)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s)
		return dflt;
	v = strtoull(s, &end, 10);
	if (*end == 'K')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	else if (*end == 'G')
		v <<= 30;
	return v;
}

static unsigned int count(void)
{
	unsigned long long n = env_size("FAKE_CUDA_DEVICES", 1);

	return n > FAKE_MAX ? FAKE_MAX : (unsigned int)n;
}

static int lost(unsigned int p)
{
	const char *path = getenv("FAKE_NVML_LOST");
	FILE *f = path ? fopen(path, "r") : NULL;
	int c, is = 0;
	unsigned int v = 0;
	int in = 0;

	if (!f)
		return 0;
	while (!is && (c = fgetc(f)) != EOF) {
		if (c >= '0' && c <= '9') {
			v = v * 10 + (unsigned int)(c - '0');
			in = 1;
		} else {
			if (in && v == p)
				is = 1;
			v = 0;
			in = 0;
		}
	}
	if (in && v == p)
		is = 1;
	fclose(f);
	return is;
}

static int index_of(nvmlDevice_t d)
{
	uintptr_t i = (uintptr_t)d;

	return i >= 1 && i <= count() ? (int)i - 1 : -1;
}

EXPORT int nvmlInit_v2(void)
{
	return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (!n)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = count();
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!device || index >= count())
		return NVML_ERROR_INVALID_ARGUMENT;
	if (lost(index))
		return NVML_ERROR_GPU_IS_LOST;
	*device = (nvmlDevice_t)(uintptr_t)(index + 1);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	char u[96];

	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned int p = 0; p < count(); p++) {
		fake_uuid_text((int)p, u, sizeof(u));
		if (strcmp(u, uuid))
			continue;
		if (lost(p))
			return NVML_ERROR_GPU_IS_LOST;
		*device = (nvmlDevice_t)(uintptr_t)(p + 1);
		return NVML_SUCCESS;
	}
	return NVML_ERROR_NOT_FOUND;
}

EXPORT int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	int p = index_of(device);

	if (p < 0 || !uuid || length < 41)
		return NVML_ERROR_INVALID_ARGUMENT;
	fake_uuid_text(p, uuid, length);
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, struct nvml_memory *memory)
{
	int p = index_of(device);

	if (p < 0 || !memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (lost((unsigned int)p))
		return NVML_ERROR_GPU_IS_LOST;
	memory->total = env_size("FAKE_CUDA_TOTAL", 1ull << 30);
	memory->used = 0;
	memory->free = memory->total;
	return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(int rc)
{
	switch (rc) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	default: return "Unknown Error";
	}
}
