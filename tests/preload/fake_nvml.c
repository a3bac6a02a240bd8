/* SPDX-License-Identifier: MIT */
/*
 * fake_nvml.c - a fake libnvidia-ml.so.1 beside the fake driver
 * (fake_cuda.c), for the shim's rewrite of NVML's memory figures.
 *
 * Its devices are the fake driver's physical devices, in their order (NVML
 * ignores CUDA_VISIBLE_DEVICES): handle i + 1 for index i, the UUID
 * "GPU-" and the driver's UUID of that device, its total and what the
 * fake driver holds on it, read through the driver's test hooks.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include "tests/preload/fake_uuid.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6

typedef struct fake_nvml_device *nvmlDevice_t;

struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_memory_v2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

/* What NVML exports, declared here: there is no header of ours for them. */
int nvmlInit_v2(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, struct nvml_memory *memory);
int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, struct nvml_memory_v2 *memory);

/* The fake driver's hooks, or 0 where it is not loaded. */
static unsigned long long driver_hook(const char *name, int arg)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	unsigned long long v = 0;

	if (!h)
		return 0;
	if (arg >= 0) {
		unsigned long long (*used)(int) = (unsigned long long (*)(int))dlsym(h, name);

		v = used ? used(arg) : 0;
	} else {
		unsigned long long (*total)(void) = (unsigned long long (*)(void))dlsym(h, name);

		v = total ? total() : 0;
	}
	dlclose(h);
	return v;
}

static int index_of(nvmlDevice_t device)
{
	uintptr_t i = (uintptr_t)device;

	return i >= 1 && i <= 8 ? (int)i - 1 : -1;
}

__attribute__((visibility("default"))) int nvmlInit_v2(void)
{
	return NVML_SUCCESS;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
									   nvmlDevice_t *device)
{
	if (!device || index >= 8)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = (nvmlDevice_t)(uintptr_t)(index + 1);
	return NVML_SUCCESS;
}

/* The fake driver's UUID of physical device p, as NVML writes UUIDs. */
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid,
							       unsigned int length)
{
	int p = index_of(device);

	if (p < 0 || !uuid)
		return NVML_ERROR_INVALID_ARGUMENT;
	return fake_uuid_text(p, uuid, length) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
								     struct nvml_memory *memory)
{
	int p = index_of(device);

	if (p < 0 || !memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	memory->total = driver_hook("fakeCudaTotal", -1);
	memory->used = driver_hook("fakeCudaUsed", p);
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

/* The driver reserves nothing in the fake. */
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
									struct nvml_memory_v2 *memory)
{
	struct nvml_memory m;
	int rc;

	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	rc = nvmlDeviceGetMemoryInfo(device, &m);
	if (rc != NVML_SUCCESS)
		return rc;
	memory->total = m.total;
	memory->reserved = 0;
	memory->free = m.free;
	memory->used = m.used;
	return NVML_SUCCESS;
}
