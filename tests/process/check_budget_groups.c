/* SPDX-License-Identifier: MIT */
/*
 * check_budget_groups.c - groups inside a device's budget, and the
 * budget's directory.
 *
 * A group (group=, XDM_BUDGET_GROUP) has a limit of its own (group_limit=)
 * inside the device's: an allocation must fit both, and a refusal says
 * which of the two refused, with both figures.  A group's usage is its
 * members' at quiescence, whatever processes join, leave or die.  dir=
 * (XDM_BUDGET_DIR) puts the segment in a directory of the user's, which
 * must be safe to keep it in.
 */
#include "config.h"

#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>

#include "tests/lib/budget_util.h"

static const char *const test_keys[] = { "grp", "grpdev", "grplive", "grpmix", "grpenv",
					 "grpleave", "grpproc", "grpdie", NULL };

static void expect_message(const char *needle)
{
	ck_assert_msg(strstr(xdm_last_error_message(), needle), "the message does not say '%s': %s",
		      needle, xdm_last_error_message());
}

static void show_is(struct xdm_runtime *rt, const char *name, const char *want)
{
	char buf[256];

	TU_OK(xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)));
	ck_assert_str_eq(buf, want);
}

/* ---- one process ------------------------------------------------------- */

START_TEST(group_limit_refuses_and_says_so)
{
	struct xdm_runtime *rt =
		budget_rt("grp", "limit=4M group=g1 group_limit=1M credit=0", "host");
	struct xdm_block a;

	show_is(rt, "group", "g1\n");
	ck_assert_uint_eq(attr(rt, "group_limit"), MIB);
	alloc_ok(rt, 900 * KIB, &a);
	ck_assert_uint_eq(attr(rt, "group_used"), 900 * KIB);
	ck_assert_uint_eq(attr(rt, "used"), 900 * KIB);
	/* The group has 124K left, the device 3.1M: the group refuses. */
	alloc_refused(rt, 200 * KIB, 124 * KIB);
	expect_message("group 'g1' refused: 204800 bytes requested, 126976 remaining of the "
		       "group's limit 1048576");
	expect_message("3272704 remaining of 4194304");
	ck_assert_uint_eq(attr(rt, "group_refusals"), 1);
	ck_assert_uint_eq(attr(rt, "refusals"), 1);
	/* Nothing of the refused request is counted anywhere. */
	ck_assert_uint_eq(attr(rt, "group_used"), 900 * KIB);
	ck_assert_uint_eq(attr(rt, "used"), 900 * KIB);
	ck_assert_uint_eq(attr(rt, "group_peak"), 900 * KIB);
	TU_OK(xdm_deallocate(rt, &a));
	ck_assert_uint_eq(attr(rt, "group_used"), 0);
	ck_assert_uint_eq(attr(rt, "used"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(device_limit_refuses_a_group_with_room)
{
	struct xdm_runtime *rt =
		budget_rt("grpdev", "limit=1M group=g1 group_limit=4M credit=0", "host");
	struct xdm_block a;

	alloc_ok(rt, 900 * KIB, &a);
	alloc_refused(rt, 200 * KIB, 124 * KIB);
	expect_message("the device refused: 204800 bytes requested, 126976 remaining of limit "
		       "1048576");
	ck_assert_uint_eq(attr(rt, "refusals"), 1);
	ck_assert_uint_eq(attr(rt, "group_refusals"), 0);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(group_limit_is_live_and_checked)
{
	struct xdm_runtime *rt =
		budget_rt("grplive", "limit=8M group=g1 group_limit=1M credit=0", "host");
	static const char *const bad[] = { "", "lots", "-1", "1.5.5M", "2M 3M", "\n" };
	struct xdm_block a;

	alloc_refused(rt, 2 * MIB, MIB);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_ne(store(rt, "group_limit", bad[i]), XDM_OK);
		ck_assert_uint_eq(attr(rt, "group_limit"), MIB);
	}
	TU_OK(store(rt, "group_limit", "3M\n"));
	ck_assert_uint_eq(attr(rt, "group_limit"), 3 * MIB);
	alloc_ok(rt, 2 * MIB, &a);
	/* Below what is held: refuses until enough is freed, takes nothing back. */
	TU_OK(store(rt, "group_limit", "1M"));
	ck_assert_uint_eq(attr(rt, "group_used"), 2 * MIB);
	alloc_refused(rt, 1, 0);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(a_process_is_in_one_group)
{
	struct xdm_runtime *rt = budget_rt("grpmix", "limit=8M group=g1 credit=0", "host"), *other;
	char key[64], stack[256];

	key_of("grpmix", key, sizeof(key));
	/* Another layer of this process on the same budget, in another group. */
	snprintf(stack, sizeof(stack), "budget key=%s group=g2 credit=0 | host", key);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &other), XDM_E_CONFIG);
	expect_message("names the same group");
	snprintf(stack, sizeof(stack), "budget key=%s credit=0 | host", key);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &other), XDM_E_CONFIG);
	expect_message("no group");
	/* The same group is one slot, counted once. */
	snprintf(stack, sizeof(stack), "budget key=%s group=g1 credit=0 | host", key);
	TU_OK(xdm_runtime_create(0, "host", stack, &other));
	show_is(other, "group", "g1\n");
	TU_OK(xdm_runtime_destroy(other));
	/* Neither refusal nor the second layer's leaving left the group. */
	show_is(rt, "group", "g1\n");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(group_from_the_environment)
{
	struct xdm_runtime *rt, *plain;
	struct xdm_block a;

	setenv("XDM_BUDGET_GROUP", "from-env", 1);
	setenv("XDM_BUDGET_GROUP_LIMIT", "64K", 1);
	rt = budget_rt("grpenv", "limit=1M credit=0", "host");
	unsetenv("XDM_BUDGET_GROUP");
	unsetenv("XDM_BUDGET_GROUP_LIMIT");
	show_is(rt, "group", "from-env\n");
	ck_assert_uint_eq(attr(rt, "group_limit"), 64 * KIB);
	alloc_refused(rt, 100 * KIB, 64 * KIB);
	alloc_ok(rt, 64 * KIB, &a);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_runtime_destroy(rt));

	/* A process in no group: the group's files say so, its limit is no knob. */
	plain = budget_rt("grpenv", "limit=1M credit=0", "host");
	show_is(plain, "group", "\n");
	ck_assert_uint_eq(attr(plain, "group_limit"), 0);
	ck_assert_int_eq(store(plain, "group_limit", "1M"), XDM_E_INVALID);
	TU_OK(xdm_runtime_destroy(plain));
}
END_TEST

START_TEST(bad_group_parameters_are_refused)
{
	static const char *const bad[][2] = {
		{ "limit=1M group_limit=1M", "group_limit without a group" },
		{ "limit=1M group=g1 group_limit=plenty", "is not a size" },
		{ "limit=1M group=0123456789012345678901234567890123456789012345678901234567890123",
		  "at most 63 bytes" },
	};
	struct xdm_runtime *rt;
	char key[64], stack[256];

	key_of("grp", key, sizeof(key));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(stack, sizeof(stack), "budget key=%s %s | host", key, bad[i][0]);
		ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
		expect_message(bad[i][1]);
	}
}
END_TEST

/* ---- several processes --------------------------------------------------- */

/*
 * Members' usage adds up in their group, groups add up in the device; the
 * group lives while it has a member, and the next group of its name is
 * made anew, with its own first member's limit.
 */
START_TEST(groups_count_their_members)
{
	struct xdm_runtime *rt = budget_rt("grpproc", "limit=64M group=g1 group_limit=32M credit=0",
					   "host");
	struct worker a, b, c;

	holder_start_params(&a, "grpproc", "group=g1 credit=0", 3 * MIB);
	holder_start_params(&b, "grpproc", "group=g1 credit=0", 5 * MIB);
	holder_start_params(&c, "grpproc", "group=g2 group_limit=16M credit=0", 7 * MIB);
	ck_assert_uint_eq(attr(rt, "group_used"), 8 * MIB);
	ck_assert_uint_eq(attr(rt, "used"), 15 * MIB);
	/* The first member's limit stands. */
	ck_assert_uint_eq(attr(rt, "group_limit"), 32 * MIB);
	ck_assert_int_eq(worker_wait(&a), 0);	/* frees, then leaves */
	ck_assert_uint_eq(attr(rt, "group_used"), 5 * MIB);
	ck_assert_uint_eq(attr(rt, "used"), 12 * MIB);
	ck_assert_int_eq(worker_wait(&b), 0);
	ck_assert_int_eq(worker_wait(&c), 0);
	ck_assert_uint_eq(attr(rt, "group_used"), 0);
	ck_assert_uint_eq(attr(rt, "used"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* The entry of group name in the segment, or NULL. */
static const struct budget_group *group_named(const struct budget_shm *s, const char *name)
{
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++)
		if (s->groups[i].members && !strcmp(s->groups[i].name, name))
			return &s->groups[i];
	return NULL;
}

/* A group made again after its last member left takes its new first's limit. */
START_TEST(a_group_ends_with_its_last_member)
{
	struct xdm_runtime *keep = budget_rt("grpleave", "limit=64M credit=0", "host");
	struct budget_shm *s = segment_map("grpleave", false);
	struct worker a, b;

	holder_start_params(&a, "grpleave", "group=g1 group_limit=2M credit=0", MIB);
	ck_assert_ptr_nonnull(group_named(s, "g1"));
	ck_assert_uint_eq(atomic_load(&group_named(s, "g1")->limit), 2 * MIB);
	ck_assert_uint_eq(atomic_load(&group_named(s, "g1")->peak), MIB);
	ck_assert_int_eq(worker_wait(&a), 0);
	ck_assert_ptr_null(group_named(s, "g1"));
	holder_start_params(&b, "grpleave", "group=g1 group_limit=5M credit=0", 512 * KIB);
	ck_assert_uint_eq(atomic_load(&group_named(s, "g1")->limit), 5 * MIB);
	ck_assert_uint_eq(atomic_load(&group_named(s, "g1")->peak), 512 * KIB);
	ck_assert_int_eq(worker_wait(&b), 0);
	munmap(s, sizeof(*s));
	TU_OK(xdm_runtime_destroy(keep));
}
END_TEST

/* A member killed holding memory: its group gets it back, exactly. */
START_TEST(a_dead_members_share_comes_back_to_its_group)
{
	struct xdm_runtime *rt = budget_rt("grpdie", "limit=64M group=g1 credit=0", "host");
	struct worker a, b;
	struct xdm_block x;

	holder_start_params(&a, "grpdie", "group=g1 credit=0", 4 * MIB);
	holder_start_params(&b, "grpdie", "group=g2 credit=0", 2 * MIB);
	alloc_ok(rt, MIB, &x);
	ck_assert_uint_eq(attr(rt, "group_used"), 5 * MIB);
	holder_kill(&a);
	holder_kill(&b);
	/* Any attach reclaims: the dead members are gone, the live one stays. */
	TU_OK(xdm_runtime_destroy(budget_rt("grpdie", "group=g1 credit=0", "host")));
	ck_assert_uint_eq(attr(rt, "group_used"), MIB);
	ck_assert_uint_eq(attr(rt, "used"), MIB);
	TU_OK(xdm_deallocate(rt, &x));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- the directory of the segment ----------------------------------------- */

static char dir[64];

static void dir_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/xdm-budget-dir-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void dir_teardown(void)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s%s-dir", dir, BUDGET_NAME_PREFIX, key_prefix);
	unlink(path);
	rmdir(dir);
}

START_TEST(dir_keeps_the_segment_there)
{
	struct xdm_runtime *rt, *env;
	char params[128], path[256], buf[256];
	struct stat st;

	snprintf(params, sizeof(params), "limit=1M dir=%s credit=0", dir);
	rt = budget_rt("dir", params, "host");
	snprintf(path, sizeof(path), "%s%s%s-dir", dir, BUDGET_NAME_PREFIX, key_prefix);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert(!segment_exists("dir"));
	snprintf(buf, sizeof(buf), "%s\n", dir);
	show_is(rt, "dir", buf);
	/* The environment names the same directory: the same budget. */
	setenv("XDM_BUDGET_DIR", dir, 1);
	env = budget_rt("dir", "credit=0", "host");
	unsetenv("XDM_BUDGET_DIR");
	ck_assert_uint_eq(attr(env, "limit"), MIB);
	TU_OK(xdm_runtime_destroy(env));
	TU_OK(xdm_runtime_destroy(rt));
	/* The last one out takes the segment with it. */
	ck_assert_int_eq(stat(path, &st), -1);
}
END_TEST

START_TEST(unsafe_dirs_are_refused)
{
	struct xdm_runtime *rt;
	char key[64], stack[512], sub[128], file[128];
	struct passwd *nobody = getpwnam("nobody");
	int fd;

	key_of("dir", key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s dir=relative/path | host", key);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	expect_message("absolute path");
	snprintf(stack, sizeof(stack), "budget key=%s dir=%s/missing | host", key, dir);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	expect_message("No such file");
	snprintf(file, sizeof(file), "%s/file", dir);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(stack, sizeof(stack), "budget key=%s dir=%s | host", key, file);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	expect_message("not a directory");
	unlink(file);
	/* Writable by others without the sticky bit: anyone could swap the file. */
	snprintf(sub, sizeof(sub), "%s/open", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_int_eq(chmod(sub, 0777), 0);
	snprintf(stack, sizeof(stack), "budget key=%s dir=%s | host", key, sub);
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	expect_message("without the sticky bit");
	/* ... with it, as /dev/shm: fine. */
	ck_assert_int_eq(chmod(sub, 01777), 0);
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	TU_OK(xdm_runtime_destroy(rt));
	/* Another user's directory: they could replace the segment. */
	if (geteuid() == 0 && nobody) {
		ck_assert_int_eq(chmod(sub, 0755), 0);
		ck_assert_int_eq(chown(sub, nobody->pw_uid, nobody->pw_gid), 0);
		ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
		expect_message("who could replace the segment");
	}
	rmdir(sub);
}
END_TEST

static Suite *groups_suite(void)
{
	Suite *s = suite_create("budget_groups");
	TCase *one = tcase_create("one_process");
	TCase *many = tcase_create("processes");
	TCase *where = tcase_create("dir");

	tcase_add_test(one, group_limit_refuses_and_says_so);
	tcase_add_test(one, device_limit_refuses_a_group_with_room);
	tcase_add_test(one, group_limit_is_live_and_checked);
	tcase_add_test(one, a_process_is_in_one_group);
	tcase_add_test(one, group_from_the_environment);
	tcase_add_test(one, bad_group_parameters_are_refused);
	suite_add_tcase(s, one);

	tcase_add_test(many, groups_count_their_members);
	tcase_add_test(many, a_group_ends_with_its_last_member);
	tcase_add_test(many, a_dead_members_share_comes_back_to_its_group);
	suite_add_tcase(s, many);

	tcase_add_checked_fixture(where, dir_setup, dir_teardown);
	tcase_add_test(where, dir_keeps_the_segment_there);
	tcase_add_test(where, unsafe_dirs_are_refused);
	suite_add_tcase(s, where);
	return s;
}

int main(void)
{
	return budget_suite_run(groups_suite(), "ckg", test_keys);
}
