/* SPDX-License-Identifier: MIT */
/*
 * nvml.c - the GPUs, from NVML reached by dlopen("libnvidia-ml.so.1"), so
 * that the plugin builds and starts on a machine without CUDA or a GPU
 * (and then says so, and advertises nothing).
 *
 * Only NVML's stable entry points are used, declared here from its ABI:
 * the plugin needs a GPU's UUID (the key of its budget), its total memory
 * (the units it advertises) and whether it still answers (its health).
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/device-plugin/dp.h"

#define NVML_SUCCESS 0

typedef void *nvml_device;

struct nvml_memory {
	unsigned long long total, free, used;
};

struct xdm_dp_nvml {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned int *n);
	int (*by_index)(unsigned int i, nvml_device *d);
	int (*by_uuid)(const char *uuid, nvml_device *d);
	int (*uuid)(nvml_device d, char *buf, unsigned int len);
	int (*memory)(nvml_device d, struct nvml_memory *m);
	const char *(*error_string)(int rc);
};

static const char *nvml_error(struct xdm_dp_nvml *n, int rc)
{
	const char *s = n->error_string ? n->error_string(rc) : NULL;

	return s ? s : "unknown NVML error";
}

int xdm_dp_nvml_open(struct xdm_dp_nvml **out, char *err, size_t errlen)
{
	struct xdm_dp_nvml *n = calloc(1, sizeof(*n));
	const char *missing = NULL;
	int rc;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(err, errlen,
			 "no NVML (%s): no NVIDIA driver on this node, or the plugin's container does not mount it",
			 dlerror());
		goto fail;
	}
#define SYM(field, name)                                                     \
	do {                                                                 \
		*(void **)&n->field = dlsym(n->lib, name);                   \
		if (!n->field && !missing)                                   \
			missing = name;                                      \
	} while (0)
	SYM(init, "nvmlInit_v2");
	SYM(shutdown, "nvmlShutdown");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
	SYM(by_uuid, "nvmlDeviceGetHandleByUUID");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(memory, "nvmlDeviceGetMemoryInfo");
	SYM(error_string, "nvmlErrorString");
#undef SYM
	if (missing) {
		snprintf(err, errlen, "libnvidia-ml.so.1 has no %s: an NVML too old for the plugin",
			 missing);
		goto fail_lib;
	}
	rc = n->init();
	if (rc != NVML_SUCCESS) {
		snprintf(err, errlen, "nvmlInit_v2 failed: %s", nvml_error(n, rc));
		goto fail_lib;
	}
	*out = n;
	return 0;
fail_lib:
	dlclose(n->lib);
fail:
	free(n);
	return -1;
}

void xdm_dp_nvml_close(struct xdm_dp_nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->lib);
	free(n);
}

int xdm_dp_nvml_list(struct xdm_dp_nvml *n, struct xdm_dp_gpu *gpus, int max, int *count,
		     char *err, size_t errlen)
{
	unsigned int total, i;
	int rc;

	*count = 0;
	rc = n->count(&total);
	if (rc != NVML_SUCCESS) {
		snprintf(err, errlen, "nvmlDeviceGetCount_v2 failed: %s", nvml_error(n, rc));
		return -1;
	}
	for (i = 0; i < total && *count < max; i++) {
		struct xdm_dp_gpu *g = &gpus[*count];
		struct nvml_memory m;
		nvml_device d;

		memset(g, 0, sizeof(*g));
		rc = n->by_index(i, &d);
		if (rc == NVML_SUCCESS)
			rc = n->uuid(d, g->uuid, sizeof(g->uuid));
		if (rc == NVML_SUCCESS)
			rc = n->memory(d, &m);
		if (rc != NVML_SUCCESS) {
			/* One GPU that does not answer does not hide the others. */
			xdm_dp_log("GPU %u does not answer NVML (%s): it is left out", i,
				   nvml_error(n, rc));
			continue;
		}
		g->total = m.total;
		g->healthy = true;
		(*count)++;
	}
	if (total > (unsigned int)max)
		xdm_dp_log("NVML lists %u GPUs; the plugin serves the first %d", total, max);
	return 0;
}

bool xdm_dp_nvml_healthy(struct xdm_dp_nvml *n, const char *uuid, char *why, size_t whylen)
{
	struct nvml_memory m;
	nvml_device d;
	int rc;

	rc = n->by_uuid(uuid, &d);
	if (rc == NVML_SUCCESS)
		rc = n->memory(d, &m);
	if (rc != NVML_SUCCESS) {
		snprintf(why, whylen, "%s", nvml_error(n, rc));
		return false;
	}
	return true;
}
