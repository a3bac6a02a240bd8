/* SPDX-License-Identifier: MIT */
/*
 * preload_rt_user.c - a plain CUDA program that has never heard of xdm,
 * for tests/gpu/test_preload.py: built by nvcc when the test runs
 * (nvcc links the CUDA runtime statically, which reaches the driver
 * through dlopen and cuGetProcAddress), and linked with -lcuda for
 * cuMemCreate, a call by the driver's exported name.
 *
 *   preload_rt_user fill malloc|async|create CHUNK_MIB
 *	allocate CHUNK_MIB blocks until the first failure; print
 *	"filled KIND N ERROR" (N blocks, the failure's name), free them all,
 *	print "freed"
 *   preload_rt_user info
 *	print "info FREE TOTAL" (cudaMemGetInfo)
 *   preload_rt_user hold MIB
 *	cudaMalloc MIB, print "holding RC", wait for a line on stdin
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)
#define MAX_BLOCKS 4096

static const char *driver_error(CUresult rc)
{
	const char *name = NULL;

	return cuGetErrorName(rc, &name) == CUDA_SUCCESS && name ? name : "unknown";
}

/* One physical allocation of the VMM API on the current device. */
static CUresult create(size_t bytes, CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp prop;
	int dev = 0;

	memset(&prop, 0, sizeof(prop));
	cudaGetDevice(&dev);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	return cuMemCreate(h, bytes, &prop, 0);
}

static int fill(const char *kind, size_t chunk)
{
	static void *ptrs[MAX_BLOCKS];
	static CUmemGenericAllocationHandle handles[MAX_BLOCKS];
	const char *err = "none";
	int n;

	for (n = 0; n < MAX_BLOCKS; n++) {
		if (!strcmp(kind, "malloc")) {
			cudaError_t e = cudaMalloc(&ptrs[n], chunk);

			if (e != cudaSuccess) {
				err = cudaGetErrorName(e);
				break;
			}
		} else if (!strcmp(kind, "async")) {
			cudaError_t e = cudaMallocAsync(&ptrs[n], chunk, 0);

			if (e == cudaSuccess)
				e = cudaStreamSynchronize(0);
			if (e != cudaSuccess) {
				err = cudaGetErrorName(e);
				break;
			}
		} else {
			CUresult rc = create(chunk, &handles[n]);

			if (rc != CUDA_SUCCESS) {
				err = driver_error(rc);
				break;
			}
		}
	}
	printf("filled %s %d %s\n", kind, n, err);
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		if (!strcmp(kind, "malloc"))
			cudaFree(ptrs[i]);
		else if (!strcmp(kind, "async"))
			cudaFreeAsync(ptrs[i], 0);
		else
			cuMemRelease(handles[i]);
	}
	cudaDeviceSynchronize();
	printf("freed\n");
	return 0;
}

int main(int argc, char **argv)
{
	/* The runtime creates its context on the first call. */
	if (cudaFree(NULL) != cudaSuccess) {
		fprintf(stderr, "preload_rt_user: no CUDA device\n");
		return 1;
	}
	if (argc == 4 && !strcmp(argv[1], "fill"))
		return fill(argv[2], strtoull(argv[3], NULL, 10) * MIB);
	if (argc == 2 && !strcmp(argv[1], "info")) {
		size_t free_bytes = 0, total = 0;
		cudaError_t e = cudaMemGetInfo(&free_bytes, &total);

		printf("info %s %zu %zu\n", cudaGetErrorName(e), free_bytes, total);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "hold")) {
		void *p = NULL;
		cudaError_t e = cudaMalloc(&p, strtoull(argv[2], NULL, 10) * MIB);
		char line[16];

		printf("holding %s\n", cudaGetErrorName(e));
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			line[0] = '\0';
		return 0;
	}
	fprintf(stderr, "usage: preload_rt_user fill malloc|async|create MIB | info | hold MIB\n");
	return 2;
}
