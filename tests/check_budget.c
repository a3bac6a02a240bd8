/* SPDX-License-Identifier: MIT */
/*
 * check_budget.c - the budget adaptor across threads, runtimes and real
 * processes, on the host platform.
 *
 * Every test draws on a segment of its own (key=ckb<pid>-<test>), so test
 * programs running in parallel never meet, and main() unlinks every one of
 * them at the end whatever happened.  Worker processes are execs of
 * tests/budget_worker (budget_test.h has the protocol).
 *
 * The multi-process test takes its stack from the environment so that the
 * GPU machine runs it on CUDA (tests/budget_gpu.sh):
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

#include "tests/budget_util.h"

/* ---- keys ---------------------------------------------------------------- */

static const char *const test_keys[] = {
	"basic", "upstream", "rounding", "live", "first", "kill", "refusal", "reuse", "stale",
	"multi", "crdraw", "crfree", "crexact", "crbig", "crmax", "crchurn", "crfini", "crzero",
	"crother", NULL,
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
	struct xdm_runtime *rt = budget_rt("basic", "limit=1M", "host");
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
	rt = budget_rt("upstream", "limit=1M", "btest fail=1");
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
	rt = budget_rt("rounding", "limit=100K", "btest round=1K");
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
	struct xdm_runtime *rt = budget_rt("live", "limit=1M", "host");
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
	struct xdm_runtime *one = budget_rt("first", "limit=1M", "host");
	struct xdm_runtime *two = budget_rt("first", "limit=2M", "host");
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
	two = budget_rt("first", "limit=2M", "host");
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
	struct xdm_runtime *rt = budget_rt("kill", "limit=1M", "host"), *other;
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

	other = budget_rt("kill", "limit=1M", "host");
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
	struct xdm_runtime *rt = budget_rt("refusal", "limit=1M", "host");
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
	struct xdm_runtime *rt = budget_rt("reuse", "limit=1M", "host"), *other;
	struct budget_shm *s = segment_map("reuse", true);
	struct budget_slot *fake = NULL;
	struct xdm_block b;
	long long mine;

	alloc_ok(rt, 10 * KIB, &b);
	for (unsigned int i = 0; i < BUDGET_SLOTS && !fake; i++)
		if (!atomic_load(&s->slots[i].pid))
			fake = &s->slots[i];
	ck_assert_ptr_nonnull(fake);
	ck_assert_int_eq(pthread_mutex_lock(&s->lock), 0);
	fake->attach = 1;
	fake->start_time = 1;	/* we surely did not start 1 tick after boot */
	atomic_store(&fake->used, 5000);
	atomic_store(&fake->pid, getpid());
	atomic_fetch_add(&s->used, 5000);
	pthread_mutex_unlock(&s->lock);
	ck_assert_uint_eq(attr(rt, "used"), 10 * KIB + 5000);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 2);

	other = budget_rt("reuse", "limit=1M", "host");
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

	rt = budget_rt("stale", "limit=2M", "host");
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
#define MP_OPS "20000"
#define MP_MAXSIZE "65536"
#define MP_LIMIT (4 * MIB)

struct monitor {
	const struct budget_shm *s;
	atomic_bool stop;
	unsigned long long samples;
	unsigned long long over;	/* samples with used > limit */
	uint64_t worst;
};

/* Samples the shared usage as fast as it can, from outside every worker. */
static void *monitor_run(void *arg)
{
	struct monitor *m = arg;

	while (!atomic_load(&m->stop)) {
		for (int i = 0; i < 256; i++) {
			uint64_t limit = atomic_load(&m->s->limit);
			uint64_t used = atomic_load(&m->s->used);

			m->samples++;
			if (used > limit) {
				m->over++;
				if (used > m->worst)
					m->worst = used;
			}
		}
		/* Leave the workers the CPUs: 2 cores must run this suite. */
		usleep(50);
	}
	return NULL;
}

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

	key_of("multi", key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s limit=%llu | %s", key, MP_LIMIT, below);
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

/* ---- per-stream credit --------------------------------------------------- */

/*
 * With credit=SIZE a stream draws the request and SIZE more from the
 * segment when its credit does not cover a request, serves later requests
 * from the credit, keeps what frees give back up to 2 x SIZE, and gives the
 * rest back.  Requests above SIZE bypass the credit.  Credit is counted in
 * the segment's used.
 */

static void alloc_on(struct xdm_runtime *rt, size_t bytes, xdm_stream_id stream,
		     struct xdm_block *b)
{
	TU_OK(xdm_allocate(rt, bytes, stream, "check_budget", b));
	ck_assert_uint_eq(b->bytes, bytes);
	ck_assert_uint_eq(b->stream, stream);
}

/* A refusal on stream and its payload. */
static void refused_on(struct xdm_runtime *rt, size_t bytes, xdm_stream_id stream,
		       size_t remaining)
{
	struct xdm_block b;
	const struct xdm_error *e;

	ck_assert_int_eq(xdm_allocate(rt, bytes, stream, "check_budget", &b),
			 XDM_E_OUT_OF_BUDGET);
	e = xdm_last_error();
	ck_assert_int_eq(e->code, XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(e->requested, bytes);
	ck_assert_uint_eq(e->remaining, remaining);
}

/* A macro, so that a failure names the test's line. */
#define CREDIT_STATE(rt, used_, held_)                                   \
	do {                                                             \
		ck_assert_uint_eq(attr((rt), "used"), (used_));          \
		ck_assert_uint_eq(attr((rt), "credit_held"), (held_));   \
	} while (0)

START_TEST(credit_draws_ahead_and_serves_from_it)
{
	struct xdm_runtime *rt = budget_rt("crdraw", "limit=1M credit=64K", "host");
	struct xdm_block a, b, c, d, e;
	long long mine;

	ck_assert_uint_eq(attr(rt, "credit"), 64 * KIB);
	CREDIT_STATE(rt, 0, 0);

	/* 4K on stream 0 draws 4K + 64K: the credit is counted as used. */
	alloc_on(rt, 4 * KIB, 0, &a);
	CREDIT_STATE(rt, 68 * KIB, 64 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), MIB - 68 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 68 * KIB);
	ck_assert_uint_eq(attr(rt, "peak"), 68 * KIB);

	/* The second is served from the credit: the segment does not move. */
	alloc_on(rt, 4 * KIB, 0, &b);
	CREDIT_STATE(rt, 68 * KIB, 60 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 68 * KIB);

	/* Another stream has a credit of its own. */
	alloc_on(rt, 4 * KIB, 1, &c);
	CREDIT_STATE(rt, 136 * KIB, 124 * KIB);

	/* A request of exactly the credit still goes through it... */
	alloc_on(rt, 64 * KIB, 2, &d);
	CREDIT_STATE(rt, 264 * KIB, 188 * KIB);
	/* ...one above it bypasses it, both ways. */
	alloc_on(rt, 64 * KIB + 1, 0, &e);
	CREDIT_STATE(rt, 328 * KIB + 1, 188 * KIB);
	TU_OK(xdm_deallocate(rt, &e));
	CREDIT_STATE(rt, 264 * KIB, 188 * KIB);

	/* Frees go back to their stream's credit, all under 2 x 64K. */
	TU_OK(xdm_deallocate(rt, &a));
	CREDIT_STATE(rt, 264 * KIB, 192 * KIB);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	CREDIT_STATE(rt, 264 * KIB, 264 * KIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crdraw"));
}
END_TEST

START_TEST(credit_frees_keep_twice_the_credit)
{
	struct xdm_runtime *rt = budget_rt("crfree", "limit=1M credit=64K", "host");
	/* used and credit_held after each of 8 allocations of 16K on stream 0 */
	static const uint64_t used_after[8] = { 80, 80, 80, 80, 80, 160, 160, 160 };
	static const uint64_t held_after[8] = { 64, 48, 32, 16, 0, 64, 48, 32 };
	/* and after each of the 8 frees: 2 x 64K is kept, the 7th passes it */
	static const uint64_t used_free[8] = { 160, 160, 160, 160, 160, 160, 80, 80 };
	static const uint64_t held_free[8] = { 48, 64, 80, 96, 112, 128, 64, 80 };
	struct xdm_block b[8];

	for (int i = 0; i < 8; i++) {
		alloc_on(rt, 16 * KIB, 0, &b[i]);
		CREDIT_STATE(rt, used_after[i] * KIB, held_after[i] * KIB);
		/* used is always the live bytes and the credit, nothing else */
		ck_assert_uint_eq(attr(rt, "used"), (uint64_t)(i + 1) * 16 * KIB +
						    attr(rt, "credit_held"));
	}
	for (int i = 0; i < 8; i++) {
		TU_OK(xdm_deallocate(rt, &b[i]));
		CREDIT_STATE(rt, used_free[i] * KIB, held_free[i] * KIB);
		ck_assert_uint_le(attr(rt, "credit_held"), 128 * KIB);
	}
	/* Nothing live: what is used is credit, and it stays a stream's. */
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crfree"));
}
END_TEST

/*
 * A process alone is refused exactly: 16 x 64K over 4 streams fill the 1M
 * limit, the last one only after the process gave back the credit another
 * stream held; then one byte more is refused with nothing remaining.
 */
START_TEST(credit_alone_is_refused_exactly)
{
	struct xdm_runtime *rt = budget_rt("crexact", "limit=1M credit=64K", "host");
	struct xdm_block b[17];
	int n = 0;
	long long mine;

	/* Streams 0, 1, 2: four blocks each, drawn 128K at a time. */
	for (xdm_stream_id s = 0; s < 3; s++) {
		for (int i = 0; i < 4; i++)
			alloc_on(rt, 64 * KIB, s, &b[n++]);
		CREDIT_STATE(rt, (s + 1) * 256 * KIB, 0);
	}
	/* Stream 3: three blocks, and 64K of credit left over. */
	alloc_on(rt, 64 * KIB, 3, &b[n++]);
	CREDIT_STATE(rt, 896 * KIB, 64 * KIB);
	alloc_on(rt, 64 * KIB, 3, &b[n++]);
	CREDIT_STATE(rt, 896 * KIB, 0);
	alloc_on(rt, 64 * KIB, 3, &b[n++]);
	CREDIT_STATE(rt, MIB, 64 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), 0);

	/* 960K live: 64K more fits exactly, once stream 3's credit is back. */
	alloc_on(rt, 64 * KIB, 0, &b[n++]);
	ck_assert_int_eq(n, 16);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);

	/* Exactly the limit is live: one byte more is refused, on any stream. */
	refused_on(rt, 1, 1, 0);
	CREDIT_STATE(rt, MIB, 0);
	refused_on(rt, 64 * KIB + 1, 2, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, MIB);

	/* A free on stream 2 goes to its credit; stream 3 gets it back. */
	TU_OK(xdm_deallocate(rt, &b[8]));
	CREDIT_STATE(rt, MIB, 64 * KIB);
	alloc_on(rt, 64 * KIB, 3, &b[8]);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);

	for (int i = 0; i < n; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	ck_assert_uint_eq(attr(rt, "used"), attr(rt, "credit_held"));
	ck_assert_uint_le(attr(rt, "credit_held"), 4 * 128 * KIB);
	ck_assert_uint_eq(attr(rt, "peak"), MIB);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crexact"));
}
END_TEST

/*
 * The same promise for a request larger than the credit: a process with
 * nothing live is refused a request of its whole limit because three of
 * its own idle streams hold credit.  FAILS: budget_charge (credit.c) sends
 * a request above credit_max straight to budget_reserve, and never to
 * budget_credit_drain before refusing.
 */
START_TEST(credit_alone_big_request_drains_first)
{
	struct xdm_runtime *rt = budget_rt("crbig", "limit=1M credit=64K", "host");
	struct xdm_block b;

	/* Streams 1..3 draw 68K each and keep it all when their block goes. */
	for (xdm_stream_id s = 1; s <= 3; s++) {
		alloc_on(rt, 4 * KIB, s, &b);
		TU_OK(xdm_deallocate(rt, &b));
	}
	CREDIT_STATE(rt, 204 * KIB, 204 * KIB);

	/* Nothing is live: the whole limit must be admitted. */
	ck_assert_msg(xdm_allocate(rt, MIB, 0, "check_budget", &b) == XDM_OK,
		      "a process with no live block was refused its limit of %llu bytes while "
		      "its own idle streams held %llu of credit: %s",
		      MIB, (unsigned long long)attr(rt, "credit_held"),
		      xdm_last_error_message());
	CREDIT_STATE(rt, MIB, 0);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * credit=max (a size every SIZE parameter accepts) must not lift the limit.
 * FAILS: budget_charge draws n + credit_max, which wraps to n - 1, and the
 * stream is credited UINT64_MAX bytes it never reserved: every later
 * request is served from that credit, past the limit.
 */
START_TEST(credit_max_keeps_the_limit)
{
	struct xdm_runtime *rt;
	struct xdm_block a, b;
	char key[64], stack[256];
	enum xdm_status st;
	uint64_t used;

	/* A credit that could overflow the arithmetic is refused at build. */
	key_of("crmax", key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s limit=1M credit=max | host", key);
	st = xdm_runtime_create(0, "host", stack, &rt);
	ck_assert_int_eq(st, XDM_E_CONFIG);
	ck_assert_msg(strstr(xdm_last_error_message(), "credit must be at most 1G"),
		      "message: %s", xdm_last_error_message());

	/* The largest allowed credit, far above the limit, keeps the limit. */
	rt = budget_rt("crmax", "limit=1M credit=1G", "host");
	alloc_on(rt, 4 * KIB, 0, &a);
	st = xdm_allocate(rt, 2 * MIB, 0, "check_budget", &b);
	if (st == XDM_OK) {
		used = attr(rt, "used");
		TU_OK(xdm_deallocate(rt, &b));
		TU_OK(xdm_deallocate(rt, &a));
		TU_OK(xdm_runtime_destroy(rt));
		ck_abort_msg("2M + 4K live under a 1M limit with credit=1G: used says %llu",
			     (unsigned long long)used);
	}
	ck_assert_int_eq(st, XDM_E_OUT_OF_BUDGET);
	/* The block is counted whole, the credit within the limit. */
	used = attr(rt, "used");
	ck_assert_uint_ge(used, 4 * KIB);
	ck_assert_uint_le(used, MIB);
	ck_assert_uint_le(attr(rt, "credit_held"), MIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- 4 threads on 4 streams churning against credit -------------------- */

#define CC_THREADS 4
#define CC_OPS 20000
#define CC_HELD 16
#define CC_MAXSIZE (96 * KIB)	/* a third of the requests bypass the credit */

struct cc_thread {
	struct xdm_runtime *rt;
	pthread_t tid;
	xdm_stream_id stream;
	uint64_t rng;
	unsigned long long allocs, refusals, bad;
	char why[256];
};

static uint64_t cc_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void *cc_run(void *arg)
{
	struct cc_thread *t = arg;
	struct xdm_block held[CC_HELD];
	unsigned int nheld = 0;

	for (int op = 0; op < CC_OPS; op++) {
		const struct xdm_error *e;
		enum xdm_status st;
		size_t bytes;

		if (nheld == CC_HELD || (nheld && cc_rand(&t->rng) % 3 == 0)) {
			unsigned int i = (unsigned int)(cc_rand(&t->rng) % nheld);

			if (xdm_deallocate(t->rt, &held[i]) != XDM_OK && !t->bad++)
				snprintf(t->why, sizeof(t->why), "free: %s",
					 xdm_last_error_message());
			held[i] = held[--nheld];
			continue;
		}
		bytes = 1 + (size_t)(cc_rand(&t->rng) % CC_MAXSIZE);
		st = xdm_allocate(t->rt, bytes, t->stream, "check_budget", &held[nheld]);
		if (st == XDM_OK) {
			nheld++;
			t->allocs++;
			continue;
		}
		e = xdm_last_error();
		t->refusals++;
		/* A refusal says what the segment had left: less than asked. */
		if ((st != XDM_E_OUT_OF_BUDGET || e->requested != bytes ||
		     e->remaining >= bytes) && !t->bad++)
			snprintf(t->why, sizeof(t->why), "%zu bytes: %s, remaining %zu: %.160s",
				 bytes, xdm_strerror(st), e->remaining, e->message);
	}
	while (nheld)
		if (xdm_deallocate(t->rt, &held[--nheld]) != XDM_OK)
			t->bad++;
	return NULL;
}

START_TEST(credit_churn_never_exceeds)
{
	struct xdm_runtime *rt = budget_rt("crchurn", "limit=1M credit=64K", "host");
	struct cc_thread t[CC_THREADS];
	struct monitor m = { 0 };
	unsigned long long refusals = 0;
	pthread_t mon;

	m.s = segment_map("crchurn", false);
	pthread_create(&mon, NULL, monitor_run, &m);
	for (int i = 0; i < CC_THREADS; i++) {
		t[i] = (struct cc_thread){ .rt = rt, .stream = (xdm_stream_id)i };
		t[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		pthread_create(&t[i].tid, NULL, cc_run, &t[i]);
	}
	for (int i = 0; i < CC_THREADS; i++) {
		pthread_join(t[i].tid, NULL);
		ck_assert_msg(t[i].bad == 0, "thread %d: %llu bad, first: %s", i, t[i].bad,
			      t[i].why);
		ck_assert_uint_gt(t[i].allocs, 0);
		refusals += t[i].refusals;
	}
	atomic_store(&m.stop, true);
	pthread_join(mon, NULL);

	ck_assert_msg(m.over == 0, "%llu of %llu samples over the limit (worst %" PRIu64 ")",
		      m.over, m.samples, m.worst);
	ck_assert_uint_gt(m.samples, 100);
	ck_assert_uint_gt(refusals, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), refusals);
	ck_assert_uint_le(attr(rt, "peak"), MIB);
	ck_assert_uint_gt(attr(rt, "peak"), MIB / 2);
	/* Nothing live: what is used is the credit, at most 2 x 64K a stream. */
	ck_assert_uint_eq(attr(rt, "used"), attr(rt, "credit_held"));
	ck_assert_uint_le(attr(rt, "credit_held"), CC_THREADS * 128 * KIB);

	/* And the runtime's end gives it all back. */
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_uint_eq(atomic_load(&m.s->used), 0);
	munmap((void *)m.s, sizeof(*m.s));
	ck_assert(!segment_exists("crchurn"));
}
END_TEST

/*
 * Destroying a runtime returns its credit.  The observer is another runtime
 * of this process on the same key: the process's row outlives the first
 * runtime, so only the drain at fini can give the credit back.
 */
START_TEST(credit_destroy_returns_all)
{
	struct xdm_runtime *obs = budget_rt("crfini", "limit=1M", "host");
	struct xdm_runtime *rt = budget_rt("crfini", "limit=1M credit=64K", "host");
	struct xdm_block b[4], o;
	long long mine;

	alloc_on(obs, 100 * KIB, 0, &o);
	for (xdm_stream_id s = 0; s < 4; s++)
		alloc_on(rt, 4 * KIB, s, &b[s]);
	CREDIT_STATE(rt, 100 * KIB + 4 * 68 * KIB, 4 * 64 * KIB);
	for (xdm_stream_id s = 0; s < 4; s++)
		TU_OK(xdm_deallocate(rt, &b[s]));
	CREDIT_STATE(rt, 100 * KIB + 4 * 68 * KIB, 4 * 68 * KIB);
	ck_assert_uint_eq(attr(obs, "credit_held"), 0);

	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_uint_eq(attr(obs, "used"), 100 * KIB);
	ck_assert_int_eq(process_rows(obs, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 100 * KIB);

	/* Credit left over from a draw and a free, the same. */
	rt = budget_rt("crfini", "limit=1M credit=64K", "host");
	alloc_on(rt, 4 * KIB, 5, &b[0]);
	alloc_on(rt, 4 * KIB, 5, &b[1]);
	TU_OK(xdm_deallocate(rt, &b[1]));
	CREDIT_STATE(rt, 168 * KIB, 64 * KIB);
	TU_OK(xdm_deallocate(rt, &b[0]));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_uint_eq(attr(obs, "used"), 100 * KIB);
	TU_OK(xdm_deallocate(obs, &o));
	ck_assert_uint_eq(attr(obs, "used"), 0);
	TU_OK(xdm_runtime_destroy(obs));
	ck_assert(!segment_exists("crfini"));
}
END_TEST

/* credit=0, the default: every allocation and free is exact in used. */
START_TEST(credit_zero_is_exact)
{
	static const size_t sizes[] = { 1, 4 * KIB, 100, 64 * KIB, 3000, 200 * KIB, 65 * KIB,
					17 };
	const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	struct xdm_runtime *rt = budget_rt("crzero", "limit=1M", "host");
	struct xdm_runtime *rt0 = budget_rt("crzero", "limit=1M credit=0", "host");
	struct xdm_block b[2 * sizeof(sizes) / sizeof(sizes[0])], last;
	uint64_t live = 0;

	ck_assert_uint_eq(attr(rt, "credit"), 0);
	ck_assert_uint_eq(attr(rt0, "credit"), 0);
	for (size_t i = 0; i < 2 * nsizes; i++) {
		struct xdm_runtime *r = i % 2 ? rt0 : rt;

		alloc_on(r, sizes[i % nsizes], (xdm_stream_id)(i % 6), &b[i]);
		live += sizes[i % nsizes];
		CREDIT_STATE(rt, live, 0);
		ck_assert_uint_eq(attr(rt0, "credit_held"), 0);
		ck_assert_uint_eq(attr(rt, "remaining"), MIB - live);
	}
	/* Exactly to the limit, and not a byte more. */
	alloc_on(rt, MIB - live, 7, &last);
	refused_on(rt, 1, 8, 0);
	refused_on(rt0, 1, 9, 0);
	TU_OK(xdm_deallocate(rt, &last));
	for (size_t i = 0; i < 2 * nsizes; i++) {
		TU_OK(xdm_deallocate(i % 2 ? rt0 : rt, &b[i]));
		live -= sizes[i % nsizes];
		CREDIT_STATE(rt0, live, 0);
	}
	ck_assert_uint_eq(attr(rt, "used"), 0);
	ck_assert_uint_eq(attr(rt, "peak"), MIB);
	TU_OK(xdm_runtime_destroy(rt0));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crzero"));
}
END_TEST

/*
 * Another process holding credit it does not use may have this one
 * refused earlier, by at most that credit; the refusal's remaining is what
 * the segment has left.  That credit comes back when the other process
 * ends, whether it destroys its runtime or is killed.
 */
START_TEST(credit_of_another_process)
{
	struct xdm_runtime *rt = budget_rt("crother", "limit=1M credit=64K", "host");
	struct xdm_block a, b, c, d;
	struct worker w;
	long long theirs;
	int status;

	/* The worker holds a 4K block and 64K of credit it does not use. */
	holder_start_params(&w, "crother", "limit=1M credit=64K", 4 * KIB);
	ck_assert_uint_eq(attr(rt, "used"), 68 * KIB);
	ck_assert_int_eq(process_rows(rt, w.pid, &theirs), 2);
	ck_assert_int_eq(theirs, 68 * KIB);
	ck_assert_uint_eq(attr(rt, "credit_held"), 0);

	alloc_on(rt, 900 * KIB, 0, &a);	/* above the credit: straight */
	CREDIT_STATE(rt, 968 * KIB, 0);

	/*
	 * 904K live in all: 100K more would fit the limit, but the worker's
	 * credit is counted.  Refused with what the segment has left, 56K,
	 * short of the request by less than the worker's credit.
	 */
	refused_on(rt, 100 * KIB, 1, 56 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), 56 * KIB);
	ck_assert_uint_le(904 * KIB + 100 * KIB, MIB);
	ck_assert_uint_le(100 * KIB - 56 * KIB, 64 * KIB);
	CREDIT_STATE(rt, 968 * KIB, 0);

	/* What is left is admitted, through this process's credit path. */
	alloc_on(rt, 56 * KIB, 1, &b);
	CREDIT_STATE(rt, MIB, 0);
	refused_on(rt, 1, 2, 0);
	/* Refused with exactly the worker's idle credit free on the device. */
	ck_assert_uint_eq(MIB - (956 * KIB + 4 * KIB), 64 * KIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);

	/* The worker frees its block and destroys its runtime: all back. */
	status = worker_wait(&w);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(attr(rt, "used"), 956 * KIB);
	ck_assert_int_eq(process_rows(rt, w.pid, &theirs), 1);
	alloc_on(rt, 68 * KIB, 2, &c);
	CREDIT_STATE(rt, MIB, 0);
	TU_OK(xdm_deallocate(rt, &c));
	CREDIT_STATE(rt, 956 * KIB, 0);

	/* A killed worker's credit is reclaimed with its block. */
	holder_start_params(&w, "crother", "limit=1M credit=64K", 4 * KIB);
	CREDIT_STATE(rt, MIB, 0);
	holder_kill(&w);
	tu_sleep_ms(2);	/* past BUDGET_RESCAN_NS since the worker's attach */
	alloc_on(rt, 68 * KIB, 3, &d);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);
	ck_assert_int_eq(process_rows(rt, w.pid, &theirs), 1);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &d));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crother"));
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("budget");
	TCase *one = tcase_create("one_process");
	TCase *many = tcase_create("processes");
	TCase *multi = tcase_create("multiprocess");
	TCase *credit = tcase_create("credit");

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

	tcase_add_test(credit, credit_draws_ahead_and_serves_from_it);
	tcase_add_test(credit, credit_frees_keep_twice_the_credit);
	tcase_add_test(credit, credit_alone_is_refused_exactly);
	tcase_add_test(credit, credit_alone_big_request_drains_first);
	tcase_add_test(credit, credit_max_keeps_the_limit);
	tcase_add_test(credit, credit_churn_never_exceeds);
	tcase_add_test(credit, credit_destroy_returns_all);
	tcase_add_test(credit, credit_zero_is_exact);
	tcase_add_test(credit, credit_of_another_process);
	tcase_set_timeout(credit, TU_TIMEOUT_S);
	suite_add_tcase(s, credit);
	return s;
}

int main(void)
{
	return budget_suite_run(budget_suite(), "ckb", test_keys);
}
