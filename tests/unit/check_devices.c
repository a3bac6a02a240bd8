/* SPDX-License-Identifier: MIT */
/*
 * check_devices.c - several devices in one process, on the host platform
 * (platform "host devices=N"): a runtime per ordinal with its own stack,
 * UUID, budget and directory in the tree; a block given to another
 * device's runtime is a typed error; and a peer use, work of one device on
 * a block of another, is waited for by the block's later uses and its free.
 *
 * The same promises on CUDA devices are checked by check_peer_cuda and
 * tests/gpu/devices.sh on a machine with two GPUs.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "tests/lib/testutil.h"

/* Ordinals no other suite uses, so that budgets keyed by UUID stay apart. */
#define DEV_A 40
#define DEV_B 41
#define PLATFORM "host devices=42"

static struct xdm_runtime *make(uint32_t ordinal, const char *stack)
{
	struct xdm_runtime *rt = NULL;

	TU_OK(xdm_runtime_create(ordinal, PLATFORM, stack, &rt));
	ck_assert_uint_eq(xdm_runtime_ordinal(rt), ordinal);
	return rt;
}

static char *tree_text(const char *fmt, const char *name, const char *rest)
{
	char path[256], *text = NULL;
	size_t len = 0;
	int err;

	snprintf(path, sizeof(path), fmt, name, rest);
	err = xdm_tree_show(path, &text, &len);
	ck_assert_msg(err == 0, "show '%s': %s", path, strerror(-err));
	return text;
}

/* ---- a runtime per ordinal -------------------------------------------------- */

START_TEST(each_ordinal_has_its_own_device_and_directory)
{
	struct xdm_runtime *a = make(DEV_A, "host"), *b = make(DEV_B, "pool | host");
	struct xdm_runtime *rt = NULL;
	struct xdm_device_info da, db;
	char *ua, *ub;

	TU_OK(xdm_runtime_device(a, &da));
	TU_OK(xdm_runtime_device(b, &db));
	ck_assert_str_ne(da.uuid, db.uuid);
	ck_assert_uint_eq(xdm_runtime_layer_count(a), 1);
	ck_assert_uint_eq(xdm_runtime_layer_count(b), 2);
	/* Each has its directory, which shows its own device. */
	ua = tree_text("%s/%s", xdm_runtime_name(a), "uuid");
	ub = tree_text("%s/%s", xdm_runtime_name(b), "uuid");
	ck_assert_uint_eq(strncmp(ua, da.uuid, strlen(da.uuid)), 0);
	ck_assert_uint_eq(strncmp(ub, db.uuid, strlen(db.uuid)), 0);
	free(ua);
	free(ub);
	/* Past the platform's devices: a typed error that says why. */
	ck_assert_int_eq(xdm_runtime_create(42, PLATFORM, "host", &rt), XDM_E_NO_DEVICE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "devices=42"));
	ck_assert_ptr_null(rt);
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

/* visible= orders host devices as CUDA_VISIBLE_DEVICES orders GPUs. */
START_TEST(visible_maps_ordinals_to_devices)
{
	static const char *const bad[] = { "2,2", "5", "1,", ",1", "1;0", "x" };
	struct xdm_runtime *rt = NULL;
	struct xdm_device_info d0, d1, r0;
	char platform[64];

	rt = NULL;
	TU_OK(xdm_runtime_create(0, "host devices=3", "host", &rt));
	TU_OK(xdm_runtime_device(rt, &d0));
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_runtime_create(1, "host devices=3", "host", &rt));
	TU_OK(xdm_runtime_device(rt, &d1));
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_runtime_create(0, "host devices=3 visible=\"1,0\"", "host", &rt));
	TU_OK(xdm_runtime_device(rt, &r0));
	ck_assert_str_eq(r0.uuid, d1.uuid);
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_runtime_create(1, "host devices=3 visible=\"1,0\"", "host", &rt));
	TU_OK(xdm_runtime_device(rt, &r0));
	ck_assert_str_eq(r0.uuid, d0.uuid);
	TU_OK(xdm_runtime_destroy(rt));
	/* Two visible devices: ordinal 2 is none, though devices=3. */
	rt = NULL;
	ck_assert_int_eq(xdm_runtime_create(2, "host devices=3 visible=\"1,0\"", "host", &rt),
			 XDM_E_NO_DEVICE);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "visible=1,0"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(platform, sizeof(platform), "host devices=3 visible=\"%s\"", bad[i]);
		ck_assert_int_eq(xdm_runtime_create(0, platform, "host", &rt), XDM_E_CONFIG);
		ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), bad[i]));
		ck_assert_ptr_null(rt);
	}
}
END_TEST

/* The process's runtimes come from xdm.conf: one stack per [device] section. */
START_TEST(the_config_gives_each_device_its_stack)
{
	static const char text[] = "platform = host devices=2\n"
				   "[device 0]\n"
				   "stack = logging sink=null | host\n"
				   "[device *]\n"
				   "stack = pool | host\n";
	char *path = tu_write_temp(text);
	struct xdm_runtime *r0 = NULL, *r1 = NULL, *r2 = NULL;
	char *names;

	setenv("XDM_CONFIG", path, 1);
	TU_OK(xdm_runtime_get(0, &r0));
	TU_OK(xdm_runtime_get(1, &r1));
	ck_assert_str_eq(xdm_runtime_layer_name(r0, 0), "logging");
	ck_assert_str_eq(xdm_runtime_layer_name(r1, 0), "pool");
	ck_assert_str_eq(xdm_runtime_name(r0), "0");
	ck_assert_str_eq(xdm_runtime_name(r1), "1");
	ck_assert_int_eq(xdm_runtime_get(2, &r2), XDM_E_NO_DEVICE);
	names = tree_text("%s/%s", "1", "stack");
	ck_assert_ptr_nonnull(strstr(names, "pool"));
	free(names);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(a_block_of_another_device_is_a_typed_error)
{
	struct xdm_runtime *a = make(DEV_A, "pool | host"), *b = make(DEV_B, "pool | host");
	struct xdm_block blk, out;

	TU_OK(xdm_allocate(a, 4096, 0, "a", &blk));
	ck_assert_int_eq(xdm_deallocate(b, &blk), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "device 40"));
	ck_assert_int_eq(blk.state, XDM_BLOCK_LIVE);
	ck_assert_int_eq(xdm_block_lookup(b, xdm_block_id_of(&blk), &out), XDM_E_INVALID);
	ck_assert_int_eq(xdm_prepare_block_use(b, xdm_block_id_of(&blk), 0, XDM_ACCESS_READ),
			 XDM_E_INVALID);
	ck_assert_int_eq(xdm_finish_block_use(b, xdm_block_id_of(&blk), 0, XDM_ACCESS_READ),
			 XDM_E_INVALID);
	ck_assert_int_eq(xdm_record_block_use(b, &blk, 0), XDM_E_INVALID);
	/* Nothing was lost: the owner still frees it. */
	TU_OK(xdm_block_lookup(a, xdm_block_id_of(&blk), &out));
	TU_OK(xdm_deallocate(a, &blk));
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

/* ---- one budget per device ----------------------------------------------------- */

START_TEST(each_device_has_its_own_budget_and_one_device_shares_it)
{
	struct xdm_runtime *a = make(DEV_A, "budget limit=1M | host");
	struct xdm_runtime *a2 = make(DEV_A, "budget limit=1M | host");
	struct xdm_runtime *b = make(DEV_B, "budget limit=1M | host");
	struct xdm_block x, y, z;

	TU_OK(xdm_allocate(a, 1 << 20, 0, "a", &x));
	/* The same device, another runtime: one budget, and it is spent. */
	ck_assert_int_eq(xdm_allocate(a2, 4096, 0, "a2", &y), XDM_E_OUT_OF_BUDGET);
	/* Another device: a budget of its own, whole. */
	TU_OK(xdm_allocate(b, 1 << 20, 0, "b", &z));
	TU_OK(xdm_deallocate(a, &x));
	TU_OK(xdm_deallocate(b, &z));
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a2));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

/*
 * A key is a group's name, and a budget still one device's: the same key on
 * two devices is refused, and %u in a key gives each device its own.
 */
START_TEST(one_key_is_one_device_and_percent_u_names_each)
{
	char stack[128], key[64], path[128];
	struct xdm_runtime *a = NULL, *b = NULL, *rt = NULL;
	struct xdm_device_info da, db;

	snprintf(key, sizeof(key), "check-devices-%ld", (long)getpid());
	snprintf(stack, sizeof(stack), "budget key=%s limit=1M | host", key);
	a = make(DEV_A, stack);
	ck_assert_int_eq(xdm_runtime_create(DEV_B, PLATFORM, stack, &rt), XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "is the budget of device"));
	ck_assert_ptr_null(rt);
	TU_OK(xdm_runtime_destroy(a));

	snprintf(stack, sizeof(stack), "budget key=%s-%%u limit=1M | host", key);
	a = make(DEV_A, stack);
	b = make(DEV_B, stack);
	TU_OK(xdm_runtime_device(a, &da));
	TU_OK(xdm_runtime_device(b, &db));
	snprintf(path, sizeof(path), "/dev/shm/xdm-budget-%s-%s", key, da.uuid);
	ck_assert_int_eq(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "/dev/shm/xdm-budget-%s-%s", key, db.uuid);
	ck_assert_int_eq(access(path, F_OK), 0);
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));

	/* A '%' that is neither %u nor %%: the config is wrong, and says where. */
	ck_assert_int_eq(xdm_runtime_create(DEV_A, PLATFORM, "budget key=a%d | host", &rt),
			 XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "'%' must be followed"));
}
END_TEST

/* ---- peer uses ------------------------------------------------------------------ */

struct probe {
	volatile int *flag;	/* read when the probe runs */
	int seen;
};

static void probe_run(void *arg)
{
	struct probe *p = arg;

	p->seen = *p->flag;
}

struct writer {
	unsigned char *mem;
	volatile int *done;
};

static void writer_run(void *arg)
{
	struct writer *w = arg;

	memset(w->mem, 0x5a, 4096);
	*w->done = 1;
}

/*
 * Device B writes device A's block behind a gate.  The free on A, and a
 * probe queued on A's stream after it, must wait for that write: the probe
 * sees it done although the test queued it while the gate still held.
 */
START_TEST(the_free_waits_for_a_peer_write)
{
	struct xdm_runtime *a = make(DEV_A, "pool | host"), *b = make(DEV_B, "pool | host");
	volatile int done = 0;
	struct writer w = { NULL, &done };
	struct probe p = { &done, -1 };
	struct xdm_block blk;
	struct tu_gate gate;
	char dir[64], *text;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(a, 4096, 0, "peer", &blk));
	w.mem = (unsigned char *)(uintptr_t)blk.ptr;
	tu_gate_hold(b, 0, &gate);
	TU_OK(xdm_prepare_peer_use(a, xdm_block_id_of(&blk), b, 0, XDM_ACCESS_WRITE));
	TU_OK(xdm_stream_launch_host(b, 0, writer_run, &w));
	TU_OK(xdm_finish_peer_use(a, xdm_block_id_of(&blk), b, 0, XDM_ACCESS_WRITE));
	/* The tree names the use by its device and stream. */
	snprintf(dir, sizeof(dir), "blocks/%" PRIu64 "/last_write", blk.generation);
	text = tree_text("%s/%s", xdm_runtime_name(a), dir);
	ck_assert_str_eq(text, "41:0\n");
	free(text);
	/* B's event is kept by A's block: B may not go away under it. */
	ck_assert_int_eq(xdm_runtime_destroy(b), XDM_E_INVALID);
	TU_OK(xdm_deallocate(a, &blk));
	TU_OK(xdm_stream_launch_host(a, 0, probe_run, &p));
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(a, 0));
	ck_assert_int_eq(p.seen, 1);
	TU_OK(xdm_stream_synchronize(b, 0));
	tu_gate_destroy(&gate);
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

/* A peer read, then a write on the owner's own other stream: the write waits. */
START_TEST(an_owner_write_waits_for_a_peer_read)
{
	struct xdm_runtime *a = make(DEV_A, "pool | host"), *b = make(DEV_B, "pool | host");
	volatile int done = 0;
	struct writer w = { NULL, &done };	/* stands for the reader: it marks done */
	struct probe p = { &done, -1 };
	struct xdm_block blk;
	struct tu_gate gate;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(a, 4096, 0, "peer", &blk));
	w.mem = (unsigned char *)(uintptr_t)blk.ptr;
	tu_gate_hold(b, 2, &gate);
	TU_OK(xdm_prepare_peer_use(a, xdm_block_id_of(&blk), b, 2, XDM_ACCESS_READ));
	TU_OK(xdm_stream_launch_host(b, 2, writer_run, &w));
	TU_OK(xdm_finish_peer_use(a, xdm_block_id_of(&blk), b, 2, XDM_ACCESS_READ));
	TU_OK(xdm_prepare_block_use(a, xdm_block_id_of(&blk), 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_stream_launch_host(a, 1, probe_run, &p));
	TU_OK(xdm_finish_block_use(a, xdm_block_id_of(&blk), 1, XDM_ACCESS_WRITE));
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(a, 1));
	ck_assert_int_eq(p.seen, 1);
	TU_OK(xdm_deallocate(a, &blk));
	TU_OK(xdm_stream_synchronize(a, 0));
	TU_OK(xdm_stream_synchronize(b, 2));
	tu_gate_destroy(&gate);
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

/*
 * A block keeps a read per stream of every runtime that read it: with peer
 * uses that is more than one runtime's XDM_MAX_STREAMS.  Device A's block is
 * read on each of A's streams and each of B's (more than 256 reads in all),
 * then written: every read is spent, the tree lists them all before, and B,
 * whose events A's block no longer keeps, may go.
 */
START_TEST(a_write_spends_reads_from_more_streams_than_one_runtime_has)
{
	enum { STREAMS = 140 };
	char *path = tu_write_temp("streams = 140\n");
	struct xdm_runtime *a, *b;
	struct xdm_block blk;
	struct xdm_block_id id;
	char dir[64], *text, *p;
	size_t listed = 0;

	setenv("XDM_CONFIG", path, 1);
	a = make(DEV_A, "host");
	b = make(DEV_B, "host");
	unlink(path);
	free(path);
	ck_assert_uint_eq(xdm_stream_count(a), STREAMS);
	ck_assert_uint_eq(xdm_stream_count(b), STREAMS);
	TU_OK(xdm_allocate(a, 4096, 0, "many readers", &blk));
	id = xdm_block_id_of(&blk);
	for (xdm_stream_id s = 0; s < STREAMS; s++) {
		TU_OK(xdm_finish_block_use(a, id, s, XDM_ACCESS_READ));
		TU_OK(xdm_finish_peer_use(a, id, b, s, XDM_ACCESS_READ));
	}
	snprintf(dir, sizeof(dir), "blocks/%" PRIu64 "/reads", blk.generation);
	text = tree_text("%s/%s", xdm_runtime_name(a), dir);
	for (p = text; (p = strchr(p, ':')); p++)
		listed++;
	ck_assert_uint_eq(listed, STREAMS);	/* B's reads, as 41:S */
	ck_assert_ptr_nonnull(strstr(text, "41:139"));
	listed = 0;
	for (p = text; *p; p++)
		listed += *p == ' ' || *p == '\n';
	ck_assert_uint_eq(listed, 2 * STREAMS);
	free(text);
	/* B's events are kept by A's block. */
	ck_assert_int_eq(xdm_runtime_destroy(b), XDM_E_INVALID);

	TU_OK(xdm_prepare_block_use(a, id, 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(a, id, 1, XDM_ACCESS_WRITE));
	snprintf(dir, sizeof(dir), "blocks/%" PRIu64 "/reads", blk.generation);
	text = tree_text("%s/%s", xdm_runtime_name(a), dir);
	ck_assert_str_eq(text, "none\n");
	free(text);
	snprintf(dir, sizeof(dir), "blocks/%" PRIu64 "/last_write", blk.generation);
	text = tree_text("%s/%s", xdm_runtime_name(a), dir);
	ck_assert_str_eq(text, "1\n");
	free(text);
	/* The write spent B's reads: nothing of B's is kept any more. */
	TU_OK(xdm_stream_synchronize(b, 0));
	TU_OK(xdm_runtime_destroy(b));
	/* Reads again after the write: the block's array starts over. */
	for (xdm_stream_id s = 0; s < 8; s++)
		TU_OK(xdm_finish_block_use(a, id, s, XDM_ACCESS_READ));
	TU_OK(xdm_deallocate(a, &blk));
	TU_OK(xdm_stream_synchronize(a, 0));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

START_TEST(bad_peer_uses_are_typed_errors)
{
	struct xdm_runtime *a = make(DEV_A, "pool | host"), *b = make(DEV_B, "pool | host");
	struct xdm_runtime *sync_free = make(DEV_A, "host free=sync");
	struct xdm_block blk, s;
	struct xdm_block_id id;

	TU_OK(xdm_allocate(a, 4096, 0, "peer", &blk));
	id = xdm_block_id_of(&blk);
	ck_assert_int_eq(xdm_prepare_peer_use(NULL, id, b, 0, XDM_ACCESS_READ), XDM_E_INVALID);
	ck_assert_int_eq(xdm_finish_peer_use(a, id, NULL, 0, XDM_ACCESS_READ), XDM_E_INVALID);
	/* The id names device A: B is not its owner. */
	ck_assert_int_eq(xdm_prepare_peer_use(b, id, a, 0, XDM_ACCESS_READ), XDM_E_INVALID);
	ck_assert_int_eq(xdm_prepare_peer_use(a, id, b, 999, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_finish_peer_use(a, id, b, 0, (enum xdm_access)9), XDM_E_INVALID);
	/* An owner whose frees are not stream-ordered cannot wait for B. */
	TU_OK(xdm_allocate(sync_free, 4096, 0, "sync", &s));
	ck_assert_int_eq(xdm_prepare_peer_use(sync_free, xdm_block_id_of(&s), b, 0,
					      XDM_ACCESS_READ), XDM_E_NOT_SUPPORTED);
	TU_OK(xdm_deallocate(sync_free, &s));
	/* A freed block: the stale id says so. */
	TU_OK(xdm_deallocate(a, &blk));
	ck_assert_int_eq(xdm_finish_peer_use(a, id, b, 0, XDM_ACCESS_WRITE),
			 XDM_E_USE_AFTER_FREE);
	TU_OK(xdm_stream_synchronize(a, 0));
	TU_OK(xdm_runtime_destroy(sync_free));
	TU_OK(xdm_runtime_destroy(b));
	TU_OK(xdm_runtime_destroy(a));
}
END_TEST

static Suite *devices_suite(void)
{
	Suite *s = suite_create("several devices");
	TCase *tc = tcase_create("devices");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_test(tc, each_ordinal_has_its_own_device_and_directory);
	tcase_add_test(tc, visible_maps_ordinals_to_devices);
	tcase_add_test(tc, the_config_gives_each_device_its_stack);
	tcase_add_test(tc, a_block_of_another_device_is_a_typed_error);
	tcase_add_test(tc, each_device_has_its_own_budget_and_one_device_shares_it);
	tcase_add_test(tc, one_key_is_one_device_and_percent_u_names_each);
	tcase_add_test(tc, the_free_waits_for_a_peer_write);
	tcase_add_test(tc, an_owner_write_waits_for_a_peer_read);
	tcase_add_test(tc, a_write_spends_reads_from_more_streams_than_one_runtime_has);
	tcase_add_test(tc, bad_peer_uses_are_typed_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(devices_suite());
}
