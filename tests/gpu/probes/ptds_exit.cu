// SPDX-License-Identifier: MIT
/*
 * ptds_exit.cu - which plain driver sequences hang a thread in its exit,
 * with no xdm in the process: the hang that made xdm refuse the per-thread
 * default stream twice (doc/design.md).  One scenario per process, given
 * as words on the command line; three worker threads run it one after the
 * other, and the main thread frees what a worker kept with cuMemFreeAsync
 * on the legacy stream after each.  A worker that has not ended within 8 s
 * is reported as hung and the process ends (exit 3).
 *
 *   alloc=pool|default|sync|none  what the worker allocates, on the legacy
 *       stream: from a pool of its own, the device's default pool, with
 *       cuMemAlloc, or nothing (a buffer of the main thread)
 *   slow    the worker's kernel on its per-thread stream spins ~50 ms
 *   mark    then an event record on the legacy stream
 *   free    then the worker frees its memory, cuMemFreeAsync on legacy
 *   sync    then the worker synchronizes its per-thread stream
 *
 *   nvcc -arch=sm_90 -o ptds_exit tests/gpu/probes/ptds_exit.cu -lcuda -lpthread
 *   ./ptds_exit alloc=sync slow
 *
 * H200, driver 580, with this program's first form (the same sequences,
 * chosen by number): hung on the second worker: "alloc=pool slow", the
 * same with mark, free or both, "alloc=sync slow" and "alloc=sync slow
 * mark"; ended: every fast kernel, "alloc=none slow", and every sequence
 * with sync ("alloc=pool slow sync", "alloc=pool slow mark free sync",
 * "alloc=sync slow mark sync").
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(x)                                                                   \
	do {                                                                       \
		CUresult r_ = (x);                                                 \
		if (r_) {                                                          \
			const char *s_ = "?";                                      \
			cuGetErrorName(r_, &s_);                                   \
			printf("%s:%d %s\n", __FILE__, __LINE__, s_);              \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

#define BYTES (1 << 20)

enum alloc { ALLOC_POOL, ALLOC_DEFAULT, ALLOC_SYNC, ALLOC_NONE };

struct scenario {
	enum alloc alloc;
	bool slow, mark, free, sync;
};

static struct scenario sc;
static CUcontext ctx;
static CUmemoryPool pool;
static CUevent mark;
static CUdeviceptr kept, main_buf;

__global__ void spin_write(char *p, long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
	p[threadIdx.x] = 1;
}

static void *worker(void *)
{
	CUdeviceptr d = main_buf;

	CHECK(cuCtxSetCurrent(ctx));
	if (sc.alloc == ALLOC_POOL)
		CHECK(cuMemAllocFromPoolAsync(&d, BYTES, pool, CU_STREAM_LEGACY));
	else if (sc.alloc == ALLOC_DEFAULT)
		CHECK(cuMemAllocAsync(&d, BYTES, CU_STREAM_LEGACY));
	else if (sc.alloc == ALLOC_SYNC)
		CHECK(cuMemAlloc(&d, BYTES));
	spin_write<<<1, 32, 0, cudaStreamPerThread>>>((char *)d, sc.slow ? 100000000LL : 1000);
	if (sc.mark)
		CHECK(cuEventRecord(mark, CU_STREAM_LEGACY));
	if (sc.free && sc.alloc != ALLOC_NONE)
		CHECK(cuMemFreeAsync(d, CU_STREAM_LEGACY));
	else if (sc.alloc != ALLOC_NONE)
		kept = d;
	if (sc.sync)
		CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	return NULL;
}

static int parse(int argc, char **argv)
{
	static const char *const allocs[] = { "alloc=pool", "alloc=default", "alloc=sync",
					      "alloc=none" };

	for (int i = 1; i < argc; i++) {
		bool known = false;

		for (int k = 0; k < 4; k++)
			if (strcmp(argv[i], allocs[k]) == 0) {
				sc.alloc = (enum alloc)k;
				known = true;
			}
		if (!strcmp(argv[i], "slow"))
			known = sc.slow = true;
		if (!strcmp(argv[i], "mark"))
			known = sc.mark = true;
		if (!strcmp(argv[i], "free"))
			known = sc.free = true;
		if (!strcmp(argv[i], "sync"))
			known = sc.sync = true;
		if (!known) {
			printf("unknown word '%s'; see the comment at the top\n", argv[i]);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	CUmemPoolProps props;
	CUdevice dev;

	if (parse(argc, argv))
		return 2;
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CHECK(cuMemPoolCreate(&pool, &props));
	CHECK(cuEventCreate(&mark, CU_EVENT_DISABLE_TIMING));
	cudaFree(0);	/* the runtime API's launches use this primary context */
	CHECK(cuMemAlloc(&main_buf, BYTES));
	for (int round = 0; round < 3; round++) {
		struct timespec until;
		pthread_t t;

		pthread_create(&t, NULL, worker, NULL);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 8;
		if (pthread_timedjoin_np(t, NULL, &until)) {
			printf("worker %d did not end within 8 s: hung in its exit\n", round);
			fflush(stdout);
			_exit(3);
		}
		if (kept) {
			CHECK(cuCtxSynchronize());
			CHECK(cuMemFreeAsync(kept, CU_STREAM_LEGACY));
			kept = 0;
		}
	}
	CHECK(cuCtxSynchronize());
	printf("every worker ended\n");
	return 0;
}
