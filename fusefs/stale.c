/* SPDX-License-Identifier: MIT */
/*
 * stale.c - a mount left behind by a process that was killed.
 *
 * When a FUSE server dies without unmounting, its mount stays, and every
 * access to it fails with ENOTCONN.  Such a mount, if it is an xdm tree, is
 * detached before the new one is made: by umount2(MNT_DETACH) as root, else
 * by `fusermount3 -u -z`.  A tree that answers belongs to a live process
 * and is left alone (EBUSY), and so is one that does not answer within a
 * second (a stopped or hung process): its directory is entered only from a
 * probe thread that may be left waiting, never from the caller.  A dead
 * mount of another filesystem is the user's to remove.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "fusefs/fusefs.h"
#include "lib/mountinfo/mountinfo.h"

extern char **environ;

struct type_at {
	const char *dir;
	char *type;
	size_t len;
	bool found;
};

/* Later lines are mounted over earlier ones: keep the last match. */
static int match_type(const char *point, const char *type, void *arg)
{
	struct type_at *t = arg;

	if (strcmp(point, t->dir) == 0) {
		snprintf(t->type, t->len, "%s", type);
		t->found = true;
	}
	return 0;
}

/*
 * The type of the topmost mount at dir (an absolute path), into type; false
 * if dir is no mount point.  Reads /proc only: it never enters dir.
 */
static bool mount_type_at(const char *dir, char *type, size_t len)
{
	struct type_at t = { dir, type, len, false };

	return mountinfo_each(match_type, &t) == 0 && t.found;
}

/* A stat of a mount point, from a thread that may be left behind. */
struct probe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, abandoned;
	int err;			/* 0 or an errno */
	char dir[PATH_MAX];
};

static void probe_free(struct probe *p)
{
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct stat st;
	bool abandoned;
	int err = stat(p->dir, &st) == 0 ? 0 : errno;

	pthread_mutex_lock(&p->lock);
	p->err = err;
	p->done = true;
	abandoned = p->abandoned;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (abandoned)
		probe_free(p);
	return NULL;
}

/* 0 or the errno of stat(dir); -ETIMEDOUT if it did not come back in 1 s. */
static int timed_stat(const char *dir)
{
	struct probe *p = calloc(1, sizeof(*p));
	struct timespec deadline;
	pthread_t thread;
	int err;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	snprintf(p->dir, sizeof(p->dir), "%s", dir);
	if (pthread_create(&thread, NULL, probe_main, p)) {
		probe_free(p);
		return -EAGAIN;
	}
	pthread_detach(thread);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 1;
	pthread_mutex_lock(&p->lock);
	while (!p->done && pthread_cond_timedwait(&p->cond, &p->lock, &deadline) != ETIMEDOUT)
		;
	if (!p->done) {
		/* The probe frees itself if the server ever answers. */
		p->abandoned = true;
		pthread_mutex_unlock(&p->lock);
		return -ETIMEDOUT;
	}
	err = p->err;
	pthread_mutex_unlock(&p->lock);
	probe_free(p);
	return err ? -err : 0;
}

static int lazy_unmount(const char *dir, char *msg, size_t len)
{
	char *argv[] = { "fusermount3", "-u", "-z", "-q", (char *)dir, NULL };
	int status = 0, err;
	pid_t pid;

	if (umount2(dir, MNT_DETACH) == 0)
		return 0;
	if (errno != EPERM) {
		err = -errno;
		snprintf(msg, len, "a stale mount is at %s and umount2 failed: %s", dir,
			 strerror(errno));
		return err;
	}
	/* Not root: the setuid helper that mounted it may take it away. */
	err = posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ);
	if (err) {
		snprintf(msg, len, "a stale mount is at %s and fusermount3 could not run: %s",
			 dir, strerror(err));
		return -err;
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			/* Reaped by the host (SIGCHLD ignored): did it work? */
			char type[64];

			status = mount_type_at(dir, type, sizeof(type)) ? 1 << 8 : 0;
			break;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(msg, len, "a stale mount is at %s and fusermount3 -u -z failed", dir);
		return -EBUSY;
	}
	return 0;
}

int fusefs_clear_stale(const char *dir, char *msg, size_t len)
{
	char type[64];
	struct stat st;
	int err;

	if (!mount_type_at(dir, type, sizeof(type))) {
		/* A plain directory: entering it cannot block on a server. */
		if (stat(dir, &st) != 0) {
			err = -errno;
			snprintf(msg, len, "%s: %s", dir, strerror(errno));
			return err;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(msg, len, "%s is not a directory", dir);
			return -ENOTDIR;
		}
		return 0;
	}
	err = timed_stat(dir);
	if (err == -ETIMEDOUT) {
		snprintf(msg, len, "%s is a %s mount whose server does not answer (a stopped or "
			 "hung process?)", dir, type);
		return -EBUSY;
	}
	if (err == -ENOTCONN && strcmp(type, "fuse." FUSEFS_NAME) == 0)
		return lazy_unmount(dir, msg, len);
	if (err == -ENOTCONN) {
		snprintf(msg, len, "%s is a dead %s mount; not an xdm tree, so not ours to "
			 "remove (umount -l it)", dir, type);
		return -EBUSY;
	}
	if (err) {
		snprintf(msg, len, "%s: %s", dir, strerror(-err));
		return err;
	}
	if (strcmp(type, "fuse." FUSEFS_NAME) == 0) {
		snprintf(msg, len, "%s is the live xdm tree of another process", dir);
		return -EBUSY;
	}
	return 0;	/* another live filesystem: mount over it, as mount(8) would */
}
