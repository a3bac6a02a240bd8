/* SPDX-License-Identifier: MIT */
/*
 * check_ipc_cuda.c - blocks of device memory shared between processes
 * (xdm_ipc_export, open, close) on a real GPU: every CUDA backend, and the
 * pool over each, between peer processes (tests/gpu/ipc_peer_cuda) that
 * write with kernels on their own stream and read back with copies.
 *
 * The rules are check_ipc's, on the driver's memory now: the bytes a
 * kernel in one process writes are the bytes the other reads; the same
 * block gives the same handle, and opening it twice in one process works
 * (the driver lets a legacy handle or a pool's pointer be opened once: the
 * platform counts); a held block's free waits for its importers and the
 * pool never hands it out meanwhile; an importer killed gives its hold
 * back; an exporter killed leaves an importer's cuda_vmm memory valid.
 * On two GPUs, the same on the second device.
 *
 *   check_ipc_cuda            run the suite
 *   check_ipc_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include "tests/lib/cudacheck.h"
#include "tests/lib/ipc_peers.h"

static void peer_start_at(struct peer *p, const char *ordinal, const char *stack)
{
	ipc_peer_start(p, "tests/gpu/ipc_peer_cuda", ordinal, "cuda", stack);
}

static void peer_start(struct peer *p, const char *stack)
{
	peer_start_at(p, "0", stack);
}

/* An odd size: the block is not the whole of its allocation or granule. */
#define BYTES ((size_t)(3 << 20) + 4099)

/*
 * Each backend's way to share, and the pool over each (the block is then
 * a part of its chunk's memory).  A loop test's _i picks one.
 */
static const char *const stacks[] = {
	"cuda_direct",
	"cuda_async ipc=true",
	"cuda_vmm ipc=true reserve=8G",
	"pool | cuda_direct",
	"pool | cuda_async ipc=true",
	"pool | cuda_vmm ipc=true reserve=8G",
};
#define NSTACKS ((int)(sizeof(stacks) / sizeof(stacks[0])))
#define FIRST_POOL 3
/* The stacks over cuda_vmm, whose memory outlives its exporter. */
#define VMM_ALONE 2
#define VMM_POOLED 5

static unsigned int share(const char *ordinal, const char *stack, size_t bytes, int fill,
			  struct peer *e, struct peer *im, struct block *b, char *hex)
{
	char out[512];

	peer_start_at(e, ordinal, stack);
	peer_start_at(im, ordinal, stack);
	*b = peer_alloc(e, bytes);
	ask_ok(e, out, sizeof(out), "fill %u %d", b->i, fill);
	peer_export(e, b->i, hex);
	return peer_open(im, hex, b->bytes);
}

/* Kernels both ways, a second open, and every hold given back. */
static void roundtrip(const char *ordinal, const char *stack)
{
	char h2[HEX_LEN + 1], hex[HEX_LEN + 1], out[512];
	struct peer e, im;
	struct block b;
	unsigned int j, j2;

	j = share(ordinal, stack, BYTES, 0x11, &e, &im, &b, hex);
	/* The same block, the same bytes: torch caches on them. */
	peer_export(&e, b.i, h2);
	ck_assert_str_eq(hex, h2);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x11", j);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x22", j);
	ask_ok(&e, out, sizeof(out), "check %u 0x22", b.i);
	/* Twice in one process: the driver's object is opened once, counted. */
	j2 = peer_open(&im, hex, b.bytes);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x22", j2);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x22", j2);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x33", j2);
	ask_ok(&im, out, sizeof(out), "close %u", j2);
	ask_ok(&e, out, sizeof(out), "check %u 0x33", b.i);
	ck_assert_str_eq(ask_ok(&im, out, sizeof(out), "tree imports"), "none|");
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	wait_outstanding(&e, 0);
	peer_stop(&im);
	peer_stop(&e);
}

START_TEST(test_roundtrip)
{
	roundtrip("0", stacks[_i]);
}
END_TEST

/* The owner's free returns at once; the memory stays while it is held. */
START_TEST(test_free_waits_for_importers)
{
	char hex[HEX_LEN + 1], out[512];
	struct peer e, im;
	struct block b;
	unsigned int j;

	j = share("0", stacks[_i], BYTES, 0x44, &e, &im, &b, hex);
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	ck_assert_uint_ge(peer_outstanding(&e), b.bytes);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x44", j);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x45", j);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x45", j);
	ask(&im, out, sizeof(out), "open %s", hex);
	ck_assert_msg(!strncmp(out, "err ", 4) && strstr(out, "freed since"), "%s", out);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	wait_outstanding(&e, 0);
	peer_stop(&im);
	peer_stop(&e);
}
END_TEST

/*
 * The pool does not hand out a block an importer holds: after the owner's
 * free, a new block of the size lands elsewhere, and the importer's bytes
 * stay what it last saw while the new one is written.
 */
START_TEST(test_pool_keeps_held_blocks)
{
	char hex[HEX_LEN + 1], out[512];
	struct peer e, im;
	struct block a, b, c;
	unsigned int j;

	peer_start(&e, stacks[_i]);
	peer_start(&im, stacks[_i]);
	a = peer_alloc(&e, 65536);
	ask_ok(&e, out, sizeof(out), "free %u", a.i);
	b = peer_alloc(&e, 65536);
	ck_assert_uint_eq(b.ptr, a.ptr);
	ask_ok(&e, out, sizeof(out), "fill %u 0x66", b.i);
	peer_export(&e, b.i, hex);
	j = peer_open(&im, hex, b.bytes);
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	c = peer_alloc(&e, 65536);
	ck_assert_uint_ne(c.ptr, b.ptr);
	ask_ok(&e, out, sizeof(out), "fill %u 0x77", c.i);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x66", j);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	/* Let go of, the block is the pool's again. */
	ask_ok(&e, out, sizeof(out), "free %u", c.i);
	peer_stop(&im);
	wait_outstanding(&e, 0);
	peer_stop(&e);
}
END_TEST

/*
 * An importer killed with a kernel's write queued behind a gate on its
 * stream: its hold goes back with its socket, and the free that waited
 * reaches the stack.
 */
START_TEST(test_importer_killed)
{
	char hex[HEX_LEN + 1], out[512];
	struct peer e, im;
	struct block b;
	unsigned int j;

	j = share("0", stacks[_i], BYTES, 0x12, &e, &im, &b, hex);
	ask_ok(&im, out, sizeof(out), "gate %u", j);
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	ck_assert_uint_ge(peer_outstanding(&e), b.bytes);
	peer_kill(&im);
	wait_outstanding(&e, 0);
	peer_stop(&e);
}
END_TEST

/*
 * An exporter killed: cuda_vmm's granules live while a process maps them,
 * so the importer still reads and writes them (the other kinds of driver
 * memory are the exporter's to keep, xdm-cuda(7)).
 */
START_TEST(test_exporter_killed)
{
	char hex[HEX_LEN + 1], out[512];
	struct peer e, im;
	struct block b;
	unsigned int j;

	j = share("0", stacks[_i], BYTES, 0x13, &e, &im, &b, hex);
	peer_kill(&e);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x13", j);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x14", j);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x14", j);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	peer_stop(&im);
}
END_TEST

/* Memory that is not exportable says how it could be. */
START_TEST(test_not_exportable)
{
	static const char *const private[][2] = {
		{ "cuda_async", "ipc=true" },
		{ "cuda_vmm ipc=false reserve=1G", "ipc=false" },
	};
	char out[512];

	for (int k = 0; k < 2; k++) {
		struct peer e;
		struct block b;

		peer_start(&e, private[k][0]);
		b = peer_alloc(&e, 4096);
		ask(&e, out, sizeof(out), "export %u", b.i);
		ck_assert_msg(!strncmp(out, "err NOT_SUPPORTED", 17) && strstr(out, private[k][1]),
			      "%s: %s", private[k][0], out);
		ask_ok(&e, out, sizeof(out), "free %u", b.i);
		peer_stop(&e);
	}
}
END_TEST

/* The second device of a two-GPU machine: a handle of its memory. */
START_TEST(test_second_device)
{
	int n = 0;

	CU_OK(ct_drv.cuDeviceGetCount(&n));
	if (n < 2) {
		printf("test_second_device: one GPU here; nothing to do\n");
		return;
	}
	roundtrip("1", stacks[_i]);
}
END_TEST

static Suite *ipc_cuda_suite(void)
{
	Suite *s = suite_create("ipc_cuda");
	TCase *tc = tcase_create("cuda");

	tcase_add_loop_test(tc, test_roundtrip, 0, NSTACKS);
	tcase_add_loop_test(tc, test_free_waits_for_importers, 0, NSTACKS);
	tcase_add_loop_test(tc, test_pool_keeps_held_blocks, FIRST_POOL, NSTACKS);
	tcase_add_loop_test(tc, test_importer_killed, 0, NSTACKS);
	tcase_add_loop_test(tc, test_exporter_killed, VMM_ALONE, VMM_ALONE + 1);
	tcase_add_loop_test(tc, test_exporter_killed, VMM_POOLED, VMM_POOLED + 1);
	tcase_add_test(tc, test_not_exportable);
	tcase_add_loop_test(tc, test_second_device, 0, NSTACKS);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_vmm ipc=true reserve=1G", ipc_cuda_suite, 300);
}
