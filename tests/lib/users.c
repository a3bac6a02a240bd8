/* SPDX-License-Identifier: MIT */
/*
 * users.c - throwaway local users and groups (users.h says how they live).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "tests/lib/testutil.h"
#include "tests/lib/users.h"

extern char **environ;

#define MAX_MADE 16

/* What this run made, for its removal; the suite's process only. */
static struct {
	pid_t main_pid;
	char useradd[PATH_MAX], userdel[PATH_MAX], groupadd[PATH_MAX], groupdel[PATH_MAX];
	char users[MAX_MADE][32], groups[MAX_MADE][32];
	int nusers, ngroups;
	void (*at_end)(void);
} run;

bool tu_find_tool(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin", path ? path : "");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", d, name);
		if (access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/* Run a tool of shadow-utils (no shell); its exit status or -1. */
static int run_tool(char *const argv[], bool quiet)
{
	posix_spawn_file_actions_t fa;
	int status, err;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	if (quiet) {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	}
	err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (err)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * userdel or groupdel, retried: another admin tool may hold the passwd
 * lock a while.  0 removed, 6 no such account; anything else is worth
 * another try.
 */
static void remove_account(char *tool, const char *name)
{
	char *argv[] = { tool, (char *)name, NULL };

	for (int i = 0; i < 20; i++) {
		int rc = run_tool(argv, true);

		if (rc == 0 || rc == 6)
			return;
		tu_sleep_ms(100);
	}
	fprintf(stderr, "tests: could not remove %s; remove it by hand (%s %s)\n", name, tool,
		name);
}

void tu_users_remove(void)
{
	if (getpid() != run.main_pid)
		return;		/* a child's exit is not the end of the run */
	while (run.nusers > 0)
		remove_account(run.userdel, run.users[--run.nusers]);
	while (run.ngroups > 0)
		remove_account(run.groupdel, run.groups[--run.ngroups]);
	if (run.at_end)
		run.at_end();
}

void tu_users_at_end(void (*fn)(void))
{
	run.at_end = fn;
}

static void on_signal(int sig)
{
	/* Not async-signal-safe in the letter (stdio in remove_account), but
	 * the process ends here either way, and the users must not outlive it. */
	tu_users_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Whether name is xdmtest-<one of roles>-<pid of a run that is gone>. */
static bool stale(const char *name, const char *const *roles)
{
	size_t pre = strlen(TU_USER_PREFIX);
	const char *p;
	char *end;
	long pid;

	if (strncmp(name, TU_USER_PREFIX, pre))
		return false;
	for (; *roles; roles++) {
		size_t n = strlen(*roles);

		p = name + pre;
		if (strncmp(p, *roles, n) || p[n] != '-')
			continue;
		pid = strtol(p + n + 1, &end, 10);
		return *end || pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
	}
	return false;
}

/* The n accounts of names (what: user or group), removed with tool. */
static void remove_leftovers(char (*names)[32], int n, const char *what, char *tool)
{
	for (int i = 0; i < n; i++) {
		fprintf(stderr, "tests: removing the %s %s, left by a run that was killed\n", what,
			names[i]);
		remove_account(tool, names[i]);
	}
}

/* The entries are read first, whole: userdel rewrites the files read. */
static void remove_stale(const char *const *roles)
{
	char names[64][32];
	struct passwd *pw;
	struct group *gr;
	int n = 0;

	setpwent();
	while ((pw = getpwent()) && n < 64)
		if (stale(pw->pw_name, roles))
			snprintf(names[n++], sizeof(names[0]), "%s", pw->pw_name);
	endpwent();
	remove_leftovers(names, n, "user", run.userdel);
	n = 0;
	setgrent();
	while ((gr = getgrent()) && n < 64)
		if (stale(gr->gr_name, roles))
			snprintf(names[n++], sizeof(names[0]), "%s", gr->gr_name);
	endgrent();
	remove_leftovers(names, n, "group", run.groupdel);
}

bool tu_users_init(const char *const *roles, char *why, size_t len)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM };

	run.main_pid = getpid();
	if (geteuid() != 0) {
		snprintf(why, len, "it makes local users and runs as each of them, which takes "
			 "root (this is uid %u)", (unsigned)geteuid());
		return false;
	}
	if (!tu_find_tool("useradd", run.useradd, sizeof(run.useradd)) ||
	    !tu_find_tool("userdel", run.userdel, sizeof(run.userdel)) ||
	    !tu_find_tool("groupadd", run.groupadd, sizeof(run.groupadd)) ||
	    !tu_find_tool("groupdel", run.groupdel, sizeof(run.groupdel))) {
		snprintf(why, len, "it makes local users and groups with useradd, userdel, "
			 "groupadd and groupdel, which this machine lacks");
		return false;
	}
	remove_stale(roles);
	atexit(tu_users_remove);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on_signal);
	return true;
}

/*
 * Run a tool that makes an account, with signals held: a tool left
 * running by a handler would finish after it, and leave its account
 * behind.  The name is recorded before, so that it is removed whatever
 * the tool did.  9: the name is taken, by a leftover of a run with our pid.
 */
static bool make_account(char *const argv[], char *tool_del, char (*made)[32], int *nmade,
			 const char *name)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM };
	sigset_t block, old;
	int rc = -1;

	if (*nmade >= MAX_MADE)
		return false;
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&block, sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	snprintf(made[(*nmade)++], 32, "%s", name);
	for (int i = 0; i < 20 && rc != 0; i++) {
		rc = run_tool(argv, false);
		if (rc == 9) {
			remove_account(tool_del, name);
			rc = -1;
		}
		if (rc != 0)
			tu_sleep_ms(100);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc == 0;
}

bool tu_group_make(struct tu_group *g, const char *role)
{
	char *argv[] = { run.groupadd, "-r", g->name, NULL };
	struct group *gr;

	snprintf(g->name, sizeof(g->name), TU_USER_PREFIX "%s-%d", role, (int)run.main_pid);
	if (!make_account(argv, run.groupdel, run.groups, &run.ngroups, g->name))
		return false;
	gr = getgrnam(g->name);
	if (!gr)
		return false;
	g->gid = gr->gr_gid;
	return g->gid != 0;
}

bool tu_user_make(struct tu_user *u, const char *role, const struct tu_group *member_of)
{
	char *plain[] = { run.useradd, "-r", "-M", "-s", "/usr/sbin/nologin", u->name, NULL };
	char *member[] = { run.useradd, "-r", "-M", "-s", "/usr/sbin/nologin", "-G",
			   member_of ? (char *)member_of->name : NULL, u->name, NULL };
	struct passwd *pw;

	snprintf(u->name, sizeof(u->name), TU_USER_PREFIX "%s-%d", role, (int)run.main_pid);
	if (!make_account(member_of ? member : plain, run.userdel, run.users, &run.nusers,
			  u->name))
		return false;
	pw = getpwnam(u->name);
	if (!pw)
		return false;
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	return u->uid != 0 && u->gid != 0;
}

/*
 * The parent's death kills the child (set after the uid change, which
 * clears it), so nothing of a user outlives a test that was killed.
 * Dumpable again: a uid change makes the process undumpable, and
 * LeakSanitizer's exit check ptraces its own threads.
 */
void tu_become(const struct tu_user *u, pid_t parent)
{
	if (initgroups(u->name, u->gid) != 0 || setgid(u->gid) != 0 || setuid(u->uid) != 0)
		_exit(120);
	if (getuid() != u->uid || geteuid() != u->uid || getegid() != u->gid ||
	    setuid(0) == 0)
		_exit(121);
	prctl(PR_SET_DUMPABLE, 1);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(122);
}

#define PROBE_MSG 512

const char *tu_probe(int (*fn)(pid_t parent, const void *arg, char *msg, size_t len),
		     const void *arg, const char *failed, char *why, size_t len)
{
	char *msg = mmap(NULL, PROBE_MSG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	pid_t parent = getpid(), pid;
	const char *no = NULL;
	int status;

	if (msg == MAP_FAILED) {
		snprintf(why, len, "mmap: %s", strerror(errno));
		return why;
	}
	msg[0] = '\0';
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(fn(parent, arg, msg, PROBE_MSG));
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		snprintf(why, len, "%s", msg[0] ? msg : failed);
		no = why;
	}
	munmap(msg, PROBE_MSG);
	return no;
}

static int runtime_as(pid_t parent, const void *arg, char *msg, size_t len)
{
	const struct tu_user *u = arg;
	struct xdm_runtime *rt;

	tu_become(u, parent);
	if (xdm_runtime_create(0, "host", "host", &rt) != XDM_OK) {
		snprintf(msg, len, "%s cannot build a runtime (is the build tree readable by "
			 "other users?): %s", u->name, xdm_last_error_message());
		return 77;
	}
	xdm_runtime_destroy(rt);
	return 0;
}

const char *tu_runtime_probe(const struct tu_user *u, char *why, size_t len)
{
	return tu_probe(runtime_as, u, "the probe as another user failed", why, len);
}

void tu_die_with_main(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != run.main_pid && getpid() != run.main_pid)
		_exit(1);
}
