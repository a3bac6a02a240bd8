/* SPDX-License-Identifier: MIT */
/*
 * check_budget_credit.c - the budget's credit=SIZE on the host platform:
 * each thread draws SIZE ahead from the shared limit into a record of its
 * own, serves its allocations from it and gives its frees back to it
 * (adaptors/budget/credit.c).
 *
 * What must stay true: the limit is never passed, whatever the threads do;
 * used is the live blocks plus the threads' credit, exactly, whenever the
 * threads are quiet; a thread that exits gives its credit back, and so does
 * the runtime's end for threads still alive; a thread alone is refused
 * exactly at the limit; a thread asked for its credit by a refused one
 * gives it back on its next call; a forked child neither spends nor returns
 * its parent's credit.
 *
 * credit=auto has a suite of its own, check_budget_auto.c; the churn and
 * the fill below run under it too.
 *
 * Threads other than the test's own are agents (budget_agent.h): each runs the
 * test's calls one at a time, on request, and lives until told to exit,
 * so every step is ordered by the test and none depends on scheduling.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>

#include "tests/lib/budget_agent.h"

static const char *const test_keys[] = {
	"crdraw", "crfree", "crexact", "crbig", "crmax", "crchurn", "crfini", "crzero", "crother",
	"crfill", "crexit", "crdrain", "crfork", "crchpool", "crflpool", "crachurn", "crafill",
	NULL,
};

/* A macro, so that a failure names the test's line. */
#define CREDIT_STATE(rt, used_, held_)                                   \
	do {                                                             \
		ck_assert_uint_eq(attr((rt), "used"), (used_));          \
		ck_assert_uint_eq(attr((rt), "credit_held"), (held_));   \
	} while (0)

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

/* ---- one thread, and a record per thread -------------------------------- */

/*
 * A thread draws the request and SIZE more when its credit does not cover
 * a request, serves its later requests from the credit on any stream,
 * keeps what its frees give back up to 2 x SIZE and gives the rest back.
 * Requests above SIZE bypass the credit.  Another thread has a record of
 * its own; credit_held is their sum, and used counts it.
 */
START_TEST(credit_draws_ahead_and_serves_from_it)
{
	struct xdm_runtime *rt = budget_rt("crdraw", "limit=1M credit=64K", "host");
	struct xdm_block a, b, c, d, e;
	struct agent other;
	long long mine;

	ck_assert_uint_eq(attr(rt, "credit"), 64 * KIB);
	CREDIT_STATE(rt, 0, 0);

	/* 4K draws 4K + 64K: the credit is counted as used. */
	alloc_on(rt, 4 * KIB, 0, &a);
	CREDIT_STATE(rt, 68 * KIB, 64 * KIB);
	ck_assert_uint_eq(attr(rt, "remaining"), MIB - 68 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 68 * KIB);
	ck_assert_uint_eq(attr(rt, "peak"), 68 * KIB);

	/* The second, on another stream, is served from the same credit. */
	alloc_on(rt, 4 * KIB, 1, &b);
	CREDIT_STATE(rt, 68 * KIB, 60 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, 68 * KIB);

	/* Another thread has a credit of its own. */
	agent_start(&other, rt);
	agent_alloc(&other, 4 * KIB, &c);
	CREDIT_STATE(rt, 136 * KIB, 124 * KIB);

	/* A request of exactly the credit still goes through it: 60K do
	 * not cover it, so it draws what they lack and the credit ahead,
	 * 4K + 64K, and holds 64K. */
	alloc_on(rt, 64 * KIB, 2, &d);
	CREDIT_STATE(rt, 204 * KIB, 128 * KIB);
	/* ...one above it bypasses it, both ways. */
	alloc_on(rt, 64 * KIB + 1, 0, &e);
	CREDIT_STATE(rt, 268 * KIB + 1, 128 * KIB);
	TU_OK(xdm_deallocate(rt, &e));
	CREDIT_STATE(rt, 204 * KIB, 128 * KIB);

	/* Frees go back to the freeing thread's credit, up to 2 x 64K... */
	TU_OK(xdm_deallocate(rt, &a));
	CREDIT_STATE(rt, 204 * KIB, 132 * KIB);
	TU_OK(xdm_deallocate(rt, &b));
	CREDIT_STATE(rt, 204 * KIB, 136 * KIB);
	agent_free(&other, &c);
	CREDIT_STATE(rt, 204 * KIB, 140 * KIB);
	/* ...and past it (72K + 64K), back to 64K: 72K go back to the segment. */
	TU_OK(xdm_deallocate(rt, &d));
	/* Nothing live: what is used is the two threads' credit. */
	CREDIT_STATE(rt, 132 * KIB, 132 * KIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);

	/* The other thread exits: exactly its 68K come back. */
	agent_exit(&other);
	CREDIT_STATE(rt, 64 * KIB, 64 * KIB);
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
	/* Nothing live: what is used is credit, and it stays the thread's. */
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crfree"));
}
END_TEST

/*
 * A thread alone is refused exactly: it gives its own credit back before a
 * refusal and asks again for exactly the request, so what counts is its
 * blocks and the request against the limit, whatever credit it held.
 */
START_TEST(credit_alone_is_refused_exactly)
{
	struct xdm_runtime *rt = budget_rt("crexact", "limit=1M credit=64K", "host");
	struct xdm_block small, mid, big, last, more;
	long long mine;

	/* 4K draws 68K; 54K more from the credit leaves 10K of it. */
	alloc_on(rt, 4 * KIB, 0, &small);
	alloc_on(rt, 54 * KIB, 1, &mid);
	CREDIT_STATE(rt, 68 * KIB, 10 * KIB);

	/* 58K live and 10K of credit: a block that leaves exactly 20K. */
	alloc_on(rt, MIB - 78 * KIB, 2, &big);
	CREDIT_STATE(rt, MIB - 10 * KIB, 10 * KIB);

	/*
	 * 20K: the 10K of credit do not cover it, neither the 20K + 64K
	 * draw nor the 20K fit beside the credit; but the blocks and the
	 * request fit exactly, so the credit goes back and it is admitted.
	 */
	alloc_on(rt, 20 * KIB, 3, &last);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);

	/* Exactly the limit is live: one byte more is refused, both ways. */
	refused_on(rt, 1, 0, 0);
	refused_on(rt, 64 * KIB + 1, 1, 0);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);
	ck_assert_int_eq(process_rows(rt, getpid(), &mine), 1);
	ck_assert_int_eq(mine, MIB);

	/* A free goes to the credit, and serves the next request exactly. */
	TU_OK(xdm_deallocate(rt, &small));
	CREDIT_STATE(rt, MIB, 4 * KIB);
	alloc_on(rt, 4 * KIB, 2, &small);
	CREDIT_STATE(rt, MIB, 0);
	refused_on(rt, 1, 2, 0);

	/* 54K of credit, 970K live: 54K + 1 is one byte too many. */
	TU_OK(xdm_deallocate(rt, &mid));
	CREDIT_STATE(rt, MIB, 54 * KIB);
	refused_on(rt, 54 * KIB + 1, 0, 54 * KIB);
	CREDIT_STATE(rt, MIB - 54 * KIB, 0);
	alloc_on(rt, 54 * KIB, 0, &more);
	CREDIT_STATE(rt, MIB, 0);

	TU_OK(xdm_deallocate(rt, &big));
	TU_OK(xdm_deallocate(rt, &last));
	TU_OK(xdm_deallocate(rt, &small));
	TU_OK(xdm_deallocate(rt, &more));
	ck_assert_uint_eq(attr(rt, "used"), attr(rt, "credit_held"));
	ck_assert_uint_le(attr(rt, "credit_held"), 128 * KIB);
	ck_assert_uint_eq(attr(rt, "peak"), MIB);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crexact"));
}
END_TEST

/*
 * The same promise for a request larger than the credit: a thread with
 * nothing live is admitted its whole limit although it holds credit.
 */
START_TEST(credit_alone_big_request_drains_first)
{
	struct xdm_runtime *rt = budget_rt("crbig", "limit=1M credit=64K", "host");
	struct xdm_block b;

	/* 68K drawn and kept whole when the block goes, three times over. */
	for (xdm_stream_id s = 1; s <= 3; s++) {
		alloc_on(rt, 4 * KIB, s, &b);
		TU_OK(xdm_deallocate(rt, &b));
	}
	CREDIT_STATE(rt, 68 * KIB, 68 * KIB);

	/* Nothing is live: the whole limit must be admitted. */
	ck_assert_msg(xdm_allocate(rt, MIB, 0, "check_budget", &b) == XDM_OK,
		      "a thread with no live block was refused its limit of %llu bytes while "
		      "it held %llu of credit: %s",
		      MIB, (unsigned long long)attr(rt, "credit_held"),
		      xdm_last_error_message());
	CREDIT_STATE(rt, MIB, 0);
	TU_OK(xdm_deallocate(rt, &b));
	CREDIT_STATE(rt, 0, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * credit=max (a size every SIZE parameter accepts) must not lift the limit:
 * a draw of n + credit_max would wrap to n - 1 and credit a thread with
 * UINT64_MAX bytes it never reserved.
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

/* ---- many threads ------------------------------------------------------ */

/* 4 threads on 4 streams churning against credit. */
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
		/*
		 * A refusal says what the segment had left: less than asked.
		 * Over a pool the ask is the block as the pool rounds it.
		 */
		if ((st != XDM_E_OUT_OF_BUDGET || e->requested < bytes ||
		     e->remaining >= e->requested) && !t->bad++)
			snprintf(t->why, sizeof(t->why), "%zu bytes: %s, remaining %zu: %.160s",
				 bytes, xdm_strerror(st), e->remaining, e->message);
	}
	while (nheld)
		if (xdm_deallocate(t->rt, &held[--nheld]) != XDM_OK)
			t->bad++;
	return NULL;
}

static void churn_never_exceeds(const char *test, const char *params, const char *below)
{
	struct xdm_runtime *rt = budget_rt(test, params, below);
	struct cc_thread t[CC_THREADS];
	struct monitor m = { 0 };
	unsigned long long refusals = 0;
	pthread_t mon;

	m.s = segment_map(test, false);
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
	/* Nothing live and every thread gone: their credit came back. */
	CREDIT_STATE(rt, 0, 0);
	TU_OK(xdm_runtime_destroy(rt));
	munmap((void *)m.s, sizeof(*m.s));
	ck_assert(!segment_exists(test));
}

START_TEST(credit_churn_never_exceeds)
{
	churn_never_exceeds("crchurn", "limit=1M credit=64K", "host");
}
END_TEST

/*
 * The same over a pool whose threads keep caches: a cached block is no
 * longer charged, and what the caches hold never counts against the limit
 * nor lets a thread pass it.
 */
START_TEST(credit_churn_never_exceeds_over_thread_caches)
{
	churn_never_exceeds("crchpool", "limit=1M credit=64K", "pool chunk=256K | host");
}
END_TEST

/*
 * Many threads fill the limit with blocks of one size, each until its first
 * refusal, and hold them.  Each refused thread gave its credit back before
 * its last, exact ask, so once all are refused no credit is left and used
 * is exactly the blocks that the threads count: within the limit, and less
 * than one block short of it (the last refusal saw every other thread's
 * credit gone).  Then they free everything, keep at most 2 x SIZE each, and
 * go again; at the end they exit and used is 0.
 */
#define FILL_THREADS 6
#define FILL_ROUNDS 4
/* No divisor of the limit (the last gap is odd), and a size class of the pool's. */
#define FILL_SIZE 3072
#define FILL_MAX (MIB / FILL_SIZE + 1)

struct fill_thread {
	struct xdm_runtime *rt;
	pthread_barrier_t *gate;
	pthread_t tid;
	xdm_stream_id stream;
	struct xdm_block blocks[FILL_MAX];
	unsigned int n;			/* blocks held after this round's fill */
	unsigned long long bad;
	char why[256];
};

static void fill_until_refused(struct fill_thread *t)
{
	const struct xdm_error *e;
	enum xdm_status st;

	for (t->n = 0; t->n < FILL_MAX; t->n++) {
		st = xdm_allocate(t->rt, FILL_SIZE, t->stream, "fill", &t->blocks[t->n]);
		if (st == XDM_OK)
			continue;
		e = xdm_last_error();
		/* A refusal says what the segment had left: less than asked. */
		if ((st != XDM_E_OUT_OF_BUDGET || e->requested != FILL_SIZE ||
		     e->remaining >= FILL_SIZE) && !t->bad++)
			snprintf(t->why, sizeof(t->why), "%s, remaining %zu: %.160s",
				 xdm_strerror(st), e->remaining, e->message);
		return;
	}
	if (!t->bad++)
		snprintf(t->why, sizeof(t->why), "%u blocks of %d under a 1M limit", t->n,
			 FILL_SIZE);
}

/* Every thread stops here while the test looks, until it has looked. */
static void fill_pause(pthread_barrier_t *gate)
{
	pthread_barrier_wait(gate);
	pthread_barrier_wait(gate);
}

static void *fill_run(void *arg)
{
	struct fill_thread *t = arg;

	for (int r = 0; r < FILL_ROUNDS; r++) {
		fill_until_refused(t);
		fill_pause(t->gate);
		for (unsigned int i = 0; i < t->n; i++)
			if (xdm_deallocate(t->rt, &t->blocks[i]) != XDM_OK && !t->bad++)
				snprintf(t->why, sizeof(t->why), "free: %s",
					 xdm_last_error_message());
		fill_pause(t->gate);
	}
	return NULL;
}

static void threads_fill_the_limit_exactly(const char *test, const char *params,
					   const char *below)
{
	struct xdm_runtime *rt = budget_rt(test, params, below);
	static struct fill_thread t[FILL_THREADS];
	pthread_barrier_t gate;
	struct monitor m = { 0 };
	pthread_t mon;

	m.s = segment_map(test, false);
	pthread_create(&mon, NULL, monitor_run, &m);
	ck_assert_int_eq(pthread_barrier_init(&gate, NULL, FILL_THREADS + 1), 0);
	for (int i = 0; i < FILL_THREADS; i++) {
		t[i] = (struct fill_thread){ .rt = rt, .gate = &gate, .stream = (xdm_stream_id)i };
		ck_assert_int_eq(pthread_create(&t[i].tid, NULL, fill_run, &t[i]), 0);
	}
	for (int r = 0; r < FILL_ROUNDS; r++) {
		uint64_t got = 0;

		pthread_barrier_wait(&gate);	/* all filled */
		for (int i = 0; i < FILL_THREADS; i++) {
			ck_assert_msg(t[i].bad == 0, "round %d, thread %d: %s", r, i, t[i].why);
			got += (uint64_t)t[i].n * FILL_SIZE;
		}
		/* Every thread refused: no credit left, used is the blocks. */
		CREDIT_STATE(rt, got, 0);
		ck_assert_uint_le(got, MIB);
		ck_assert_msg(MIB - got < FILL_SIZE, "round %d: %" PRIu64 " of %llu filled", r,
			      got, MIB);
		pthread_barrier_wait(&gate);	/* looked: free */
		pthread_barrier_wait(&gate);	/* all freed */
		/* Nothing live: used is the threads' credit, 2 x 64K each at most. */
		ck_assert_uint_eq(attr(rt, "used"), attr(rt, "credit_held"));
		ck_assert_uint_le(attr(rt, "credit_held"), FILL_THREADS * 128 * KIB);
		pthread_barrier_wait(&gate);	/* looked: next round */
	}
	for (int i = 0; i < FILL_THREADS; i++)
		ck_assert_int_eq(pthread_join(t[i].tid, NULL), 0);
	atomic_store(&m.stop, true);
	pthread_join(mon, NULL);
	pthread_barrier_destroy(&gate);

	ck_assert_msg(m.over == 0, "%llu of %llu samples over the limit (worst %" PRIu64 ")",
		      m.over, m.samples, m.worst);
	ck_assert_uint_le(attr(rt, "peak"), MIB);
	/* The threads exited: their credit came back, to the byte. */
	CREDIT_STATE(rt, 0, 0);
	TU_OK(xdm_runtime_destroy(rt));
	munmap((void *)m.s, sizeof(*m.s));
	ck_assert(!segment_exists(test));
}

START_TEST(credit_threads_fill_the_limit_exactly)
{
	threads_fill_the_limit_exactly("crfill", "limit=1M credit=64K", "host");
}
END_TEST

/*
 * Over a pool with thread caches: the blocks each thread freed between
 * rounds sit in its cache, uncharged, and the next round fills the limit
 * to the same byte from them.
 */
START_TEST(credit_threads_fill_exactly_over_thread_caches)
{
	threads_fill_the_limit_exactly("crflpool", "limit=1M credit=64K", "pool chunk=256K | host");
}
END_TEST

/*
 * Both under credit=auto, the default: a thread's credit there is at most
 * 1/16 of the room at its draw (64K under this 1M limit) and keeps at
 * most twice the larger of that and 64K, the bounds the tests hold
 * credit=64K to.
 */
START_TEST(credit_auto_churn_never_exceeds)
{
	churn_never_exceeds("crachurn", "limit=1M", "host");
}
END_TEST

START_TEST(credit_auto_threads_fill_the_limit_exactly)
{
	threads_fill_the_limit_exactly("crafill", "limit=1M", "host");
}
END_TEST

/* ---- a thread's end, a drain request, the runtime's end, fork ---------- */

/*
 * A thread that exits gives its credit back (the key's destructor): used
 * drops by exactly that credit, its blocks stay counted.  Threads come and
 * go without leaving anything behind, more than a page of records at once
 * included.
 */
#define EXIT_CROWD 70	/* more threads than a page has records (64) */

START_TEST(credit_thread_exit_gives_it_back)
{
	struct xdm_runtime *rt = budget_rt("crexit", "limit=16M credit=64K", "host");
	static struct agent crowd[EXIT_CROWD];
	struct xdm_block kept, b, blocks[EXIT_CROWD];
	struct agent a;

	/* 4K live and 64K of credit: the exit gives back the 64K. */
	agent_start(&a, rt);
	agent_alloc(&a, 4 * KIB, &kept);
	CREDIT_STATE(rt, 68 * KIB, 64 * KIB);
	agent_exit(&a);
	CREDIT_STATE(rt, 4 * KIB, 0);

	/* A thread that drew and freed leaves nothing behind. */
	agent_start(&a, rt);
	agent_alloc(&a, 4 * KIB, &b);
	agent_free(&a, &b);
	CREDIT_STATE(rt, 72 * KIB, 68 * KIB);
	agent_exit(&a);
	CREDIT_STATE(rt, 4 * KIB, 0);

	/* 70 threads hold 68K each at once; credit_held sums every record. */
	for (int i = 0; i < EXIT_CROWD; i++) {
		agent_start(&crowd[i], rt);
		agent_alloc(&crowd[i], 4 * KIB, &blocks[i]);
		agent_free(&crowd[i], &blocks[i]);
	}
	CREDIT_STATE(rt, 4 * KIB + EXIT_CROWD * 68 * KIB, EXIT_CROWD * 68 * KIB);
	for (int i = 0; i < EXIT_CROWD; i += 2)
		agent_exit(&crowd[i]);
	CREDIT_STATE(rt, 4 * KIB + EXIT_CROWD / 2 * 68 * KIB, EXIT_CROWD / 2 * 68 * KIB);
	for (int i = 1; i < EXIT_CROWD; i += 2)
		agent_exit(&crowd[i]);
	CREDIT_STATE(rt, 4 * KIB, 0);

	/* The exited thread's block, freed here, goes to this thread's credit. */
	TU_OK(xdm_deallocate(rt, &kept));
	CREDIT_STATE(rt, 4 * KIB, 4 * KIB);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crexit"));
}
END_TEST

/*
 * A refused thread cannot take a live thread's credit; it asks for it,
 * and the owner gives all of it back on its next call: an allocation
 * (keeping only the request), a free of a block larger than the credit,
 * or a free within it.  Then what was refused fits.
 */
START_TEST(credit_drain_request_is_honoured)
{
	struct xdm_runtime *rt = budget_rt("crdrain", "limit=1M credit=64K", "host");
	struct xdm_block a4, a1, a8, big, m64;
	struct agent a;

	agent_start(&a, rt);
	agent_alloc(&a, 4 * KIB, &a4);
	alloc_on(rt, 900 * KIB, 0, &big);
	CREDIT_STATE(rt, 968 * KIB, 64 * KIB);

	/* 64K fits the blocks but not beside the other thread's credit. */
	refused_on(rt, 64 * KIB, 0, 56 * KIB);
	CREDIT_STATE(rt, 968 * KIB, 64 * KIB);
	/* Its next allocation serves 1 byte and gives the rest back. */
	agent_alloc(&a, 1, &a1);
	CREDIT_STATE(rt, 904 * KIB + 1, 0);
	alloc_on(rt, 64 * KIB, 0, &m64);
	CREDIT_STATE(rt, 968 * KIB + 1, 0);

	/* The other way round, heard on a free larger than the credit. */
	TU_OK(xdm_deallocate(rt, &m64));
	CREDIT_STATE(rt, 968 * KIB + 1, 64 * KIB);
	ck_assert_int_eq(agent_call(&a, AGENT_ALLOC, 60 * KIB, &a8), XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(a.requested, 60 * KIB);
	ck_assert_uint_eq(a.remaining, 56 * KIB - 1);
	CREDIT_STATE(rt, 968 * KIB + 1, 64 * KIB);
	TU_OK(xdm_deallocate(rt, &big));
	CREDIT_STATE(rt, 4 * KIB + 1, 0);

	/* And on a free within the credit. */
	agent_alloc(&a, 8 * KIB, &a8);
	CREDIT_STATE(rt, 76 * KIB + 1, 64 * KIB);
	refused_on(rt, MIB - 12 * KIB - 1, 0, 948 * KIB - 1);
	agent_free(&a, &a4);
	CREDIT_STATE(rt, 8 * KIB + 1, 0);
	alloc_on(rt, MIB - 8 * KIB - 1, 0, &big);
	CREDIT_STATE(rt, MIB, 0);
	refused_on(rt, 1, 0, 0);

	TU_OK(xdm_deallocate(rt, &big));
	agent_free(&a, &a1);
	agent_free(&a, &a8);
	agent_exit(&a);
	CREDIT_STATE(rt, 0, 0);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crdrain"));
}
END_TEST

/*
 * Destroying a runtime returns the credit of every thread, those still
 * alive included (they exit after it, with the key gone).  The observer
 * is another runtime of this process on the same key: the process's row
 * outlives the first runtime, so only its fini can give the credit back.
 */
#define FINI_AGENTS 4

START_TEST(credit_destroy_returns_all)
{
	struct xdm_runtime *obs = budget_rt("crfini", "limit=1M credit=0", "host");
	struct xdm_runtime *rt = budget_rt("crfini", "limit=1M credit=64K", "host");
	struct agent agents[FINI_AGENTS];
	struct xdm_block b[FINI_AGENTS], o, mine[2];
	long long row;

	alloc_on(obs, 100 * KIB, 0, &o);
	for (int i = 0; i < FINI_AGENTS; i++) {
		agent_start(&agents[i], rt);
		agent_alloc(&agents[i], 4 * KIB, &b[i]);
		agent_free(&agents[i], &b[i]);
	}
	alloc_on(rt, 4 * KIB, 0, &mine[0]);
	alloc_on(rt, 4 * KIB, 1, &mine[1]);
	TU_OK(xdm_deallocate(rt, &mine[1]));
	CREDIT_STATE(rt, 100 * KIB + (FINI_AGENTS + 1) * 68 * KIB,
		     FINI_AGENTS * 68 * KIB + 64 * KIB);
	ck_assert_uint_eq(attr(obs, "credit_held"), 0);

	/* A block left live is freed by the core, then all credit goes. */
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert_uint_eq(attr(obs, "used"), 100 * KIB);
	ck_assert_int_eq(process_rows(obs, getpid(), &row), 1);
	ck_assert_int_eq(row, 100 * KIB);
	for (int i = 0; i < FINI_AGENTS; i++)
		agent_exit(&agents[i]);
	ck_assert_uint_eq(attr(obs, "used"), 100 * KIB);

	TU_OK(xdm_deallocate(obs, &o));
	ck_assert_uint_eq(attr(obs, "used"), 0);
	TU_OK(xdm_runtime_destroy(obs));
	ck_assert(!segment_exists("crfini"));
}
END_TEST

/* An attribute in a child that must not call check (it only exits). */
static uint64_t child_attr(struct xdm_runtime *rt, const char *name)
{
	char buf[64];

	if (xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)) != XDM_OK)
		return UINT64_MAX;
	return strtoull(buf, NULL, 10);
}

/* The child's checks; 0, or the number of the one that failed. */
static int fork_child(struct xdm_runtime *rt)
{
	struct xdm_block b;

	/* The parent's thread holds 64K: it is not the child's. */
	if (child_attr(rt, "credit_held") != 0)
		return 10;
	if (child_attr(rt, "used") != 68 * KIB)
		return 11;
	/* So 4K draws afresh: 68K more in used, and 64K of its own. */
	if (xdm_allocate(rt, 4 * KIB, 0, "child", &b) != XDM_OK)
		return 12;
	if (child_attr(rt, "used") != 136 * KIB || child_attr(rt, "credit_held") != 64 * KIB)
		return 13;
	if (xdm_deallocate(rt, &b) != XDM_OK)
		return 14;
	if (child_attr(rt, "credit_held") != 68 * KIB)
		return 15;
	/* A refusal gives back the child's own credit, not the parent's. */
	if (xdm_allocate(rt, 2 * MIB, 0, "child", &b) != XDM_E_OUT_OF_BUDGET)
		return 16;
	if (child_attr(rt, "used") != 68 * KIB || child_attr(rt, "credit_held") != 0)
		return 17;
	return 0;
}

static void nothing(void *arg)
{
	(void)arg;
}

/*
 * Every stream's thread has run an item and gone back to waiting: none is
 * starting up (which allocates) when the test forks.  The child allocates,
 * and an allocator lock held by another thread at the fork would never be
 * released there (AddressSanitizer's allocator has such locks).
 */
static void streams_settled(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++) {
		TU_OK(xdm_stream_launch_host(rt, s, nothing, NULL));
		TU_OK(xdm_stream_synchronize(rt, s));
	}
}

/*
 * A forked child has only the thread that forked, and the parent's credit
 * records read as zero there (MADV_WIPEONFORK): it neither hands out nor
 * gives back the credit its parent's threads hold.
 */
START_TEST(credit_forked_child_has_none_of_the_parents)
{
	struct xdm_runtime *rt = budget_rt("crfork", "limit=1M credit=64K", "host");
	struct xdm_block a, b;
	long long row;
	pid_t pid;
	int status;

	alloc_on(rt, 4 * KIB, 0, &a);
	CREDIT_STATE(rt, 68 * KIB, 64 * KIB);
	streams_settled(rt);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(fork_child(rt));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the child failed its check %d (status %#x)", WEXITSTATUS(status), status);

	/* The parent's credit is as it was, and serves it. */
	CREDIT_STATE(rt, 68 * KIB, 64 * KIB);
	ck_assert_int_eq(process_rows(rt, getpid(), &row), 1);
	ck_assert_int_eq(row, 68 * KIB);
	alloc_on(rt, 4 * KIB, 0, &b);
	CREDIT_STATE(rt, 68 * KIB, 60 * KIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	CREDIT_STATE(rt, 68 * KIB, 68 * KIB);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("crfork"));
}
END_TEST

/* ---- credit=0, and other processes ------------------------------------- */

/* credit=0, the strict mode: every allocation and free is exact in used. */
START_TEST(credit_zero_is_exact)
{
	static const size_t sizes[] = { 1, 4 * KIB, 100, 64 * KIB, 3000, 200 * KIB, 65 * KIB,
					17 };
	const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	struct xdm_runtime *rt = budget_rt("crzero", "limit=1M credit=0", "host");
	struct xdm_runtime *rt0 = budget_rt("crzero", "limit=1M credit=0K", "host");
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

static Suite *credit_suite(void)
{
	Suite *s = suite_create("budget_credit");
	TCase *one = tcase_create("one_thread");
	TCase *threads = tcase_create("threads");
	TCase *others = tcase_create("others");

	tcase_add_test(one, credit_draws_ahead_and_serves_from_it);
	tcase_add_test(one, credit_frees_keep_twice_the_credit);
	tcase_add_test(one, credit_alone_is_refused_exactly);
	tcase_add_test(one, credit_alone_big_request_drains_first);
	tcase_add_test(one, credit_max_keeps_the_limit);
	tcase_add_test(one, credit_zero_is_exact);
	suite_add_tcase(s, one);

	tcase_add_test(threads, credit_churn_never_exceeds);
	tcase_add_test(threads, credit_threads_fill_the_limit_exactly);
	tcase_add_test(threads, credit_churn_never_exceeds_over_thread_caches);
	tcase_add_test(threads, credit_threads_fill_exactly_over_thread_caches);
	tcase_add_test(threads, credit_auto_churn_never_exceeds);
	tcase_add_test(threads, credit_auto_threads_fill_the_limit_exactly);
	tcase_add_test(threads, credit_thread_exit_gives_it_back);
	tcase_add_test(threads, credit_drain_request_is_honoured);
	tcase_add_test(threads, credit_destroy_returns_all);
	tcase_set_timeout(threads, TU_TIMEOUT_S);
	suite_add_tcase(s, threads);

	tcase_add_test(others, credit_forked_child_has_none_of_the_parents);
	tcase_add_test(others, credit_of_another_process);
	tcase_set_timeout(others, TU_TIMEOUT_S);
	suite_add_tcase(s, others);
	return s;
}

int main(void)
{
	return budget_suite_run(credit_suite(), "ckc", test_keys);
}
