// SPDX-License-Identifier: MIT
/*
 * ptds_order.cu - does a second thread's work on its per-thread default
 * stream follow a first thread's, given what the first queued on the
 * legacy stream in between?  The question behind serving
 * CU_STREAM_PER_THREAD through the legacy stream (doc/design.md).
 *
 * Thread A launches a kernel that spins ~300 ms on its per-thread stream
 * and then writes 1; then, by mode, queues on the legacy stream: nothing
 * (0, the control), a wait on an event of its per-thread stream (1), an
 * event record (2), a 1-byte memset (3), the wait and a record (4).  Then
 * thread B writes 2 on its own per-thread stream.  2 at the end: B's write
 * followed A's.  Not part of make check (it needs nvcc); by hand on a GPU:
 *
 *   nvcc -arch=sm_90 -o ptds_order tests/gpu/probes/ptds_order.cu -lpthread
 *   ./ptds_order
 *
 * H200, driver 580, with this program's first form (the same sequence;
 * A ended without synchronizing its stream, after B): mode 0 raced (final
 * 1, B's sync took 0 ms, in both of its runs); modes 1-4 ordered (final 2,
 * B's sync took 303-304 ms).
 */
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>

#define CHECK(x)                                                                   \
	do {                                                                       \
		cudaError_t e_ = (x);                                              \
		if (e_) {                                                          \
			printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

enum mode { NOTHING, WAIT_EVENT, RECORD, MEMSET, WAIT_AND_RECORD };

static const char *const mode_name[] = { "nothing (control)", "wait on A's event",
					  "event record", "1-byte memset",
					  "wait and event record" };

__global__ void slow_write(int *p, int v, long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
	*p = v;
}

__global__ void fast_write(int *p, int v)
{
	*p = v;
}

static int *buf;
static char *scratch;
static enum mode mode;
static pthread_barrier_t meet;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *thread_a(void *)
{
	cudaEvent_t e;

	CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	slow_write<<<1, 1, 0, cudaStreamPerThread>>>(buf, 1, 600000000LL);
	CHECK(cudaGetLastError());
	if (mode == WAIT_EVENT || mode == WAIT_AND_RECORD) {
		CHECK(cudaEventRecord(e, cudaStreamPerThread));
		CHECK(cudaStreamWaitEvent(cudaStreamLegacy, e, 0));
	}
	if (mode == RECORD || mode == WAIT_AND_RECORD)
		CHECK(cudaEventRecord(e, cudaStreamLegacy));
	if (mode == MEMSET)
		CHECK(cudaMemsetAsync(scratch, 0, 1, cudaStreamLegacy));
	pthread_barrier_wait(&meet);	/* A queued everything: B goes */
	pthread_barrier_wait(&meet);	/* B is done: A may end */
	CHECK(cudaStreamSynchronize(cudaStreamPerThread));
	CHECK(cudaEventDestroy(e));
	return NULL;
}

static void *thread_b(void *)
{
	double t0;

	pthread_barrier_wait(&meet);
	t0 = now_s();
	fast_write<<<1, 1, 0, cudaStreamPerThread>>>(buf, 2);
	CHECK(cudaStreamSynchronize(cudaStreamPerThread));
	printf("  B's own sync took %.0f ms\n", (now_s() - t0) * 1e3);
	pthread_barrier_wait(&meet);
	return NULL;
}

int main(void)
{
	static const enum mode modes[] = { NOTHING, WAIT_EVENT, RECORD, MEMSET,
					   WAIT_AND_RECORD, NOTHING };

	CHECK(cudaMalloc(&buf, sizeof(int)));
	CHECK(cudaMalloc(&scratch, 64));
	/* Load both kernels first: a lazy module load serializes the device. */
	slow_write<<<1, 1>>>(buf, 0, 10);
	fast_write<<<1, 1>>>(buf, 0);
	CHECK(cudaDeviceSynchronize());
	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		pthread_t a, b;
		int v;

		mode = modes[i];
		CHECK(cudaMemset(buf, 0, sizeof(int)));
		CHECK(cudaDeviceSynchronize());
		pthread_barrier_init(&meet, NULL, 2);
		pthread_create(&a, NULL, thread_a, NULL);
		pthread_create(&b, NULL, thread_b, NULL);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		pthread_barrier_destroy(&meet);
		CHECK(cudaDeviceSynchronize());
		CHECK(cudaMemcpy(&v, buf, sizeof(int), cudaMemcpyDeviceToHost));
		printf("legacy gets %s: final %d, %s\n", mode_name[mode], v,
		       v == 2 ? "B followed A" : "B raced A");
	}
	return 0;
}
