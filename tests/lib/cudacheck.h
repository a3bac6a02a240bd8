/* SPDX-License-Identifier: MIT */
/*
 * cudacheck.h - small helpers the GPU check suites share: a driver call's
 * check, a runtime stream's native handle, a block's device pointer,
 * synchronizing every stream, the runtime's count of queued waits, counting
 * bytes of device memory, and the main of a suite.
 */
#ifndef XDM_TESTS_CUDACHECK_H
#define XDM_TESTS_CUDACHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/cudatest.h"
#include "tests/lib/testutil.h"

#define CU_OK(expr)                                                             \
	do {                                                                    \
		CUresult cu_r_ = (expr);                                        \
		ck_assert_msg(cu_r_ == CUDA_SUCCESS, "%s: %s", #expr,           \
			      ct_result_text(cu_r_));                           \
	} while (0)

static inline CUstream ct_stream(struct xdm_runtime *rt, xdm_stream_id s)
{
	void *h = NULL;

	TU_OK(xdm_stream_handle(rt, s, &h));
	return (CUstream)h;
}

static inline CUdeviceptr ct_dev(const struct xdm_block *b)
{
	return (CUdeviceptr)b->ptr;
}

static inline void ct_sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

static inline uint64_t ct_waits(struct xdm_runtime *rt)
{
	struct xdm_stats st;

	xdm_runtime_stats(rt, &st);
	return st.waits_queued;
}

/* How many of the first n bytes at p hold v. */
static inline size_t ct_count_bytes(CUdeviceptr p, size_t n, uint8_t v)
{
	uint8_t *host = malloc(n);
	size_t same = 0;

	ck_assert_ptr_nonnull(host);
	CU_OK(ct_drv.cuMemcpyDtoH(host, p, n));
	for (size_t i = 0; i < n; i++)
		same += host[i] == v;
	free(host);
	return same;
}

/* XDM_TEST_SANITIZER: leave out the controls, which race on purpose. */
static inline bool ct_under_sanitizer(void)
{
	const char *san = getenv("XDM_TEST_SANITIZER");

	return san && *san && strcmp(san, "0") != 0;
}

/*
 * Whether the driver's free memory (cuMemGetInfo) moves only with what
 * this process maps, so a test may hold it to the bytes: not under Compute
 * Sanitizer, whose own device allocations move it too (gate runs saw 0
 * taken for 128 MiB mapped, and 588 MiB for 1 GiB).  The layers' own
 * counts are asserted either way.
 */
static inline bool ct_driver_free_is_ours(void)
{
	return !ct_under_sanitizer();
}

/*
 * The main of a GPU suite: skip (77) where probe_stack cannot be served,
 * exit 0 for `--probe`; else one suite at a time on the machine, under a
 * watchdog of watchdog_s (more under a sanitizer), in one process (CK_NOFORK: CUDA state does not survive fork).
 */
static inline int ct_run_gpu_suite(int argc, char **argv, const char *probe_stack,
				   Suite *(*make)(void), unsigned int watchdog_s)
{
	SRunner *sr;
	CUresult r;
	int rc, failed;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/*
	 * The lock first: the probe makes a context and gives it back, which
	 * another suite measuring the device's free memory must not see.
	 */
	ct_take_gpu_lock();
	rc = ct_probe(probe_stack);
	if (rc || (argc > 1 && strcmp(argv[1], "--probe") == 0))
		return rc;

	ct_start_watchdog(ct_under_sanitizer() ? watchdog_s + 300 : watchdog_s);
	r = ct_gpu_init(0);
	if (r != CUDA_SUCCESS) {
		printf("ERROR: the tests' own driver setup failed: %s\n%s\n", ct_result_text(r),
		       ct_gpu.jit_log);
		return 99;
	}
	sr = srunner_create(make());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* XDM_TESTS_CUDACHECK_H */
