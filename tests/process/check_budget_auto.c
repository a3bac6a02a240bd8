/* SPDX-License-Identifier: MIT */
/*
 * check_budget_auto.c - the budget's credit=auto, its default, on the host
 * platform: each thread's credit follows its demand (adaptors/budget/credit.c).
 *
 * The rule the tests hold the module to: a thread starts with no credit;
 * each draw (a request its credit does not cover) takes the request and,
 * ahead, twice the last draw (64K the first time, at least the request,
 * at most 16M), but never more than 1/16 of the room the limit has beside
 * the request; a free that would leave more than twice the size halves the
 * size (not below 64K) and keeps at most that; a thread asked for its
 * credit back, or refused, starts again from none.  And the promises of
 * every credit: used is the live blocks plus the credit held, exactly,
 * whenever the threads are quiet; a thread alone is refused exactly at the
 * limit; a refused thread asks the others back and they give all of it on
 * their next call; a thread that exits gives its credit back.
 *
 * Every number is read from the tree (used, credit_held) after calls the
 * test orders itself: the other threads are agents (budget_agent.h).
 */
#include "config.h"

#include "tests/lib/budget_agent.h"

static const char *const test_keys[] = {
	"augrow", "aushare", "augroup", "audrain", "auparam", NULL,
};

#define CREDIT_STATE(rt, used_, held_)                                   \
	do {                                                             \
		ck_assert_uint_eq(attr((rt), "used"), (used_));          \
		ck_assert_uint_eq(attr((rt), "credit_held"), (held_));   \
	} while (0)

#define AUTO_MIN (64 * KIB)
#define AUTO_MAX (16 * MIB)

static void alloc_on(struct xdm_runtime *rt, size_t bytes, struct xdm_block *b)
{
	TU_OK(xdm_allocate(rt, bytes, 0, "check_budget_auto", b));
	ck_assert_uint_eq(b->bytes, bytes);
}

static void refused_with(struct xdm_runtime *rt, size_t bytes, size_t remaining)
{
	struct xdm_block b;
	const struct xdm_error *e;

	ck_assert_int_eq(xdm_allocate(rt, bytes, 0, "check_budget_auto", &b),
			 XDM_E_OUT_OF_BUDGET);
	e = xdm_last_error();
	ck_assert_uint_eq(e->requested, bytes);
	ck_assert_uint_eq(e->remaining, remaining);
}

static void attr_text_is(struct xdm_runtime *rt, const char *name, const char *want)
{
	char buf[64];

	TU_OK(xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)));
	ck_assert_str_eq(buf, want);
}

/*
 * Under a limit far above the draws (the share never binds), a thread that
 * keeps allocating draws 64K, 128K, ... 16M ahead, one draw each time its
 * credit runs out.  Once it frees more than twice its size the size
 * halves at each overflow, down to 64K, and the next draw doubles again
 * from there.
 */
#define GROW_STEPS 12	/* 64K << 8 is 16M: the last four draws are the ceiling */

START_TEST(auto_credit_grows_with_demand_and_halves_when_it_falls)
{
	struct xdm_runtime *rt = budget_rt("augrow", "limit=1G", "host");
	/* held after freeing big[11], big[10], ... big[0]: kept while within
	 * twice the size, else the halved size */
	static const uint64_t held_after_free[GROW_STEPS] = {
		16 * MIB, 32 * MIB, 8 * MIB, 4 * MIB, 2 * MIB, MIB,
		512 * KIB, 256 * KIB, 128 * KIB, 64 * KIB, 64 * KIB, 128 * KIB,
	};
	struct xdm_block small[GROW_STEPS], big[GROW_STEPS], a, b;
	uint64_t live = 0;

	attr_text_is(rt, "credit", "auto\n");
	CREDIT_STATE(rt, 0, 0);
	for (int i = 0; i < GROW_STEPS; i++) {
		uint64_t ahead = AUTO_MIN << i < AUTO_MAX ? AUTO_MIN << i : AUTO_MAX;

		/* The credit is spent: 4K draws itself and twice the last draw. */
		alloc_on(rt, 4 * KIB, &small[i]);
		live += 4 * KIB;
		CREDIT_STATE(rt, live + ahead, ahead);
		/* A block of the whole credit is served from it. */
		alloc_on(rt, ahead, &big[i]);
		live += ahead;
		CREDIT_STATE(rt, live, 0);
	}
	ck_assert_uint_eq(attr(rt, "refusals"), 0);

	/* Demand falls: each free past twice the size halves it. */
	for (int i = GROW_STEPS - 1; i >= 0; i--) {
		live -= big[i].bytes;
		TU_OK(xdm_deallocate(rt, &big[i]));
		CREDIT_STATE(rt, live + held_after_free[GROW_STEPS - 1 - i],
			     held_after_free[GROW_STEPS - 1 - i]);
	}
	/* 128K held at size 64K: a 4K free overflows, 64K is kept. */
	live -= small[0].bytes;
	TU_OK(xdm_deallocate(rt, &small[0]));
	CREDIT_STATE(rt, live + 64 * KIB, 64 * KIB);

	/* Spent again, it grows from the size it has fallen to. */
	alloc_on(rt, 64 * KIB, &a);
	live += 64 * KIB;
	CREDIT_STATE(rt, live, 0);
	alloc_on(rt, 4 * KIB, &b);
	live += 4 * KIB;
	CREDIT_STATE(rt, live + 128 * KIB, 128 * KIB);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	for (int i = 1; i < GROW_STEPS; i++)
		TU_OK(xdm_deallocate(rt, &small[i]));
	/* Nothing live: what is used is this thread's credit, the 128K of the
	 * draw and the frees, all kept: within twice its size. */
	CREDIT_STATE(rt, 240 * KIB, 240 * KIB);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("augrow"));
}
END_TEST

/*
 * Near the limit a draw takes less: 1/16 of the room beside the request.
 * Then a thread alone is still refused exactly: its own credit goes back
 * before its last, exact ask.
 */
START_TEST(auto_credit_takes_a_share_of_the_room)
{
	struct xdm_runtime *rt = budget_rt("aushare", "limit=1M", "host");
	struct xdm_block a, b, c, d;
	uint64_t used, held, ahead, last;

	/* 64K would be the first draw; the share of 1M - 4K is a little less. */
	alloc_on(rt, 4 * KIB, &a);
	ahead = (MIB - 4 * KIB) / 16;
	ck_assert_uint_lt(ahead, AUTO_MIN);
	used = 4 * KIB + ahead;
	held = ahead;
	CREDIT_STATE(rt, used, held);

	/* 512K: the credit does not cover it; the draw takes what it lacks
	 * and the credit ahead, cut to the share, and holds that. */
	alloc_on(rt, 512 * KIB, &b);
	ahead = (MIB - used - 512 * KIB) / 16;
	ck_assert_uint_lt(ahead, AUTO_MIN / 2);
	used += 512 * KIB - held + ahead;
	held = ahead;
	CREDIT_STATE(rt, used, held);

	/* 400K leaves little room: the draw takes a few kilobytes ahead. */
	alloc_on(rt, 400 * KIB, &c);
	ahead = (MIB - used - 400 * KIB) / 16;
	ck_assert_uint_lt(ahead, 8 * KIB);
	used += 400 * KIB - held + ahead;
	held = ahead;
	CREDIT_STATE(rt, used, held);

	/* The blocks and a request of the rest fill the limit exactly: the
	 * thread gives its credit back and is admitted. */
	last = MIB - used + held;
	alloc_on(rt, last, &d);
	CREDIT_STATE(rt, MIB, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 0);
	refused_with(rt, 1, 0);
	ck_assert_uint_eq(attr(rt, "refusals"), 1);

	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	TU_OK(xdm_deallocate(rt, &d));
	held = attr(rt, "credit_held");
	CREDIT_STATE(rt, held, held);
	ck_assert_uint_le(held, 2 * AUTO_MIN);
	ck_assert_uint_eq(attr(rt, "peak"), MIB);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("aushare"));
}
END_TEST

/* In a group, the share is of the smaller room: the group's here. */
START_TEST(auto_credit_takes_a_share_of_the_groups_room)
{
	struct xdm_runtime *rt =
		budget_rt("augroup", "limit=1G group=ag group_limit=1M", "host");
	struct xdm_block a;
	uint64_t ahead = (MIB - 4 * KIB) / 16;

	alloc_on(rt, 4 * KIB, &a);
	CREDIT_STATE(rt, 4 * KIB + ahead, ahead);
	ck_assert_uint_eq(attr(rt, "group_used"), 4 * KIB + ahead);
	TU_OK(xdm_deallocate(rt, &a));
	CREDIT_STATE(rt, 4 * KIB + ahead, 4 * KIB + ahead);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("augroup"));
}
END_TEST

/*
 * Two threads hold auto credit that a third one's request needs.  It is
 * refused and asks them back; each gives all of it on its next call, and
 * then the request, which fills the limit exactly, is admitted.  A thread
 * that gave its credit back starts again from 64K; one that exits gives
 * back exactly what it holds.
 */
START_TEST(auto_credit_is_asked_back_and_starts_over)
{
	struct xdm_runtime *rt = budget_rt("audrain", "limit=16M", "host");
	struct xdm_block blocks[2][4], big, again;
	struct agent ag[2];
	uint64_t live = 0, n;

	for (int i = 0; i < 2; i++) {
		agent_start(&ag[i], rt);
		/* 64K ahead, spent, then 128K ahead. */
		agent_alloc(&ag[i], 4 * KIB, &blocks[i][0]);
		agent_alloc(&ag[i], 64 * KIB, &blocks[i][1]);
		agent_alloc(&ag[i], 4 * KIB, &blocks[i][2]);
		live += 72 * KIB;
	}
	CREDIT_STATE(rt, live + 256 * KIB, 256 * KIB);

	/* The blocks and this request fill the limit; the credit is in the way. */
	n = 16 * MIB - live;
	refused_with(rt, n, n - 256 * KIB);
	CREDIT_STATE(rt, live + 256 * KIB, 256 * KIB);

	/* Each agent's next call serves a byte from its credit and gives
	 * back the rest. */
	agent_alloc(&ag[0], 1, &blocks[0][3]);
	CREDIT_STATE(rt, live + 1 + 128 * KIB, 128 * KIB);
	agent_alloc(&ag[1], 1, &blocks[1][3]);
	live += 2;
	CREDIT_STATE(rt, live, 0);

	/* Now what the blocks leave is admitted, to the byte. */
	alloc_on(rt, 16 * MIB - live, &big);
	CREDIT_STATE(rt, 16 * MIB, 0);
	refused_with(rt, 1, 0);

	/* The refused thread starts from none: its free keeps 64K. */
	TU_OK(xdm_deallocate(rt, &big));
	CREDIT_STATE(rt, live + 64 * KIB, 64 * KIB);

	/* The agent that gave its 128K back draws 64K ahead, not 256K. */
	agent_alloc(&ag[0], 4 * KIB, &again);
	live += 4 * KIB;
	CREDIT_STATE(rt, live + 64 * KIB + 64 * KIB, 128 * KIB);

	/* The agents exit: exactly their credit comes back, their blocks stay. */
	agent_exit(&ag[0]);
	CREDIT_STATE(rt, live + 64 * KIB, 64 * KIB);
	agent_exit(&ag[1]);
	CREDIT_STATE(rt, live + 64 * KIB, 64 * KIB);

	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++)
			TU_OK(xdm_deallocate(rt, &blocks[i][j]));
	TU_OK(xdm_deallocate(rt, &again));
	ck_assert_uint_eq(attr(rt, "used"), attr(rt, "credit_held"));
	ck_assert_uint_le(attr(rt, "credit_held"), 2 * AUTO_MIN);
	ck_assert_uint_eq(attr(rt, "refusals"), 2);
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("audrain"));
}
END_TEST

/* credit= is auto by default and by name, a size, or 0; anything else is
 * refused at build with a sentence that names the forms. */
START_TEST(credit_parameter_forms)
{
	static const char *const bad[][2] = {
		{ "credit=lots", "credit must be auto, 0 or a size (like 64K or 1M), not 'lots'" },
		{ "credit=-1", "credit must be auto, 0 or a size" },
		{ "credit=2G", "credit must be at most 1G" },
	};
	struct xdm_runtime *rt;
	char key[64], stack[256];

	rt = budget_rt("auparam", "limit=1M", "host");
	attr_text_is(rt, "credit", "auto\n");
	TU_OK(xdm_runtime_destroy(rt));
	rt = budget_rt("auparam", "limit=1M credit=auto", "host");
	attr_text_is(rt, "credit", "auto\n");
	TU_OK(xdm_runtime_destroy(rt));
	rt = budget_rt("auparam", "limit=1M credit=0", "host");
	attr_text_is(rt, "credit", "0\n");
	TU_OK(xdm_runtime_destroy(rt));
	rt = budget_rt("auparam", "limit=1M credit=64K", "host");
	attr_text_is(rt, "credit", "65536\n");
	/* Read-only: a write changes nothing. */
	ck_assert_int_ne(xdm_layer_attr_store(rt, 0, "credit", "0"), XDM_OK);
	attr_text_is(rt, "credit", "65536\n");
	TU_OK(xdm_runtime_destroy(rt));

	key_of("auparam", key, sizeof(key));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(stack, sizeof(stack), "budget key=%s limit=1M %s | host", key, bad[i][0]);
		ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
		ck_assert_msg(strstr(xdm_last_error_message(), bad[i][1]), "%s: %s", bad[i][0],
			      xdm_last_error_message());
	}
	ck_assert(!segment_exists("auparam"));
}
END_TEST

static Suite *auto_suite(void)
{
	Suite *s = suite_create("budget_auto");
	TCase *tc = tcase_create("auto");

	tcase_add_test(tc, auto_credit_grows_with_demand_and_halves_when_it_falls);
	tcase_add_test(tc, auto_credit_takes_a_share_of_the_room);
	tcase_add_test(tc, auto_credit_takes_a_share_of_the_groups_room);
	tcase_add_test(tc, auto_credit_is_asked_back_and_starts_over);
	tcase_add_test(tc, credit_parameter_forms);
	tcase_set_timeout(tc, TU_TIMEOUT_S);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return budget_suite_run(auto_suite(), "cka", test_keys);
}
