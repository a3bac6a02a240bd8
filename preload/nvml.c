/* SPDX-License-Identifier: MIT */
/*
 * nvml.c - NVML's memory figures, cut to the budget as cuMemGetInfo's are.
 *
 * Programs and their libraries also size themselves from NVML
 * (nvmlDeviceGetMemoryInfo), which torch, monitoring agents and schedulers
 * read.  The shim answers for a device the program has allocated on
 * through CUDA (it knows that device's budget); NVML names devices by a
 * handle of its own, which its UUID ties to the budget's.  Any other
 * device's figures are NVML's own.
 *
 * The structs are NVML's stable ABI: nvmlMemory_t (total, free, used) and
 * nvmlMemory_v2_t (a version word, total, reserved, free, used).
 */
#include "config.h"

#include <string.h>

#include "preload/preload.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_UUID_LEN 96

struct nvml_memory {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

struct nvml_memory_v2 {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
};

typedef int (*nvml_memory_fn)(void *device, void *memory);
typedef int (*nvml_uuid_fn)(void *device, char *uuid, unsigned int length);

/* The budget of NVML's device, if the program has used it through CUDA. */
static struct preload_device *device_of(void *device)
{
	nvml_uuid_fn get_uuid = (nvml_uuid_fn)preload_library_symbol("libnvidia-ml.so.1",
								     "nvmlDeviceGetUUID");
	char uuid[NVML_UUID_LEN];

	if (!get_uuid || get_uuid(device, uuid, sizeof(uuid)) != NVML_SUCCESS)
		return NULL;
	uuid[sizeof(uuid) - 1] = '\0';
	/* NVML writes "GPU-" and then the UUID as the budget names it. */
	return preload_device_by_uuid(strncmp(uuid, "GPU-", 4) ? uuid : uuid + 4);
}

/* total and free cut to the budget; what is used follows. */
static void clip(void *device, unsigned long long *total, unsigned long long *free_bytes)
{
	struct preload_device *d = device_of(device);
	size_t t = (size_t)*total, f = (size_t)*free_bytes;

	if (!d)
		return;
	preload_clip_info(d, &f, &t);
	*total = t;
	*free_bytes = f;
}

PRELOAD_EXPORT int nvmlDeviceGetMemoryInfo(void *device, void *memory)
{
	nvml_memory_fn real = (nvml_memory_fn)preload_real(PRELOAD_NVML_MEMORY_INFO, false);
	struct nvml_memory *m = memory;
	int rc;

	if (!real)
		return NVML_ERROR_UNINITIALIZED;
	rc = real(device, memory);
	if (rc != NVML_SUCCESS || !m)
		return rc;
	clip(device, &m->total, &m->free);
	m->used = m->total - m->free;
	return rc;
}

PRELOAD_EXPORT int nvmlDeviceGetMemoryInfo_v2(void *device, void *memory)
{
	nvml_memory_fn real = (nvml_memory_fn)preload_real(PRELOAD_NVML_MEMORY_INFO_V2, false);
	struct nvml_memory_v2 *m = memory;
	int rc;

	if (!real)
		return NVML_ERROR_UNINITIALIZED;
	rc = real(device, memory);
	if (rc != NVML_SUCCESS || !m)
		return rc;
	clip(device, &m->total, &m->free);
	if (m->reserved > m->total - m->free)
		m->reserved = m->total - m->free;
	m->used = m->total - m->free - m->reserved;
	return rc;
}
