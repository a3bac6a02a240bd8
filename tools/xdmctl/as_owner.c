/* SPDX-License-Identifier: MIT */
/*
 * as_owner.c - work that root must not do inside another user's file,
 * done by a child process that has become that user.
 *
 * Locking the segment's robust mutex makes glibc link the mutex into the
 * locking thread's robust list and unlink it again, writing through
 * pointers kept in the mutex itself: whoever can write the file chooses
 * where the locker's process writes.  Mapping the file read-write also
 * hands its owner a SIGBUS (truncation) for the mapper.  So root never
 * does either in a file another user can write: a child drops every
 * privilege, to the file's owner (or, for a root file that a group or
 * everyone can write, to nobody), checks that root cannot be had back,
 * and only then opens, maps and locks.  What the owner can do to that
 * child, it can do to any process of its own.
 *
 * The child keeps nothing of root's: no supplementary group, no open file
 * but the directory it works in and the pipe its answer goes back by (its
 * standard streams are /dev/null, so no terminal of root's is handed to
 * another user's process), and it is not dumpable, so its user cannot
 * ptrace it or open its descriptors.  The parent waits for the answer
 * with a deadline: a child stopped by its user (SIGSTOP) is killed, not
 * waited for.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "as_owner.h"

/* Where a uid or gid has no name here: the kernel's overflow ids. */
#define NOBODY_ID 65534
/* The child's descriptors: its directory and its answer's pipe. */
#define CHILD_DIR_FD 3
#define CHILD_ANSWER_FD 4
/* The child's exit status when it could not become the user. */
#define CHILD_CANNOT_DROP 125

static uid_t nobody_uid(void)
{
	struct passwd pw, *found = NULL;
	char text[1024];

	if (getpwnam_r("nobody", &pw, text, sizeof(text), &found) == 0 && found &&
	    found->pw_uid != 0)
		return found->pw_uid;
	return NOBODY_ID;
}

static gid_t nobody_gid(void)
{
	struct group gr, *found = NULL;
	char text[4096];

	if (getgrnam_r("nogroup", &gr, text, sizeof(text), &found) == 0 && found &&
	    found->gr_gid != 0)
		return found->gr_gid;
	return NOBODY_ID;
}

/* The primary group of uid, or nogroup where it has no entry here (a container's user). */
static gid_t primary_gid(uid_t uid)
{
	struct passwd pw, *found = NULL;
	char text[1024];

	if (getpwuid_r(uid, &pw, text, sizeof(text), &found) == 0 && found && found->pw_gid != 0)
		return found->pw_gid;
	return nobody_gid();
}

bool xdmctl_owner_identity(const struct stat *st, struct xdmctl_identity *who)
{
	if (st->st_uid != 0) {
		/* Its owner's own rights open it; the group is the owner's own. */
		who->uid = st->st_uid;
		who->gid = primary_gid(st->st_uid);
		return true;
	}
	if (st->st_mode & S_IWOTH) {
		/* Anyone may write it: as anyone, with no group of root's. */
		who->uid = nobody_uid();
		who->gid = nobody_gid();
		return true;
	}
	if (st->st_mode & S_IWGRP) {
		/* Its group may write it: as a stranger in that group. */
		who->uid = nobody_uid();
		who->gid = st->st_gid;
		return who->gid != 0;
	}
	return false;
}

/* Moves dir to CHILD_DIR_FD and answer to CHILD_ANSWER_FD, and closes every other descriptor. */
static int keep_only(int dir, int answer, int devnull)
{
	int d, a;

	if (dup2(devnull, STDIN_FILENO) < 0 || dup2(devnull, STDOUT_FILENO) < 0 ||
	    dup2(devnull, STDERR_FILENO) < 0)
		return -1;
	/* Above the two targets first, so that neither overwrites the other. */
	d = fcntl(dir, F_DUPFD, CHILD_ANSWER_FD + 1);
	a = fcntl(answer, F_DUPFD, CHILD_ANSWER_FD + 1);
	if (d < 0 || a < 0 || dup2(d, CHILD_DIR_FD) < 0 || dup2(a, CHILD_ANSWER_FD) < 0)
		return -1;
	if (close_range(CHILD_ANSWER_FD + 1, ~0u, 0) != 0) {
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = CHILD_ANSWER_FD + 1; fd < (max > 0 ? max : 1024); fd++)
			close((int)fd);
	}
	return 0;
}

/* Become who, for good; 0, or -1 if any of it failed or root could be had back. */
static int drop_to(const struct xdmctl_identity *who)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL) != 0 || setresgid(who->gid, who->gid, who->gid) != 0 ||
	    setresuid(who->uid, who->uid, who->uid) != 0)
		return -1;
	if (getresuid(&ru, &eu, &su) != 0 || ru != who->uid || eu != who->uid || su != who->uid)
		return -1;
	if (getresgid(&rg, &eg, &sg) != 0 || rg != who->gid || eg != who->gid || sg != who->gid)
		return -1;
	if (getgroups(0, NULL) != 0)
		return -1;
	/* Both must fail now: a process that could take root back is not dropped. */
	if (setresuid(0, 0, 0) == 0 || setresgid(0, 0, 0) == 0)
		return -1;
	/*
	 * The change of uid left the process dumpable if the kernel is set
	 * so (fs.suid_dumpable): its new user could then ptrace it.
	 */
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The child's answer, size bytes, by the deadline: 0, or -1 (short, or late). */
static int read_answer(int fd, void *out, size_t size, long long deadline)
{
	size_t got = 0;

	while (got < size) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();
		ssize_t n;
		int ready;

		if (left <= 0)
			return -1;
		ready = poll(&pf, 1, left > 60000 ? 60000 : (int)left);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			continue;
		n = read(fd, (char *)out + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static void child(const struct xdmctl_identity *who, int dir, int answer, int devnull,
		  xdmctl_as_owner_fn fn, void *arg, void *out, size_t size)
{
	const char *p = out;
	size_t left = size;

	if (keep_only(dir, answer, devnull) != 0 || drop_to(who) != 0)
		_exit(CHILD_CANNOT_DROP);
	fn(arg, CHILD_DIR_FD, out);
	while (left) {
		ssize_t n = write(CHILD_ANSWER_FD, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(EXIT_FAILURE);
		p += n;
		left -= (size_t)n;
	}
	_exit(EXIT_SUCCESS);
}

int xdmctl_as_owner(const struct xdmctl_identity *who, int dir, xdmctl_as_owner_fn fn, void *arg,
		    void *out, size_t size, int timeout_ms, char *why, size_t len)
{
	int pipefd[2], devnull, status = 0, answered;
	pid_t pid, reaped;

	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		snprintf(why, len, "cannot open /dev/null: %s", strerror(errno));
		return -1;
	}
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		snprintf(why, len, "cannot make a pipe: %s", strerror(errno));
		close(devnull);
		return -1;
	}
	/* Whatever is buffered is written once, by the parent, not twice. */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "cannot start a process as uid %u: %s", (unsigned int)who->uid,
			 strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		close(devnull);
		return -1;
	}
	if (pid == 0)
		child(who, dir, pipefd[1], devnull, fn, arg, out, size);
	close(pipefd[1]);
	close(devnull);
	answered = read_answer(pipefd[0], out, size, now_ms() + timeout_ms);
	close(pipefd[0]);
	if (answered != 0)
		kill(pid, SIGKILL);	/* stopped by its user, or hung: not waited for */
	while ((reaped = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	/* Reaped already (SIGCHLD ignored by whoever started us): the answer says it all. */
	if (reaped != pid) {
		if (answered == 0)
			return 0;
		snprintf(why, len, "the process that works as uid %u gave no answer",
			 (unsigned int)who->uid);
		return -1;
	}
	if (answered == 0 && WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SUCCESS)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_CANNOT_DROP)
		snprintf(why, len, "the process that works as uid %u, gid %u could not take "
			 "those credentials alone (or could have taken root's back)",
			 (unsigned int)who->uid, (unsigned int)who->gid);
	else if (answered != 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		snprintf(why, len, "the process that works as uid %u gave no answer within %d "
			 "s (stopped or killed by that user?) and was killed",
			 (unsigned int)who->uid, timeout_ms / 1000);
	else if (WIFSIGNALED(status))
		snprintf(why, len, "the process that works as uid %u died of signal %d (%s)%s",
			 (unsigned int)who->uid, WTERMSIG(status), strsignal(WTERMSIG(status)),
			 WTERMSIG(status) == SIGBUS ? ": the file was cut short under it" : "");
	else
		snprintf(why, len, "the process that works as uid %u ended with status %d and "
			 "no answer", (unsigned int)who->uid,
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return -1;
}
