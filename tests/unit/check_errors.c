/* SPDX-License-Identifier: MIT */
/* check_errors.c - typed errors, payloads and the per-thread detail. */
#include "config.h"

#include <xdm/module.h>

#include "tests/lib/testutil.h"

START_TEST(strerror_names_every_status)
{
	for (int s = 0; s < XDM_STATUS_COUNT; s++) {
		const char *text = xdm_strerror((enum xdm_status)s);

		ck_assert_ptr_nonnull(text);
		ck_assert_str_ne(text, "unknown status");
		for (int t = 0; t < s; t++)
			ck_assert_str_ne(text, xdm_strerror((enum xdm_status)t));
	}
	ck_assert_str_eq(xdm_strerror(XDM_STATUS_COUNT), "unknown status");
	ck_assert_str_eq(xdm_strerror((enum xdm_status)-1), "unknown status");
}
END_TEST

START_TEST(budget_payload)
{
	enum xdm_status st = xdm_error_set_budget(4096, 100, "need %d", 4096);

	ck_assert_int_eq(st, XDM_E_OUT_OF_BUDGET);
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(xdm_last_error()->requested, 4096);
	ck_assert_uint_eq(xdm_last_error()->remaining, 100);
	ck_assert_str_eq(xdm_last_error_message(), "need 4096");
}
END_TEST

START_TEST(block_payloads)
{
	ck_assert_int_eq(xdm_error_set_block(XDM_E_OUT_OF_BOUNDS, 77, XDM_SIDE_AFTER, "oob"),
			 XDM_E_OUT_OF_BOUNDS);
	ck_assert_uint_eq(xdm_last_error()->generation, 77);
	ck_assert_int_eq(xdm_last_error()->side, XDM_SIDE_AFTER);
	ck_assert_int_eq(xdm_error_set_block(XDM_E_USE_AFTER_FREE, 9, XDM_SIDE_NONE, "uaf"),
			 XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, 9);
	ck_assert_int_eq(xdm_last_error()->side, XDM_SIDE_NONE);
}
END_TEST

START_TEST(driver_payload_and_reset)
{
	xdm_error_set_budget(1, 2, "first");
	ck_assert_int_eq(xdm_error_set_driver(2, "CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
			 XDM_E_DRIVER);
	ck_assert_int_eq(xdm_last_error()->driver_code, 2);
	/* A new error never carries the payload of the previous one. */
	ck_assert_uint_eq(xdm_last_error()->requested, 0);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "out of memory"));
}
END_TEST

START_TEST(clear_resets)
{
	xdm_error_set(XDM_E_INVALID, "bad");
	xdm_error_clear();
	ck_assert_int_eq(xdm_last_error()->code, XDM_OK);
	ck_assert_str_eq(xdm_last_error_message(), "no error");
}
END_TEST

START_TEST(long_message_truncates_safely)
{
	char big[2000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	xdm_error_set(XDM_E_CONFIG, "%s", big);
	ck_assert_uint_eq(strlen(xdm_last_error_message()), sizeof(xdm_last_error()->message) - 1);
}
END_TEST

static void *set_in_thread(void *arg)
{
	xdm_error_set(XDM_E_MODULE, "from the other thread");
	*(int *)arg = xdm_last_error()->code;
	return NULL;
}

START_TEST(detail_is_per_thread)
{
	pthread_t t;
	int other = -1;

	xdm_error_set(XDM_E_NO_DEVICE, "mine");
	pthread_create(&t, NULL, set_in_thread, &other);
	pthread_join(t, NULL);
	ck_assert_int_eq(other, XDM_E_MODULE);
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_NO_DEVICE);
	ck_assert_str_eq(xdm_last_error_message(), "mine");
}
END_TEST

START_TEST(runtime_errors_carry_payloads)
{
	struct xdm_runtime *rt;
	struct xdm_block b, stale;

	TU_OK(xdm_runtime_create(0, "host", "host", &rt));
	TU_OK(xdm_allocate(rt, 100, 0, "t", &b));
	stale = b;
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(xdm_deallocate(rt, &stale), XDM_E_USE_AFTER_FREE);
	ck_assert_uint_eq(xdm_last_error()->generation, stale.generation);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "not live"));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *errors_suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc = tcase_create("errors");

	tcase_add_test(tc, strerror_names_every_status);
	tcase_add_test(tc, budget_payload);
	tcase_add_test(tc, block_payloads);
	tcase_add_test(tc, driver_payload_and_reset);
	tcase_add_test(tc, clear_resets);
	tcase_add_test(tc, long_message_truncates_safely);
	tcase_add_test(tc, detail_is_per_thread);
	tcase_add_test(tc, runtime_errors_carry_payloads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(errors_suite());
}
