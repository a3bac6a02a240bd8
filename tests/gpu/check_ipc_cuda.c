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
 * On two GPUs, the same on the second device.  Another user the exporter
 * admits (XDM_IPC_ALLOW) opens a block that is the whole of its
 * allocation (cuda_direct's, cuda_vmm's), and is refused the others (a
 * pool's chunk, cuda_async's pool), where the suite can make a user (root,
 * useradd) that can use the GPU.
 *
 *   check_ipc_cuda            run the suite
 *   check_ipc_cuda --probe    exit 0 if the suite would run here, 77 if not
 */
#include "config.h"

#include "tests/lib/cudacheck.h"
#include "tests/lib/ipc_peers.h"
#include "tests/lib/users.h"

/* Another user, made at the first case that needs it, where it can be. */
static struct tu_user other;
static int other_state;		/* 0 not tried, 1 made and can use the GPU, -1 not */

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

static void start_both(const char *ordinal, const char *stack, struct peer *e, struct peer *im)
{
	peer_start_at(e, ordinal, stack);
	peer_start_at(im, ordinal, stack);
}

START_TEST(test_roundtrip)
{
	struct peer e, im;

	start_both("0", stacks[_i], &e, &im);
	ipc_case_roundtrip(&e, &im, BYTES);
}
END_TEST

START_TEST(test_free_waits_for_importers)
{
	struct peer e, im;

	start_both("0", stacks[_i], &e, &im);
	ipc_case_free_waits(&e, &im, BYTES);
}
END_TEST

/* The reuse test: it fails if the pool hands out a block while it is imported. */
START_TEST(test_pool_keeps_held_blocks)
{
	struct peer e, im;

	start_both("0", stacks[_i], &e, &im);
	ipc_case_pool_keeps_held(&e, &im);
}
END_TEST

/* With a kernel's write queued behind a gate on the importer's stream. */
START_TEST(test_importer_killed)
{
	struct peer e, im;

	start_both("0", stacks[_i], &e, &im);
	ipc_case_importer_killed(&e, &im, BYTES, true);
}
END_TEST

/*
 * An exporter killed: cuda_vmm's granules live while a process maps them,
 * so the importer still reads and writes them (the other kinds of driver
 * memory are the exporter's to keep, xdm-cuda(7)).
 */
START_TEST(test_exporter_killed)
{
	struct peer e, im;
	struct ipc_share s;
	char out[512];

	start_both("0", stacks[_i], &e, &im);
	ipc_share_block(&e, &im, BYTES, 0x13, &s);
	peer_kill(&e);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x13", s.j);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x14", s.j);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x14", s.j);
	ask_ok(&im, out, sizeof(out), "close %u", s.j);
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
	struct peer e, im;
	int n = 0;

	CU_OK(ct_drv.cuDeviceGetCount(&n));
	if (n < 2) {
		printf("test_second_device: one GPU here; nothing to do\n");
		return;
	}
	start_both("1", stacks[_i], &e, &im);
	ipc_case_roundtrip(&e, &im, BYTES);
}
END_TEST

static void become_other(const void *parent)
{
	tu_become(&other, *(const pid_t *)parent);
}

/*
 * Whether the other user is there and can use the GPU: made (root and
 * useradd), then a peer of its own exec'd (this process has CUDA state a
 * fork must not use) that says it is ready once its runtime is built.
 */
static bool other_ready(void)
{
	static const char *const roles[] = { "icu", NULL };
	const char *top = getenv("XDM_TOP_BUILDDIR");
	const char *argv[] = { NULL, "0", "cuda", "cuda_direct", NULL };
	char why[256], path[4096], line[256] = "";
	pid_t parent = getpid();
	struct worker w;

	if (other_state)
		return other_state > 0;
	other_state = -1;
	if (!tu_users_init(roles, why, sizeof(why))) {
		printf("check_ipc_cuda: no other user: %s\n", why);
		return false;
	}
	if (!tu_user_make(&other, "icu", NULL)) {
		printf("check_ipc_cuda: useradd could not make another user\n");
		return false;
	}
	snprintf(path, sizeof(path), "%s/tests/gpu/ipc_peer_cuda", top ? top : ".");
	argv[0] = path;
	worker_spawn(&w, argv, NULL, become_other, &parent);
	if (!fgets(line, sizeof(line), w.from) || strncmp(line, "ready", 5))
		printf("check_ipc_cuda: %s cannot use the GPU here (%s)\n", other.name,
		       line[0] ? line : "it said nothing");
	else
		other_state = 1;
	worker_wait(&w);
	return other_state > 0;
}

/*
 * Another user, admitted by name: the whole of an allocation it gets, and
 * writes what the exporter reads; memory that holds more it is refused.
 */
START_TEST(test_other_user)
{
	/* cuda_direct and cuda_vmm alone: a block is its whole allocation. */
	const bool whole = _i == 0 || _i == VMM_ALONE;
	pid_t parent = getpid();
	struct peer e, im;
	struct block b;
	char hex[HEX_LEN + 1], out[512];
	unsigned int j;

	if (!other_ready()) {
		printf("test_other_user: %s: no other user can use the GPU here; nothing to do\n",
		       stacks[_i]);
		return;
	}
	setenv("XDM_IPC_ALLOW", other.name, 1);
	peer_start(&e, stacks[_i]);
	unsetenv("XDM_IPC_ALLOW");
	ipc_peer_start_in(&im, "tests/gpu/ipc_peer_cuda", "0", "cuda", stacks[_i], become_other,
			  &parent);
	b = peer_alloc(&e, BYTES);
	ask_ok(&e, out, sizeof(out), "fill %u 0x11", b.i);
	peer_export(&e, b.i, hex);
	ask(&im, out, sizeof(out), "open %s", hex);
	if (!whole) {
		ck_assert_msg(!strncmp(out, "err NOT_SUPPORTED", 17) &&
			      strstr(out, "holds more than the block"), "%s: %s", stacks[_i], out);
	} else {
		ck_assert_msg(sscanf(out, "ok %u", &j) == 1, "%s: %s", stacks[_i], out);
		ask_ok(&im, out, sizeof(out), "icheck %u 0x11", j);
		ask_ok(&im, out, sizeof(out), "ifill %u 0x22", j);
		ask_ok(&im, out, sizeof(out), "close %u", j);
		ask_ok(&e, out, sizeof(out), "check %u 0x22", b.i);
	}
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	wait_outstanding(&e, 0);
	peer_stop(&im);
	peer_stop(&e);
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
	tcase_add_loop_test(tc, test_other_user, 0, NSTACKS);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	return ct_run_gpu_suite(argc, argv, "cuda_vmm ipc=true reserve=1G", ipc_cuda_suite, 300);
}
