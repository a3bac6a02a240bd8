/* SPDX-License-Identifier: MIT */
/*
 * check_host_vmm.c - the host_vmm backend on the host platform: granules
 * handed out lowest address first, mapping in place, giving back any run of
 * whole granules, and releases that wait for their stream.
 *
 * The runtime's own calls reach a backend only with whole blocks it
 * registered.  To give back part of a block, or to map at an address, the
 * tests stack a small in-process adaptor ("vmm_probe") on top that does
 * nothing but remember its layer; the tests then call the backend below it
 * through xdm_up_allocate, xdm_up_allocate_at and xdm_up_deallocate, as a
 * pool above it would.  Blocks got that way are never in the runtime's
 * registry; the backend's fini unmaps whatever is left.
 *
 * Stream order is shown with a gate (a host function that waits until the
 * test opens it), never with a pause: while the stream stands at the gate,
 * a release queued behind it cannot have run, whatever the scheduling.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"

#define KIB ((size_t)1024)
#define G (64 * KIB)		/* the granule of every stack below but one */

#define PLAIN "host_vmm granule=64K reserve=64M"
#define PROBED "vmm_probe | host_vmm granule=64K reserve=64M"

/* ---- the probe: an adaptor that lets a test call the backend ------------ */

/* The probe's layer while its runtime lives.  check forks a process per test. */
static struct xdm_layer *probe;

static enum xdm_status probe_init(struct xdm_layer *self, const struct xdm_params *params)
{
	probe = self;
	return XDM_OK;
}

static void probe_fini(struct xdm_layer *self)
{
	probe = NULL;
}

/* It keeps no record per block, so it may pass the question down. */
static uint64_t probe_granularity(struct xdm_layer *self)
{
	return xdm_up_granularity(xdm_layer_upstream(self));
}

static const struct xdm_ops probe_ops = {
	XDM_OPS_HEADER("vmm_probe", XDM_KIND_ADAPTOR),
	.description = "test adaptor: remembers its layer",
	.init = probe_init,
	.fini = probe_fini,
	.granularity = probe_granularity,
};

static struct xdm_runtime *runtime(const char *stack)
{
	static bool registered;
	struct xdm_runtime *rt = NULL;

	if (!registered) {
		TU_OK(xdm_module_register(&probe_ops));
		registered = true;
	}
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	return rt;
}

static struct xdm_layer *backend(void)
{
	ck_assert_ptr_nonnull(probe);
	return xdm_layer_upstream(probe);
}

/* What a pool above would do: the core is not asked, so the block's stream
 * is set here. */
static void v_alloc(size_t bytes, xdm_stream_id stream, struct xdm_block *b)
{
	*b = (struct xdm_block){ .stream = stream };
	TU_OK(xdm_up_allocate(backend(), bytes, stream, "probe", b));
}

static enum xdm_status v_alloc_at(uint64_t ptr, size_t bytes, struct xdm_block *b)
{
	*b = (struct xdm_block){ 0 };
	return xdm_up_allocate_at(backend(), ptr, bytes, 0, "probe", b);
}

static enum xdm_status v_free(uint64_t ptr, size_t bytes, xdm_stream_id stream)
{
	struct xdm_block b = { .ptr = ptr, .bytes = bytes, .stream = stream };

	return xdm_up_deallocate(backend(), &b);
}

/* ---- attributes of the backend, the bottom layer ------------------------ */

static uint64_t attr(struct xdm_runtime *rt, const char *name)
{
	uint32_t layer = xdm_runtime_layer_count(rt) - 1;

	ck_assert_str_eq(xdm_runtime_layer_name(rt, layer), "host_vmm");
	return tu_attr_u64(rt, layer, name);
}

struct counts {
	uint64_t mapped, mapped_peak, releasing, maps, releases;
};

static struct counts counts(struct xdm_runtime *rt)
{
	return (struct counts){
		.mapped = attr(rt, "mapped"),
		.mapped_peak = attr(rt, "mapped_peak"),
		.releasing = attr(rt, "releasing"),
		.maps = attr(rt, "maps"),
		.releases = attr(rt, "releases"),
	};
}

static void assert_same(struct counts a, struct counts b, const char *what)
{
	ck_assert_msg(a.mapped == b.mapped && a.mapped_peak == b.mapped_peak &&
		      a.releasing == b.releasing && a.maps == b.maps && a.releases == b.releases,
		      "%s changed the counts: mapped %" PRIu64 "->%" PRIu64 ", releasing %" PRIu64
		      "->%" PRIu64 ", maps %" PRIu64 "->%" PRIu64 ", releases %" PRIu64 "->%" PRIu64,
		      what, a.mapped, b.mapped, a.releasing, b.releasing, a.maps, b.maps,
		      a.releases, b.releases);
}

static unsigned char *mem(uint64_t ptr)
{
	return (unsigned char *)(uintptr_t)ptr;
}

/* Every byte of [p, p + n) holds value. */
static bool holds(const unsigned char *p, size_t n, unsigned char value)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != value)
			return false;
	return true;
}

static void sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

/* ---- through the runtime ------------------------------------------------- */

START_TEST(allocate_and_free_across_a_granule_seam)
{
	struct xdm_runtime *rt = runtime(PLAIN);
	struct xdm_block b;
	unsigned char *p;

	ck_assert_uint_eq(attr(rt, "granule"), G);
	ck_assert_uint_eq(attr(rt, "reserved_va"), 64 * 1024 * KIB);
	ck_assert(xdm_supports_block_use_tracking(rt));
	TU_OK(xdm_allocate(rt, 100000, 0, "seam", &b));
	ck_assert_uint_eq(b.bytes, 2 * G);
	ck_assert_uint_eq(b.align, G);
	ck_assert_uint_eq(b.ptr % G, 0);
	ck_assert_uint_eq(attr(rt, "mapped"), 2 * G);
	ck_assert_uint_eq(attr(rt, "maps"), 2);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 2 * G);

	/* One range: a write that straddles the seam reads back whole. */
	p = mem(b.ptr);
	memset(p, 0, b.bytes);
	memset(p + G - 100, 0xa5, 200);
	ck_assert(holds(p + G - 100, 200, 0xa5));
	ck_assert(holds(p, G - 100, 0));
	memset(p, 0x3c, b.bytes);
	ck_assert(holds(p, b.bytes, 0x3c));

	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_RETIRED);
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "releasing"), 0);
	ck_assert_uint_eq(attr(rt, "releases"), 2);
	ck_assert_uint_eq(attr(rt, "mapped_peak"), 2 * G);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(defaults_are_2M_granules_in_64G)
{
	struct xdm_runtime *rt = runtime("vmm_probe | host_vmm");
	struct xdm_block b;

	ck_assert_uint_eq(attr(rt, "granule"), 2 * 1024 * KIB);
	ck_assert_uint_eq(attr(rt, "reserved_va"), (uint64_t)64 << 30);
	/* The probe passes the question down; the runtime's first layer is it. */
	ck_assert_uint_eq(xdm_up_granularity(probe), 2 * 1024 * KIB);
	TU_OK(xdm_allocate(rt, 1, 0, "one", &b));
	ck_assert_uint_eq(b.bytes, 2 * 1024 * KIB);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(bad_parameters_are_config_errors)
{
	static const struct { const char *stack, *needle; } cases[] = {
		{ "host_vmm granule=3000", "granule" },
		{ "host_vmm granule=96K", "power of two" },
		{ "host_vmm granule=256", "page size" },
		{ "host_vmm granule=0", "granule" },
		{ "host_vmm granule=64K reserve=32K", "reserve" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tu_expect_config_error("host", cases[i].stack, cases[i].needle);
}
END_TEST

/* ---- places: lowest first, in place, taken ------------------------------ */

START_TEST(neighbours_lowest_first_and_allocate_at)
{
	struct xdm_runtime *rt = runtime(PROBED);
	struct xdm_block a, b, c, d;
	uint64_t reserved = attr(rt, "reserved_va");

	v_alloc(G, 0, &a);
	v_alloc(100 * KIB, 0, &b);
	ck_assert_uint_eq(b.bytes, 2 * G);
	ck_assert_uint_eq(b.ptr, a.ptr + G);

	/* Growing b in place, right after it. */
	TU_OK(v_alloc_at(b.ptr + b.bytes, G, &c));
	ck_assert_uint_eq(c.ptr, b.ptr + b.bytes);
	ck_assert_uint_eq(c.bytes, G);
	ck_assert_int_eq(c.state, XDM_BLOCK_LIVE);
	memset(mem(a.ptr), 7, 4 * G);	/* a, b, c: one range */
	ck_assert_uint_eq(attr(rt, "maps"), 4);

	/* Taken places, and places that are not there. */
	ck_assert_int_eq(v_alloc_at(a.ptr, G, &d), XDM_E_OUT_OF_MEMORY);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "host_vmm"));
	ck_assert_int_eq(v_alloc_at(c.ptr, 2 * G, &d), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(v_alloc_at(a.ptr + reserved, G, &d), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(v_alloc_at(a.ptr - G, G, &d), XDM_E_OUT_OF_MEMORY);
	/* Not granules at all: a caller's mistake. */
	ck_assert_int_eq(v_alloc_at(c.ptr + G + 4096, G, &d), XDM_E_INVALID);
	ck_assert_int_eq(v_alloc_at(c.ptr + G, G / 2, &d), XDM_E_INVALID);
	ck_assert_uint_eq(attr(rt, "maps"), 4);
	ck_assert_uint_eq(attr(rt, "mapped"), 4 * G);

	/* Give back across allocations: b's second granule with c, then a with
	 * b's first. */
	TU_OK(v_free(b.ptr + G, 2 * G, 0));
	TU_OK(v_free(a.ptr, 2 * G, 0));
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "releases"), 4);

	/* Free again, the lowest address comes first. */
	v_alloc(3 * G, 0, &d);
	ck_assert_uint_eq(d.ptr, a.ptr);
	ck_assert(holds(mem(d.ptr), 3 * G, 0));	/* released pages come back zeroed */
	TU_OK(v_free(d.ptr, d.bytes, 0));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- giving back part of a block, and what is refused ------------------- */

START_TEST(partial_free_of_the_middle_granule)
{
	struct xdm_runtime *rt = runtime(PROBED);
	uint64_t reserved = attr(rt, "reserved_va");
	struct xdm_block b;
	struct counts before;
	unsigned char *p;
	static const struct { int64_t off; size_t bytes; const char *what; } bad[] = {
		{ 1, G, "a misaligned address" },
		{ 0, G + 1, "a size that is not whole granules" },
		{ 0, 0, "no bytes" },
		{ G, G, "the freed middle again" },
		{ 0, 3 * G, "a range over the freed middle" },
		{ 3 * G, G, "a granule never handed out" },
		{ -(int64_t)G, 2 * G, "a range starting before the reservation" },
	};

	v_alloc(3 * G, 0, &b);
	p = mem(b.ptr);
	memset(p, 0x11, 3 * G);
	TU_OK(v_free(b.ptr + G, G, 0));
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(attr(rt, "mapped"), 2 * G);
	ck_assert_uint_eq(attr(rt, "releases"), 1);

	/* The outer granules are untouched, and still read and write. */
	ck_assert(holds(p, G, 0x11));
	ck_assert(holds(p + 2 * G, G, 0x11));
	memset(p, 0x22, G);
	memset(p + 2 * G, 0x33, G);
	ck_assert(holds(p, G, 0x22));
	ck_assert(holds(p + 2 * G, G, 0x33));

	before = counts(rt);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum xdm_status st = v_free(b.ptr + (uint64_t)bad[i].off, bad[i].bytes, 0);

		ck_assert_msg(st == XDM_E_INVALID, "%s: %s, not INVALID", bad[i].what,
			      xdm_strerror(st));
		ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "host_vmm"));
		assert_same(before, counts(rt), bad[i].what);
	}
	ck_assert_int_eq(v_free(b.ptr + reserved, G, 0), XDM_E_INVALID);
	TU_OK(xdm_stream_synchronize(rt, 0));
	assert_same(before, counts(rt), "a range past the reservation");
	ck_assert(holds(p, G, 0x22));
	ck_assert(holds(p + 2 * G, G, 0x33));

	TU_OK(v_free(b.ptr, G, 0));
	TU_OK(v_free(b.ptr + 2 * G, G, 0));
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "releases"), 3);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A release that cannot be queued leaves the granules mapped and usable. */
START_TEST(release_not_queued_stays_mapped)
{
	struct xdm_runtime *rt = runtime(PROBED);
	struct xdm_block b;
	struct counts before;

	v_alloc(2 * G, 0, &b);
	before = counts(rt);
	ck_assert_int_ne(v_free(b.ptr, G, XDM_MAX_STREAMS + 7), XDM_OK);
	assert_same(before, counts(rt), "a release on a stream that does not exist");
	memset(mem(b.ptr), 1, 2 * G);
	TU_OK(v_free(b.ptr, 2 * G, 0));
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- stream order ----------------------------------------------------------- */

START_TEST(release_waits_for_its_stream)
{
	struct xdm_runtime *rt = runtime(PLAIN);
	struct xdm_block b;
	struct tu_gate gate;

	tu_gate_init(&gate);
	TU_OK(xdm_allocate(rt, 3 * G, 1, "held", &b));
	tu_gate_hold(rt, 1, &gate);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_RETIRED);

	/* Stream 1 stands at the gate: the release behind it has not run. */
	ck_assert_uint_eq(attr(rt, "releasing"), 3 * G);
	ck_assert_uint_eq(attr(rt, "mapped"), 3 * G);
	ck_assert_uint_eq(attr(rt, "releases"), 0);
	ck_assert_uint_eq(xdm_bytes_outstanding(rt), 3 * G);
	TU_OK(xdm_reap_pending(rt));	/* does not wait for the stream */
	ck_assert_uint_eq(attr(rt, "releasing"), 3 * G);
	/* Work queued before the free may still use the memory. */
	memset(mem(b.ptr), 0x5a, 3 * G);
	ck_assert(holds(mem(b.ptr), 3 * G, 0x5a));

	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 1));
	ck_assert_uint_eq(attr(rt, "releasing"), 0);
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "releases"), 3);
	ck_assert_uint_eq(attr(rt, "mapped_peak"), 3 * G);
	TU_OK(xdm_runtime_destroy(rt));
	tu_gate_destroy(&gate);
}
END_TEST

START_TEST(a_range_being_released_is_not_handed_out)
{
	struct xdm_runtime *rt = runtime(PROBED);
	struct xdm_block b, c, d, again;
	struct tu_gate gate;

	tu_gate_init(&gate);
	v_alloc(2 * G, 1, &b);
	tu_gate_hold(rt, 1, &gate);
	TU_OK(v_free(b.ptr, b.bytes, 1));

	/* The lowest free run is past b, on any stream; b's place is taken. */
	v_alloc(2 * G, 2, &c);
	ck_assert_uint_eq(c.ptr, b.ptr + 2 * G);
	v_alloc(G, 1, &d);
	ck_assert_uint_eq(d.ptr, c.ptr + 2 * G);
	ck_assert_int_eq(v_alloc_at(b.ptr, G, &again), XDM_E_OUT_OF_MEMORY);
	ck_assert_int_eq(v_free(b.ptr, G, 1), XDM_E_INVALID);
	ck_assert_uint_eq(attr(rt, "releasing"), 2 * G);
	ck_assert_uint_eq(attr(rt, "mapped"), 5 * G);

	/* Once the stream has passed the release, the place is free again. */
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 1));
	ck_assert_uint_eq(attr(rt, "releasing"), 0);
	v_alloc(2 * G, 2, &again);
	ck_assert_uint_eq(again.ptr, b.ptr);

	TU_OK(v_free(again.ptr, 4 * G, 2));	/* again and c, side by side */
	TU_OK(v_free(d.ptr, G, 1));
	sync_all(rt);
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "maps"), 7);
	ck_assert_uint_eq(attr(rt, "releases"), 7);
	TU_OK(xdm_runtime_destroy(rt));
	tu_gate_destroy(&gate);
}
END_TEST

/* Destroying a runtime whose blocks the backend still maps unmaps them. */
START_TEST(destroy_with_mapped_granules)
{
	struct xdm_runtime *rt = runtime(PROBED);
	struct xdm_block a, b;

	v_alloc(3 * G, 0, &a);
	TU_OK(xdm_allocate(rt, G, 1, "live", &b));
	TU_OK(v_free(a.ptr + G, G, 0));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- threads ------------------------------------------------------------------ */

enum { CHURN_THREADS = 4, CHURN_ROUNDS = 300 };

struct churn {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	enum xdm_status st;
};

/* Allocate, write, give back in two halves: the map under contention. */
static void *churn_run(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < CHURN_ROUNDS && c->st == XDM_OK; i++) {
		struct xdm_block b = { .stream = c->stream };
		size_t n = (size_t)(1 + i % 3) * 2 * G;

		c->st = xdm_up_allocate(backend(), n, c->stream, "churn", &b);
		if (c->st)
			break;
		memset(mem(b.ptr), i, b.bytes);
		c->st = v_free(b.ptr + b.bytes / 2, b.bytes / 2, c->stream);
		if (!c->st)
			c->st = v_free(b.ptr, b.bytes / 2, c->stream);
	}
	return NULL;
}

START_TEST(threads_churn_on_their_own_streams)
{
	struct xdm_runtime *rt = runtime(PROBED);
	struct churn c[CHURN_THREADS];
	pthread_t t[CHURN_THREADS];

	for (int i = 0; i < CHURN_THREADS; i++) {
		c[i] = (struct churn){ .rt = rt, .stream = (xdm_stream_id)i + 1 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn_run, &c[i]), 0);
	}
	for (int i = 0; i < CHURN_THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(c[i].st == XDM_OK, "thread %d: %s", i, xdm_strerror(c[i].st));
	}
	sync_all(rt);
	ck_assert_uint_eq(attr(rt, "mapped"), 0);
	ck_assert_uint_eq(attr(rt, "releasing"), 0);
	ck_assert_uint_eq(attr(rt, "maps"), attr(rt, "releases"));
	ck_assert_uint_eq(attr(rt, "maps"), (uint64_t)CHURN_THREADS * CHURN_ROUNDS / 3 * 12);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- under the pool (kept to a smoke test while the pool changes) ------- */

START_TEST(pool_over_host_vmm_smoke)
{
	struct xdm_runtime *rt = runtime("pool | host_vmm granule=64K reserve=256M");
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, 1000, 0, "pooled", &b));
	memset(mem(b.ptr), 9, 1000);
	ck_assert(holds(mem(b.ptr), 1000, 9));
	ck_assert_uint_ge(attr(rt, "mapped"), 1000);
	ck_assert_uint_eq(attr(rt, "mapped") % G, 0);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_reap_pending(rt));
	sync_all(rt);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *host_vmm_suite(void)
{
	Suite *s = suite_create("host_vmm");
	TCase *basics = tcase_create("basics");
	TCase *ranges = tcase_create("ranges");
	TCase *order = tcase_create("stream order");
	TCase *pool = tcase_create("pool");

	tcase_add_test(basics, allocate_and_free_across_a_granule_seam);
	tcase_add_test(basics, defaults_are_2M_granules_in_64G);
	tcase_add_test(basics, bad_parameters_are_config_errors);
	tcase_add_test(ranges, neighbours_lowest_first_and_allocate_at);
	tcase_add_test(ranges, partial_free_of_the_middle_granule);
	tcase_add_test(ranges, release_not_queued_stays_mapped);
	tcase_add_test(ranges, destroy_with_mapped_granules);
	tcase_set_timeout(order, TU_TIMEOUT_S);
	tcase_add_test(order, release_waits_for_its_stream);
	tcase_add_test(order, a_range_being_released_is_not_handed_out);
	tcase_add_test(order, threads_churn_on_their_own_streams);
	tcase_add_test(pool, pool_over_host_vmm_smoke);
	suite_add_tcase(s, basics);
	suite_add_tcase(s, ranges);
	suite_add_tcase(s, order);
	suite_add_tcase(s, pool);
	return s;
}

int main(void)
{
	return tu_run_suite(host_vmm_suite());
}
