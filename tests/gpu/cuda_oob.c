/* SPDX-License-Identifier: MIT */
/*
 * cuda_oob.c - a planted out-of-bounds write, for the sanitizer gate.
 *
 *   cuda_oob STACK        (cuda_direct, cuda_async, cuda_vmm or "pool | cuda_vmm")
 *
 * Allocates a block of exactly 1000 bytes from a runtime on BACKEND and has
 * a kernel store one byte just past its end, then synchronizes, frees and
 * exits 0.  Run plainly, the stray byte most likely lands in memory the
 * driver rounded the allocation up to, and nothing notices.  Under
 * `compute-sanitizer --tool memcheck` the write must be reported where the
 * allocation is the driver's own (cuda_direct); whether memcheck sees it
 * inside cuda_async's pool is what the gate records.
 *
 * Exit: 0 when every call succeeded, 1 when one failed (a write caught by
 * the sanitizer typically makes the synchronization fail), 2 for bad usage,
 * 77 when there is no GPU.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <xdm/xdm.h>

#include "tests/lib/cudatest.h"

#define PLANTED_BYTES 1000

static int fail_xdm(const char *what, enum xdm_status st)
{
	fprintf(stderr, "cuda_oob: %s: %s (%s)\n", what, xdm_strerror(st),
		xdm_last_error_message());
	return 1;
}

int main(int argc, char **argv)
{
	struct xdm_runtime *rt;
	struct xdm_block b;
	enum xdm_status st;
	char why[512];
	void *h = NULL;
	size_t offset;
	CUresult r;
	int rc = 0;

	if (argc != 2 || (strcmp(argv[1], "cuda_direct") && strcmp(argv[1], "cuda_async") &&
			  strcmp(argv[1], "cuda_vmm") && strcmp(argv[1], "pool | cuda_vmm"))) {
		fprintf(stderr, "usage: cuda_oob cuda_direct|cuda_async|cuda_vmm|'pool | cuda_vmm'\n");
		return 2;
	}
	if (ct_driver_open(why, sizeof(why))) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	st = xdm_runtime_create(0, "cuda", argv[1], &rt);
	if (st == XDM_E_NO_DEVICE) {
		printf("SKIP: no GPU: %s\n", xdm_last_error_message());
		return 77;
	}
	if (st)
		return fail_xdm("runtime", st);
	r = ct_gpu_init(0);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_oob: driver setup: %s\n%s\n", ct_result_text(r),
			ct_gpu.jit_log);
		return 1;
	}
	st = xdm_allocate(rt, PLANTED_BYTES, 0, "planted", &b);
	if (st)
		return fail_xdm("allocate", st);
	st = xdm_stream_handle(rt, 0, &h);
	if (st)
		return fail_xdm("stream handle", st);

	/*
	 * One past the end of the block as the runtime describes it: that is
	 * byte 1000 unless the backend reports rounded-up usable bytes, and
	 * then the first byte it never offered.
	 */
	offset = b.bytes;
	printf("cuda_oob: %s block of %zu bytes (asked %d) at 0x%llx; writing 1 byte at "
	       "offset %zu\n", argv[1], b.bytes, PLANTED_BYTES, (unsigned long long)b.ptr, offset);
	fflush(stdout);
	r = ct_oob_write((CUstream)h, (CUdeviceptr)b.ptr, offset, 0xee);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_oob: launch: %s\n", ct_result_text(r));
		rc = 1;
	}
	st = xdm_stream_synchronize(rt, 0);
	if (st)
		rc = fail_xdm("synchronize", st);
	r = ct_drv.cuCtxSynchronize();
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_oob: context synchronize: %s\n", ct_result_text(r));
		rc = 1;
	}
	st = xdm_deallocate(rt, &b);
	if (st)
		rc = fail_xdm("deallocate", st);
	st = xdm_reap_pending(rt);
	if (st)
		rc = fail_xdm("reap", st);
	st = xdm_runtime_destroy(rt);
	if (st)
		rc = fail_xdm("destroy", st);
	if (rc == 0)
		printf("cuda_oob: done, nothing reported by the program itself\n");
	return rc;
}
