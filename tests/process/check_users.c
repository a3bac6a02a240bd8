/* SPDX-License-Identifier: MIT */
/*
 * check_users.c - another local user against a budget segment and a FUSE
 * tree (issue 15).
 *
 * main() creates two throwaway system users, an owner and an attacker
 * (xdmtest-own-<pid>, xdmtest-att-<pid>, tests/lib/users.c), and removes
 * them at the end, from a signal handler if the suite is interrupted, and
 * at the start of a later run if it was killed outright.  Each side runs in a child that
 * has dropped every privilege to its user: run as root, the checks would
 * prove nothing, since root passes every permission check.
 *
 *	segment	  the attacker can neither open, rename over, truncate nor
 *		  unlink the owner's segment; the owner's limit and usage
 *		  stay what they were.
 *	mount	  the attacker can neither list, read, write nor unmount the
 *		  owner's tree; the mount is owner-only (no allow_other,
 *		  default_permissions) over a 0700 directory.
 *	squat	  a name taken first by the attacker (garbage, a segment that
 *		  looks right, an empty file, a FIFO, a directory, symlinks)
 *		  makes the owner's attach fail with an error that says so,
 *		  and the owner never maps or writes the attacker's file.
 *	reclaim	  the attacker's process taking the pid of a dead owner
 *		  process does not keep the dead one's bytes counted.
 *
 * Each refusal has its control: the same call by another process of the
 * owner, or by the attacker on a file of its own, succeeds.
 *
 * The mount cases run in a private mount namespace of the test: where
 * /dev/fuse is closed to other users (mode 0600, as in some containers),
 * the namespace gets a /dev/fuse of its own that the owner can open, so
 * nothing outside the test changes.
 *
 * Exit 77 (skip) when not root or without useradd; the mount cases are
 * left out, with a sentence, where no user mount can be made.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"
#include "tests/lib/user_agent.h"
#include "tests/lib/users.h"

extern char **environ;

#define MIB (1024ull * 1024ull)
#define LIMIT_TEXT "64M"
#define LIMIT_BYTES (64 * MIB)

/* ---- the two users (tests/lib/users.c makes and removes them) ------------- */

static struct tu_user own, att;
/* "cku<pid of main>": budget keys, mount directories, stray files. */
static char prefix[32];

/* Whatever this run made, besides the users: segments, files, dirs
 * (run after the users' removal, tu_users_at_end). */
static void remove_files(void)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	d = opendir("/dev/shm");
	while (d && (e = readdir(d))) {
		/* our segments (xdm-budget-cku<pid>-...) and our stray files */
		if (!strstr(e->d_name, prefix))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if (unlink(path) != 0)
			rmdir(path);	/* a squatted name may be a directory */
	}
	if (d)
		closedir(d);
	d = opendir("/tmp");
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "xdm-", 4) || !strstr(e->d_name, prefix))
			continue;
		snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
		/* Only empty directories and symlinks are made there. */
		if (rmdir(path) != 0 && errno == ENOTDIR)
			unlink(path);
	}
	if (d)
		closedir(d);
}

/* ---- short-lived agents: a function run as a user ------------------------ */

#define MAX_STEPS 48

/* What an agent did: each step's errno (0: it succeeded), and values. */
struct report {
	int n;
	struct {
		char what[64];
		int err;
	} step[MAX_STEPS];
	long long val[8];
	char text[1024];
};

typedef void (*agent_fn)(struct report *rep, const void *arg);

static void step(struct report *rep, const char *what, int err)
{
	if (rep->n < MAX_STEPS) {
		snprintf(rep->step[rep->n].what, sizeof(rep->step[0].what), "%s", what);
		rep->step[rep->n].err = err;
		rep->n++;
	}
}

/* ret < 0: the step failed with errno. */
static void step_ret(struct report *rep, const char *what, long ret)
{
	step(rep, what, ret < 0 ? errno : 0);
}

/* open(path, flags), closed again at once: 0 or the errno. */
static int try_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int try_shm_open(const char *name, int flags)
{
	int fd = shm_open(name, flags, 0600);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* Run fn as u in a child; the report it filled, or a failed test. */
static struct report *run_as(const struct tu_user *u, agent_fn fn, const void *arg)
{
	struct report *rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t parent = getpid(), pid;
	int status;

	ck_assert(rep != MAP_FAILED);
	memset(rep, 0, sizeof(*rep));
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		tu_become(u, parent);
		fn(rep, arg);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the agent of %s ended with status 0x%x (120-122: it could not "
		      "become the user)", u->name, status);
	return rep;
}

static void report_free(struct report *rep)
{
	munmap(rep, sizeof(*rep));
}

/* The step named what ended with want (0: succeeded). */
static void expect_step(const struct report *rep, const char *who, const char *what, int want)
{
	for (int i = 0; i < rep->n; i++) {
		if (strcmp(rep->step[i].what, what) != 0)
			continue;
		ck_assert_msg(rep->step[i].err == want, "%s: %s: %s, where %s was expected", who,
			      what, rep->step[i].err ? strerror(rep->step[i].err) : "it succeeded",
			      want ? strerror(want) : "success");
		return;
	}
	ck_abort_msg("%s: no step '%s' was taken", who, what);
}

/* ---- the long-lived owner: a process that holds a runtime --------------- */

struct owner_args {
	const char *key;
	size_t hold;		/* bytes kept allocated while it lives */
	const char *mount;	/* mount the tree there, or NULL */
};

static void owner_main(FILE *in, FILE *out, const void *arg)
{
	const struct owner_args *a = arg;
	char stack[256], path[128], line[128], *text;
	struct xdm_runtime *rt;
	struct xdm_block held, b;
	enum xdm_status st;
	size_t len;

	snprintf(stack, sizeof(stack), "budget key=%s limit=" LIMIT_TEXT " | host", a->key);
	st = xdm_runtime_create(0, "host", stack, &rt);
	if (st == XDM_OK && a->hold)
		st = xdm_allocate(rt, a->hold, 0, "check_users", &held);
	if (st == XDM_OK && a->mount)
		st = xdm_mount(a->mount);
	if (st != XDM_OK) {
		fprintf(out, "err %d %s\n", (int)st, xdm_last_error_message());
		fflush(out);
		return;
	}
	fprintf(out, "ok\n");
	fflush(out);
	while (fgets(line, sizeof(line), in)) {
		unsigned long long n;

		if (strcmp(line, "limit\n") == 0) {
			/* The owner's own view, through the tree API. */
			snprintf(path, sizeof(path), "%s/budget/limit", xdm_runtime_name(rt));
			if (xdm_tree_show(path, &text, &len) == 0) {
				fputs(text, out);
				free(text);
			} else {
				fputs("?\n", out);
			}
		} else if (sscanf(line, "alloc %llu", &n) == 1) {
			st = xdm_allocate(rt, (size_t)n, 0, "check_users", &b);
			if (st == XDM_OK)
				st = xdm_deallocate(rt, &b);
			if (st == XDM_OK)
				st = xdm_stream_synchronize(rt, 0);
			fprintf(out, "%d\n", (int)st);
		} else {
			break;
		}
		fflush(out);
	}
	/* EOF or "quit": leave as a well-behaved process does. */
	if (a->mount)
		xdm_unmount();
	if (a->hold)
		xdm_deallocate(rt, &held);
	xdm_runtime_destroy(rt);
	fprintf(out, "bye\n");
	fflush(out);
}

/* Start an owner process; fails the test unless it says "ok". */
static void owner_start(struct tu_agent *o, const struct owner_args *a)
{
	char line[1024];

	tu_agent_start(o, &own, owner_main, a);
	ck_assert_msg(fgets(line, sizeof(line), o->from), "the owner process said nothing");
	ck_assert_msg(strcmp(line, "ok\n") == 0, "the owner process could not start: %s", line);
}

/* One command, one line of answer. */
static void owner_ask(struct tu_agent *o, const char *cmd, char *answer, size_t len)
{
	fprintf(o->to, "%s\n", cmd);
	fflush(o->to);
	ck_assert_msg(fgets(answer, (int)len, o->from), "the owner process said nothing to '%s'",
		      cmd);
}

/* The owner's limit as the owner reads it. */
static void expect_owner_limit(struct tu_agent *o, unsigned long long want)
{
	char line[64], buf[64];

	owner_ask(o, "limit", line, sizeof(line));
	snprintf(buf, sizeof(buf), "%llu\n", want);
	ck_assert_msg(strcmp(line, buf) == 0, "the owner reads its limit as %s, not %s", line,
		      buf);
}

/* ---- the segment, watched by root from outside --------------------------- */

static void key_of(const char *test, char *key, size_t len)
{
	snprintf(key, len, "%s-%s", prefix, test);
}

static void shm_name_of(const char *key, char *name, size_t len)
{
	snprintf(name, len, "%s%s", BUDGET_NAME_PREFIX, key);
}

struct seg_view {
	uint64_t limit, used;
	struct stat st;
};

static void seg_view(const char *name, struct seg_view *v)
{
	const struct budget_shm *s;
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);

	ck_assert_msg(fd >= 0, "root: shm_open %s: %s", name, strerror(errno));
	ck_assert_int_eq(fstat(fd, &v->st), 0);
	ck_assert_uint_eq(v->st.st_size, sizeof(*s));
	s = mmap(NULL, sizeof(*s), PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(s != MAP_FAILED);
	close(fd);
	ck_assert(atomic_load(&s->magic) == BUDGET_MAGIC);
	v->limit = atomic_load(&s->limit);
	v->used = atomic_load(&s->used);
	munmap((void *)s, sizeof(*s));
}

/* ---- segment: no access for another user ---------------------------------- */

struct seg_args {
	char name[BUDGET_NAME_MAX + 32];	/* the owner's segment */
	char path[BUDGET_NAME_MAX + 48];	/* its file under /dev/shm */
	char mine[BUDGET_NAME_MAX + 40];	/* a segment of the agent's own */
	char mine_path[BUDGET_NAME_MAX + 48];
};

/* Reading calls: refused to the attacker, allowed to the owner. */
static void seg_reads(struct report *rep, const void *arg)
{
	const struct seg_args *a = arg;
	struct stat st;

	step(rep, "shm_open O_RDONLY", try_shm_open(a->name, O_RDONLY | O_CLOEXEC));
	step(rep, "shm_open O_RDWR", try_shm_open(a->name, O_RDWR | O_CLOEXEC));
	step(rep, "open by path O_RDONLY", try_open(a->path, O_RDONLY));
	step(rep, "open by path O_RDWR", try_open(a->path, O_RDWR));
	/* The name itself is no secret: /dev/shm is world-readable. */
	step_ret(rep, "stat", stat(a->path, &st));
	rep->val[0] = st.st_uid;
	rep->val[1] = st.st_mode & 07777;
}

/* Changing calls, by the attacker only; each with its control on a file
 * of the attacker's own, so that a refusal is the file's, not the call's. */
static void seg_changes(struct report *rep, const void *arg)
{
	const struct seg_args *a = arg;
	int fd;

	step(rep, "open O_WRONLY|O_TRUNC", try_open(a->path, O_WRONLY | O_TRUNC));
	step_ret(rep, "truncate", truncate(a->path, 0));
	step_ret(rep, "chmod 0666", chmod(a->path, 0666));
	step_ret(rep, "chown to self", chown(a->path, getuid(), getgid()));
	step(rep, "shm_open O_CREAT|O_EXCL",
	     try_shm_open(a->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC));
	step(rep, "shm_open O_CREAT|O_TRUNC",
	     try_shm_open(a->name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC));
	step_ret(rep, "shm_unlink", shm_unlink(a->name));

	/* A segment of its own: made, then renamed over the owner's. */
	fd = shm_open(a->mine, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	step_ret(rep, "control: create own", fd);
	if (fd >= 0) {
		step_ret(rep, "control: ftruncate own", ftruncate(fd, 4096));
		close(fd);
	}
	step_ret(rep, "rename own over it", rename(a->mine_path, a->path));
	step_ret(rep, "link own over it", link(a->mine_path, a->path));
	step_ret(rep, "control: truncate own", truncate(a->mine_path, 0));
	step_ret(rep, "control: chmod own", chmod(a->mine_path, 0600));
	step_ret(rep, "control: unlink own", shm_unlink(a->mine));
}

START_TEST(segment_closed_to_another_user)
{
	struct owner_args oa = { .hold = MIB };
	struct seg_view before, after;
	struct seg_args sa;
	struct report *rep;
	struct tu_agent o;
	char key[96], line[64];

	key_of("seg", key, sizeof(key));
	oa.key = key;
	shm_name_of(key, sa.name, sizeof(sa.name));
	snprintf(sa.path, sizeof(sa.path), "/dev/shm%s", sa.name);
	snprintf(sa.mine, sizeof(sa.mine), "%s-att", sa.name);
	snprintf(sa.mine_path, sizeof(sa.mine_path), "/dev/shm%s", sa.mine);

	owner_start(&o, &oa);
	seg_view(sa.name, &before);
	ck_assert_uint_eq(before.st.st_uid, own.uid);
	ck_assert_uint_eq(before.st.st_mode & 07777, 0600);
	ck_assert_uint_eq(before.limit, LIMIT_BYTES);
	ck_assert_uint_ge(before.used, MIB);

	/* The control: another process of the owner opens it both ways. */
	rep = run_as(&own, seg_reads, &sa);
	expect_step(rep, "owner", "shm_open O_RDONLY", 0);
	expect_step(rep, "owner", "shm_open O_RDWR", 0);
	expect_step(rep, "owner", "open by path O_RDONLY", 0);
	expect_step(rep, "owner", "open by path O_RDWR", 0);
	report_free(rep);

	rep = run_as(&att, seg_reads, &sa);
	expect_step(rep, "attacker", "shm_open O_RDONLY", EACCES);
	expect_step(rep, "attacker", "shm_open O_RDWR", EACCES);
	expect_step(rep, "attacker", "open by path O_RDONLY", EACCES);
	expect_step(rep, "attacker", "open by path O_RDWR", EACCES);
	expect_step(rep, "attacker", "stat", 0);
	ck_assert_int_eq(rep->val[0], (long long)own.uid);
	ck_assert_int_eq(rep->val[1], 0600);
	report_free(rep);

	rep = run_as(&att, seg_changes, &sa);
	expect_step(rep, "attacker", "open O_WRONLY|O_TRUNC", EACCES);
	expect_step(rep, "attacker", "truncate", EACCES);
	expect_step(rep, "attacker", "chmod 0666", EPERM);
	expect_step(rep, "attacker", "chown to self", EPERM);
	expect_step(rep, "attacker", "shm_open O_CREAT|O_EXCL", EEXIST);
	expect_step(rep, "attacker", "shm_open O_CREAT|O_TRUNC", EACCES);
	/* /dev/shm is sticky: only a file's owner may remove or replace it. */
	/* (The kernel says EPERM; glibc's shm_unlink makes it EACCES.) */
	expect_step(rep, "attacker", "shm_unlink", EACCES);
	expect_step(rep, "attacker", "control: create own", 0);
	expect_step(rep, "attacker", "control: ftruncate own", 0);
	expect_step(rep, "attacker", "rename own over it", EPERM);
	expect_step(rep, "attacker", "link own over it", EEXIST);
	expect_step(rep, "attacker", "control: truncate own", 0);
	expect_step(rep, "attacker", "control: chmod own", 0);
	expect_step(rep, "attacker", "control: unlink own", 0);
	report_free(rep);

	/* The very same segment, with what it held. */
	seg_view(sa.name, &after);
	ck_assert_uint_eq(after.st.st_ino, before.st.st_ino);
	ck_assert_uint_eq(after.st.st_uid, own.uid);
	ck_assert_uint_eq(after.st.st_mode & 07777, 0600);
	ck_assert_uint_eq(after.limit, before.limit);
	ck_assert_uint_eq(after.used, before.used);
	/* And the owner still works under its own limit. */
	expect_owner_limit(&o, LIMIT_BYTES);
	owner_ask(&o, "alloc 1048576", line, sizeof(line));
	ck_assert_str_eq(line, "0\n");
	owner_ask(&o, "alloc 134217728", line, sizeof(line));
	ck_assert_int_eq(atoi(line), XDM_E_OUT_OF_BUDGET);
	tu_agent_stop(&o);
}
END_TEST

/* ---- squatting: the name taken first by the attacker ----------------------- */

enum squat_kind {
	SQUAT_GARBAGE,		/* 0666, 4096 bytes of noise */
	SQUAT_BAD_MAGIC,	/* 0666, the layout's size, a huge limit, a wrong magic */
	SQUAT_LOOKALIKE,	/* 0666, a segment right in every field, a huge limit */
	SQUAT_EMPTY,		/* 0666, zero bytes: a creator that never sized it */
	SQUAT_PRIVATE,		/* 0600 lookalike: the owner cannot even open it */
	SQUAT_FIFO,		/* 0666 FIFO: an open that could block */
	SQUAT_DIR,		/* a directory of the name */
	SQUAT_SYMLINK,		/* a symlink to a 0666 lookalike of the attacker's */
	SQUAT_DANGLING,		/* a symlink to nothing: a create would follow it */
	SQUAT_KINDS
};

static const char *const squat_names[] = {
	"garbage", "badmagic", "lookalike", "empty", "private", "fifo", "dir", "symlink",
	"dangling",
};

struct squat_args {
	enum squat_kind kind;
	char name[BUDGET_NAME_MAX + 32];
	char path[BUDGET_NAME_MAX + 48];
	char target[BUDGET_NAME_MAX + 48];	/* what a symlink points to */
};

static bool fill_lookalike(int fd, uint64_t magic)
{
	struct budget_shm *s;

	if (ftruncate(fd, sizeof(*s)) != 0)
		return false;
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED)
		return false;
	/* No lock is made: a victim that took it would hang or fault. */
	s->version = BUDGET_LAYOUT_VERSION;
	s->nslots = BUDGET_SLOTS;
	s->size = sizeof(*s);
	atomic_store(&s->limit, UINT64_MAX / 2);
	atomic_store(&s->magic, magic);
	munmap(s, sizeof(*s));
	return true;
}

/* The attacker plants the name; step "plant" says whether it could. */
static void squat_plant(struct report *rep, const void *arg)
{
	const struct squat_args *a = arg;
	unsigned char noise[4096];
	int fd = -1, err = 0;

	switch (a->kind) {
	case SQUAT_GARBAGE:
	case SQUAT_BAD_MAGIC:
	case SQUAT_LOOKALIKE:
	case SQUAT_EMPTY:
	case SQUAT_PRIVATE:
		fd = shm_open(a->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || fchmod(fd, a->kind == SQUAT_PRIVATE ? 0600 : 0666) != 0) {
			err = errno;
			break;
		}
		if (a->kind == SQUAT_GARBAGE) {
			for (size_t i = 0; i < sizeof(noise); i++)
				noise[i] = (unsigned char)(i * 131 + 7);
			if (write(fd, noise, sizeof(noise)) != (ssize_t)sizeof(noise))
				err = EIO;
		} else if (a->kind != SQUAT_EMPTY &&
			   !fill_lookalike(fd, a->kind == SQUAT_BAD_MAGIC ? ~BUDGET_MAGIC
									: BUDGET_MAGIC)) {
			err = errno ? errno : EIO;
		}
		break;
	case SQUAT_FIFO:
		if (mkfifo(a->path, 0600) != 0 || chmod(a->path, 0666) != 0)
			err = errno;
		break;
	case SQUAT_DIR:
		if (mkdir(a->path, 0777) != 0 || chmod(a->path, 0777) != 0)
			err = errno;
		break;
	case SQUAT_SYMLINK:
		fd = open(a->target, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || fchmod(fd, 0666) != 0 || !fill_lookalike(fd, BUDGET_MAGIC) ||
		    symlink(a->target, a->path) != 0)
			err = errno ? errno : EIO;
		break;
	case SQUAT_DANGLING:
		if (symlink(a->target, a->path) != 0)
			err = errno;
		break;
	default:
		err = EINVAL;
	}
	if (fd >= 0)
		close(fd);
	step(rep, "plant", err);
}

/* The attacker takes the name away again (the control's first half). */
static void squat_remove(struct report *rep, const void *arg)
{
	const struct squat_args *a = arg;
	int ret = unlink(a->path);

	if (ret != 0 && errno == EISDIR)
		ret = rmdir(a->path);
	step_ret(rep, "remove", ret);
	if (a->kind == SQUAT_SYMLINK)
		step_ret(rep, "remove target", unlink(a->target));
}

/* The owner builds a runtime over the name: its status, time, message. */
static void squat_attach(struct report *rep, const void *arg)
{
	const struct squat_args *a = arg;
	struct timespec t0, t1;
	struct xdm_runtime *rt = NULL;
	char stack[256];
	enum xdm_status st;

	snprintf(stack, sizeof(stack), "budget key=%s limit=" LIMIT_TEXT " | host",
		 a->name + strlen(BUDGET_NAME_PREFIX));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	st = xdm_runtime_create(0, "host", stack, &rt);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rep->val[0] = st;
	rep->val[1] = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	rep->val[2] = rt != NULL;
	snprintf(rep->text, sizeof(rep->text), "%s", st ? xdm_last_error_message() : "");
	if (st == XDM_OK) {
		/* The limit it would enforce: the attacker's or its own? */
		char path[64], *text = NULL;
		size_t len;

		snprintf(path, sizeof(path), "%s/budget/limit", xdm_runtime_name(rt));
		if (xdm_tree_show(path, &text, &len) == 0)
			rep->val[3] = strtoll(text, NULL, 10);
		free(text);
		xdm_runtime_destroy(rt);
	}
}

/* Everything about a path that the owner might have changed. */
struct squat_seen {
	int err;		/* of the lstat */
	struct stat st;
	unsigned long long sum;	/* of the bytes of a regular file */
};

static void squat_look(const char *path, struct squat_seen *s)
{
	unsigned char buf[4096];
	ssize_t n;
	int fd;

	memset(s, 0, sizeof(*s));
	s->err = lstat(path, &s->st) == 0 ? 0 : errno;
	if (s->err || !S_ISREG(s->st.st_mode))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ck_assert_int_ge(fd, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			s->sum = s->sum * 31 + buf[i];
	close(fd);
}

static void expect_same(const char *path, const struct squat_seen *a, const struct squat_seen *b)
{
	ck_assert_msg(a->err == b->err, "%s: %s before, %s after", path, strerror(a->err),
		      strerror(b->err));
	if (a->err)
		return;
	ck_assert_msg(a->st.st_ino == b->st.st_ino && a->st.st_mode == b->st.st_mode &&
		      a->st.st_uid == b->st.st_uid && a->st.st_size == b->st.st_size &&
		      a->sum == b->sum,
		      "%s was changed by the owner's attach", path);
}

static void squat_one(enum squat_kind kind)
{
	struct squat_seen name_before, name_after, target_before, target_after;
	struct squat_args sa = { .kind = kind };
	char key[96], want[64];
	struct report *rep;
	long long st;

	key_of(squat_names[kind], key, sizeof(key));
	shm_name_of(key, sa.name, sizeof(sa.name));
	snprintf(sa.path, sizeof(sa.path), "/dev/shm%s", sa.name);
	snprintf(sa.target, sizeof(sa.target), "/dev/shm/%s-target-%s", prefix,
		 squat_names[kind]);

	rep = run_as(&att, squat_plant, &sa);
	expect_step(rep, "attacker", "plant", 0);
	report_free(rep);
	squat_look(sa.path, &name_before);
	squat_look(sa.target, &target_before);
	ck_assert_int_eq(name_before.err, 0);
	ck_assert_uint_eq(name_before.st.st_uid, att.uid);

	alarm(30);	/* a FIFO that blocked the open would hang here */
	rep = run_as(&own, squat_attach, &sa);
	alarm(0);
	st = rep->val[0];
	ck_assert_msg(st != XDM_OK, "%s: the owner attached to the attacker's name (limit %lld)",
		      squat_names[kind], rep->val[3]);
	ck_assert_msg(!rep->val[2], "%s: a runtime was returned with an error",
		      squat_names[kind]);
	ck_assert_msg(strstr(rep->text, sa.name), "%s: the error does not name %s: %s",
		      squat_names[kind], sa.name, rep->text);
	printf("check_users: squat %s: after %lld ms the owner was told: %s\n", squat_names[kind],
	       rep->val[1], rep->text);
	snprintf(want, sizeof(want), "uid %u", (unsigned)att.uid);
	switch (kind) {
	case SQUAT_GARBAGE:
	case SQUAT_BAD_MAGIC:
	case SQUAT_LOOKALIKE:
	case SQUAT_EMPTY:
	case SQUAT_FIFO:
		/* Opened, then refused for its owner before any map. */
		ck_assert_msg(st == XDM_E_CONFIG, "%s: %s, not XDM_E_CONFIG: %s",
			      squat_names[kind], xdm_strerror((enum xdm_status)st), rep->text);
		ck_assert_msg(strstr(rep->text, want), "%s: the error does not name %s: %s",
			      squat_names[kind], want, rep->text);
		/* (The owner's uid check comes before any wait for a
		 * creator's magic: the sentence above proves which refused.) */
		break;
	case SQUAT_PRIVATE:
	case SQUAT_DIR:
	case SQUAT_SYMLINK:
	case SQUAT_DANGLING:
		/*
		 * The owner cannot open it at all (EACCES; a directory, EINVAL;
		 * a link, ELOOP: shm_open never follows one): the budget then
		 * looks at the name and names its owner.
		 */
		ck_assert_msg(st == XDM_E_CONFIG && strstr(rep->text, want), "%s: %s: %s",
			      squat_names[kind], xdm_strerror((enum xdm_status)st), rep->text);
		break;
	default:
		ck_abort();
	}
	report_free(rep);

	/* The owner wrote nothing: not the name, not what a link names. */
	squat_look(sa.path, &name_after);
	squat_look(sa.target, &target_after);
	expect_same(sa.path, &name_before, &name_after);
	expect_same(sa.target, &target_before, &target_after);
	if (kind == SQUAT_DANGLING)
		ck_assert_msg(target_after.err == ENOENT, "the dangling link was followed: %s "
			      "exists", sa.target);

	/* The control: once the attacker takes it away, the same key works
	 * for the owner, with the owner's own limit. */
	rep = run_as(&att, squat_remove, &sa);
	expect_step(rep, "attacker", "remove", 0);
	report_free(rep);
	rep = run_as(&own, squat_attach, &sa);
	ck_assert_msg(rep->val[0] == XDM_OK, "%s: after the squat, the owner's attach: %s",
		      squat_names[kind], rep->text);
	ck_assert_int_eq(rep->val[3], (long long)LIMIT_BYTES);
	report_free(rep);
	/* ... and it left nothing: the last one out unlinks the segment. */
	ck_assert_int_eq(access(sa.path, F_OK), -1);
}

START_TEST(squatted_name)
{
	squat_one((enum squat_kind)_i);
}
END_TEST

/* ---- the mount: owner only ---------------------------------------------- */

/*
 * A mount namespace of the test's own, so that nothing it mounts is seen
 * outside; and, where /dev/fuse is closed to other users, a node of the
 * same device there that they may open (the owner needs it to mount).
 * NULL, or why the mount cases cannot run.
 */
static const char *private_fuse(char *why, size_t len)
{
	char dir[PATH_MAX], node[PATH_MAX + 8];
	struct stat st;

	if (stat("/dev/fuse", &st) != 0) {
		snprintf(why, len, "/dev/fuse: %s", strerror(errno));
		return why;
	}
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, len, "no private mount namespace: %s", strerror(errno));
		return why;
	}
	if ((st.st_mode & 0006) == 0006)
		return NULL;
	snprintf(dir, sizeof(dir), "/tmp/xdm-%s-dev-XXXXXX", prefix);
	if (!mkdtemp(dir)) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		return why;
	}
	snprintf(node, sizeof(node), "%s/fuse", dir);
	if (mount("xdm-test", dir, "tmpfs", MS_NOSUID, "mode=0755") != 0 ||
	    mknod(node, S_IFCHR | 0600, st.st_rdev) != 0 || chmod(node, 0666) != 0 ||
	    mount(node, "/dev/fuse", NULL, MS_BIND, NULL) != 0) {
		snprintf(why, len, "/dev/fuse is mode %03o and no private node of it could be "
			 "made: %s", (unsigned)(st.st_mode & 0777), strerror(errno));
		umount2(dir, MNT_DETACH);
		rmdir(dir);
		return why;
	}
	/* The bind keeps the node; the tmpfs and its directory may go. */
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	return NULL;
}

struct mount_info {
	int id;
	char type[64];
	char opts[512];		/* the superblock's options */
};

/* The topmost mount at dir (from /proc, never entering dir). */
static bool mount_info_at(const char *dir, struct mount_info *mi)
{
	char line[8192], point[PATH_MAX], type[64], src[256], opts[512];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;
	int id;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		/* id parent major:minor root POINT options... - TYPE SOURCE SUPER */
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%d %*s %*s %*s %4095s", &id, point) != 2 ||
		    sscanf(dash + 3, "%63s %255s %511s", type, src, opts) != 3)
			continue;
		tu_mountinfo_unescape(point);
		if (strcmp(point, dir) != 0)
			continue;
		mi->id = id;
		snprintf(mi->type, sizeof(mi->type), "%s", type);
		snprintf(mi->opts, sizeof(mi->opts), "%s", opts);
		found = true;
	}
	fclose(f);
	return found;
}

static bool has_opt(const char *opts, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = opts; p; p = strchr(p, ',')) {
		p += *p == ',';
		if (strncmp(p, opt, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	}
	return false;
}

struct mnt_args {
	char dir[128];			/* the owner's mount point */
	char limit[160];		/* <dir>/0/budget/limit */
	char version[160];		/* <dir>/version */
	char other[128];		/* where the attacker may mount its own */
	const char *store;		/* the owner's control writes this limit */
};

static int echo_to(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	size_t len = strlen(value);
	ssize_t n;
	int err = 0;

	if (fd < 0)
		return errno;
	n = write(fd, value, len);
	if (n < 0)
		err = errno;
	else if ((size_t)n != len)
		err = EIO;
	if (close(fd) != 0 && !err)
		err = errno;
	return err;
}

static int read_to(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return errno;
	buf[n] = '\0';
	return 0;
}

/* What a process may do in the mount: list, read, write, stat. */
static void mnt_use(struct report *rep, const void *arg)
{
	const struct mnt_args *a = arg;
	struct dirent *e;
	struct stat st;
	DIR *d;

	step_ret(rep, "stat", stat(a->dir, &st));
	rep->val[0] = st.st_uid;
	rep->val[1] = st.st_mode & 07777;
	d = opendir(a->dir);
	step(rep, "opendir", d ? 0 : errno);
	while (d && (e = readdir(d)))
		rep->val[2]++;
	if (d)
		closedir(d);
	step(rep, "read version", read_to(a->version, rep->text, sizeof(rep->text)));
	step(rep, "read limit", read_to(a->limit, rep->text, sizeof(rep->text)));
	step(rep, "open limit O_WRONLY", try_open(a->limit, O_WRONLY));
	if (a->store)
		step(rep, "write limit", echo_to(a->limit, a->store));
}

/* What the attacker tries besides: truncate, unmount, mount over it. */
static void mnt_attack(struct report *rep, const void *arg)
{
	const struct mnt_args *a = arg;
	char *argv[] = { "fusermount3", "-u", "-z", (char *)a->dir, NULL };
	posix_spawn_file_actions_t fa;
	int status = 0;
	pid_t pid;

	step(rep, "write limit", echo_to(a->limit, "1\n"));
	step_ret(rep, "truncate limit", truncate(a->limit, 0));
	step_ret(rep, "umount2", umount2(a->dir, 0));
	step_ret(rep, "umount2 MNT_DETACH", umount2(a->dir, MNT_DETACH));
	/* The setuid helper that unmounts a user's own FUSE mounts. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawnp(&pid, "fusermount3", &fa, NULL, argv, environ) == 0 &&
	    waitpid(pid, &status, 0) == pid)
		rep->val[0] = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
	else
		rep->val[0] = -1;
	posix_spawn_file_actions_destroy(&fa);
	/* xdm's own mount over the owner's: it must not take the stale-mount
	 * path (detach) for a live tree it cannot even stat. */
	rep->val[1] = xdm_mount(a->dir);
	snprintf(rep->text, sizeof(rep->text), "%s", xdm_last_error_message());
	if (rep->val[1] == XDM_OK)
		xdm_unmount();
	/* The control: a tree of its own mounts fine. */
	rep->val[2] = xdm_mount(a->other);
	if (rep->val[2] == XDM_OK)
		rep->val[3] = xdm_unmount();
	else
		snprintf(rep->text, sizeof(rep->text), "%s", xdm_last_error_message());
}

START_TEST(mount_closed_to_another_user)
{
	struct owner_args oa = { .hold = MIB };
	struct mount_info mi, mi2;
	char key[96], why[512], name[BUDGET_NAME_MAX + 32];
	char peek[128], under[288], want[64];
	struct seg_view v;
	struct mnt_args ma = { .store = NULL };
	struct report *rep;
	struct tu_agent o;
	struct stat st;

	ck_assert_msg(!private_fuse(why, sizeof(why)), "%s", why);
	key_of("mnt", key, sizeof(key));
	shm_name_of(key, name, sizeof(name));
	oa.key = key;
	snprintf(ma.dir, sizeof(ma.dir), "/tmp/xdm-%s-mnt", prefix);
	snprintf(ma.other, sizeof(ma.other), "/tmp/xdm-%s-other", prefix);
	snprintf(ma.limit, sizeof(ma.limit), "%s/0/budget/limit", ma.dir);
	snprintf(ma.version, sizeof(ma.version), "%s/version", ma.dir);
	oa.mount = ma.dir;
	ck_assert_int_eq(access(ma.dir, F_OK), -1);

	/* The owner's xdm_mount makes the directory and mounts there. */
	owner_start(&o, &oa);
	ck_assert_msg(mount_info_at(ma.dir, &mi), "nothing is mounted at %s", ma.dir);
	ck_assert_str_eq(mi.type, "fuse.xdm");
	snprintf(want, sizeof(want), "user_id=%u", (unsigned)own.uid);
	ck_assert_msg(has_opt(mi.opts, want), "the mount's options %s lack %s", mi.opts, want);
	ck_assert_msg(has_opt(mi.opts, "default_permissions"), "options %s", mi.opts);
	ck_assert_msg(!has_opt(mi.opts, "allow_other") && !has_opt(mi.opts, "allow_root"),
		      "the mount is open to others: %s", mi.opts);
	/* Under the mount: the directory as made, seen through a bind of
	 * /tmp that leaves the mounts on it behind. */
	snprintf(peek, sizeof(peek), "/tmp/xdm-%s-peek-XXXXXX", prefix);
	ck_assert(mkdtemp(peek));
	ck_assert_int_eq(mount("/tmp", peek, NULL, MS_BIND, NULL), 0);
	ck_assert_int_lt(snprintf(under, sizeof(under), "%s/%s", peek, ma.dir + strlen("/tmp/")),
			 (int)sizeof(under));
	ck_assert_msg(lstat(under, &st) == 0, "%s: %s", under, strerror(errno));
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_uid, own.uid);
	ck_assert_msg((st.st_mode & 07777) == 0700, "the mount point was made %03o",
		      (unsigned)(st.st_mode & 07777));
	ck_assert_int_eq(umount2(peek, MNT_DETACH), 0);
	ck_assert_int_eq(rmdir(peek), 0);
	/* Without allow_other not even root's processes are let in. */
	ck_assert_int_eq(stat(ma.dir, &st), -1);
	ck_assert_int_eq(errno, EACCES);

	/* The control: another process of the owner lists, reads, writes. */
	ma.store = "33554432\n";
	rep = run_as(&own, mnt_use, &ma);
	expect_step(rep, "owner", "stat", 0);
	ck_assert_int_eq(rep->val[0], (long long)own.uid);
	ck_assert_int_eq(rep->val[1], 0555);
	expect_step(rep, "owner", "opendir", 0);
	ck_assert_int_ge(rep->val[2], 3);
	expect_step(rep, "owner", "read version", 0);
	expect_step(rep, "owner", "read limit", 0);
	ck_assert_str_eq(rep->text, "67108864\n");
	expect_step(rep, "owner", "open limit O_WRONLY", 0);
	expect_step(rep, "owner", "write limit", 0);
	report_free(rep);
	seg_view(name, &v);
	ck_assert_uint_eq(v.limit, 32 * MIB);

	ma.store = NULL;
	rep = run_as(&att, mnt_use, &ma);
	expect_step(rep, "attacker", "stat", EACCES);
	expect_step(rep, "attacker", "opendir", EACCES);
	expect_step(rep, "attacker", "read version", EACCES);
	expect_step(rep, "attacker", "read limit", EACCES);
	expect_step(rep, "attacker", "open limit O_WRONLY", EACCES);
	report_free(rep);

	rep = run_as(&att, mnt_attack, &ma);
	expect_step(rep, "attacker", "write limit", EACCES);
	expect_step(rep, "attacker", "truncate limit", EACCES);
	expect_step(rep, "attacker", "umount2", EPERM);
	expect_step(rep, "attacker", "umount2 MNT_DETACH", EPERM);
	ck_assert_msg(rep->val[0] != 0, "fusermount3 -u unmounted another user's tree");
	ck_assert_msg(rep->val[1] != XDM_OK, "the attacker's xdm_mount took the owner's mount "
		      "point");
	ck_assert_msg(rep->val[2] == XDM_OK && rep->val[3] == XDM_OK,
		      "control: the attacker's mount of its own: %s", rep->text);
	report_free(rep);

	/* The same mount, still serving its owner, with the owner's limit. */
	ck_assert(mount_info_at(ma.dir, &mi2));
	ck_assert_int_eq(mi2.id, mi.id);
	seg_view(name, &v);
	ck_assert_uint_eq(v.limit, 32 * MIB);
	expect_owner_limit(&o, 32 * MIB);
	rep = run_as(&own, mnt_use, &ma);
	expect_step(rep, "owner", "read limit", 0);
	ck_assert_str_eq(rep->text, "33554432\n");
	report_free(rep);

	/* It made the directory, so its unmount takes it away. */
	tu_agent_stop(&o);
	ck_assert(!mount_info_at(ma.dir, &mi2));
	ck_assert_int_eq(access(ma.dir, F_OK), -1);
	ck_assert_int_eq(access(ma.other, F_OK), -1);
}
END_TEST

/* ---- the mount point taken first by the attacker ------------------------ */

struct point_args {
	char dir[128];		/* the attacker's directory, mode 0777 */
	char link[128];		/* the attacker's symlink to ... */
	char target[128];	/* ... a directory of the owner's */
	char mine[128];		/* the control: the owner's own directory */
};

static void point_plant(struct report *rep, const void *arg)
{
	const struct point_args *a = arg;

	step_ret(rep, "mkdir", mkdir(a->dir, 0777));
	step_ret(rep, "chmod", chmod(a->dir, 0777));
	step_ret(rep, "symlink", symlink(a->target, a->link));
}

/* xdm_mount at each: val[i] its status, text the messages. */
static void point_mount(struct report *rep, const void *arg)
{
	const struct point_args *a = arg;
	const char *dirs[] = { a->dir, a->link, a->mine };
	struct xdm_runtime *rt;
	size_t used = 0;

	if (xdm_runtime_create(0, "host", "host", &rt) != XDM_OK) {
		snprintf(rep->text, sizeof(rep->text), "%s", xdm_last_error_message());
		rep->val[7] = 1;
		return;
	}
	for (int i = 0; i < 3; i++) {
		if (!dirs[i][0])
			continue;
		rep->val[i] = xdm_mount(dirs[i]);
		if (rep->val[i] == XDM_OK)
			xdm_unmount();
		else
			used += (size_t)snprintf(rep->text + used, sizeof(rep->text) - used,
						 "%s\n", xdm_last_error_message());
		if (used >= sizeof(rep->text))
			used = sizeof(rep->text) - 1;
	}
	xdm_runtime_destroy(rt);
}

/* Nothing is mounted at any of these. */
static void expect_unmounted(const struct point_args *a)
{
	struct mount_info mi;

	ck_assert_msg(!mount_info_at(a->dir, &mi), "a tree is left at %s", a->dir);
	ck_assert_msg(!mount_info_at(a->link, &mi), "a tree is left at %s", a->link);
	ck_assert_msg(!mount_info_at(a->target, &mi), "a tree is left at %s", a->target);
}

/*
 * A tree configured at a guessable place (mount = /tmp/xdm-%p) is not put
 * on a directory another user made there, nor where another user's symlink
 * points: as root, that link could lay the tree over /etc.
 */
START_TEST(mount_point_squatted)
{
	struct point_args pa = { .mine = "" };
	char why[512], want[64];
	struct report *rep;
	struct stat st;

	ck_assert_msg(!private_fuse(why, sizeof(why)), "%s", why);
	snprintf(pa.dir, sizeof(pa.dir), "/tmp/xdm-%s-sqdir", prefix);
	snprintf(pa.link, sizeof(pa.link), "/tmp/xdm-%s-sqlink", prefix);
	snprintf(pa.target, sizeof(pa.target), "/tmp/xdm-%s-sqtarget", prefix);
	snprintf(pa.mine, sizeof(pa.mine), "/tmp/xdm-%s-sqmine", prefix);
	snprintf(want, sizeof(want), "uid %u", (unsigned)att.uid);

	/* The owner's directory, and the control's. */
	ck_assert_int_eq(mkdir(pa.target, 0700), 0);
	ck_assert_int_eq(chown(pa.target, own.uid, own.gid), 0);
	ck_assert_int_eq(mkdir(pa.mine, 0700), 0);
	ck_assert_int_eq(chown(pa.mine, own.uid, own.gid), 0);
	rep = run_as(&att, point_plant, &pa);
	expect_step(rep, "attacker", "mkdir", 0);
	expect_step(rep, "attacker", "chmod", 0);
	expect_step(rep, "attacker", "symlink", 0);
	report_free(rep);

	rep = run_as(&own, point_mount, &pa);
	ck_assert_msg(!rep->val[7], "the owner's runtime: %s", rep->text);
	ck_assert_msg(rep->val[0] != XDM_OK, "the owner's tree went on the attacker's %s",
		      pa.dir);
	ck_assert_msg(rep->val[1] != XDM_OK, "the owner's tree went where the attacker's %s "
		      "points", pa.link);
	ck_assert_msg(rep->val[2] == XDM_OK, "control: the owner's own directory: %s",
		      rep->text);
	ck_assert_msg(strstr(rep->text, pa.dir) && strstr(rep->text, pa.link) &&
		      strstr(rep->text, want), "the errors do not say whose: %s", rep->text);
	report_free(rep);
	expect_unmounted(&pa);

	/* Root's process, with the attacker's link to a directory of root's. */
	ck_assert_int_eq(chown(pa.target, 0, 0), 0);
	pa.mine[0] = '\0';
	{
		struct report *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		int status;
		pid_t pid;

		ck_assert(r != MAP_FAILED);
		memset(r, 0, sizeof(*r));
		fflush(NULL);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			point_mount(r, &pa);
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_msg(!r->val[7], "root's runtime: %s", r->text);
		ck_assert_msg(r->val[0] != XDM_OK, "root's tree went on the attacker's %s",
			      pa.dir);
		ck_assert_msg(r->val[1] != XDM_OK, "root's tree went where the attacker's %s "
			      "points", pa.link);
		report_free(r);
	}
	expect_unmounted(&pa);
	/* Nothing of theirs was removed either. */
	ck_assert_int_eq(lstat(pa.dir, &st), 0);
	ck_assert_int_eq(lstat(pa.link, &st), 0);
	ck_assert_int_eq(rmdir(pa.dir), 0);
	ck_assert_int_eq(unlink(pa.link), 0);
	ck_assert_int_eq(rmdir(pa.target), 0);
	snprintf(pa.mine, sizeof(pa.mine), "/tmp/xdm-%s-sqmine", prefix);
	ck_assert_int_eq(rmdir(pa.mine), 0);
}
END_TEST

/* ---- reclaim: a dead owner's pid in the attacker's hands -------------------- */

static int set_last_pid(pid_t pid)
{
	FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "we");
	int ok;

	if (!f)
		return errno;
	ok = fprintf(f, "%d", (int)pid) > 0;
	if (fclose(f) != 0 || !ok)
		return errno ? errno : EIO;
	return 0;
}

/*
 * A process of the attacker with pid `pid`, if the kernel lets us choose
 * (ns_last_pid), sleeping until killed; 0 where it could not be had.
 */
static pid_t attacker_with_pid(pid_t pid, char *why, size_t len)
{
	pid_t parent = getpid();

	for (int tries = 0; tries < 200; tries++) {
		int ready[2], err;
		pid_t child;
		char c;

		err = set_last_pid(pid - 1);
		if (err) {
			snprintf(why, len, "ns_last_pid: %s", strerror(err));
			return 0;
		}
		ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
		child = fork();
		ck_assert_int_ge(child, 0);
		if (child == 0) {
			close(ready[0]);
			if (getpid() != pid)
				_exit(0);
			tu_become(&att, parent);
			if (write(ready[1], "r", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		close(ready[1]);
		if (child == pid) {
			ck_assert_int_eq(read(ready[0], &c, 1), 1);
			close(ready[0]);
			return child;
		}
		close(ready[0]);
		waitpid(child, NULL, 0);	/* someone else took the pid first */
	}
	snprintf(why, len, "pid %d was taken by other processes 200 times", (int)pid);
	return 0;
}

START_TEST(reclaim_despite_pid_reuse)
{
	struct owner_args stay = { .hold = MIB }, dies = { .hold = 8 * MIB };
	struct seg_view v1, v2, v3;
	struct squat_args sa = { .kind = SQUAT_KINDS };
	char key[96], name[BUDGET_NAME_MAX + 32], why[256], proc[BUDGET_NAME_MAX + 48];
	struct tu_agent c, a;
	struct report *rep;
	struct stat st;
	pid_t dead, squatter;
	int status;

	key_of("reclaim", key, sizeof(key));
	shm_name_of(key, name, sizeof(name));
	snprintf(sa.name, sizeof(sa.name), "%s", name);
	stay.key = dies.key = key;

	owner_start(&c, &stay);
	seg_view(name, &v1);
	owner_start(&a, &dies);
	seg_view(name, &v2);
	ck_assert_uint_ge(v2.used, v1.used + 8 * MIB);

	/*
	 * The owner's process dies holding 8M; the attacker gets its pid.
	 * A process is known by its pid and its start time in clock ticks
	 * (10 ms): a pid reused within the same tick would pass for the
	 * dead process, so the dead one lives a few ticks first, as any
	 * real process does (see DESIGN-NOTES on the same-tick case).
	 */
	tu_sleep_ms(50);
	dead = a.pid;
	ck_assert_int_eq(kill(dead, SIGKILL), 0);
	ck_assert_int_eq(waitpid(dead, &status, 0), dead);
	fclose(a.to);
	fclose(a.from);
	squatter = attacker_with_pid(dead, why, sizeof(why));
	if (squatter) {
		snprintf(proc, sizeof(proc), "/proc/%d", (int)squatter);
		ck_assert_int_eq(stat(proc, &st), 0);
		ck_assert_uint_eq(st.st_uid, att.uid);
	} else {
		printf("check_users: reclaim without the pid taken over (%s)\n", why);
	}

	/*
	 * A new process of the owner attaches, and its reclaim must count
	 * the dead one's 8M out: the pid is alive, but kill(pid, 0) says
	 * EPERM and the start time is another process's.
	 */
	rep = run_as(&own, squat_attach, &sa);
	ck_assert_msg(rep->val[0] == XDM_OK, "the owner's attach: %s", rep->text);
	report_free(rep);
	seg_view(name, &v3);
	ck_assert_msg(v3.used == v1.used, "used is %" PRIu64 " with %d %s, not the %" PRIu64
		      " of the live owner", v3.used, (int)dead,
		      squatter ? "in the attacker's hands" : "gone", v1.used);
	if (squatter) {
		kill(squatter, SIGKILL);
		waitpid(squatter, NULL, 0);
	}
	tu_agent_stop(&c);
	snprintf(proc, sizeof(proc), "/dev/shm%s", name);
	ck_assert_int_eq(access(proc, F_OK), -1);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

/*
 * The mount probe's child: a private namespace, then a grandchild of the
 * owner's that mounts.
 */
static int mount_as_owner(pid_t parent, const void *arg, char *msg, size_t len)
{
	pid_t self = getpid(), owner;
	char dir[PATH_MAX];
	int status;

	(void)parent;
	(void)arg;
	if (private_fuse(msg, len))
		return 77;
	snprintf(dir, sizeof(dir), "/tmp/xdm-%s-probe", prefix);
	owner = fork();
	if (owner == 0) {
		struct xdm_runtime *rt;
		enum xdm_status st;

		tu_become(&own, self);
		st = xdm_runtime_create(0, "host", "host", &rt);
		if (st == XDM_OK)
			st = xdm_mount(dir);
		if (st != XDM_OK)
			snprintf(msg, len, "the owner cannot mount a tree: %s",
				 xdm_last_error_message());
		if (st == XDM_OK)
			xdm_unmount();
		_exit(st == XDM_OK ? 0 : 77);
	}
	while (owner > 0 && waitpid(owner, &status, 0) < 0)
		if (errno != EINTR)
			return 99;
	return owner > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

/* Can the owner mount a tree here?  NULL, or why not. */
static const char *mount_probe(char *why, size_t len)
{
	char tool[PATH_MAX];

	if (!tu_find_tool("fusermount3", tool, sizeof(tool))) {
		snprintf(why, len, "no fusermount3, which a user's FUSE mount needs");
		return why;
	}
	return tu_probe(mount_as_owner, NULL, "the mount probe failed", why, len);
}

static Suite *users_suite(bool mounts)
{
	Suite *s = suite_create("users");
	TCase *tc = tcase_create("another user");

	tcase_add_test(tc, segment_closed_to_another_user);
	tcase_add_loop_test(tc, squatted_name, 0, SQUAT_KINDS);
	tcase_add_test(tc, reclaim_despite_pid_reuse);
	if (mounts) {
		tcase_add_test(tc, mount_closed_to_another_user);
		tcase_add_test(tc, mount_point_squatted);
	}
	tcase_add_checked_fixture(tc, tu_die_with_main, NULL);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	static const char *const roles[] = { "own", "att", NULL };
	const char *no_mount;
	char why[512];

	snprintf(prefix, sizeof(prefix), "cku%d", (int)getpid());
	if (!tu_users_init(roles, why, sizeof(why))) {
		printf("SKIP: check_users: %s\n", why);
		return 77;
	}
	tu_users_at_end(remove_files);
	if (!tu_user_make(&own, "own", NULL) || !tu_user_make(&att, "att", NULL)) {
		printf("SKIP: useradd could not make the users %s and %s\n", own.name, att.name);
		return 77;
	}
	if (tu_runtime_probe(&own, why, sizeof(why))) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	no_mount = mount_probe(why, sizeof(why));
	if (no_mount)
		printf("SKIP (the mount case only): %s\n", no_mount);
	return tu_run_suite(users_suite(!no_mount));
}
