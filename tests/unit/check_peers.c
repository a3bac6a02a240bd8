/* SPDX-License-Identifier: MIT */
/*
 * check_peers.c - the peers= parameter of cuda_async and cuda_vmm,
 * without a GPU: backends/cuda/peers.c is linked in and driven directly.
 * Its values are read and refused as the layers read them, and checked
 * against machines made up here (how many devices, which of them can
 * reach the layer's own), so every answer the driver could give is
 * covered on any machine; and so are the writes of the `peers` attribute,
 * which add to what is granted.  What the driver itself does with the
 * grant is tests/gpu/check_peer_cuda.c's, on two GPUs.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <xdm/xdm.h>

#include "backends/cuda/peers.h"
#include "tests/lib/testutil.h"

#define BIT(n) (UINT64_C(1) << (n))

#define HAS(text) ck_assert_msg(strstr(xdm_last_error_message(), (text)) != NULL, \
				"expected \"%s\" in: %s", (text), xdm_last_error_message())

static struct cuda_peers_request parse_ok(const char *text)
{
	struct cuda_peers_request r;

	TU_OK(cuda_peers_parse("cuda_async", text, &r));
	return r;
}

/* text is refused as a config error whose sentence names it and says why. */
static void parse_refused(const char *text, const char *why)
{
	struct cuda_peers_request r;
	char value[128];

	ck_assert_msg(cuda_peers_parse("cuda_vmm", text, &r) == XDM_E_CONFIG,
		      "peers='%s' was taken", text);
	snprintf(value, sizeof(value), "cuda_vmm: peers='%s' must be 'none', 'all' or device "
		 "ordinals separated by commas (like 1,2); ", text);
	HAS(value);
	HAS(why);
}

/* ---- reading the value ---------------------------------------------- */

START_TEST(test_none_and_all)
{
	ck_assert_int_eq(parse_ok(NULL).kind, CUDA_PEERS_NONE);
	ck_assert_int_eq(parse_ok("none").kind, CUDA_PEERS_NONE);
	ck_assert_int_eq(parse_ok("all").kind, CUDA_PEERS_ALL);
	ck_assert_uint_eq(parse_ok("all").listed, 0);
}
END_TEST

START_TEST(test_lists)
{
	struct cuda_peers_request r = parse_ok("1");

	ck_assert_int_eq(r.kind, CUDA_PEERS_LIST);
	ck_assert_uint_eq(r.listed, BIT(1));
	ck_assert_uint_eq(parse_ok("1,2").listed, BIT(1) | BIT(2));
	ck_assert_uint_eq(parse_ok("3,0,2").listed, BIT(0) | BIT(2) | BIT(3));
	/* Decimal, never octal; the largest ordinal xdm serves. */
	ck_assert_uint_eq(parse_ok("010").listed, BIT(10));
	ck_assert_uint_eq(parse_ok("63").listed, BIT(63));
	/* Its own device parses; resolving refuses it, with the machine. */
	ck_assert_uint_eq(parse_ok("0").listed, BIT(0));
}
END_TEST

START_TEST(test_refusals)
{
	parse_refused("", "it is empty");
	parse_refused("bogus", "'bogus' is not a device ordinal");
	parse_refused("All", "'All' is not a device ordinal");
	parse_refused("1,", "an ordinal is missing before or after a comma");
	parse_refused(",1", "an ordinal is missing before or after a comma");
	parse_refused("1,,2", "an ordinal is missing before or after a comma");
	parse_refused("1;2", "'1;2' is not a device ordinal");
	parse_refused("1 2", "'1 2' is not a device ordinal");
	parse_refused("-1", "'-1' is not a device ordinal");
	parse_refused("+1", "'+1' is not a device ordinal");
	parse_refused("0x1", "'0x1' is not a device ordinal");
	parse_refused("none,1", "'none' is not a device ordinal");
	parse_refused("1,all", "'all' is not a device ordinal");
	parse_refused("2,1,2", "device 2 is named twice");
	parse_refused("64", "device 64 is past the largest ordinal xdm serves, 63");
	parse_refused("1,99999999999999999999999",
		      "device 99999999999999999999999 is past the largest ordinal xdm serves");
}
END_TEST

/* ---- checking it against a machine ---------------------------------- */

static struct cuda_peers resolve_ok(const char *text, struct cuda_peers_machine m)
{
	struct cuda_peers_request r = parse_ok(text);
	struct cuda_peers out;

	TU_OK(cuda_peers_resolve("cuda_async", &r, &m, &out));
	return out;
}

static void resolve_refused(const char *text, struct cuda_peers_machine m, const char *why)
{
	struct cuda_peers_request r = parse_ok(text);
	struct cuda_peers out;

	ck_assert_int_eq(cuda_peers_resolve("cuda_async", &r, &m, &out), XDM_E_CONFIG);
	ck_assert_uint_eq(out.granted, 0);
	HAS("cuda_async: peers names device ");
	HAS(why);
}

START_TEST(test_all)
{
	struct cuda_peers_machine two = { .self = 0, .count = 2, .can_access = BIT(1) };
	struct cuda_peers_machine four = { .self = 2, .count = 4,
					   .can_access = BIT(0) | BIT(3) };
	struct cuda_peers_machine one = { .self = 0, .count = 1 };
	struct cuda_peers p;

	p = resolve_ok("all", two);
	ck_assert_uint_eq(p.granted, BIT(1));
	ck_assert_uint_eq(p.skipped, 0);
	/* Device 1 cannot reach device 2: left out and shown, not refused. */
	p = resolve_ok("all", four);
	ck_assert_uint_eq(p.granted, BIT(0) | BIT(3));
	ck_assert_uint_eq(p.skipped, BIT(1));
	p = resolve_ok("all", one);
	ck_assert_uint_eq(p.granted, 0);
	ck_assert_uint_eq(p.skipped, 0);
	/* A can_access bit for the device itself grants it nothing. */
	two.can_access |= BIT(0);
	ck_assert_uint_eq(resolve_ok("all", two).granted, BIT(1));
}
END_TEST

START_TEST(test_all_past_the_largest_ordinal)
{
	struct cuda_peers_machine big = { .self = 5, .count = 100, .can_access = ~UINT64_C(0) };
	struct cuda_peers p = resolve_ok("all", big);

	ck_assert_uint_eq(p.granted, ~BIT(5));
	ck_assert_uint_eq(p.skipped, 0);
}
END_TEST

START_TEST(test_none_grants_nothing)
{
	struct cuda_peers_machine two = { .self = 0, .count = 2, .can_access = BIT(1) };
	struct cuda_peers p = resolve_ok("none", two);

	ck_assert_uint_eq(p.granted, 0);
	ck_assert_uint_eq(p.skipped, 0);
}
END_TEST

START_TEST(test_list)
{
	struct cuda_peers_machine four = { .self = 0, .count = 4,
					   .can_access = BIT(1) | BIT(2) | BIT(3) };
	struct cuda_peers p;

	p = resolve_ok("1", four);
	ck_assert_uint_eq(p.granted, BIT(1));
	ck_assert_uint_eq(p.skipped, 0);
	ck_assert_uint_eq(resolve_ok("3,1", four).granted, BIT(1) | BIT(3));
}
END_TEST

START_TEST(test_list_refusals)
{
	struct cuda_peers_machine two = { .self = 0, .count = 2, .can_access = BIT(1) };
	struct cuda_peers_machine one = { .self = 0, .count = 1 };
	struct cuda_peers_machine four = { .self = 1, .count = 4, .can_access = BIT(0) | BIT(3) };

	resolve_refused("7", two, "device 7, which this process does not have: it sees 2 CUDA "
			"devices, numbered from 0 (after CUDA_VISIBLE_DEVICES)");
	resolve_refused("1", one, "device 1, which this process does not have: it sees 1 CUDA "
			"device, numbered from 0");
	resolve_refused("0", two, "device 0, which is the layer's own device");
	resolve_refused("2", four, "device 2, which cannot access the memory of device 1 "
			"(cuDeviceCanAccessPeer says no)");
	/* One bad ordinal refuses the whole list; the lowest is named. */
	resolve_refused("3,7,2", four, "device 2, which cannot access");
	resolve_refused("1,7", two, "device 7,");
}
END_TEST

/* ---- a write of the attribute --------------------------------------- */

static struct cuda_peers_request write_ok(const char *text)
{
	struct cuda_peers_request r;

	TU_OK(cuda_peers_parse_write("cuda_vmm", text, strlen(text), &r));
	return r;
}

static void write_refused(const char *buf, size_t len, const char *why)
{
	struct cuda_peers_request r;

	ck_assert_msg(cuda_peers_parse_write("cuda_async", buf, len, &r) == XDM_E_CONFIG,
		      "a write of '%.*s' was taken", (int)len, buf);
	HAS("cuda_async: peers");
	HAS(why);
}

START_TEST(test_write_reads_as_the_parameter)
{
	struct cuda_peers_request r = write_ok("1");

	ck_assert_int_eq(r.kind, CUDA_PEERS_LIST);
	ck_assert_uint_eq(r.listed, BIT(1));
	/* As echo(1) writes it: one trailing newline. */
	ck_assert_uint_eq(write_ok("1,3\n").listed, BIT(1) | BIT(3));
	ck_assert_int_eq(write_ok("all").kind, CUDA_PEERS_ALL);
	ck_assert_int_eq(write_ok("all\n").kind, CUDA_PEERS_ALL);
	/* Only len bytes are read, whatever follows them. */
	ck_assert_uint_eq(cuda_peers_parse_write("cuda_vmm", "2,9", 1, &r), XDM_OK);
	ck_assert_uint_eq(r.listed, BIT(2));
}
END_TEST

START_TEST(test_write_refusals)
{
	char lots[512];

	/* No revocation: 'none' would say one happens. */
	write_refused("none", 4, "never takes a grant back");
	write_refused("none\n", 5, "never takes a grant back");
	write_refused("", 0, "it is empty");
	write_refused("\n", 1, "it is empty");
	write_refused("1\n\n", 3, "is not a device ordinal");
	write_refused("1,x", 3, "'x' is not a device ordinal");
	write_refused("1\0" "2", 3, "a NUL byte");
	write_refused("64", 2, "past the largest ordinal xdm serves");
	write_refused("1,1", 3, "device 1 is named twice");
	memset(lots, '1', sizeof(lots));
	write_refused(lots, sizeof(lots), "longer than any list");
}
END_TEST

static struct cuda_peers extend_ok(const char *text, struct cuda_peers_machine m,
				   struct cuda_peers have)
{
	struct cuda_peers_request r = write_ok(text);
	struct cuda_peers out;

	TU_OK(cuda_peers_extend("cuda_vmm", &r, &m, &have, &out));
	return out;
}

/* Refused with why; what was granted stays exactly as it was. */
static void extend_refused(const char *text, struct cuda_peers_machine m,
			   struct cuda_peers have, const char *why)
{
	struct cuda_peers_request r = write_ok(text);
	struct cuda_peers out = { .granted = 0xdead, .skipped = 0xbeef };

	ck_assert_int_eq(cuda_peers_extend("cuda_vmm", &r, &m, &have, &out), XDM_E_CONFIG);
	ck_assert_uint_eq(out.granted, have.granted);
	ck_assert_uint_eq(out.skipped, have.skipped);
	HAS("cuda_vmm: peers names device ");
	HAS(why);
}

START_TEST(test_extend_is_a_union)
{
	struct cuda_peers_machine four = { .self = 0, .count = 4,
					   .can_access = BIT(1) | BIT(2) | BIT(3) };
	struct cuda_peers none = { 0 }, one = { .granted = BIT(1) }, p;

	p = extend_ok("2", four, none);
	ck_assert_uint_eq(p.granted, BIT(2));
	p = extend_ok("2", four, one);
	ck_assert_uint_eq(p.granted, BIT(1) | BIT(2));
	/* Named again: granted once, nothing new. */
	p = extend_ok("1", four, one);
	ck_assert_uint_eq(p.granted, BIT(1));
	p = extend_ok("3,1", four, one);
	ck_assert_uint_eq(p.granted, BIT(1) | BIT(3));
	p = extend_ok("all", four, one);
	ck_assert_uint_eq(p.granted, BIT(1) | BIT(2) | BIT(3));
	ck_assert_uint_eq(p.skipped, 0);
}
END_TEST

START_TEST(test_extend_own_device)
{
	struct cuda_peers_machine four = { .self = 2, .count = 4,
					   .can_access = BIT(0) | BIT(3) };
	struct cuda_peers one = { .granted = BIT(3) }, p;

	/* The device itself, alone or in a list: accepted, adds nothing. */
	p = extend_ok("2", four, one);
	ck_assert_uint_eq(p.granted, BIT(3));
	ck_assert_uint_eq(p.skipped, 0);
	p = extend_ok("2,0", four, one);
	ck_assert_uint_eq(p.granted, BIT(0) | BIT(3));
	/* Even where the driver would say it cannot reach itself. */
	four.can_access = 0;
	ck_assert_uint_eq(extend_ok("2", four, one).granted, BIT(3));
}
END_TEST

START_TEST(test_extend_all_and_skipped)
{
	struct cuda_peers_machine four = { .self = 2, .count = 4,
					   .can_access = BIT(0) | BIT(3) };
	struct cuda_peers one = { .granted = BIT(0) }, p;

	p = extend_ok("all", four, one);
	ck_assert_uint_eq(p.granted, BIT(0) | BIT(3));
	ck_assert_uint_eq(p.skipped, BIT(1));
	/* Skipped by peers=all at init, still unreachable: still skipped. */
	one.skipped = BIT(1);
	p = extend_ok("3", four, one);
	ck_assert_uint_eq(p.granted, BIT(0) | BIT(3));
	ck_assert_uint_eq(p.skipped, BIT(1));
	/* A device skipped once and granted since is shown only as granted. */
	four.can_access |= BIT(1);
	p = extend_ok("1", four, one);
	ck_assert_uint_eq(p.granted, BIT(0) | BIT(1));
	ck_assert_uint_eq(p.skipped, 0);
}
END_TEST

START_TEST(test_extend_refusals_change_nothing)
{
	struct cuda_peers_machine four = { .self = 1, .count = 4, .can_access = BIT(0) | BIT(3) };
	struct cuda_peers have = { .granted = BIT(0), .skipped = BIT(2) };

	extend_refused("7", four, have, "device 7, which this process does not have: it sees 4");
	extend_refused("2", four, have, "device 2, which cannot access the memory of device 1");
	/* One bad ordinal in a list: the good ones are not granted either. */
	extend_refused("3,2", four, have, "device 2, which cannot access");
	extend_refused("3,9", four, have, "device 9,");
	extend_refused("1,9", four, have, "device 9,");
}
END_TEST

/* ---- the attribute's value ------------------------------------------ */

static void shows(uint64_t set, const char *want)
{
	char buf[256];
	int n = cuda_peers_show(set, buf, sizeof(buf));

	ck_assert_int_eq(n, (int)strlen(want));
	ck_assert_str_eq(buf, want);
}

START_TEST(test_show)
{
	char buf[8];

	shows(0, "\n");
	shows(BIT(1), "1\n");
	shows(BIT(0) | BIT(2) | BIT(63), "0 2 63\n");
	shows(BIT(10) | BIT(3), "3 10\n");
	/* Too short for the value and its newline: nothing half written. */
	ck_assert_int_eq(cuda_peers_show(0, buf, 1), -EOVERFLOW);
	ck_assert_int_eq(cuda_peers_show(0, buf, 2), 1);
	ck_assert_int_eq(cuda_peers_show(BIT(1) | BIT(2), buf, 4), -EOVERFLOW);
	ck_assert_int_eq(cuda_peers_show(BIT(1) | BIT(2), buf, 5), 4);
	ck_assert_str_eq(buf, "1 2\n");
	ck_assert_int_eq(cuda_peers_show(~UINT64_C(0), buf, sizeof(buf)), -EOVERFLOW);
}
END_TEST

static Suite *peers_suite(void)
{
	Suite *s = suite_create("peers");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_none_and_all);
	tcase_add_test(tc, test_lists);
	tcase_add_test(tc, test_refusals);
	suite_add_tcase(s, tc);

	tc = tcase_create("resolve");
	tcase_add_test(tc, test_all);
	tcase_add_test(tc, test_all_past_the_largest_ordinal);
	tcase_add_test(tc, test_none_grants_nothing);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_list_refusals);
	suite_add_tcase(s, tc);

	tc = tcase_create("write");
	tcase_add_test(tc, test_write_reads_as_the_parameter);
	tcase_add_test(tc, test_write_refusals);
	tcase_add_test(tc, test_extend_is_a_union);
	tcase_add_test(tc, test_extend_own_device);
	tcase_add_test(tc, test_extend_all_and_skipped);
	tcase_add_test(tc, test_extend_refusals_change_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("show");
	tcase_add_test(tc, test_show);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(peers_suite());
}
