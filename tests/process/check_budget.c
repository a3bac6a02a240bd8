/* SPDX-License-Identifier: MIT */
/*
 * check_budget.c - the budget adaptor across threads, runtimes and real
 * processes, on the host platform.
 *
 * Every test draws on a segment of its own (key=ckb<pid>-<test>), so test
 * programs running in parallel never meet, and main() unlinks every one of
 * them at the end whatever happened.  Worker processes are execs of
 * tests/process/budget_worker (budget_test.h has the protocol).  The credit
 * parameter has a suite of its own, tests/process/check_budget_credit.c.
 *
 * The multi-process test takes its stack from the environment so that the
 * GPU machine runs it on CUDA (tests/gpu/budget_gpu.sh):
 *	XDM_BUDGET_TEST_PLATFORM (default host), XDM_BUDGET_TEST_STACK
 *	(default host): the workers' stack below "budget key=... limit=...".
 * The suite's own process never touches that stack: it watches the segment
 * through a read-only mapping.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <xdm/module.h>

#include "tests/lib/budget_util.h"

/* ---- keys ---------------------------------------------------------------- */

static const char *const test_keys[] = {
	"basic", "upstream", "rounding", "live", "first", "kill", "refusal", "reuse", "stale",
	"multi", NULL,
};

/* ---- a backend to misbehave below the budget ----------------------------- */

/* fail=1 refuses every allocation; round=N hands out N bytes more. */
static enum xdm_status btest_init(struct xdm_layer *self, const struct xdm_params *params)
{
	uint64_t *cfg = calloc(2, sizeof(*cfg));

	if (!cfg)
		return XDM_E_OUT_OF_MEMORY;
	cfg[0] = xdm_params_bool(params, "fail");
	cfg[1] = xdm_params_size(params, "round");
	xdm_layer_set_priv(self, cfg);
	return XDM_OK;
}

static void btest_fini(struct xdm_layer *self)
{
	free(xdm_layer_priv(self));
}

static enum xdm_status btest_allocate(struct xdm_layer *self, size_t bytes, xdm_stream_id stream,
				      const char *tag, struct xdm_block *out)
{
	const uint64_t *cfg = xdm_layer_priv(self);
	void *p;

	if (cfg[0])
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "btest: refused by fail=1");
	p = malloc(bytes + cfg[1]);
	if (!p)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "btest: no memory");
	out->ptr = (uint64_t)(uintptr_t)p;
	out->bytes = bytes + cfg[1];
	out->align = 16;
	out->state = XDM_BLOCK_LIVE;
	return XDM_OK;
}

static enum xdm_status btest_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	free((void *)(uintptr_t)block->ptr);
	block->state = XDM_BLOCK_FREED;
	return XDM_OK;
}

static const struct xdm_param_spec btest_params[] = {
	{ .name = "fail", .type = XDM_PARAM_BOOL, .default_value = "false" },
	{ .name = "round", .type = XDM_PARAM_SIZE, .default_value = "0" },
	{ .name = NULL },
};

static const struct xdm_ops btest_ops = {
	XDM_OPS_HEADER("btest", XDM_KIND_BACKEND),
	.params = btest_params,
	.init = btest_init,
	.fini = btest_fini,
	.allocate = btest_allocate,
	.deallocate = btest_deallocate,
};

/* Once per process, so that CK_FORK=no runs work too. */
static void btest_register(void)
{
	static bool done;

	if (!done)
		TU_OK(xdm_module_register(&btest_ops));
	done = true;
}

/* ---- one process --------------------------------------------------------- */

START_TEST(basic_accounting)
{
	struct xdm_runtime *rt = budget_rt("basic", "limit=1M credit=0", "host");
	struct xdm_device_info dev;
	struct xdm_block a, b;
	long long mine;
	char buf[128];

	TU_OK(xdm_runtime_device(rt, &dev));
	ck_assert_uint_eq(attr(rt, "limit"), MIB);
	ck_assert_uint_eq(attr(rt, "configured_limit"), MIB);
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_uint_eq(attr(rt, "reset_stale"), 0);

	alloc_ok(rt, 600 * KIB, &a);
	ck_assert_uint_eq(attr(rt, "used"), 600 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), 424 * KIB);

	/* One byte over is refused, with the request and what is left. */
	alloc_refused(rt, 424 * KIB + 1, 424 * KIB);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), dev.uuid));
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "434177 bytes requested"));
	ck_assert_uint_eq(attr(rt, "refusals"), 1);
	alloc_ok(rt, 424 * KIB, &b);	/* exactly to the limit */
	ck_assert_uint_eq(attr(rt, "remaining"), 0);
	alloc_refused(rt, 1, 0);

	TU_OK(xdm_deallocate(rt, &a));
	ck_assert_uint_eq(attr(rt, "used"), 424 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 424 * KIB);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_uint_eq(attr(rt, "peak"), MIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);

	TU_OK(xdm_layer_attr_show(rt, 0, "segment", buf, sizeof(buf)));
	ck_assert_ptr_nonnull(strstr(buf, key_prefix));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("basic"));
}
END_TEST

START_TEST(upstream_failure_gives_back)
{
	struct xdm_runtime *rt;
	struct xdm_block b;

	btest_register();
	rt = budget_rt("upstream", "limit=1M credit=0", "btest fail=1");
	ck_assert_int_eq(xdm_allocate(rt, 1000, 0, NULL, &b), XDM_E_OUT_OF_MEMORY);
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A layer below that hands out more than asked is charged what it hands out. */
START_TEST(rounded_blocks_are_charged_whole)
{
	struct xdm_runtime *rt;
	struct xdm_block a, b;
	long long mine;

	btest_register();
	rt = budget_rt("rounding", "limit=100K credit=0", "btest round=1K");
	TU_OK(xdm_allocate(rt, 10 * KIB, 0, NULL, &a));
	ck_assert_uint_eq(a.bytes, 11 * KIB);
	ck_assert_uint_eq(attr(rt, "used"), 11 * KIB);
	/* 89K remain: 89K fits the budget's check, not the rounded 90K. */
	ck_assert_int_eq(xdm_allocate(rt, 89 * KIB, 0, NULL, &b), XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(xdm_last_error()->requested, 90 * KIB);
	ck_assert_uint_eq(attr(rt, "used"), 11 * KIB);
	TU_OK(xdm_allocate(rt, 88 * KIB, 0, NULL, &b));
	ck_assert_uint_eq(attr(rt, "used"), 100 * KIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(live_limit_change)
{
	static const char *const bad[] = {
		"banana", "-1", "", "8Gx", "\n", "1 G", "99999999999999999999",
		"20000000000000T", "101%x", "0x10",
	};
	struct xdm_runtime *rt = budget_rt("live", "limit=1M credit=0", "host");
	struct xdm_device_info dev;
	struct xdm_block a, b, c;

	TU_OK(xdm_runtime_device(rt, &dev));
	alloc_ok(rt, 600 * KIB, &a);

	/* Lowering below the usage refuses until enough is freed. */
	TU_OK(store(rt, "limit", "500K"));
	ck_assert_uint_eq(attr(rt, "limit"), 500 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), 0);
	alloc_refused(rt, 1, 0);
	TU_OK(xdm_deallocate(rt, &a));
	alloc_ok(rt, 400 * KIB, &a);
	alloc_refused(rt, 200 * KIB, 100 * KIB);

	/* Raising admits at once; echo's newline is fine. */
	TU_OK(store(rt, "limit", "1M\n"));
	alloc_ok(rt, 200 * KIB, &b);
	ck_assert_uint_eq(attr(rt, "used"), 600 * KIB);

	/* Bad writes are refused and change nothing. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(store(rt, "limit", bad[i]) == XDM_E_INVALID, "'%s' accepted",
			      bad[i]);
		ck_assert_uint_eq(attr(rt, "limit"), MIB);
	}
	ck_assert_int_eq(store(rt, "used", "0"), XDM_E_NOT_SUPPORTED);

	/* % of the device's memory, and max. */
	TU_OK(store(rt, "limit", "50%"));
	ck_assert_uint_eq(attr(rt, "limit"), dev.total_bytes / 2);
	TU_OK(store(rt, "limit", "max"));
	ck_assert_uint_eq(attr(rt, "limit"), UINT64_MAX);
	alloc_ok(rt, 4 * MIB, &c);
	/* configured_limit is what the layer was given, not the live value. */
	ck_assert_uint_eq(attr(rt, "configured_limit"), MIB);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- several runtimes, several processes -------------------------------- */

START_TEST(first_limit_stands_and_last_out_unlinks)
{
	struct xdm_runtime *one = budget_rt("first", "limit=1M credit=0", "host");
	struct xdm_runtime *two = budget_rt("first", "limit=2M credit=0", "host");
	struct xdm_block b;
	long long mine;

	ck_assert_uint_eq(attr(two, "limit"), MIB);
	ck_assert_uint_eq(attr(two, "configured_limit"), 2 * MIB);
	ck_assert_uint_eq(attr(one, "configured_limit"), MIB);

	/* Two runtimes of one process: one budget, one row. */
	alloc_ok(two, 700 * KIB, &b);
	ck_assert_uint_eq(attr(one, "used"), 700 * KIB);
	alloc_refused(one, 400 * KIB, 324 * KIB);
	ck_assert_int_eq(process_rows(one, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 700 * KIB);

	TU_OK(xdm_runtime_destroy(one));
	ck_assert(segment_exists("first"));
	ck_assert_int_eq(process_rows(two, getpid(), &mine), 1);
	TU_OK(xdm_deallocate(two, &b));
	TU_OK(xdm_runtime_destroy(two));
	ck_assert(!segment_exists("first"));

	/* A fresh start takes its own limit and inherits nothing. */
	two = budget_rt("first", "limit=2M credit=0", "host");
	ck_assert_uint_eq(attr(two, "limit"), 2 * MIB);
	ck_assert_uint_eq(attr(two, "peak"), 0);
	ck_assert_uint_eq(attr(two, "refusals"), 0);
	ck_assert_uint_eq(attr(two, "reset_stale"), 0);
	TU_OK(xdm_runtime_destroy(two));
	ck_assert(!segment_exists("first"));
}
END_TEST

START_TEST(killed_share_comes_back_on_attach)
{
	struct xdm_runtime *rt = budget_rt("kill", "limit=1M credit=0", "host"), *other;
	const size_t n = 300000;
	struct worker w;
	struct xdm_block b;
	long long theirs;

	alloc_ok(rt, 100 * KIB, &b);
	holder_start(&w, "kill", "1M", n);
	ck_assert_uint_eq(attr(rt, "used"), 100 * KIB + n);
	ck_assert_int_eq(process_rows(rt, w.pid, &theirs), 2);
	ck_assert_int_eq(theirs, n);

	holder_kill(&w);
	/* Nobody has looked yet: still counted. */
	ck_assert_uint_eq(attr(rt, "used"), 100 * KIB + n);

	other = budget_rt("kill", "limit=1M credit=0", "host");
	ck_assert_uint_eq(attr(rt, "used"), 100 * KIB);
	ck_assert_int_eq(process_rows(rt, w.pid, &theirs), 1);
	ck_assert_int_eq(theirs, -1);
	ck_assert_uint_eq(attr(other, "reset_stale"), 0);
	TU_OK(xdm_runtime_destroy(other));

	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("kill"));
}
END_TEST

START_TEST(killed_share_comes_back_on_refusal)
{
	struct xdm_runtime *rt = budget_rt("refusal", "limit=1M credit=0", "host");
	const size_t n = 800 * KIB;
	struct worker w;
	struct xdm_block a, b;

	alloc_ok(rt, 100 * KIB, &a);
	holder_start(&w, "refusal", "1M", n);
	holder_kill(&w);
	ck_assert_uint_eq(attr(rt, "used"), 100 * KIB + n);
	/* A refusal rescans once a millisecond has passed since the last
	 * scan (the worker's attach): see BUDGET_RESCAN_NS. */
	tu_sleep_ms(2);

	/* Fits only once the dead worker's share is back: no refusal counted. */
	alloc_ok(rt, 924 * KIB, &b);
	ck_assert_uint_eq(attr(rt, "used"), MIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A slot with a live pid but another start time is a dead process whose
 * pid was reused: here our own pid, planted by hand. */
START_TEST(reused_pid_is_dead)
{
	struct xdm_runtime *rt = budget_rt("reuse", "limit=1M credit=0", "host"), *other;
	struct budget_shm *s = segment_map("reuse", true);
	struct budget_slot *fake = NULL;
	struct xdm_block b;
	long long mine;
	int held;

	alloc_ok(rt, 10 * KIB, &b);
	for (unsigned int i = 0; i < BUDGET_SLOTS && !fake; i++)
		if (!atomic_load(&s->slots[i].pid))
			fake = &s->slots[i];
	ck_assert_ptr_nonnull(fake);
	held = hold_segment_lock("reuse");
	fake->attach = 1;
	fake->start_time = 1;	/* we surely did not start 1 tick after boot */
	atomic_store(&fake->used, 5000);
	atomic_store(&fake->pid, getpid());
	atomic_fetch_add(&s->used, 5000);
	close(held);
	ck_assert_uint_eq(attr(rt, "used"), 10 * KIB + 5000);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 2);

	other = budget_rt("reuse", "limit=1M credit=0", "host");
	ck_assert_uint_eq(attr(rt, "used"), 10 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 10 * KIB);
	ck_assert_int_eq(atomic_load(&fake->pid), 0);

	TU_OK(xdm_runtime_destroy(other));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
	ck_assert(!segment_exists("reuse"));
}
END_TEST

START_TEST(segment_of_dead_owners_is_reset)
{
	struct xdm_runtime *rt;
	struct budget_shm *s;
	struct worker w;

	holder_start(&w, "stale", "1M", 300000);
	holder_kill(&w);
	s = segment_map("stale", false);
	ck_assert_uint_eq(atomic_load(&s->used), 300000);
	ck_assert_uint_eq(atomic_load(&s->limit), MIB);
	munmap(s, sizeof(*s));

	rt = budget_rt("stale", "limit=2M credit=0", "host");
	ck_assert_uint_eq(attr(rt, "reset_stale"), 1);
	ck_assert_uint_eq(attr(rt, "limit"), 2 * MIB);
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_uint_eq(attr(rt, "peak"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("stale"));
}
END_TEST

/* ---- 8 processes x 4 threads against one budget ------------------------- */

#define MP_WORKERS 8
#define MP_THREADS "4"
#define MP_ROUNDS 5
/*
 * ThreadSanitizer reports a race the first time the two accesses meet
 * unordered, not by the luck of many tries: a quarter of the operations
 * serves it, at a quarter of its 16 s there (the monitor still takes
 * millions of samples).
 */
#ifdef __SANITIZE_THREAD__
#define MP_OPS "5000"
#else
#define MP_OPS "20000"
#endif
#define MP_MAXSIZE "65536"
#define MP_LIMIT (4 * MIB)

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

START_TEST(many_processes_never_exceed)
{
	const char *platform = env_or("XDM_BUDGET_TEST_PLATFORM", "host");
	const char *below = env_or("XDM_BUDGET_TEST_STACK", "host");
	unsigned long long refusals = 0;
	struct worker w[MP_WORKERS];
	struct monitor m = { 0 };
	char key[64], stack[256], limit[32], rounds[8], seed[16];
	pthread_t mon;

	/* credit=0: at each round a worker's tally is its slot, to the byte. */
	key_of("multi", key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s limit=%llu credit=0 | %s", key, MP_LIMIT,
		 below);
	snprintf(limit, sizeof(limit), "%llu", MP_LIMIT);
	snprintf(rounds, sizeof(rounds), "%d", MP_ROUNDS);
	for (int i = 0; i < MP_WORKERS; i++) {
		const char *argv[] = {
			NULL,	 "churn", platform, stack, limit, MP_THREADS, rounds, MP_OPS,
			seed,	 MP_MAXSIZE, NULL,
		};

		/* execv copies the arguments: seed may be reused. */
		snprintf(seed, sizeof(seed), "%d", 1000 + i);
		worker_start(&w[i], argv);
	}
	m.s = segment_map("multi", false);
	pthread_create(&mon, NULL, monitor_run, &m);

	for (int r = 0; r < MP_ROUNDS; r++) {
		unsigned long long sum = 0;

		for (int i = 0; i < MP_WORKERS; i++) {
			unsigned long long live, refused, bad;
			unsigned int round;
			char line[128];
			bool found = false;

			worker_line(&w[i], line, sizeof(line));
			ck_assert_int_eq(sscanf(line, BT_REPORT_FMT, &round, &live, &refused, &bad),
					 4);
			ck_assert_uint_eq(round, r);
			ck_assert_msg(bad == 0, "worker %d: %llu bad refusals or failures", i,
				      bad);
			/* Each process's own tally is its slot in the segment. */
			for (unsigned int k = 0; k < BUDGET_SLOTS; k++) {
				const struct budget_slot *slot = &m.s->slots[k];

				if (atomic_load(&slot->pid) == w[i].pid) {
					ck_assert_uint_eq(atomic_load(&slot->used), live);
					found = true;
				}
			}
			ck_assert_msg(found, "worker %d has no slot", i);
			sum += live;
			if (r == MP_ROUNDS - 1)
				refusals += refused;
		}
		/* Everyone is quiescent: the sum of the tallies is the usage. */
		ck_assert_uint_eq(atomic_load(&m.s->used), sum);
		ck_assert_uint_le(sum, MP_LIMIT);
		for (int i = 0; i < MP_WORKERS; i++) {
			fputs(BT_GO, w[i].to);
			fflush(w[i].to);
		}
	}
	for (int i = 0; i < MP_WORKERS; i++) {
		int status = worker_wait(&w[i]);

		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "worker %d ended with status %#x", i, status);
	}
	atomic_store(&m.stop, true);
	pthread_join(mon, NULL);

	/* For the log: the GPU machine's closing note quotes it. */
	printf("multiprocess: %s | %s, %d processes x %s threads, limit %llu: %llu samples, "
	       "%llu over the limit, %llu refusals, %" PRIu64 " reclaim scans, peak %" PRIu64 "\n",
	       platform, below, MP_WORKERS, MP_THREADS, MP_LIMIT, m.samples, m.over, refusals,
	       (uint64_t)atomic_load(&m.s->scans),
	       (uint64_t)atomic_load(&m.s->peak));
	ck_assert_msg(m.over == 0, "%llu of %llu samples over the limit (worst %" PRIu64 ")",
		      m.over, m.samples, m.worst);
	ck_assert_uint_gt(m.samples, 1000);
	ck_assert_uint_gt(refusals, 0);
	ck_assert_uint_eq(atomic_load(&m.s->refusals), refusals);
	ck_assert_uint_eq(atomic_load(&m.s->used), 0);
	ck_assert_uint_le(atomic_load(&m.s->peak), MP_LIMIT);
	ck_assert_uint_gt(atomic_load(&m.s->peak), MP_LIMIT / 2);
	munmap((void *)m.s, sizeof(*m.s));
	ck_assert(!segment_exists("multi"));
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("budget");
	TCase *one = tcase_create("one_process");
	TCase *many = tcase_create("processes");
	TCase *multi = tcase_create("multiprocess");

	tcase_add_test(one, basic_accounting);
	tcase_add_test(one, upstream_failure_gives_back);
	tcase_add_test(one, rounded_blocks_are_charged_whole);
	tcase_add_test(one, live_limit_change);
	suite_add_tcase(s, one);

	tcase_add_test(many, first_limit_stands_and_last_out_unlinks);
	tcase_add_test(many, killed_share_comes_back_on_attach);
	tcase_add_test(many, killed_share_comes_back_on_refusal);
	tcase_add_test(many, reused_pid_is_dead);
	tcase_add_test(many, segment_of_dead_owners_is_reset);
	suite_add_tcase(s, many);

	tcase_add_test(multi, many_processes_never_exceed);
	tcase_set_timeout(multi, 2 * TU_TIMEOUT_S);
	suite_add_tcase(s, multi);

	return s;
}

int main(void)
{
	return budget_suite_run(budget_suite(), "ckb", test_keys);
}
