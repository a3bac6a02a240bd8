/* SPDX-License-Identifier: MIT */
/*
 * check_vmm_cuda.c - cuda_vmm on a real GPU: blocks of several granules are
 * one range that kernels fill across the seams; allocate_at grows a block
 * in place and the two are used as one; any run of mapped granules is
 * given back on its own, whatever block it came from, and nothing else is;
 * a release waits for the kernel still running on its stream (unmapping
 * under it would kill the context); released memory goes back to the
 * driver; and a request larger than the device fails with nothing left.
 *
 * allocate_at and partial releases are methods a layer above calls, not
 * runtime calls, so the stack is `vmmprobe | cuda_vmm`: vmmprobe is this
 * program's own adaptor, with no methods but init, which keeps its layer so
 * that the tests can call into cuda_vmm below it as the pool would.
 *
 * Like check_cuda, the suite runs in one process (CK_NOFORK: CUDA state
 * does not survive fork) and skips (77) without a GPU.
 *
 *   check_vmm_cuda            run the suite
 *   check_vmm_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <check.h>
#include <xdm/module.h>
#include <xdm/xdm.h>

#include "tests/lib/cudacheck.h"
#include "tests/lib/testutil.h"

#define MIB ((size_t)1024 * 1024)
#define SPIN (300 * CT_CYCLES_PER_MS)	/* about 300 ms on an H200 */

/* Byte patterns: distinct, and none is 0 or what fresh memory tends to hold. */
enum { P = 0xa1, Q = 0x5c, R = 0x3e };

/* ---- the probe adaptor ------------------------------------------------ */

/* The probe's layer in the runtime made last (one at a time, no fork). */
static struct xdm_layer *probe;

static enum xdm_status probe_init(struct xdm_layer *self, const struct xdm_params *params)
{
	(void)params;
	probe = self;
	return XDM_OK;
}

static const struct xdm_ops probe_ops = {
	XDM_OPS_HEADER("vmmprobe", XDM_KIND_ADAPTOR),
	.description = "the test's handle on the layer below",
	.init = probe_init,
};

/* The runtime, its cuda_vmm layer, and that layer's granule. */
struct vmm {
	struct xdm_runtime *rt;
	struct xdm_layer *up;
	uint64_t g;
};

static struct vmm open_vmm(const char *params)
{
	static bool registered;
	struct vmm v;
	char stack[128];

	if (!registered)
		TU_OK(xdm_module_register(&probe_ops));
	registered = true;
	snprintf(stack, sizeof(stack), "vmmprobe | cuda_vmm%s%s", *params ? " " : "", params);
	CU_OK(ct_ctx_current());
	TU_OK(xdm_runtime_create(0, "cuda", stack, &v.rt));
	ck_assert_str_eq(xdm_runtime_layer_name(v.rt, 1), "cuda_vmm");
	v.up = xdm_layer_upstream(probe);
	ck_assert_ptr_nonnull(v.up);
	v.g = xdm_up_granularity(v.up);
	ck_assert_uint_gt(v.g, 0);
	ck_assert_uint_eq(v.g & (v.g - 1), 0);
	return v;
}

static uint64_t attr(const struct vmm *v, const char *name)
{
	return tu_attr_u64(v->rt, 1, name);
}

/* What the core fills in before a layer sees a block. */
static struct xdm_block blank(xdm_stream_id stream)
{
	return (struct xdm_block){ .stream = stream, .tag = "vmm test",
				   .align = XDM_DEFAULT_ALIGN, .state = XDM_BLOCK_LIVE };
}

static struct xdm_block get(const struct vmm *v, size_t bytes, xdm_stream_id stream)
{
	struct xdm_block b = blank(stream);

	b.bytes = bytes;
	TU_OK(xdm_up_allocate(v->up, bytes, stream, b.tag, &b));
	ck_assert_uint_eq(b.ptr % v->g, 0);
	ck_assert_uint_eq(b.bytes % v->g, 0);
	ck_assert_uint_ge(b.bytes, bytes);
	ck_assert_uint_lt(b.bytes - bytes, v->g);
	ck_assert_uint_eq(b.align, v->g);
	return b;
}

static enum xdm_status get_at(const struct vmm *v, uint64_t ptr, size_t bytes,
			      xdm_stream_id stream, struct xdm_block *b)
{
	*b = blank(stream);
	b->bytes = bytes;
	return xdm_up_allocate_at(v->up, ptr, bytes, stream, b->tag, b);
}

/* Hand back [ptr, ptr + bytes) on stream, as the pool would. */
static enum xdm_status put(const struct vmm *v, uint64_t ptr, size_t bytes,
			   xdm_stream_id stream)
{
	struct xdm_block b = blank(stream);

	b.ptr = ptr;
	b.bytes = bytes;
	return xdm_up_deallocate(v->up, &b);
}

static void expect_bytes(CUdeviceptr p, size_t n, uint8_t value, const char *what)
{
	size_t same = ct_count_bytes(p, n, value);

	ck_assert_msg(same == n, "%s: %zu of %zu bytes are not 0x%02x", what, n - same, n, value);
}

static void expect_message(const char *text)
{
	ck_assert_msg(strstr(xdm_last_error_message(), text), "expected \"%s\" in: %s", text,
		      xdm_last_error_message());
}

/* Everything handed back and reaped: nothing mapped, then destroyed. */
static void close_vmm(struct vmm *v)
{
	ct_sync_all(v->rt);
	TU_OK(xdm_reap_pending(v->rt));
	ck_assert_uint_eq(attr(v, "mapped"), 0);
	ck_assert_uint_eq(attr(v, "releasing"), 0);
	ck_assert_uint_eq(attr(v, "maps"), attr(v, "releases"));
	ck_assert_uint_eq(xdm_up_bytes_outstanding(v->up), 0);
	TU_OK(xdm_runtime_destroy(v->rt));
	probe = NULL;
}

/* ---- blocks of several granules are one range -------------------------- */

START_TEST(blocks_are_one_range_across_granule_seams)
{
	struct vmm v = open_vmm("reserve=1G");
	struct xdm_block b;
	CUdeviceptr p;
	size_t n, w = 4096;

	ck_assert_uint_eq(attr(&v, "granule"), v.g);
	ck_assert_uint_eq(attr(&v, "reserved_va"), 1024 * MIB);
	/* Through the runtime, as a stack of cuda_vmm alone is used. */
	TU_OK(xdm_allocate(v.rt, 3 * v.g - 100, 0, "three granules", &b));
	p = ct_dev(&b);
	n = b.bytes;
	ck_assert_uint_eq(n, 3 * v.g);
	ck_assert_uint_eq(b.align, v.g);
	ck_assert_uint_eq(xdm_bytes_outstanding(v.rt), n);
	ck_assert_uint_eq(attr(&v, "mapped"), n);
	ck_assert_uint_eq(attr(&v, "maps"), 3);
	/* One fill over all, then one across each seam. */
	CU_OK(ct_fill(ct_stream(v.rt, 0), p, n, P));
	CU_OK(ct_fill(ct_stream(v.rt, 0), p + v.g - w, 2 * w, Q));
	CU_OK(ct_fill(ct_stream(v.rt, 0), p + 2 * v.g - w, 2 * w, R));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	expect_bytes(p, v.g - w, P, "first granule");
	expect_bytes(p + v.g - w, 2 * w, Q, "first seam");
	expect_bytes(p + v.g + w, v.g - 2 * w, P, "second granule");
	expect_bytes(p + 2 * v.g - w, 2 * w, R, "second seam");
	expect_bytes(p + 2 * v.g + w, v.g - w, P, "third granule");
	TU_OK(xdm_deallocate(v.rt, &b));
	ck_assert_uint_eq(xdm_bytes_outstanding(v.rt), 0);
	ck_assert_uint_eq(attr(&v, "mapped_peak"), n);
	close_vmm(&v);
}
END_TEST

/* ---- allocate_at grows a block in place -------------------------------- */

START_TEST(allocate_at_grows_in_place)
{
	struct vmm v = open_vmm("reserve=1G");
	struct xdm_block a = get(&v, 2 * v.g, 0), b, c;
	uint64_t end = a.ptr + a.bytes, reserved = attr(&v, "reserved_va");

	/* The range was empty: the lowest run is its start. */
	TU_OK(get_at(&v, end, v.g, 0, &b));
	ck_assert_uint_eq(b.ptr, end);
	ck_assert_uint_eq(b.bytes, v.g);
	ck_assert_uint_eq(attr(&v, "mapped"), 3 * v.g);
	/* One kernel over both blocks: they are one range now. */
	CU_OK(ct_fill(ct_stream(v.rt, 0), ct_dev(&a), 3 * v.g, R));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	expect_bytes(ct_dev(&a), 3 * v.g, R, "grown range");

	/* Taken, partly taken, past the range: no room there; the caller
	 * allocates anywhere instead. */
	ck_assert_int_eq(get_at(&v, a.ptr, v.g, 0, &c), XDM_E_OUT_OF_MEMORY);
	expect_message("taken");
	ck_assert_int_eq(get_at(&v, end - v.g, 2 * v.g, 0, &c), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(get_at(&v, a.ptr + reserved, v.g, 0, &c), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(get_at(&v, a.ptr + reserved - v.g, 2 * v.g, 0, &c), XDM_E_OUT_OF_MEMORY);
	/* Off a granule is a caller's bug. */
	ck_assert_int_eq(get_at(&v, end + v.g + 4096, v.g, 0, &c), XDM_E_INVALID);
	ck_assert_uint_eq(attr(&v, "mapped"), 3 * v.g);
	ck_assert_uint_eq(attr(&v, "maps"), 3);

	/* Both blocks back in one call: a range that spans them. */
	TU_OK(put(&v, a.ptr, 3 * v.g, 0));
	close_vmm(&v);
}
END_TEST

/* ---- any run of mapped granules is given back, nothing else ------------ */

START_TEST(partial_release_keeps_the_rest)
{
	struct vmm v = open_vmm("reserve=1G");
	struct xdm_block a = get(&v, 3 * v.g, 0), mid;
	CUdeviceptr p = ct_dev(&a);

	CU_OK(ct_fill(ct_stream(v.rt, 0), p, 3 * v.g, P));
	TU_OK(put(&v, a.ptr + v.g, v.g, 0));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	TU_OK(xdm_reap_pending(v.rt));
	ck_assert_uint_eq(attr(&v, "mapped"), 2 * v.g);
	ck_assert_uint_eq(attr(&v, "releases"), 1);
	ck_assert_uint_eq(xdm_up_bytes_outstanding(v.up), 2 * v.g);

	/* The outer granules are untouched, and still take writes. */
	expect_bytes(p, v.g, P, "first granule after the middle went");
	expect_bytes(p + 2 * v.g, v.g, P, "last granule after the middle went");
	CU_OK(ct_fill(ct_stream(v.rt, 0), p, v.g, Q));
	CU_OK(ct_fill(ct_stream(v.rt, 0), p + 2 * v.g, v.g, R));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	expect_bytes(p, v.g, Q, "first granule");
	expect_bytes(p + 2 * v.g, v.g, R, "last granule");

	/* Nothing but mapped granules on their bounds; each refusal changes nothing. */
	ck_assert_int_eq(put(&v, a.ptr + v.g, v.g, 0), XDM_E_INVALID);
	expect_message("not mapped");
	ck_assert_int_eq(put(&v, a.ptr, 3 * v.g, 0), XDM_E_INVALID);
	ck_assert_int_eq(put(&v, a.ptr + 4096, v.g, 0), XDM_E_INVALID);
	expect_message("granule");
	ck_assert_int_eq(put(&v, a.ptr, v.g + v.g / 2, 0), XDM_E_INVALID);
	ck_assert_int_eq(put(&v, a.ptr, 0, 0), XDM_E_INVALID);
	ck_assert_uint_eq(attr(&v, "mapped"), 2 * v.g);
	ck_assert_uint_eq(attr(&v, "releasing"), 0);

	/* The hole is free again, in its place. */
	TU_OK(get_at(&v, a.ptr + v.g, v.g, 0, &mid));
	CU_OK(ct_fill(ct_stream(v.rt, 0), p, 3 * v.g, P));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	expect_bytes(p, 3 * v.g, P, "the range with its middle mapped again");
	TU_OK(put(&v, a.ptr, v.g, 0));
	TU_OK(put(&v, a.ptr + v.g, 2 * v.g, 0));
	close_vmm(&v);
}
END_TEST

/* ---- a release waits for the kernel on its stream ---------------------- */

/*
 * A kernel on stream 1 spins and then writes the block; the block is
 * handed back on stream 1 before the kernel may even start (a gate holds
 * the stream).  Until the kernel is done the granule must stay mapped and
 * must not be handed out again, however often the backend reaps; an unmap
 * under the kernel would end it with CUDA_ERROR_ILLEGAL_ADDRESS and kill
 * the context, so the synchronizes below would fail.
 */
START_TEST(release_waits_for_the_kernel_on_its_stream)
{
	struct vmm v = open_vmm("reserve=1G");
	struct xdm_block a = get(&v, v.g, 1), b, refused;
	struct tu_gate gate;

	tu_gate_init(&gate);
	tu_gate_hold(v.rt, 1, &gate);
	CU_OK(ct_spin_fill(ct_stream(v.rt, 1), ct_dev(&a), v.g, P, SPIN));
	TU_OK(put(&v, a.ptr, v.g, 1));
	ck_assert_uint_eq(attr(&v, "releasing"), v.g);
	ck_assert_uint_eq(attr(&v, "mapped"), v.g);
	ck_assert_uint_eq(xdm_up_bytes_outstanding(v.up), 0);

	/* Allocating reaps first; the releasing granule is not handed out. */
	b = get(&v, v.g, 0);
	ck_assert_uint_ne(b.ptr, a.ptr);
	ck_assert_int_eq(get_at(&v, a.ptr, v.g, 0, &refused), XDM_E_OUT_OF_MEMORY);
	TU_OK(xdm_reap_pending(v.rt));
	ck_assert_uint_eq(attr(&v, "releasing"), v.g);

	/*
	 * The kernel starts and spins; a reap now most likely finds it running
	 * and must leave the granule mapped.  What it finds depends on timing,
	 * so it is not asserted: an unmap under the kernel faults the
	 * synchronizes below, which is the proof.
	 */
	tu_gate_open(&gate);
	TU_OK(xdm_reap_pending(v.rt));
	TU_OK(xdm_stream_synchronize(v.rt, 1));
	CU_OK(ct_drv.cuCtxSynchronize());
	tu_gate_destroy(&gate);

	/* Done now: the next reap releases it, if the last one did not. */
	TU_OK(xdm_reap_pending(v.rt));
	ck_assert_uint_eq(attr(&v, "releasing"), 0);
	ck_assert_uint_eq(attr(&v, "mapped"), v.g);
	ck_assert_uint_eq(attr(&v, "releases"), 1);
	/* And the context is alive: work on the other block still runs. */
	CU_OK(ct_fill(ct_stream(v.rt, 0), ct_dev(&b), v.g, Q));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	expect_bytes(ct_dev(&b), v.g, Q, "block beside the released one");
	TU_OK(put(&v, b.ptr, b.bytes, 0));
	close_vmm(&v);
}
END_TEST

/* ---- released memory goes back to the driver --------------------------- */

/* The driver's side only where its free memory is ours (ct_driver_free_is_ours). */

START_TEST(release_gives_device_memory_back)
{
	struct vmm v = open_vmm("reserve=2G");
	size_t free0, free1, free2, total, n = 64 * v.g, slack = 4 * v.g;
	struct xdm_block a;

	CU_OK(ct_drv.cuMemGetInfo(&free0, &total));
	a = get(&v, n, 0);
	CU_OK(ct_drv.cuMemGetInfo(&free1, &total));
	ck_assert_msg(!ct_driver_free_is_ours() || free1 + n <= free0 + slack,
		      "mapping %zu bytes took only %zu from the device", n,
		      free0 > free1 ? free0 - free1 : 0);
	TU_OK(put(&v, a.ptr, a.bytes, 0));
	TU_OK(xdm_stream_synchronize(v.rt, 0));
	TU_OK(xdm_reap_pending(v.rt));
	ck_assert_uint_eq(attr(&v, "mapped"), 0);
	CU_OK(ct_drv.cuMemGetInfo(&free2, &total));
	ck_assert_msg(!ct_driver_free_is_ours() || free2 + slack >= free1 + n,
		      "releasing %zu bytes gave back only %zu", n, free2 > free1 ? free2 - free1 : 0);
	close_vmm(&v);
}
END_TEST

/* ---- more than the device has ------------------------------------------ */

START_TEST(more_than_the_device_fails_with_nothing_left)
{
	struct vmm v = open_vmm("");
	struct xdm_device_info dev;
	struct xdm_block b = blank(0), small;
	size_t free0, free1, total;
	enum xdm_status st;

	TU_OK(xdm_runtime_device(v.rt, &dev));
	/* The default reserve is twice the device, on granules. */
	ck_assert_uint_ge(attr(&v, "reserved_va"), 2 * dev.total_bytes);
	ck_assert_uint_lt(attr(&v, "reserved_va"), 2 * dev.total_bytes + v.g);
	small = get(&v, v.g, 0);
	CU_OK(ct_drv.cuMemGetInfo(&free0, &total));
	st = xdm_up_allocate(v.up, dev.total_bytes + v.g, 0, b.tag, &b);
	ck_assert_msg(st == XDM_E_OUT_OF_MEMORY, "%s: %s", xdm_strerror(st),
		      xdm_last_error_message());
	expect_message("CUDA_ERROR_OUT_OF_MEMORY");
	ck_assert_uint_eq(attr(&v, "mapped"), v.g);
	/*
	 * The driver's free memory comes back too, but not to the byte: after
	 * some 40,000 granules were created and mapped (and undone) for the
	 * request, an H100 showed 977 MiB less free, the driver's own (page
	 * tables of the range), not a granule of cuda_vmm's, whose mapped
	 * count is exact above.  Bounded at 1/32 of the device; printed.
	 */
	CU_OK(ct_drv.cuMemGetInfo(&free1, &total));
	printf("after the refused request the driver's free memory is %zd MiB lower\n",
	       ((ssize_t)free0 - (ssize_t)free1) / (1 << 20));
	ck_assert_msg(free1 + total / 32 >= free0, "the refused request left %zu bytes taken",
		      free0 - free1);
	/* More than the whole range: refused before the driver is asked. */
	st = xdm_up_allocate(v.up, (size_t)attr(&v, "reserved_va") + v.g, 0, b.tag, &b);
	ck_assert_int_eq(st, XDM_E_OUT_OF_MEMORY);
	TU_OK(put(&v, small.ptr, small.bytes, 0));
	close_vmm(&v);
}
END_TEST

/* ---- the suite ------------------------------------------------------------ */

static Suite *vmm_cuda_suite(void)
{
	Suite *s = suite_create("vmm_cuda");
	TCase *tc = tcase_create("vmm");

	tcase_add_test(tc, blocks_are_one_range_across_granule_seams);
	tcase_add_test(tc, allocate_at_grows_in_place);
	tcase_add_test(tc, partial_release_keeps_the_rest);
	tcase_add_test(tc, release_waits_for_the_kernel_on_its_stream);
	tcase_add_test(tc, release_gives_device_memory_back);
	/* Under memcheck every refused driver call is an error: left out there. */
	if (!ct_under_sanitizer())
		tcase_add_test(tc, more_than_the_device_fails_with_nothing_left);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_vmm reserve=1G", vmm_cuda_suite, 180);
}
