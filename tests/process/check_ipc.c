/* SPDX-License-Identifier: MIT */
/*
 * check_ipc.c - blocks shared between processes (xdm_ipc_export, open,
 * close) on the host platform's memfd twin: real processes
 * (tests/process/ipc_peer, one command a line), real descriptors passed
 * over the exporter's socket, real SIGKILLs.
 *
 * Each rule of xdm(3)'s IPC section is a case: the bytes travel both ways;
 * a held block's free waits for its importers (its backend keeps the
 * memory, the pool does not hand it out again); an importer killed in the
 * middle of a use gives its hold back; an exporter killed leaves the
 * importer's memory valid; the block counts once, in the exporter's budget
 * row; the tree shows importers and imports; bad handles are typed errors.
 * Nothing waits on a clock except for what another process does on its own
 * (its server answering a close, the kernel closing a dead process's
 * socket): those are waited for, with a deadline that only a failure
 * reaches.
 */
#include "config.h"

#include "tests/lib/ipc_peers.h"

static const char *const test_keys[] = { "rows", NULL };

static void peer_start_at(struct peer *p, const char *ordinal, const char *stack)
{
	/* Two host devices, so that a handle can be of another one. */
	ipc_peer_start(p, "tests/process/ipc_peer", ordinal, "host devices=2", stack);
}

static void peer_start(struct peer *p, const char *stack)
{
	peer_start_at(p, "0", stack);
}

/*
 * The budget's used bytes reach want, waited for: the exporter's server
 * thread frees a held block down the stack first and uncharges the budget
 * after (memory is back before the budget says there is room), so the
 * backend's count can read 0 a moment before the budget's does.
 */
static void wait_used(struct xdm_runtime *rt, uint64_t want)
{
	uint64_t now = attr(rt, "used");

	for (int ms = 0; now != want && ms < TU_PATIENCE_MS; ms += 10) {
		tu_sleep_ms(10);
		now = attr(rt, "used");
	}
	ck_assert_uint_eq(now, want);
}

/* The start of most cases: an exporter and an importer on stack, a block shared. */
static void share(const char *stack, size_t bytes, int fill, struct peer *e, struct peer *im,
		  struct ipc_share *s)
{
	peer_start(e, stack);
	peer_start(im, stack);
	ipc_share_block(e, im, bytes, fill, s);
}

/* An odd size: the block is not the whole of its pages. */
#define BYTES ((size_t)(1 << 20) + 4099)

#define SHARED "host ipc=true"

/*
 * The stacks whose blocks are shared: each memfd twin, and the pool over
 * each (a block's memory is its chunk's, at an offset).  A loop test's
 * _i picks one.
 */
static const char *const stacks[] = {
	SHARED,
	"host_vmm ipc=true granule=64K reserve=256M",
	"pool | " SHARED,
	"pool | host_vmm ipc=true granule=64K reserve=256M",
};
#define NSTACKS ((int)(sizeof(stacks) / sizeof(stacks[0])))
#define FIRST_POOL 2

/* ---- the bytes, both ways ------------------------------------------------ */

START_TEST(test_roundtrip)
{
	struct peer e, im;

	peer_start(&e, stacks[_i]);
	peer_start(&im, stacks[_i]);
	ipc_case_roundtrip(&e, &im, BYTES);
}
END_TEST

/* ---- lifetimes ----------------------------------------------------------- */

START_TEST(test_free_waits_for_importers)
{
	struct peer e, im;

	peer_start(&e, stacks[_i]);
	peer_start(&im, stacks[_i]);
	ipc_case_free_waits(&e, &im, BYTES);
}
END_TEST

START_TEST(test_pool_keeps_held_blocks)
{
	struct peer e, im;

	peer_start(&e, stacks[_i]);
	peer_start(&im, SHARED);
	ipc_case_pool_keeps_held(&e, &im);
}
END_TEST

/* An importer killed in the middle of a use (ipc_peers.h), both orders. */
static void importer_killed(const char *stack, bool free_first)
{
	struct peer e, im;

	peer_start(&e, stack);
	peer_start(&im, stack);
	ipc_case_importer_killed(&e, &im, BYTES, free_first);
}

START_TEST(test_importer_killed_after_free)
{
	importer_killed(stacks[_i], true);
}
END_TEST

START_TEST(test_importer_killed_before_free)
{
	importer_killed(stacks[_i], false);
}
END_TEST

/*
 * An exporter killed while the importer's use stands at a gate: a memfd
 * lives while mapped, so the use runs on valid memory and sees what the
 * exporter wrote; the close after tells a dead socket, and says OK.
 */
START_TEST(test_exporter_killed)
{
	struct peer e, im;
	struct ipc_share s;
	char out[512];

	share(stacks[_i], BYTES, 0x33, &e, &im, &s);
	ask_ok(&im, out, sizeof(out), "gate %u", s.j);
	peer_kill(&e);
	ask_ok(&im, out, sizeof(out), "ungate");
	ask_ok(&im, out, sizeof(out), "icheck %u 0x5a", s.j);
	ask_ok(&im, out, sizeof(out), "close %u", s.j);
	/* Its handles open no more, with a sentence that says why. */
	ask(&im, out, sizeof(out), "open %s", s.hex);
	ck_assert_msg(!strncmp(out, "err INVALID", 11) && strstr(out, "cannot be reached"),
		      "%s", out);
	peer_stop(&im);
}
END_TEST

/* ---- the budget: the exporter's row, once -------------------------------- */

START_TEST(test_budget_rows)
{
	char out[512], key[64], stack[256];
	struct xdm_runtime *rt;
	struct peer e, im;
	struct ipc_share s;
	long long bytes;

	key_of("rows", key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s limit=16M credit=0 | " SHARED, key);
	rt = budget_rt("rows", "limit=16M credit=0", "host");
	share(stack, BYTES, -1, &e, &im, &s);
	ck_assert_uint_eq(attr(rt, "used"), s.b.bytes);
	process_rows(rt, e.pid, &bytes);
	ck_assert_int_eq(bytes, (long long)s.b.bytes);
	process_rows(rt, im.pid, &bytes);
	ck_assert_int_le(bytes, 0);
	/* Freed by its owner and still held: still the owner's. */
	ask_ok(&e, out, sizeof(out), "free %u", s.b.i);
	process_rows(rt, e.pid, &bytes);
	ck_assert_int_eq(bytes, (long long)s.b.bytes);
	ask_ok(&im, out, sizeof(out), "close %u", s.j);
	wait_outstanding(&e, 0);
	wait_used(rt, 0);
	peer_stop(&im);
	peer_stop(&e);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- the tree ------------------------------------------------------------ */

START_TEST(test_tree)
{
	char hex[HEX_LEN + 1], out[512], want[64];
	struct peer e, im;
	struct block b;
	unsigned int j;
	const char *text;

	peer_start(&e, stacks[_i]);
	peer_start(&im, stacks[_i]);
	b = peer_alloc(&e, BYTES);
	ck_assert_str_eq(ask_ok(&e, out, sizeof(out), "tree blocks/%llu/importers",
				b.generation), "none|");
	ck_assert_str_eq(ask_ok(&im, out, sizeof(out), "tree imports"), "none|");
	peer_export(&e, b.i, hex);
	j = peer_open(&im, hex, b.bytes);
	/* "<pid> <opens> <since>" */
	snprintf(want, sizeof(want), "%d 1 ", (int)im.pid);
	text = ask_ok(&e, out, sizeof(out), "tree blocks/%llu/importers", b.generation);
	ck_assert_msg(!strncmp(text, want, strlen(want)), "importers: %s", text);
	/* "<ptr> <bytes> <exporter pid> <generation> <since>" */
	text = ask_ok(&im, out, sizeof(out), "tree imports");
	snprintf(want, sizeof(want), " %zu %d %llu ", b.bytes, (int)e.pid, b.generation);
	ck_assert_msg(strstr(text, want), "imports: %s", text);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	ck_assert_str_eq(ask_ok(&im, out, sizeof(out), "tree imports"), "none|");
	peer_stop(&im);
	peer_stop(&e);
}
END_TEST

/* ---- bad input ----------------------------------------------------------- */

static void open_refused(struct peer *p, const char *hex, const char *status, const char *why)
{
	char out[512];

	ask(p, out, sizeof(out), "open %s", hex);
	ck_assert_msg(!strncmp(out, "err ", 4) && !strncmp(out + 4, status, strlen(status)) &&
			      strstr(out, why), "open answered '%s', not %s ... %s", out, status,
		      why);
}

START_TEST(test_bad_handles)
{
	char hex[HEX_LEN + 1], bad[HEX_LEN + 1], out[512];
	struct peer e, im, other, private;
	struct block b, p;

	peer_start(&e, SHARED);
	peer_start(&im, SHARED);
	b = peer_alloc(&e, 4096);
	peer_export(&e, b.i, hex);

	/* Garbage, cut short, one byte changed. */
	memset(bad, 'a', HEX_LEN);
	bad[HEX_LEN] = '\0';
	open_refused(&im, bad, "INVALID", "mark");
	snprintf(bad, sizeof(bad), "%.200s", hex);
	open_refused(&im, bad, "INVALID", "checksum");
	snprintf(bad, sizeof(bad), "%s", hex);
	bad[100] = bad[100] == '0' ? '1' : '0';
	open_refused(&im, bad, "INVALID", "checksum");
	/* Another device: ordinal 1 of the host platform (devices=2). */
	peer_start_at(&other, "1", SHARED);
	open_refused(&other, hex, "INVALID", "device");
	peer_stop(&other);
	/* A block freed (and never opened): the exporter refuses it. */
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	open_refused(&im, hex, "USE_AFTER_FREE", "freed since");
	/* A close of what was never opened. */
	ask(&im, out, sizeof(out), "closeptr %" PRIx64, b.ptr);
	ck_assert_msg(!strncmp(out, "err INVALID", 11), "%s", out);
	/* Memory that cannot be shared: a sentence that says how it could. */
	peer_start(&private, "host");
	p = peer_alloc(&private, 4096);
	ask(&private, out, sizeof(out), "export %u", p.i);
	ck_assert_msg(!strncmp(out, "err NOT_SUPPORTED", 17) && strstr(out, "ipc=true"), "%s",
		      out);
	peer_stop(&private);
	/* Nothing above mapped anything. */
	ck_assert_str_eq(ask_ok(&im, out, sizeof(out), "tree imports"), "none|");
	peer_stop(&im);
	peer_stop(&e);
}
END_TEST

/* ---- memory in many pieces ----------------------------------------------- */

/*
 * A block of 1281 granules of host_vmm, one descriptor each: they travel
 * in many messages, and each side starts with room for 256 descriptors
 * only, which xdm makes by raising its soft limit to the hard one, or says
 * why it cannot.
 */
#define PIECES_STACK "host_vmm ipc=true granule=4K reserve=64M"
#define PIECES_BYTES ((size_t)(5 << 20) + 1)

START_TEST(test_many_pieces)
{
	char hex[HEX_LEN + 1], out[512];
	unsigned long long soft, hard;
	struct peer e, im;
	struct block b;
	unsigned int j;

	peer_start(&e, PIECES_STACK);
	peer_start(&im, PIECES_STACK);
	ck_assert_int_eq(sscanf(ask_ok(&e, out, sizeof(out), "nofile"), "%llu %llu", &soft,
				&hard), 2);
	ask_ok(&e, out, sizeof(out), "nofile 256");
	ask_ok(&im, out, sizeof(out), "nofile 256");
	b = peer_alloc(&e, PIECES_BYTES);
	ck_assert_uint_eq(b.bytes, PIECES_BYTES - 1 + 4096);
	ask_ok(&e, out, sizeof(out), "fill %u 0x33", b.i);
	if (hard < 2048) {
		/* No room can be made: a sentence that says so, nothing exported. */
		ask(&e, out, sizeof(out), "export %u", b.i);
		ck_assert_msg(!strncmp(out, "err OUT_OF_MEMORY", 17) && strstr(out, "RLIMIT_NOFILE"),
			      "%s", out);
	} else {
		peer_export(&e, b.i, hex);
		j = peer_open(&im, hex, b.bytes);
		ask_ok(&im, out, sizeof(out), "icheck %u 0x33", j);
		ask_ok(&im, out, sizeof(out), "ifill %u 0x44", j);
		ask_ok(&e, out, sizeof(out), "check %u 0x44", b.i);
		/* The importer made its room, and the exporter's server its own. */
		ck_assert_int_eq(sscanf(ask_ok(&im, out, sizeof(out), "nofile"), "%llu %llu",
					&soft, &hard), 2);
		ck_assert_uint_eq(soft, hard);
		ck_assert_int_eq(sscanf(ask_ok(&e, out, sizeof(out), "nofile"), "%llu %llu",
					&soft, &hard), 2);
		ck_assert_uint_eq(soft, hard);
		/* Opened again: every piece travels again. */
		ck_assert_uint_ne(peer_open(&im, hex, b.bytes), j);
		ask_ok(&im, out, sizeof(out), "close %u", j);
	}
	ask_ok(&e, out, sizeof(out), "free %u", b.i);
	peer_stop(&im);
	wait_outstanding(&e, 0);
	peer_stop(&e);
}
END_TEST

/*
 * An importer that may not open the pieces of a block: the open fails with
 * a sentence naming the limit, the hold the exporter counted goes back,
 * and the connection to that exporter, kept by another import, still
 * serves the next open (every piece sent was read and closed).
 */
START_TEST(test_pieces_past_the_limit)
{
	char big_hex[HEX_LEN + 1], small_hex[HEX_LEN + 1], out[512];
	struct block big, small;
	struct peer e, im;
	unsigned int j, j2;
	const char *text = "";

	peer_start(&e, PIECES_STACK);
	peer_start(&im, PIECES_STACK);
	big = peer_alloc(&e, PIECES_BYTES);
	small = peer_alloc(&e, 4096);
	ask_ok(&e, out, sizeof(out), "fill %u 0x21", small.i);
	peer_export(&e, big.i, big_hex);
	peer_export(&e, small.i, small_hex);
	/* Open already, the small one keeps the connection to the exporter. */
	j = peer_open(&im, small_hex, small.bytes);
	/* Below what the big one needs, hard limit included. */
	ask_ok(&im, out, sizeof(out), "nofile 64 64");
	ask(&im, out, sizeof(out), "open %s", big_hex);
	ck_assert_msg(!strncmp(out, "err ", 4) && strstr(out, "RLIMIT_NOFILE"), "%s", out);
	/* The exporter hears the close on its own thread: waited for. */
	for (int ms = 0; ms < TU_PATIENCE_MS; ms += 10) {
		text = ask_ok(&e, out, sizeof(out), "tree blocks/%llu/importers", big.generation);
		if (!strcmp(text, "none|"))
			break;
		tu_sleep_ms(10);
	}
	ck_assert_str_eq(text, "none|");
	/* The next answer on that connection is an answer. */
	j2 = peer_open(&im, small_hex, small.bytes);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x21", j2);
	ask_ok(&im, out, sizeof(out), "close %u", j2);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	ask_ok(&e, out, sizeof(out), "free %u", big.i);
	ask_ok(&e, out, sizeof(out), "free %u", small.i);
	peer_stop(&im);
	wait_outstanding(&e, 0);
	peer_stop(&e);
}
END_TEST

static Suite *ipc_suite(void)
{
	Suite *s = suite_create("ipc");
	TCase *tc = tcase_create("host");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_loop_test(tc, test_roundtrip, 0, NSTACKS);
	tcase_add_loop_test(tc, test_free_waits_for_importers, 0, NSTACKS);
	tcase_add_loop_test(tc, test_pool_keeps_held_blocks, FIRST_POOL, NSTACKS);
	tcase_add_loop_test(tc, test_importer_killed_after_free, 0, NSTACKS);
	tcase_add_loop_test(tc, test_importer_killed_before_free, 0, NSTACKS);
	tcase_add_loop_test(tc, test_exporter_killed, 0, NSTACKS);
	tcase_add_loop_test(tc, test_tree, 0, NSTACKS);
	tcase_add_test(tc, test_budget_rows);
	tcase_add_test(tc, test_bad_handles);
	tcase_add_test(tc, test_many_pieces);
	tcase_add_test(tc, test_pieces_past_the_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return budget_suite_run(ipc_suite(), "ipc", test_keys);
}
