/* SPDX-License-Identifier: MIT */
/*
 * check_native.c - the framework entry on the host platform: native stream
 * handles, allocation by stream and free by pointer, interned and
 * per-thread tags.  The host platform's NULL handle is its default stream,
 * as NULL is the legacy default stream on cuda.
 */
#include "config.h"

#include <stdint.h>

#include "tests/lib/testutil.h"

static struct xdm_runtime *make(const char *stack)
{
	struct xdm_runtime *rt;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	return rt;
}

static uint64_t layer_number(struct xdm_runtime *rt, uint32_t layer, const char *attr)
{
	char buf[64];

	TU_OK(xdm_layer_attr_show(rt, layer, attr, buf, sizeof(buf)));
	return strtoull(buf, NULL, 10);
}

START_TEST(default_stream_is_one_imported_stream)
{
	struct xdm_runtime *rt = make("host");
	uint32_t owned = xdm_stream_count(rt);
	xdm_stream_id a, b;
	void *h;

	TU_OK(xdm_native_stream(rt, NULL, &a));
	ck_assert_uint_eq(a, owned);			/* imported after the owned ones */
	ck_assert_uint_eq(xdm_stream_count(rt), owned + 1);
	TU_OK(xdm_native_stream(rt, NULL, &b));
	ck_assert_uint_eq(a, b);
	ck_assert_uint_eq(xdm_stream_count(rt), owned + 1);
	/* A handle of one of the runtime's own streams is that stream. */
	TU_OK(xdm_stream_handle(rt, 3, &h));
	TU_OK(xdm_native_stream(rt, h, &b));
	ck_assert_uint_eq(b, 3);
	ck_assert_uint_eq(xdm_stream_count(rt), owned + 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(foreign_handle_is_invalid)
{
	struct xdm_runtime *rt = make("host");
	uint32_t count = xdm_stream_count(rt);
	int not_a_stream;
	xdm_stream_id id;
	void *p;

	ck_assert_int_eq(xdm_native_stream(rt, &not_a_stream, &id), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "not a stream"));
	ck_assert_int_eq(xdm_native_allocate(rt, 64, &not_a_stream, NULL, &p), XDM_E_INVALID);
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(xdm_stream_count(rt), count);
	ck_assert_int_eq(xdm_native_stream(NULL, NULL, &id), XDM_E_INVALID);
	ck_assert_int_eq(xdm_native_stream(rt, NULL, NULL), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* Handles of another runtime's streams are foreign too. */
START_TEST(other_runtime_stream_is_foreign)
{
	struct xdm_runtime *a = make("host"), *b = make("host");
	xdm_stream_id id;
	void *h;

	TU_OK(xdm_stream_handle(b, 1, &h));
	ck_assert_int_eq(xdm_native_stream(a, h, &id), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(a));
	TU_OK(xdm_runtime_destroy(b));
}
END_TEST

START_TEST(allocate_and_free_by_pointer)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_stats st;
	struct xdm_block b;
	void *p, *q;

	TU_OK(xdm_native_allocate(rt, 1000, NULL, "weights", &p));
	ck_assert_ptr_nonnull(p);
	TU_OK(xdm_native_allocate(rt, 24, NULL, NULL, &q));
	TU_OK(xdm_native_lookup(rt, p, &b));
	ck_assert_uint_eq(b.ptr, (uintptr_t)p);
	ck_assert_uint_ge(b.bytes, 1000);
	ck_assert_str_eq(b.tag, "weights");
	TU_OK(xdm_native_lookup(rt, q, &b));
	ck_assert_str_eq(b.tag, "untagged");
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 2);
	memset(p, 0x5a, 1000);			/* host memory: really usable */
	TU_OK(xdm_native_free(rt, p, NULL));
	TU_OK(xdm_native_free(rt, q, NULL));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	ck_assert_uint_eq(st.bytes_outstanding, 0);
	ck_assert_uint_eq(st.allocs, 2);
	ck_assert_uint_eq(st.frees, 2);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(zero_bytes_and_null_free)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_stats st;
	void *p = &p;

	TU_OK(xdm_native_allocate(rt, 0, NULL, NULL, &p));
	ck_assert_ptr_null(p);
	TU_OK(xdm_native_free(rt, NULL, NULL));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.allocs, 0);
	ck_assert_uint_eq(st.failures, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(bad_pointers_free_nothing)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_stats st;
	struct xdm_block b;
	char stack_var[64];
	void *p;

	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	/* Foreign, interior, and freed pointers: typed errors, nothing freed. */
	ck_assert_int_eq(xdm_native_free(rt, stack_var, NULL), XDM_E_INVALID);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "not the address of a live "
				     "block"));
	ck_assert_int_eq(xdm_native_free(rt, (char *)p + 64, NULL), XDM_E_INVALID);
	ck_assert_int_eq(xdm_native_record_use(rt, stack_var, NULL), XDM_E_INVALID);
	ck_assert_int_eq(xdm_native_lookup(rt, stack_var, &b), XDM_E_INVALID);
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 1);
	ck_assert_uint_eq(st.frees, 0);
	TU_OK(xdm_native_free(rt, p, NULL));
	ck_assert_int_eq(xdm_native_free(rt, p, NULL), XDM_E_INVALID);	/* double free */
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.frees, 1);
	ck_assert_int_eq(xdm_native_free(NULL, p, NULL), XDM_E_INVALID);
	ck_assert_int_eq(xdm_native_allocate(rt, 64, NULL, NULL, NULL), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* The budget sees framework blocks: a refusal carries its payload. */
START_TEST(budget_refuses_with_payload)
{
	struct xdm_runtime *rt = make("budget key=check-native limit=64K | host");
	const struct xdm_error *e;
	void *p, *q = &q;

	TU_OK(xdm_native_allocate(rt, 48 << 10, NULL, NULL, &p));
	ck_assert_int_eq(xdm_native_allocate(rt, 32 << 10, NULL, NULL, &q), XDM_E_OUT_OF_BUDGET);
	ck_assert_ptr_null(q);
	e = xdm_last_error();
	ck_assert_uint_eq(e->requested, 32 << 10);
	ck_assert_uint_eq(e->remaining, 16 << 10);
	TU_OK(xdm_native_free(rt, p, NULL));
	TU_OK(xdm_native_allocate(rt, 32 << 10, NULL, NULL, &q));
	TU_OK(xdm_native_free(rt, q, NULL));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * A free that names another stream than the block's waits for the work
 * queued there: stream 3 stands at a gate, so the free (queued on the
 * default stream behind a wait) must not run before the gate opens.
 */
START_TEST(free_on_other_stream_waits)
{
	struct xdm_runtime *rt = make("host");
	struct tu_gate gate;
	xdm_stream_id def;
	void *p, *h3;

	TU_OK(xdm_stream_handle(rt, 3, &h3));
	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	TU_OK(xdm_native_stream(rt, NULL, &def));
	tu_gate_init(&gate);
	tu_gate_hold(rt, 3, &gate);
	TU_OK(xdm_native_free(rt, p, h3));
	tu_sleep_ms(50);
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 0);
	ck_assert_uint_eq(layer_number(rt, 0, "pending_frees"), 1);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 3));
	TU_OK(xdm_stream_synchronize(rt, def));
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* The control: freed on its own stream, the gate elsewhere does not hold it. */
START_TEST(free_on_own_stream_does_not_wait)
{
	struct xdm_runtime *rt = make("host");
	struct tu_gate gate;
	xdm_stream_id def;
	void *p;

	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	TU_OK(xdm_native_stream(rt, NULL, &def));
	tu_gate_init(&gate);
	tu_gate_hold(rt, 3, &gate);
	TU_OK(xdm_native_free(rt, p, NULL));
	TU_OK(xdm_stream_synchronize(rt, def));
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 1);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 3));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* release frees on the block's own stream, after a recorded use; twice is INVALID. */
START_TEST(release_frees_on_own_stream_after_recorded_uses)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_stats stats;
	struct tu_gate gate;
	xdm_stream_id def;
	void *p, *h5;

	TU_OK(xdm_stream_handle(rt, 5, &h5));
	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	TU_OK(xdm_native_stream(rt, NULL, &def));
	tu_gate_init(&gate);
	tu_gate_hold(rt, 5, &gate);
	TU_OK(xdm_native_record_use(rt, p, h5));
	TU_OK(xdm_native_release(rt, p));
	xdm_runtime_stats(rt, &stats);
	ck_assert_uint_eq(stats.blocks_outstanding, 0);
	tu_sleep_ms(50);
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 0);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 5));
	TU_OK(xdm_stream_synchronize(rt, def));
	TU_OK(xdm_reap_pending(rt));
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 1);
	ck_assert_int_eq(xdm_native_release(rt, p), XDM_E_INVALID);
	TU_OK(xdm_native_release(rt, NULL));
	ck_assert_int_eq(xdm_native_release(NULL, p), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* record_use (torch's record_stream) holds the free as well. */
START_TEST(record_use_holds_the_free)
{
	struct xdm_runtime *rt = make("host");
	struct tu_gate gate;
	xdm_stream_id def;
	void *p, *h5;

	TU_OK(xdm_stream_handle(rt, 5, &h5));
	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	TU_OK(xdm_native_stream(rt, NULL, &def));
	tu_gate_init(&gate);
	tu_gate_hold(rt, 5, &gate);
	TU_OK(xdm_native_record_use(rt, p, h5));
	TU_OK(xdm_native_free(rt, p, NULL));
	tu_sleep_ms(50);
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 0);
	tu_gate_open(&gate);
	TU_OK(xdm_stream_synchronize(rt, 5));
	TU_OK(xdm_stream_synchronize(rt, def));
	ck_assert_uint_eq(layer_number(rt, 0, "frees"), 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* A stack that cannot track frees synchronously, so the free is not refused. */
START_TEST(untracked_stack_frees_on_other_stream)
{
	struct xdm_runtime *rt = make("host free=sync");
	struct xdm_stats st;
	void *p, *h2;

	TU_OK(xdm_stream_handle(rt, 2, &h2));
	TU_OK(xdm_native_allocate(rt, 4096, NULL, NULL, &p));
	TU_OK(xdm_native_free(rt, p, h2));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.frees, 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

struct importer {
	struct xdm_runtime *rt;
	void *handle;
	xdm_stream_id id;
	enum xdm_status st;
};

static void *import_thread(void *arg)
{
	struct importer *im = arg;

	im->st = xdm_native_stream(im->rt, im->handle, &im->id);
	return NULL;
}

/* First sight from several threads at once: one stream, one id. */
START_TEST(concurrent_first_sight)
{
	struct xdm_runtime *rt = make("host");
	uint32_t count = xdm_stream_count(rt);
	struct importer im[6];
	pthread_t t[6];

	for (int i = 0; i < 6; i++) {
		im[i] = (struct importer){ .rt = rt, .handle = NULL };
		ck_assert_int_eq(pthread_create(&t[i], NULL, import_thread, &im[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(im[i].st, XDM_OK);
		ck_assert_uint_eq(im[i].id, im[0].id);
	}
	ck_assert_uint_eq(xdm_stream_count(rt), count + 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(tags_are_interned)
{
	const char *a = xdm_tag_intern("activations");
	char text[] = "activations";
	char too_long[XDM_TAG_MAX + 2];

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(xdm_tag_intern(text), a);	/* same text, same copy */
	ck_assert_ptr_ne(a, text);
	ck_assert_ptr_ne(xdm_tag_intern("gradients"), a);
	memset(too_long, 'x', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	ck_assert_ptr_null(xdm_tag_intern(too_long));
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_INVALID);
	too_long[XDM_TAG_MAX] = '\0';			/* exactly the maximum */
	ck_assert_ptr_nonnull(xdm_tag_intern(too_long));
	ck_assert_ptr_null(xdm_tag_intern(""));
	ck_assert_ptr_null(xdm_tag_intern("a,b"));
	ck_assert_ptr_null(xdm_tag_intern("a\nb"));
	ck_assert_ptr_null(xdm_tag_intern(NULL));
}
END_TEST

START_TEST(thread_tag_tags_native_blocks)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_block b;
	char name[32] = "optimizer";
	void *p, *q;

	ck_assert_ptr_null(xdm_thread_tag());
	TU_OK(xdm_set_thread_tag(name));
	memset(name, 0, sizeof(name));			/* the caller's copy may go */
	ck_assert_str_eq(xdm_thread_tag(), "optimizer");
	TU_OK(xdm_native_allocate(rt, 256, NULL, NULL, &p));
	TU_OK(xdm_native_allocate(rt, 256, NULL, "explicit", &q));
	TU_OK(xdm_native_lookup(rt, p, &b));
	ck_assert_str_eq(b.tag, "optimizer");
	TU_OK(xdm_native_lookup(rt, q, &b));
	ck_assert_str_eq(b.tag, "explicit");		/* an explicit tag wins */
	ck_assert_int_eq(xdm_set_thread_tag("bad,tag"), XDM_E_INVALID);
	ck_assert_str_eq(xdm_thread_tag(), "optimizer");	/* a refusal changes nothing */
	TU_OK(xdm_set_thread_tag(NULL));
	ck_assert_ptr_null(xdm_thread_tag());
	TU_OK(xdm_native_free(rt, p, NULL));
	TU_OK(xdm_native_free(rt, q, NULL));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static void *other_thread_tag(void *arg)
{
	*(const char **)arg = xdm_thread_tag();
	return NULL;
}

START_TEST(thread_tag_is_per_thread)
{
	const char *seen = "unset";
	pthread_t t;

	TU_OK(xdm_set_thread_tag("main"));
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread_tag, &seen), 0);
	pthread_join(t, NULL);
	ck_assert_ptr_null(seen);
	TU_OK(xdm_set_thread_tag(NULL));
}
END_TEST

static int count_entry(const char *name, const struct xdm_tree_node *node, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

/* The tree shows a framework block's tag like any other. */
START_TEST(tree_shows_native_tag)
{
	struct xdm_runtime *rt = make("host");
	struct xdm_block b;
	char path[128];
	int entries = 0;
	size_t len;
	char *text;
	void *p;

	TU_OK(xdm_set_thread_tag("kv-cache"));
	TU_OK(xdm_native_allocate(rt, 512, NULL, NULL, &p));
	TU_OK(xdm_set_thread_tag(NULL));
	TU_OK(xdm_native_lookup(rt, p, &b));
	ck_assert_int_eq(xdm_tree_list("0/blocks", count_entry, &entries), 0);
	ck_assert_int_eq(entries, 1);
	snprintf(path, sizeof(path), "0/blocks/%llu/tag", (unsigned long long)b.generation);
	ck_assert_int_eq(xdm_tree_show(path, &text, &len), 0);
	ck_assert_str_eq(text, "kv-cache\n");
	free(text);
	TU_OK(xdm_native_free(rt, p, NULL));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *native_suite(void)
{
	Suite *s = suite_create("native");
	TCase *tc = tcase_create("native");

	tcase_add_test(tc, default_stream_is_one_imported_stream);
	tcase_add_test(tc, foreign_handle_is_invalid);
	tcase_add_test(tc, other_runtime_stream_is_foreign);
	tcase_add_test(tc, allocate_and_free_by_pointer);
	tcase_add_test(tc, zero_bytes_and_null_free);
	tcase_add_test(tc, bad_pointers_free_nothing);
	tcase_add_test(tc, budget_refuses_with_payload);
	tcase_add_test(tc, free_on_other_stream_waits);
	tcase_add_test(tc, free_on_own_stream_does_not_wait);
	tcase_add_test(tc, record_use_holds_the_free);
	tcase_add_test(tc, release_frees_on_own_stream_after_recorded_uses);
	tcase_add_test(tc, untracked_stack_frees_on_other_stream);
	tcase_add_test(tc, concurrent_first_sight);
	tcase_add_test(tc, tags_are_interned);
	tcase_add_test(tc, thread_tag_tags_native_blocks);
	tcase_add_test(tc, thread_tag_is_per_thread);
	tcase_add_test(tc, tree_shows_native_tag);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(native_suite());
}
