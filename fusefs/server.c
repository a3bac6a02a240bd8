/* SPDX-License-Identifier: MIT */
/*
 * server.c - the FUSE server thread inside the host process.
 *
 * The loop is our own rather than fuse_loop(): it polls the FUSE device
 * together with an eventfd, because libfuse 3.14 does not wake a loop
 * blocked reading /dev/fuse on fuse_session_exit().  Stopping writes the
 * eventfd, joins the thread, then unmounts.  No signal handler is installed
 * and the thread blocks every signal, so the host's signals go to its own
 * threads.  Descriptors are close-on-exec, and a forked child closes its
 * copies (forget), so no other process can keep a dead server's mount alive.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/frontend.h"
#include "fusefs/fusefs.h"

#include <fuse_lowlevel.h>

struct server {
	struct fusefs_ctx ctx;
	struct fuse *fuse;
	int wake_fd;
	pthread_t thread;
	bool mounted;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	struct fuse_session *se = fuse_get_session(s->fuse);
	struct fuse_buf buf = { 0 };
	struct pollfd fds[2] = {
		{ .fd = fuse_session_fd(se), .events = POLLIN },
		{ .fd = s->wake_fd, .events = POLLIN },
	};

	while (!fuse_session_exited(se)) {
		int n = poll(fds, 2, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || fds[1].revents)
			break;
		if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			break;	/* unmounted from outside (umount, fusermount -u) */
		n = fuse_session_receive_buf(se, &buf);
		if (n == -EINTR || n == -EAGAIN || n == -ENOENT)
			continue;
		if (n == -ENOMEM) {
			/* Nobody else answers this mount: wait and try again. */
			usleep(1000);
			continue;
		}
		if (n <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	return NULL;
}

static void destroy(struct server *s)
{
	if (s->mounted)
		fuse_unmount(s->fuse);
	if (s->fuse)
		fuse_destroy(s->fuse);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	fusefs_free_open(&s->ctx);
	pthread_mutex_destroy(&s->ctx.open_lock);
	free(s);
}

static struct fuse *new_fuse(struct server *s, char *msg, size_t len)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse *f = NULL;

	/* Owner only (no allow_other), and the kernel checks the modes. */
	if (fuse_opt_add_arg(&args, FUSEFS_NAME) ||
	    fuse_opt_add_arg(&args, "-odefault_permissions,fsname=" FUSEFS_NAME
				    ",subtype=" FUSEFS_NAME)) {
		snprintf(msg, len, "out of memory for the FUSE arguments");
		goto out;
	}
	f = fuse_new(&args, &fusefs_ops, sizeof(fusefs_ops), &s->ctx);
	if (!f)
		snprintf(msg, len, "fuse_new failed");
out:
	fuse_opt_free_args(&args);
	return f;
}

/*
 * A mount point another user owns is theirs, not ours to cover.  A place
 * such as /tmp/xdm-%p can be guessed and made first by anyone: mounting on
 * their directory puts the tree where they chose, and their symlink there
 * would lay it over any directory the link names (root's mount(2) follows
 * it).  Our own entries and root's are taken; in a sticky directory such as
 * /tmp nobody else can rename or replace them between this check and the
 * mount.  (In a world-writable directory without the sticky bit, no check
 * can help: anyone may swap any entry there.)
 */
static int check_owner(const char *dir, char *msg, size_t len)
{
	uid_t me = geteuid();
	struct stat st;
	int err;

	if (lstat(dir, &st) != 0)
		goto fail;
	if (S_ISLNK(st.st_mode) && (st.st_uid == me || st.st_uid == 0) && stat(dir, &st) != 0)
		goto fail;
	if (st.st_uid == me || st.st_uid == 0)
		return 0;
	snprintf(msg, len, "%s%s belongs to uid %u, not to this process (uid %u): another "
		 "user's directory is never mounted over", S_ISLNK(st.st_mode) ? "the link " : "",
		 dir, (unsigned)st.st_uid, (unsigned)me);
	return -EPERM;

fail:
	err = -errno;
	snprintf(msg, len, "%s: %s", dir, strerror(errno));
	return err;
}

static int start(const char *dir, void **out, char *msg, size_t len)
{
	sigset_t all, old;
	struct server *s;
	int err, fd;

	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		err = -errno;
		snprintf(msg, len, "/dev/fuse: %s", strerror(errno));
		return err == -EACCES ? err : -ENODEV;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(msg, len, "out of memory for the server");
		return -ENOMEM;
	}
	s->wake_fd = -1;
	pthread_mutex_init(&s->ctx.open_lock, NULL);
	s->ctx.uid = getuid();
	s->ctx.gid = getgid();
	clock_gettime(CLOCK_REALTIME, &s->ctx.started);

	err = fusefs_clear_stale(dir, msg, len);
	if (err)
		goto fail;
	/* After the stale mount is gone: what is under it is what we cover. */
	err = check_owner(dir, msg, len);
	if (err)
		goto fail;
	err = -EIO;
	s->fuse = new_fuse(s, msg, len);
	if (!s->fuse)
		goto fail;
	if (fuse_mount(s->fuse, dir) != 0) {
		snprintf(msg, len, "fuse_mount failed (libfuse said why above)");
		goto fail;
	}
	s->mounted = true;
	fd = fuse_session_fd(fuse_get_session(s->fuse));
	fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
	s->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (s->wake_fd < 0) {
		err = -errno;
		snprintf(msg, len, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* The thread starts with every signal blocked and keeps it so. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&s->thread, NULL, serve, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		snprintf(msg, len, "cannot start the server thread: %s", strerror(-err));
		goto fail;
	}
	*out = s;
	return 0;

fail:
	destroy(s);
	return err;
}

static void stop(void *server)
{
	struct server *s = server;
	uint64_t one = 1;

	while (write(s->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(s->thread, NULL);
	destroy(s);
}

static void forget(void *server)
{
	struct server *s = server;

	close(fuse_session_fd(fuse_get_session(s->fuse)));
	close(s->wake_fd);
}

__attribute__((visibility("default"))) const struct xdm_frontend xdm_fusefs_frontend = {
	.abi = XDM_FRONTEND_ABI,
	.start = start,
	.stop = stop,
	.forget = forget,
};
