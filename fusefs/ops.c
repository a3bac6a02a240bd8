/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the filesystem calls, each a thin map onto the xdm_tree_* API.
 *
 * sysfs rules: a file's value is rendered when it is opened and reads are
 * served from that snapshot (direct_io: no page cache, sizes need not be
 * known); a write stores the whole value at once; truncation of a writable
 * file succeeds and does nothing, so `echo V > file` works; writing a
 * read-only file is EACCES even for root, whom default_permissions lets
 * past the mode bits.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xdm/xdm.h>

#include "fusefs/fusefs.h"

static const char *tree_path(const char *path)
{
	/* FUSE paths start at "/"; the tree's at "". */
	return path[0] == '/' ? path + 1 : path;
}

static struct fusefs_ctx *ctx(void)
{
	return fuse_get_context()->private_data;
}

static void track(struct fusefs_ctx *c, struct fusefs_snapshot *snap)
{
	pthread_mutex_lock(&c->open_lock);
	snap->prev = NULL;
	snap->next = c->open;
	if (c->open)
		c->open->prev = snap;
	c->open = snap;
	pthread_mutex_unlock(&c->open_lock);
}

static void untrack(struct fusefs_ctx *c, struct fusefs_snapshot *snap)
{
	pthread_mutex_lock(&c->open_lock);
	if (snap->prev)
		snap->prev->next = snap->next;
	else
		c->open = snap->next;
	if (snap->next)
		snap->next->prev = snap->prev;
	pthread_mutex_unlock(&c->open_lock);
}

void fusefs_free_open(struct fusefs_ctx *c)
{
	struct fusefs_snapshot *snap, *next;

	pthread_mutex_lock(&c->open_lock);
	for (snap = c->open; snap; snap = next) {
		next = snap->next;
		free(snap->text);
		free(snap);
	}
	c->open = NULL;
	pthread_mutex_unlock(&c->open_lock);
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/*
	 * Values are never cached (direct_io, rendered at open), and neither
	 * are attributes, so a stat of a freed block's directory says ENOENT
	 * at once.  Names are kept for a second: walking a path then costs no
	 * LOOKUP per component, and a name kept too long only leads to a
	 * getattr or open that answers ENOENT.
	 */
	cfg->entry_timeout = 1.0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	cfg->kernel_cache = 0;
	return ctx();
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	const struct fusefs_ctx *c = ctx();
	struct xdm_tree_node node;
	int err;

	(void)fi;
	err = xdm_tree_stat(tree_path(path), &node);
	if (err)
		return err;
	memset(st, 0, sizeof(*st));
	st->st_mode = (node.dir ? S_IFDIR : S_IFREG) | node.mode;
	st->st_nlink = node.dir ? 2 : 1;
	/* Like sysfs: a page, whatever the value's length. */
	st->st_size = node.dir ? 0 : 4096;
	st->st_uid = c->uid;
	st->st_gid = c->gid;
	st->st_atim = st->st_mtim = st->st_ctim = c->started;
	return 0;
}

struct fill {
	void *buf;
	fuse_fill_dir_t filler;
};

static int fill_one(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct fill *f = arg;
	struct stat st;

	/* The type goes into d_type: a walker need not stat every entry. */
	memset(&st, 0, sizeof(st));
	st.st_mode = (node->dir ? S_IFDIR : S_IFREG) | node->mode;
	return f->filler(f->buf, name, &st, 0, 0) ? -ENOMEM : 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t offset,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct fill f = { buf, filler };

	(void)offset;
	(void)fi;
	(void)flags;
	if (filler(buf, ".", NULL, 0, 0) || filler(buf, "..", NULL, 0, 0))
		return -ENOMEM;
	return xdm_tree_list(tree_path(path), fill_one, &f);
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	struct xdm_tree_node node;
	struct fusefs_snapshot *snap;
	int err;

	/*
	 * A read-only open needs no stat: the show says EISDIR for a directory
	 * and EACCES for an action such as logging's flush.  Only a write
	 * needs the mode.
	 */
	if (acc != O_RDONLY) {
		err = xdm_tree_stat(tree_path(path), &node);
		if (err)
			return err;
		if (node.dir)
			return -EISDIR;
		if (!(node.mode & 0200))
			return -EACCES;
		if (acc == O_RDWR && !(node.mode & 0400))
			return -EACCES;
	}
	snap = calloc(1, sizeof(*snap));
	if (!snap)
		return -ENOMEM;
	if (acc != O_WRONLY) {
		err = xdm_tree_show(tree_path(path), &snap->text, &snap->len);
		if (err) {
			free(snap);
			return err;
		}
	}
	track(ctx(), snap);
	fi->fh = (uint64_t)(uintptr_t)snap;
	fi->direct_io = 1;
	return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t offset,
		   struct fuse_file_info *fi)
{
	const struct fusefs_snapshot *snap = (const struct fusefs_snapshot *)(uintptr_t)fi->fh;
	size_t n;

	(void)path;
	if (offset < 0)
		return -EINVAL;
	if (!snap->text || (size_t)offset >= snap->len)
		return 0;
	n = snap->len - (size_t)offset;
	if (n > size)
		n = size;
	memcpy(buf, snap->text + offset, n);
	return (int)n;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t offset,
		    struct fuse_file_info *fi)
{
	int err;

	(void)fi;
	/* The whole value in one write: a continuation cannot be parsed. */
	if (offset != 0)
		return -EINVAL;
	err = xdm_tree_store(tree_path(path), buf, size);
	return err ? err : (int)size;
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct xdm_tree_node node;
	int err;

	(void)size;
	(void)fi;
	err = xdm_tree_stat(tree_path(path), &node);
	if (err)
		return err;
	if (node.dir)
		return -EISDIR;
	return node.mode & 0200 ? 0 : -EACCES;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct fusefs_snapshot *snap = (struct fusefs_snapshot *)(uintptr_t)fi->fh;

	(void)path;
	if (snap) {
		untrack(ctx(), snap);
		free(snap->text);
		free(snap);
	}
	return 0;
}

const struct fuse_operations fusefs_ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.truncate = fs_truncate,
	.release = fs_release,
};
