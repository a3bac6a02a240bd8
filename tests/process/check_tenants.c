/* SPDX-License-Identifier: MIT */
/*
 * check_tenants.c - users of one machine kept apart (issue 40): one budget
 * per GPU that a group of users shares and nobody outside it can squat,
 * and a log file that nobody else can redirect or read.
 *
 * main() makes a group and three throwaway users (xdmtest-tga-<pid>,
 * xdmtest-tgb-<pid> in the group xdmtest-tgg-<pid>, and xdmtest-tgo-<pid>
 * outside it) and removes them at the end (tests/lib/users.c).  Each user
 * is a process of its own (an agent) that has dropped every privilege to
 * it and does what the test tells it through a pipe.
 *
 *	budget	 a directory of the shared shape (root's, the group's,
 *		 2770), made here under /tmp, not the machine's own: both
 *		 members attach to one segment, see each other's usage and
 *		 limit, and the last one out removes it; the outsider and
 *		 root are refused with a sentence; in a sticky one the
 *		 last one out cannot remove another member's segment and the
 *		 next attach takes it over.  A squatted name in /dev/shm is
 *		 refused with a sentence that says whose it is.  Without
 *		 dir= or $XDM_BUDGET_DIR the budget goes to the configured
 *		 shared directory where it exists, in a private mount
 *		 namespace of the test, so the machine's own is never made.
 *	log	 a symbolic link at the log's path is refused and nothing
 *		 is written through it; another user's file is refused and
 *		 stays empty; the user's own file is written (the control);
 *		 the default path is in the user's own log directory (the
 *		 session's, where it has one of the user's own), and a
 *		 directory another user made first under its name is refused.
 *
 * Exit 77 (skip) when not root, without useradd and groupadd, or where
 * the users cannot build a runtime from this build tree; the default
 * directory case is left out, with a sentence, where the test cannot
 * mount in a mount namespace of its own.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"
#include "tests/lib/user_agent.h"
#include "tests/lib/users.h"

#define MIB (1024ull * 1024ull)

static struct tu_user mem_a, mem_b, outsider;
static struct tu_group group;
static pid_t main_pid;
/* "ckt<pid of main>": keys, and the names of everything made under /tmp. */
static char tag[32];

/* ---- agents: a process of a user, told what to do through a pipe -------- */

#define AGENT_BLOCKS 16

struct agent_state {
	struct xdm_runtime *rt;
	struct xdm_block blocks[AGENT_BLOCKS];
	int nblocks;
};

static void answer_status(FILE *out, enum xdm_status st)
{
	if (st == XDM_OK)
		fprintf(out, "ok\n");
	else
		fprintf(out, "err %d %s\n", (int)st, xdm_last_error_message());
}

static void answer_errno(FILE *out, int rc)
{
	if (rc == 0)
		fprintf(out, "ok\n");
	else
		fprintf(out, "err %d %s\n", errno, strerror(errno));
}

static void agent_detach(struct agent_state *a)
{
	while (a->nblocks > 0)
		xdm_deallocate(a->rt, &a->blocks[--a->nblocks]);
	if (a->rt) {
		xdm_stream_synchronize(a->rt, 0);
		xdm_runtime_destroy(a->rt);
	}
	a->rt = NULL;
}

/* One command; false: the agent is done. */
static bool agent_do(struct agent_state *a, char *line, FILE *out)
{
	char attr[64], path[PATH_MAX], target[PATH_MAX], value[256];
	unsigned long long n;
	unsigned int layer, mode;
	size_t len = strlen(line);
	enum xdm_status st;
	int fd;

	if (len && line[len - 1] == '\n')
		line[--len] = '\0';
	if (!strncmp(line, "attach ", 7)) {
		answer_status(out, a->rt ? XDM_E_INVALID :
				   xdm_runtime_create(0, "host", line + 7, &a->rt));
	} else if (sscanf(line, "alloc %llu", &n) == 1 && a->rt && a->nblocks < AGENT_BLOCKS) {
		st = xdm_allocate(a->rt, (size_t)n, 0, "check_tenants", &a->blocks[a->nblocks]);
		if (st == XDM_OK)
			a->nblocks++;
		answer_status(out, st);
	} else if (!strcmp(line, "free") && a->rt && a->nblocks > 0) {
		st = xdm_deallocate(a->rt, &a->blocks[--a->nblocks]);
		if (st == XDM_OK)
			st = xdm_stream_synchronize(a->rt, 0);
		answer_status(out, st);
	} else if (sscanf(line, "show %u %63s", &layer, attr) == 2 && a->rt) {
		st = xdm_layer_attr_show(a->rt, layer, attr, value, sizeof(value));
		value[strcspn(value, "\n")] = '\0';
		if (st == XDM_OK)
			fprintf(out, "ok %s\n", value);
		else
			answer_status(out, st);
	} else if (sscanf(line, "store %u %63s %255s", &layer, attr, value) == 3 && a->rt) {
		answer_status(out, xdm_layer_attr_store(a->rt, layer, attr, value));
	} else if (!strcmp(line, "detach")) {
		agent_detach(a);
		answer_status(out, XDM_OK);
	} else if (sscanf(line, "symlink %4095s %4095s", target, path) == 2) {
		answer_errno(out, symlink(target, path));
	} else if (sscanf(line, "file %4095s %o", path, &mode) == 2) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		answer_errno(out, fd < 0 ? -1 : fchmod(fd, mode));
		if (fd >= 0)
			close(fd);
	} else if (sscanf(line, "mkdir %4095s %o", path, &mode) == 2) {
		answer_errno(out, mkdir(path, 0700) != 0 ? -1 : chmod(path, mode));
	} else if (!strcmp(line, "quit")) {
		agent_detach(a);
		fprintf(out, "bye\n");
		fflush(out);
		return false;
	} else {
		fprintf(out, "err 0 no such command: %s\n", line);
	}
	fflush(out);
	return true;
}

static void agent_body(FILE *in, FILE *out, const void *arg)
{
	struct agent_state a = { .rt = NULL };
	char line[8192];

	(void)arg;
	/* The log's default path must not depend on where the test runs. */
	if (chdir("/") != 0)
		_exit(123);
	while (fgets(line, sizeof(line), in) && agent_do(&a, line, out))
		;
}

static void agent_start(struct tu_agent *ag, const struct tu_user *u)
{
	tu_agent_start(ag, u, agent_body, NULL);
}

/* One command, its one line of answer (without the newline). */
__attribute__((format(printf, 4, 5)))
static void agent_say(struct tu_agent *ag, char *answer, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(ag->to, fmt, ap);
	va_end(ap);
	fputc('\n', ag->to);
	fflush(ag->to);
	ck_assert_msg(fgets(answer, (int)len, ag->from), "%s said nothing", ag->user->name);
	answer[strcspn(answer, "\n")] = '\0';
}

/* A command that must succeed. */
#define agent_ok(ag, ...)                                                               \
	do {                                                                            \
		char ok_answer_[1024];                                                  \
		agent_say((ag), ok_answer_, sizeof(ok_answer_), __VA_ARGS__);           \
		ck_assert_msg(!strncmp(ok_answer_, "ok", 2), "%s: %s", (ag)->user->name, \
			      ok_answer_);                                              \
	} while (0)

/* A layer's attribute as the agent reads it, as a number. */
static uint64_t agent_attr(struct tu_agent *ag, const char *attr)
{
	char answer[1024];

	agent_say(ag, answer, sizeof(answer), "show 0 %s", attr);
	ck_assert_msg(!strncmp(answer, "ok ", 3), "%s: show %s: %s", ag->user->name, attr,
		      answer);
	return strtoull(answer + 3, NULL, 10);
}

/* The answer of a refused command holds every one of the NULL-ended words. */
static void expect_words(const char *who, const char *answer, ...)
{
	const char *word;
	va_list ap;

	ck_assert_msg(!strncmp(answer, "err ", 4), "%s was not refused: %s", who, answer);
	va_start(ap, answer);
	while ((word = va_arg(ap, const char *)))
		ck_assert_msg(strstr(answer, word), "%s was told '%s', which does not say '%s'",
			      who, answer, word);
	va_end(ap);
}

/* ---- places made by root for the test ------------------------------------ */

static void place(char *path, size_t len, const char *what)
{
	snprintf(path, len, "/tmp/xdm-%s-%s", tag, what);
}

/* A directory of root's, of group gid, with mode (chmod after chown,
 * which may clear the set-group-ID bit). */
static void make_dir(const char *path, gid_t gid, mode_t mode)
{
	ck_assert_msg(mkdir(path, 0700) == 0, "mkdir %s: %s", path, strerror(errno));
	ck_assert_int_eq(chown(path, 0, gid), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_tree(const char *path)
{
	nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Everything this run made under /tmp and /dev/shm. */
static void remove_places(void)
{
	char path[PATH_MAX];
	const struct tu_user *users[] = { &mem_a, &mem_b, &outsider };
	struct dirent *e;
	DIR *d;

	if (getpid() != main_pid)
		return;
	for (int i = 0; i < 2; i++) {
		const char *dir = i ? "/dev/shm" : "/tmp";

		d = opendir(dir);
		while (d && (e = readdir(d))) {
			if (!strstr(e->d_name, tag))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			remove_tree(path);
		}
		if (d)
			closedir(d);
	}
	/* The users' own log directories (the default path). */
	for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		if (!users[i]->uid)
			continue;
		snprintf(path, sizeof(path), "/tmp/xdm-%u", (unsigned)users[i]->uid);
		remove_tree(path);
	}
}

static void file_stat(const char *path, struct stat *st)
{
	ck_assert_msg(lstat(path, st) == 0, "%s: %s", path, strerror(errno));
}

/* ---- budget: the directory a group shares --------------------------------- */

static void stack_of(char *stack, size_t len, const char *dir, const char *key,
		     const char *limit)
{
	snprintf(stack, len, "budget%s%s key=%s-%s limit=%s credit=0 | host", dir ? " dir=" : "",
		 dir ? dir : "", tag, key, limit);
}

START_TEST(shared_dir_two_members_one_budget)
{
	char dir[128], seg[PATH_MAX], stack[PATH_MAX + 128], answer[1024];
	struct tu_agent a, b;
	struct stat st;

	place(dir, sizeof(dir), "shared");
	make_dir(dir, group.gid, 02770);
	snprintf(seg, sizeof(seg), "%s/xdm-budget-%s-two", dir, tag);

	agent_start(&a, &mem_a);
	agent_start(&b, &mem_b);
	stack_of(stack, sizeof(stack), dir, "two", "64M");
	agent_ok(&a, "attach %s", stack);
	agent_ok(&a, "alloc %llu", 8 * MIB);

	/* The segment is the group's, open to it, made by A. */
	file_stat(seg, &st);
	ck_assert_uint_eq(st.st_uid, mem_a.uid);
	ck_assert_uint_eq(st.st_gid, group.gid);
	ck_assert_msg((st.st_mode & 07777) == 0660, "the segment has mode %04o, not 0660",
		      (unsigned)(st.st_mode & 07777));

	/* B joins A's budget: A's 8M are in its usage, A's limit is its. */
	stack_of(stack, sizeof(stack), dir, "two", "32M");
	agent_ok(&b, "attach %s", stack);
	ck_assert_uint_eq(agent_attr(&b, "limit"), 64 * MIB);
	ck_assert_uint_eq(agent_attr(&b, "used"), 8 * MIB);
	ck_assert_uint_eq(agent_attr(&b, "remaining"), 56 * MIB);

	/* B's allocation is in A's view, and B's limit holds A. */
	agent_ok(&b, "alloc %llu", 4 * MIB);
	ck_assert_uint_eq(agent_attr(&a, "used"), 12 * MIB);
	agent_ok(&b, "store 0 limit 16M");
	ck_assert_uint_eq(agent_attr(&a, "limit"), 16 * MIB);
	agent_say(&a, answer, sizeof(answer), "alloc %llu", 5 * MIB);
	expect_words(mem_a.name, answer, "4194304 remaining", NULL);
	agent_ok(&a, "alloc %llu", 4 * MIB);
	ck_assert_uint_eq(agent_attr(&b, "remaining"), 0);

	/* A leaves first; B, the last one out, removes A's segment. */
	tu_agent_stop(&a);
	ck_assert_uint_eq(agent_attr(&b, "used"), 4 * MIB);
	tu_agent_stop(&b);
	ck_assert_msg(access(seg, F_OK) != 0, "%s is still there after its last user left",
		      seg);
}
END_TEST

START_TEST(shared_dir_refuses_outsider_and_root)
{
	char dir[128], stack[PATH_MAX + 128], answer[1024], *msg;
	struct xdm_runtime *rt;
	struct tu_agent a, o;

	place(dir, sizeof(dir), "closed");
	make_dir(dir, group.gid, 02770);
	stack_of(stack, sizeof(stack), dir, "closed", "64M");

	/* The outsider is told where, whose, and what to do. */
	agent_start(&o, &outsider);
	agent_say(&o, answer, sizeof(answer), "attach %s", stack);
	expect_words(outsider.name, answer, dir, group.name, "not in that group", "usermod",
		     "XDM_BUDGET_DIR", NULL);
	tu_agent_stop(&o);

	/* Root, who could, does not: every member can write the segments. */
	ck_assert_int_eq(xdm_runtime_create(0, "host", stack, &rt), XDM_E_CONFIG);
	msg = (char *)xdm_last_error_message();
	ck_assert_msg(strstr(msg, dir) && strstr(msg, "root does not use it") &&
		      strstr(msg, group.name), "root was told: %s", msg);

	/* The control: a member attaches. */
	agent_start(&a, &mem_a);
	agent_ok(&a, "attach %s", stack);
	agent_ok(&a, "alloc %llu", MIB);
	tu_agent_stop(&a);
}
END_TEST

/*
 * A sticky shared directory: the last one out may not remove a segment
 * another member made.  It leaves it, unmarked, and the next attach finds
 * nobody in it and starts it afresh.
 */
START_TEST(shared_dir_sticky_last_out)
{
	char dir[128], seg[PATH_MAX], stack[PATH_MAX + 128];
	struct tu_agent a, b;

	place(dir, sizeof(dir), "sticky");
	make_dir(dir, group.gid, 03770);
	snprintf(seg, sizeof(seg), "%s/xdm-budget-%s-sticky", dir, tag);
	agent_start(&a, &mem_a);
	agent_start(&b, &mem_b);
	stack_of(stack, sizeof(stack), dir, "sticky", "64M");
	agent_ok(&a, "attach %s", stack);
	agent_ok(&a, "alloc %llu", 2 * MIB);
	agent_ok(&b, "attach %s", stack);
	agent_ok(&b, "alloc %llu", 3 * MIB);
	agent_ok(&a, "detach");
	agent_ok(&b, "detach");
	ck_assert_msg(access(seg, F_OK) == 0, "B removed A's segment from a sticky directory");

	stack_of(stack, sizeof(stack), dir, "sticky", "32M");
	agent_ok(&b, "attach %s", stack);
	ck_assert_uint_eq(agent_attr(&b, "limit"), 32 * MIB);
	ck_assert_uint_eq(agent_attr(&b, "used"), 0);
	agent_ok(&b, "alloc %llu", MIB);
	tu_agent_stop(&b);
	tu_agent_stop(&a);
}
END_TEST

/* Another user's file at the default name in /dev/shm: said to be a squat. */
START_TEST(squat_in_dev_shm_is_named)
{
	char seg[PATH_MAX], stack[PATH_MAX + 128], answer[1024], uid[32];
	struct tu_agent a, o;
	struct stat st;

	snprintf(seg, sizeof(seg), "/dev/shm/xdm-budget-%s-squat", tag);
	agent_start(&o, &outsider);
	agent_ok(&o, "file %s 600", seg);
	tu_agent_stop(&o);

	agent_start(&a, &mem_a);
	stack_of(stack, sizeof(stack), "/dev/shm", "squat", "64M");
	agent_say(&a, answer, sizeof(answer), "attach %s", stack);
	snprintf(uid, sizeof(uid), "(uid %u)", (unsigned)outsider.uid);
	expect_words(mem_a.name, answer, seg, outsider.name, uid, "took this budget's name first",
		     BUDGET_SHARED_DIR, NULL);
	tu_agent_stop(&a);
	/* Nothing was written into it. */
	file_stat(seg, &st);
	ck_assert_uint_eq(st.st_size, 0);
	ck_assert_uint_eq(st.st_uid, outsider.uid);
}
END_TEST

/*
 * No dir= and no $XDM_BUDGET_DIR: the configured shared directory where it
 * exists (for a member; an outsider is told, not sent to /dev/shm), else
 * /dev/shm.  The test's own mount namespace has a tmpfs over the shared
 * directory's parent, so the machine's is never made.
 */
START_TEST(default_is_the_shared_dir)
{
	char parent[PATH_MAX], stack[PATH_MAX + 128], answer[1024], seg[PATH_MAX];
	char shm_seg[PATH_MAX];
	struct tu_agent a, o;

	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	snprintf(parent, sizeof(parent), "%s", BUDGET_SHARED_DIR);
	dirname(parent);
	ck_assert_int_eq(mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), 0);
	make_dir(BUDGET_SHARED_DIR, group.gid, 02770);
	unsetenv("XDM_BUDGET_DIR");
	snprintf(seg, sizeof(seg), "%s/xdm-budget-%s-default", BUDGET_SHARED_DIR, tag);
	snprintf(shm_seg, sizeof(shm_seg), "/dev/shm/xdm-budget-%s-default", tag);

	agent_start(&a, &mem_a);
	agent_start(&o, &outsider);
	stack_of(stack, sizeof(stack), NULL, "default", "64M");
	agent_ok(&a, "attach %s", stack);
	agent_ok(&a, "alloc %llu", MIB);
	agent_say(&a, answer, sizeof(answer), "show 0 dir");
	ck_assert_msg(!strcmp(answer + 3, BUDGET_SHARED_DIR), "the budget is in %s", answer);
	ck_assert_msg(access(seg, F_OK) == 0, "no segment %s", seg);
	ck_assert_msg(access(shm_seg, F_OK) != 0, "a segment in /dev/shm: %s", shm_seg);

	agent_say(&o, answer, sizeof(answer), "attach %s", stack);
	expect_words(outsider.name, answer, BUDGET_SHARED_DIR, group.name, "not in that group",
		     NULL);
	ck_assert_msg(access(shm_seg, F_OK) != 0, "the outsider went to /dev/shm");
	agent_ok(&a, "detach");

	/* Where it does not exist: /dev/shm. */
	ck_assert_int_eq(rmdir(BUDGET_SHARED_DIR), 0);
	agent_ok(&a, "attach %s", stack);
	agent_say(&a, answer, sizeof(answer), "show 0 dir");
	ck_assert_str_eq(answer, "ok /dev/shm");
	ck_assert_msg(access(shm_seg, F_OK) == 0, "no segment %s", shm_seg);
	tu_agent_stop(&a);
	tu_agent_stop(&o);
}
END_TEST

/* ---- log: the file sink's file ---------------------------------------------- */

/*
 * A directory anyone may write in, without the sticky bit: there the
 * kernel's protected_symlinks and protected_regular do not apply, and
 * only the sink's own checks keep the rows where they belong.
 */
static void make_open_dir(char *dir, size_t len, const char *what)
{
	place(dir, len, what);
	make_dir(dir, 0, 0777);
}

static void expect_size(const char *path, off_t size)
{
	struct stat st;

	file_stat(path, &st);
	ck_assert_msg(st.st_size == size, "%s holds %jd bytes, not %jd", path,
		      (intmax_t)st.st_size, (intmax_t)size);
}

START_TEST(log_symlink_refused)
{
	char dir[128], link[PATH_MAX], victim[128], answer[1024];
	struct tu_agent a, o;

	make_open_dir(dir, sizeof(dir), "logs-link");
	snprintf(link, sizeof(link), "%s/log.csv", dir);
	place(victim, sizeof(victim), "victim");
	agent_start(&a, &mem_a);
	agent_start(&o, &outsider);
	agent_ok(&a, "file %s 600", victim);
	agent_ok(&o, "symlink %s %s", victim, link);

	agent_say(&a, answer, sizeof(answer), "attach logging path=%s | host", link);
	expect_words(mem_a.name, answer, link, "symbolic link", NULL);
	expect_size(victim, 0);

	/* A link of the user's own is no better: the log is never written
	 * through one. */
	unlink(link);
	agent_ok(&a, "symlink %s %s", victim, link);
	agent_say(&a, answer, sizeof(answer), "attach logging path=%s | host", link);
	expect_words(mem_a.name, answer, "symbolic link", NULL);
	expect_size(victim, 0);
	tu_agent_stop(&a);
	tu_agent_stop(&o);
}
END_TEST

START_TEST(log_foreign_file_refused)
{
	char dir[128], path[PATH_MAX], answer[1024], uid[32];
	struct tu_agent a, o;

	make_open_dir(dir, sizeof(dir), "logs-foreign");
	snprintf(path, sizeof(path), "%s/log.csv", dir);
	agent_start(&a, &mem_a);
	agent_start(&o, &outsider);
	/* Open to anyone, so that only the owner's check stands in the way. */
	agent_ok(&o, "file %s 666", path);

	agent_say(&a, answer, sizeof(answer), "attach logging path=%s | host", path);
	snprintf(uid, sizeof(uid), "(uid %u)", (unsigned)outsider.uid);
	expect_words(mem_a.name, answer, path, outsider.name, uid, NULL);
	expect_size(path, 0);
	tu_agent_stop(&a);
	tu_agent_stop(&o);
}
END_TEST

/* The control: the user's own file, made before or by the sink, is written. */
START_TEST(log_own_file_written)
{
	char dir[128], made[PATH_MAX], fresh[PATH_MAX];
	struct tu_agent a;
	struct stat st;

	make_open_dir(dir, sizeof(dir), "logs-own");
	snprintf(made, sizeof(made), "%s/made.csv", dir);
	snprintf(fresh, sizeof(fresh), "%s/fresh.csv", dir);
	agent_start(&a, &mem_a);
	agent_ok(&a, "file %s 600", made);
	agent_ok(&a, "attach logging path=%s | host", made);
	agent_ok(&a, "alloc 4096");
	agent_ok(&a, "free");
	agent_ok(&a, "detach");
	file_stat(made, &st);
	ck_assert_msg(st.st_size > (off_t)strlen("thread,time,action,ptr,bytes,stream,device,"
						"tag,query_id\n"),
		      "%s holds only %jd bytes", made, (intmax_t)st.st_size);

	agent_ok(&a, "attach logging path=%s | host", fresh);
	agent_ok(&a, "detach");
	file_stat(fresh, &st);
	ck_assert_uint_eq(st.st_uid, mem_a.uid);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_gt(st.st_size, 0);
	tu_agent_stop(&a);
}
END_TEST

/*
 * No path=: the user's log directory, /tmp/xdm-<uid> here (the agents
 * have no $XDG_RUNTIME_DIR), made 0700; one another user made first under
 * that name is refused, and nothing goes into it.
 */
START_TEST(log_default_is_the_users_own)
{
	char dir_a[PATH_MAX], dir_b[PATH_MAX], answer[1024], want[PATH_MAX + 32];
	struct tu_agent a, b, o;
	struct stat st;

	snprintf(dir_a, sizeof(dir_a), "/tmp/xdm-%u", (unsigned)mem_a.uid);
	snprintf(dir_b, sizeof(dir_b), "/tmp/xdm-%u", (unsigned)mem_b.uid);
	remove_tree(dir_a);
	remove_tree(dir_b);
	unsetenv("XDG_RUNTIME_DIR");
	agent_start(&a, &mem_a);
	agent_start(&b, &mem_b);
	agent_start(&o, &outsider);

	agent_ok(&a, "attach logging | host");
	agent_say(&a, answer, sizeof(answer), "show 0 path");
	snprintf(want, sizeof(want), "ok %s/xdm-%d-0.csv", dir_a, (int)a.pid);
	ck_assert_str_eq(answer, want);
	agent_ok(&a, "detach");
	file_stat(dir_a, &st);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_uid, mem_a.uid);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	expect_size(want + 3, (off_t)strlen("thread,time,action,ptr,bytes,stream,device,tag,"
					     "query_id\n"));

	/* The outsider takes B's name first: B is told, and writes nothing. */
	agent_ok(&o, "mkdir %s 777", dir_b);
	agent_say(&b, answer, sizeof(answer), "attach logging | host");
	expect_words(mem_b.name, answer, dir_b, outsider.name, "path=", NULL);
	file_stat(dir_b, &st);
	ck_assert_uint_eq(st.st_nlink, 2);	/* still empty */
	tu_agent_stop(&a);
	tu_agent_stop(&b);
	tu_agent_stop(&o);
}
END_TEST

/*
 * With a session's runtime directory of the user's own, the log goes in
 * its xdm/; one that is another user's (kept across su) is passed over
 * for /tmp/xdm-<uid>.
 */
START_TEST(log_default_in_the_session_dir)
{
	char mine[128], theirs[128], answer[1024], want[PATH_MAX + 32];
	struct tu_agent a;
	struct stat st;

	place(mine, sizeof(mine), "xdg-a");
	place(theirs, sizeof(theirs), "xdg-b");
	make_dir(mine, 0, 0700);
	ck_assert_int_eq(chown(mine, mem_a.uid, mem_a.gid), 0);
	make_dir(theirs, 0, 0700);
	ck_assert_int_eq(chown(theirs, mem_b.uid, mem_b.gid), 0);

	setenv("XDG_RUNTIME_DIR", mine, 1);
	agent_start(&a, &mem_a);
	agent_ok(&a, "attach logging | host");
	agent_say(&a, answer, sizeof(answer), "show 0 path");
	snprintf(want, sizeof(want), "ok %s/xdm/xdm-%d-0.csv", mine, (int)a.pid);
	ck_assert_str_eq(answer, want);
	tu_agent_stop(&a);
	file_stat(want + 3, &st);
	ck_assert_uint_eq(st.st_uid, mem_a.uid);

	setenv("XDG_RUNTIME_DIR", theirs, 1);
	agent_start(&a, &mem_a);
	agent_ok(&a, "attach logging | host");
	agent_say(&a, answer, sizeof(answer), "show 0 path");
	snprintf(want, sizeof(want), "ok /tmp/xdm-%u/xdm-%d-0.csv", (unsigned)mem_a.uid,
		 (int)a.pid);
	ck_assert_str_eq(answer, want);
	tu_agent_stop(&a);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

/* Can the test mount a tmpfs over the shared directory's parent in a
 * mount namespace of its own?  NULL, or why not. */
static const char *namespace_probe(char *why, size_t len)
{
	char parent[PATH_MAX];
	int status;
	pid_t pid;

	snprintf(parent, sizeof(parent), "%s", BUDGET_SHARED_DIR);
	dirname(parent);
	if (!strcmp(parent, "/")) {
		snprintf(why, len, "the shared directory %s is in /, which the test cannot "
			 "cover with a tmpfs of its own", BUDGET_SHARED_DIR);
		return why;
	}
	pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWNS) == 0 &&
		      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		      mount("tmpfs", parent, "tmpfs", 0, "mode=0755") == 0 ? 0 : 1);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		snprintf(why, len, "no tmpfs can be mounted over %.200s in a mount namespace of "
			 "the test's own", parent);
		return why;
	}
	return NULL;
}

static Suite *tenants_suite(bool namespaces)
{
	Suite *s = suite_create("tenants");
	TCase *budget = tcase_create("budget");
	TCase *log = tcase_create("log");

	tcase_add_test(budget, shared_dir_two_members_one_budget);
	tcase_add_test(budget, shared_dir_refuses_outsider_and_root);
	tcase_add_test(budget, shared_dir_sticky_last_out);
	tcase_add_test(budget, squat_in_dev_shm_is_named);
	if (namespaces)
		tcase_add_test(budget, default_is_the_shared_dir);
	tcase_add_test(log, log_symlink_refused);
	tcase_add_test(log, log_foreign_file_refused);
	tcase_add_test(log, log_own_file_written);
	tcase_add_test(log, log_default_is_the_users_own);
	tcase_add_test(log, log_default_in_the_session_dir);
	tcase_add_checked_fixture(budget, tu_die_with_main, NULL);
	tcase_add_checked_fixture(log, tu_die_with_main, NULL);
	tcase_set_timeout(budget, 60);
	tcase_set_timeout(log, 60);
	suite_add_tcase(s, budget);
	suite_add_tcase(s, log);
	return s;
}

int main(void)
{
	static const char *const roles[] = { "tga", "tgb", "tgo", "tgg", NULL };
	const char *no_namespace;
	char why[512];
	int rc;

	main_pid = getpid();
	snprintf(tag, sizeof(tag), "ckt%d", (int)main_pid);
	if (!tu_users_init(roles, why, sizeof(why))) {
		printf("SKIP: check_tenants: %s\n", why);
		return 77;
	}
	atexit(remove_places);
	if (!tu_group_make(&group, "tgg") || !tu_user_make(&mem_a, "tga", &group) ||
	    !tu_user_make(&mem_b, "tgb", &group) || !tu_user_make(&outsider, "tgo", NULL)) {
		printf("SKIP: check_tenants: useradd or groupadd could not make the test's "
		       "users and group\n");
		return 77;
	}
	if (tu_runtime_probe(&mem_a, why, sizeof(why))) {
		printf("SKIP: check_tenants: %s\n", why);
		return 77;
	}
	no_namespace = namespace_probe(why, sizeof(why));
	if (no_namespace)
		printf("SKIP (the default directory case only): %s\n", no_namespace);
	rc = tu_run_suite(tenants_suite(!no_namespace));
	return rc;
}
