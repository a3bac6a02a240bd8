/* SPDX-License-Identifier: MIT */
/*
 * check_budget_segment.c - a budget segment that is not what it should be
 * (garbage, truncated, another layout, fields overwritten, a lock nobody
 * will release) is refused at attach with XDM_E_CONFIG and a sentence; it
 * is neither used nor removed, and nothing crashes.  Garbage where the
 * lock is changes nothing: the lock is the kernel's, not the file's.
 */
#include "config.h"

#include <inttypes.h>

#include "tests/lib/budget_util.h"

static const char *const test_keys[] = {
	"garbage", "older", "short", "empty", "nomagic", "limit", "slotpid", "begun", "usage",
	"lock", "lockjunk", NULL,
};

/* Write a segment by hand, as its owner (or garbage) could. */
static void plant(const char *test, const void *bytes, size_t len)
{
	char name[128];
	int fd;

	shm_name_of(test, name, sizeof(name));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_msg(fd >= 0, "shm_open %s: %s", name, strerror(errno));
	if (len)
		ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
}

/* A segment as this xdm would have made it, with no process in it. */
static struct budget_shm *well_formed(void)
{
	struct budget_shm *s = aligned_alloc(64, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	memset(s, 0, sizeof(*s));
	s->version = BUDGET_LAYOUT_VERSION;
	s->nslots = BUDGET_SLOTS;
	s->size = sizeof(*s);
	atomic_store(&s->limit, MIB);
	atomic_store(&s->limit_check, ~MIB);
	atomic_store(&s->magic, BUDGET_MAGIC);
	return s;
}

/* The attach is refused with a sentence holding each of the texts. */
static void refused(const char *test, const char *text, const char *text2)
{
	struct xdm_runtime *rt = NULL;
	char key[64], stack[256];
	const struct xdm_error *e;

	key_of(test, key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s limit=1M credit=0 | host", key);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	ck_assert_ptr_null(rt);
	e = xdm_last_error();
	ck_assert_msg(strstr(e->message, text), "'%s' not in: %s", text, e->message);
	ck_assert_msg(!text2 || strstr(e->message, text2), "'%s' not in: %s", text2, e->message);
	ck_assert_msg(strstr(e->message, key), "the segment is not named: %s", e->message);
}

/* The refused segment is still there, as it was. */
static void unchanged(const char *test, const void *bytes, size_t len)
{
	char name[128], *now = malloc(len + 1);
	ssize_t n;
	int fd;

	ck_assert_ptr_nonnull(now);
	shm_name_of(test, name, sizeof(name));
	fd = shm_open(name, O_RDONLY, 0);
	ck_assert_int_ge(fd, 0);
	n = read(fd, now, len + 1);
	close(fd);
	ck_assert_int_eq(n, (ssize_t)len);
	ck_assert(memcmp(now, bytes, len) == 0);
	free(now);
	shm_unlink(name);
}

START_TEST(garbage_is_refused_at_once)
{
	size_t len = sizeof(struct budget_shm);
	unsigned char *junk = malloc(len);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	ck_assert_ptr_nonnull(junk);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		junk[i] = (unsigned char)x;
	}
	plant("garbage", junk, len);
	/* Neither waited for as a creator at work, nor removed as abandoned. */
	refused("garbage", "is not an xdm budget segment", "its magic is");
	unchanged("garbage", junk, len);
	free(junk);
}
END_TEST

START_TEST(older_layout_is_refused)
{
	struct budget_shm *s = well_formed();

	s->version = 1;
	plant("older", s, sizeof(*s));
	refused("older", "layout version 1", "every process on one device must run the same xdm");
	unchanged("older", s, sizeof(*s));
	free(s);
}
END_TEST

START_TEST(truncated_is_refused)
{
	struct budget_shm *s = well_formed();

	plant("short", s, sizeof(*s) / 2);
	refused("short", "bytes, not the", NULL);
	unchanged("short", s, sizeof(*s) / 2);
	free(s);
}
END_TEST

/*
 * Empty: what a creator that died before sizing it leaves.  After the wait
 * for a creator it is taken for abandoned and made anew.
 */
START_TEST(empty_is_abandoned_and_made_anew)
{
	struct xdm_runtime *rt;
	struct xdm_block b;

	plant("empty", NULL, 0);
	rt = budget_rt("empty", "limit=1M credit=0", "host");
	ck_assert_uint_eq(attr(rt, "limit"), MIB);
	alloc_ok(rt, 1000, &b);
	ck_assert_uint_eq(attr(rt, "used"), 1000);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
	ck_assert(!segment_exists("empty"));
}
END_TEST

/* No magic but processes in it: garbage over a segment in use, never
 * taken for an abandoned one (removing it would split their budget). */
START_TEST(no_magic_with_data_is_refused)
{
	struct budget_shm *s = well_formed();

	atomic_store(&s->magic, 0);
	atomic_store(&s->slots[3].pid, 1);
	s->slots[3].attach = 1;
	plant("nomagic", s, sizeof(*s));
	refused("nomagic", "has no magic but holds data", NULL);
	unchanged("nomagic", s, sizeof(*s));
	free(s);
}
END_TEST

/*
 * Fields overwritten under a live process: the next attach refuses, the
 * process already there goes on, and once the field is right again the
 * attach succeeds.
 */
START_TEST(overwritten_limit_is_refused)
{
	struct xdm_runtime *rt = budget_rt("limit", "limit=1M credit=0", "host"), *two;
	struct budget_shm *s = segment_map("limit", true);
	struct xdm_block b;

	ck_assert_uint_eq(atomic_load(&s->limit_check), ~MIB);
	atomic_store(&s->limit, 0x4141414141414141ull);
	refused("limit", "the limit 4702111234474983745 does not match its check word", NULL);
	alloc_ok(rt, 1000, &b);

	/* A store through the knob writes both words. */
	TU_OK(store(rt, "limit", "2M"));
	ck_assert_uint_eq(atomic_load(&s->limit_check), ~(2 * MIB));
	two = budget_rt("limit", "limit=1M credit=0", "host");
	ck_assert_uint_eq(attr(two, "limit"), 2 * MIB);
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
}
END_TEST

START_TEST(slot_with_no_pid_is_refused)
{
	struct xdm_runtime *rt = budget_rt("slotpid", "limit=1M credit=0", "host"), *two;
	struct budget_shm *s = segment_map("slotpid", true);

	atomic_store(&s->slots[200].pid, -5);
	refused("slotpid", "slot 200 holds pid -5", NULL);
	atomic_store(&s->slots[200].pid, 0);
	two = budget_rt("slotpid", "limit=1M credit=0", "host");
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
}
END_TEST

/* Our own slot, with more changes finished than begun. */
static struct budget_slot *slot_of(struct budget_shm *s, pid_t pid)
{
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		if (atomic_load(&s->slots[i].pid) == pid)
			return &s->slots[i];
	ck_abort_msg("no slot of pid %d", (int)pid);
	return NULL;
}

START_TEST(slot_finishing_more_than_it_began_is_refused)
{
	struct xdm_runtime *rt = budget_rt("begun", "limit=1M credit=0", "host"), *two;
	struct budget_shm *s = segment_map("begun", true);
	struct budget_slot *mine = slot_of(s, getpid());
	uint64_t done = atomic_load(&mine->done);

	atomic_store(&mine->done, atomic_load(&mine->begun) + 5);
	refused("begun", "finished", "changes");
	atomic_store(&mine->done, done);
	two = budget_rt("begun", "limit=1M credit=0", "host");
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
}
END_TEST

START_TEST(usage_below_live_processes_is_refused)
{
	struct xdm_runtime *rt = budget_rt("usage", "limit=1M credit=0", "host"), *two;
	struct budget_shm *s = segment_map("usage", true);
	struct xdm_block b;

	alloc_ok(rt, 100 * KIB, &b);
	atomic_store(&s->used, 10);
	refused("usage", "its usage 10 is below the 102400 bytes", NULL);
	atomic_store(&s->used, 100 * KIB);
	two = budget_rt("usage", "limit=1M credit=0", "host");
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(attr(rt, "used"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
}
END_TEST

/*
 * A lock nobody releases (its holder stopped): the attach gives up after
 * BUDGET_LOCK_WAIT_S with a sentence, and works once it is let go.
 */
START_TEST(lock_nobody_releases_times_out)
{
	struct xdm_runtime *rt = budget_rt("lock", "limit=1M credit=0", "host"), *two;
	int held = hold_segment_lock("lock");

	refused("lock", "was not released in", "stopped");
	close(held);
	two = budget_rt("lock", "limit=1M credit=0", "host");
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * Garbage where the lock is (where a pthread mutex was, before layout 7:
 * a lock word that nobody would release, robust-list links that a holder
 * would have followed) changes nothing: attaches, limit stores and
 * detaches go on as before.
 */
START_TEST(lock_field_garbage_is_harmless)
{
	struct xdm_runtime *rt = budget_rt("lockjunk", "limit=1M credit=0", "host"), *two;
	struct budget_shm *s = segment_map("lockjunk", true);

	memset((void *)&s->lock, 0xa5, sizeof(s->lock));
	two = budget_rt("lockjunk", "limit=1M credit=0", "host");
	TU_OK(xdm_layer_attr_store(two, 0, "limit", "2M"));
	ck_assert_uint_eq(atomic_load(&s->limit), 2 * MIB);
	TU_OK(xdm_runtime_destroy(two));
	TU_OK(xdm_runtime_destroy(rt));
	munmap(s, sizeof(*s));
}
END_TEST

static Suite *segment_suite(void)
{
	Suite *s = suite_create("budget_segment");
	TCase *whole = tcase_create("whole_segments");
	TCase *fields = tcase_create("fields");

	tcase_add_test(whole, garbage_is_refused_at_once);
	tcase_add_test(whole, older_layout_is_refused);
	tcase_add_test(whole, truncated_is_refused);
	tcase_add_test(whole, empty_is_abandoned_and_made_anew);
	tcase_add_test(whole, no_magic_with_data_is_refused);
	suite_add_tcase(s, whole);

	tcase_add_test(fields, overwritten_limit_is_refused);
	tcase_add_test(fields, slot_with_no_pid_is_refused);
	tcase_add_test(fields, slot_finishing_more_than_it_began_is_refused);
	tcase_add_test(fields, usage_below_live_processes_is_refused);
	tcase_add_test(fields, lock_nobody_releases_times_out);
	tcase_add_test(fields, lock_field_garbage_is_harmless);
	suite_add_tcase(s, fields);
	return s;
}

int main(void)
{
	return budget_suite_run(segment_suite(), "cks", test_keys);
}
