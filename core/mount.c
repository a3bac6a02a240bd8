/* SPDX-License-Identifier: MIT */
/*
 * mount.c - serving the introspection tree as files.
 *
 * libxdm does not link libfuse: the FUSE server is fusefs.so, found in the
 * module path and dlopened on the first mount, so a program that never
 * mounts never loads it.  One tree per process, mounted by xdm_mount() or by
 * the first runtime built when the config or XDM_MOUNT names a directory.
 * Exit unmounts (atexit); a forked child forgets the parent's server and may
 * mount its own.  A failed configured mount is reported on stderr and the
 * runtime serves memory all the same.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/frontend.h"

#define FRONTEND_FILE "fusefs"

static struct xdm_mount_state *state(void)
{
	return &xdm_table()->mount;
}

/* dir with "%p" made the pid and "%%" a '%'; any other '%' is an error. */
static enum xdm_status expand_dir(const char *dir, char *out, size_t len)
{
	size_t n = 0;

	for (const char *s = dir; *s; s++) {
		int w;

		if (*s != '%')
			w = snprintf(out + n, len - n, "%c", *s);
		else if (s[1] == 'p' && ++s)
			w = snprintf(out + n, len - n, "%ld", (long)getpid());
		else if (s[1] == '%' && ++s)
			w = snprintf(out + n, len - n, "%%");
		else
			return xdm_error_set(XDM_E_INVALID, "mount directory '%s': only %%p and "
					     "%%%% may follow a '%%'", dir);
		if (w < 0 || (size_t)w >= len - n)
			return xdm_error_set(XDM_E_INVALID, "mount directory '%s' is too long",
					     dir);
		n += (size_t)w;
	}
	if (n == 0)
		return xdm_error_set(XDM_E_INVALID, "mount directory is empty");
	return XDM_OK;
}

static enum xdm_status load_frontend(struct xdm_mount_state *ms, const char *module_dir)
{
	char file[PATH_MAX], searched[1024];
	const struct xdm_frontend *fe;
	void *dl;

	if (ms->fe)
		return XDM_OK;
	if (!xdm_module_path_find(module_dir, FRONTEND_FILE, file, sizeof(file), searched,
				  sizeof(searched)))
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "cannot mount: %s.so is not in the module path (%s); was "
				     "xdm built without FUSE (libfuse3-dev)?", FRONTEND_FILE,
				     searched);
	dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return xdm_error_set(XDM_E_MODULE, "cannot mount: dlopen %s: %s", file, dlerror());
	fe = dlsym(dl, XDM_FRONTEND_SYMBOL);
	if (!fe || fe->abi != XDM_FRONTEND_ABI) {
		dlclose(dl);
		return xdm_error_set(XDM_E_MODULE, "cannot mount: %s has no %s of ABI %d", file,
				     XDM_FRONTEND_SYMBOL, XDM_FRONTEND_ABI);
	}
	ms->dl = dl;
	ms->fe = fe;
	return XDM_OK;
}

static void unmount_at_exit(void)
{
	xdm_unmount();
}

/*
 * Fork waits for the server to finish the tree operation it is in: every
 * lock a tree operation takes (shard spinlocks, the index, the event pool,
 * module locks) is taken under the tree lock held shared, so holding it
 * exclusive across fork leaves none of them held in the child.  (A tree
 * callback must therefore not fork.)  The mount lock is not taken here:
 * libfuse itself forks, to run fusermount3 for a user who is not root,
 * while our mount holds it; the child makes it anew, as the only thread.
 */
static void before_fork(void)
{
	pthread_rwlock_wrlock(&xdm_table()->tree_lock);
}

static void after_fork_parent(void)
{
	pthread_rwlock_unlock(&xdm_table()->tree_lock);
}

static void after_fork_child(void)
{
	struct xdm_mount_state *ms = state();

	/*
	 * Made anew rather than unlocked: the rwlock knows its writer by
	 * thread id, and the child's one thread has another.
	 */
	pthread_rwlock_init(&xdm_table()->tree_lock, NULL);
	pthread_mutex_init(&ms->lock, NULL);
	/* The server thread stayed in the parent, and so does the mount. */
	if (ms->server)
		ms->fe->forget(ms->server);
	ms->server = NULL;
	free(ms->dir);		/* the child's copy; unmount clears it before freeing */
	ms->dir = NULL;
	ms->created_dir = false;
}

/*
 * The absolute form of path, resolving its parent only: the directory itself
 * may be a dead mount that no stat can enter (ENOTCONN) until it is cleaned.
 */
static int absolute_path(const char *path, char *out, size_t len)
{
	char parent[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == path)
		snprintf(parent, sizeof(parent), "/");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - path), path);
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		/* "dir/" or "dir/..": no last component to keep apart. */
		return realpath(path, out) ? 0 : -1;
	}
	if (!realpath(parent, real))
		return -1;
	if ((size_t)snprintf(out, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) >=
	    len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static enum xdm_status mount_at(const char *dir, const char *module_dir)
{
	struct xdm_mount_state *ms = state();
	char path[PATH_MAX], real[PATH_MAX], msg[512];
	enum xdm_status st;
	bool created = false;
	void *server;
	int err;

	if (!dir)
		return xdm_error_set(XDM_E_INVALID, "xdm_mount: directory is NULL");
	pthread_mutex_lock(&ms->lock);
	if (ms->server) {
		st = xdm_error_set(XDM_E_INVALID, "cannot mount at %s: the tree is mounted at %s "
				   "already", dir, ms->dir);
		goto unlock;
	}
	st = expand_dir(dir, path, sizeof(path));
	if (st)
		goto unlock;
	st = load_frontend(ms, module_dir);
	if (st)
		goto unlock;
	if (mkdir(path, 0700) == 0) {
		created = true;
	} else if (errno != EEXIST) {
		st = xdm_error_set(XDM_E_INVALID, "cannot mount at %s: mkdir: %s", path,
				   strerror(errno));
		goto unlock;
	}
	/* Absolute: unmount and rmdir must find it after a chdir. */
	if (absolute_path(path, real, sizeof(real))) {
		st = xdm_error_set(XDM_E_INVALID, "cannot mount at %s: %s", path, strerror(errno));
		goto remove_dir;
	}
	err = ms->fe->start(real, &server, msg, sizeof(msg));
	if (err) {
		st = xdm_error_set(err == -ENODEV || err == -ENOENT ? XDM_E_NOT_SUPPORTED
								    : XDM_E_INVALID,
				   "cannot mount at %s: %s", real, msg);
		goto remove_dir;
	}
	ms->dir = strdup(real);
	if (!ms->dir) {
		ms->fe->stop(server);
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory for a mount");
		goto remove_dir;
	}
	ms->server = server;
	ms->created_dir = created;
	if (!ms->hooks) {
		atexit(unmount_at_exit);
		pthread_atfork(before_fork, after_fork_parent, after_fork_child);
		ms->hooks = true;
	}
	goto unlock;

remove_dir:
	if (created)
		rmdir(path);
unlock:
	pthread_mutex_unlock(&ms->lock);
	return st;
}

enum xdm_status xdm_mount(const char *dir)
{
	struct xdm_config *cfg = atomic_load_explicit(&xdm_table()->config,
						      memory_order_acquire);

	return mount_at(dir, cfg ? cfg->module_dir : NULL);
}

enum xdm_status xdm_unmount(void)
{
	struct xdm_mount_state *ms = state();
	enum xdm_status st = XDM_OK;
	void *server;
	char *dir;

	pthread_mutex_lock(&ms->lock);
	if (!ms->server) {
		st = xdm_error_set(XDM_E_INVALID, "xdm_unmount: nothing is mounted");
		goto unlock;
	}
	server = ms->server;
	/* Cleared first: a fork during the stop must not forget freed memory. */
	ms->server = NULL;
	ms->fe->stop(server);
	dir = ms->dir;
	/* Cleared before the free: a child forked now frees its copy once. */
	ms->dir = NULL;
	if (ms->created_dir)
		rmdir(dir);
	ms->created_dir = false;
	free(dir);
unlock:
	pthread_mutex_unlock(&ms->lock);
	return st;
}

bool xdm_mount_point(char *buf, size_t len)
{
	struct xdm_mount_state *ms = state();
	bool mounted;

	pthread_mutex_lock(&ms->lock);
	mounted = ms->server != NULL;
	if (mounted && buf && len)
		snprintf(buf, len, "%s", ms->dir);
	pthread_mutex_unlock(&ms->lock);
	return mounted;
}

void xdm_mount_configured(const struct xdm_config *cfg)
{
	struct xdm_mount_state *ms = state();
	const char *env = getenv("XDM_MOUNT");
	const char *dir = env ? env : cfg->mount;	/* XDM_MOUNT= turns it off */
	struct xdm_error saved = *xdm_last_error();
	bool first;

	pthread_mutex_lock(&ms->lock);
	first = !ms->auto_tried && !ms->server;
	ms->auto_tried = true;
	pthread_mutex_unlock(&ms->lock);
	if (!first || !dir || !dir[0])
		return;
	if (mount_at(dir, cfg->module_dir) != XDM_OK)
		fprintf(stderr, "xdm: %s (the runtime serves memory without it)\n",
			xdm_last_error()->message);
	/* The caller succeeded: its thread error stays what it was. */
	*(struct xdm_error *)xdm_last_error() = saved;
}
