/* SPDX-License-Identifier: MIT */
/*
 * tree.c - the introspection tree: which runtimes it shows, how a path is
 * walked to a directory and a file, and the public xdm_tree_* calls that the
 * FUSE front end (or any program) uses.
 *
 * The tree knows no module: a layer directory holds whatever attributes the
 * layer's module declares, and a module's attr_group shows the same
 * attributes at <runtime>/<group>/.  Each call holds the table's tree lock
 * shared for its whole length, so a runtime cannot be destroyed under it;
 * nothing else is locked but the short shard locks of the registry.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tree.h"

#define DIR_MODE 0555
/* The longest value a store accepts. */
#define XDM_TREE_VALUE_MAX (64u << 10)

/* ---- text buffers ------------------------------------------------------ */

void tree_printf(struct tree_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 256;

		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void tree_put_clean(struct tree_buf *b, const char *text)
{
	size_t n = text ? strlen(text) : 0;
	char *clean = malloc(n + 1);

	if (!clean) {
		b->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++)
		clean[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
	clean[n] = '\0';
	tree_printf(b, "%s", clean);
	free(clean);
}

/* ---- which runtimes the tree shows ------------------------------------ */

static bool name_taken(struct xdm_runtime_table *t, const char *name)
{
	for (struct xdm_runtime *r = t->published; r; r = r->published_next)
		if (strcmp(r->name, name) == 0)
			return true;
	return false;
}

/*
 * The first live runtime of ordinal N is "N", whatever made it; another
 * one alive at the same time is "N.K", K counting in the process.  A
 * program with one runtime per device finds it at its ordinal.
 */
void xdm_tree_publish(struct xdm_runtime *rt)
{
	struct xdm_runtime_table *t = xdm_table();

	pthread_rwlock_wrlock(&t->tree_lock);
	snprintf(rt->name, sizeof(rt->name), "%u", rt->ordinal);
	while (name_taken(t, rt->name))
		snprintf(rt->name, sizeof(rt->name), "%u.%u", rt->ordinal, ++t->published_seq);
	rt->published_next = t->published;
	t->published = rt;
	pthread_rwlock_unlock(&t->tree_lock);
}

void xdm_tree_unpublish(struct xdm_runtime *rt)
{
	struct xdm_runtime_table *t = xdm_table();

	pthread_rwlock_wrlock(&t->tree_lock);
	for (struct xdm_runtime **p = &t->published; *p; p = &(*p)->published_next) {
		if (*p == rt) {
			*p = rt->published_next;
			break;
		}
	}
	pthread_rwlock_unlock(&t->tree_lock);
}

static struct xdm_runtime *find_runtime(const char *name)
{
	for (struct xdm_runtime *r = xdm_table()->published; r; r = r->published_next)
		if (strcmp(r->name, name) == 0)
			return r;
	return NULL;
}

/* ---- walking a path --------------------------------------------------- */

/*
 * A name a module chose (group, attribute) that can be a directory entry:
 * not empty, no '/', not "." or "..", at most NAME_MAX bytes.  Others are
 * left out of the tree rather than listed as entries nobody can open.
 */
static bool entry_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= NAME_MAX && !strchr(name, '/') && strcmp(name, ".") &&
	       strcmp(name, "..");
}

/* A decimal without sign, leading zeros or junk: the tree's ids. */
static bool parse_id(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static bool runtime_name_taken(const char *name)
{
	static const char *const dirs[] = { "blocks", "streams", "layers" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strcmp(name, dirs[i]) == 0)
			return true;
	for (const struct tree_file *f = xdm_tree_runtime_files; f->name; f++)
		if (strcmp(name, f->name) == 0)
			return true;
	return false;
}

/*
 * The topmost layer whose module declares group, or NULL.  The core's own
 * names win: a group called "stack" or "blocks" is not shown.
 */
static struct xdm_layer *group_layer(struct xdm_runtime *rt, const char *group)
{
	if (!entry_name_ok(group) || runtime_name_taken(group))
		return NULL;
	for (uint32_t i = 0; i < rt->nlayers; i++) {
		const char *g = rt->layers[i].ops->attr_group;

		if (g && strcmp(g, group) == 0)
			return &rt->layers[i];
	}
	return NULL;
}

static struct xdm_layer *numbered_layer(struct xdm_runtime *rt, const char *name)
{
	const char *dash = strchr(name, '-');
	char num[16];
	uint64_t n;

	if (!dash || (size_t)(dash - name) >= sizeof(num))
		return NULL;
	memcpy(num, name, (size_t)(dash - name));
	num[dash - name] = '\0';
	if (!parse_id(num, &n) || n >= rt->nlayers)
		return NULL;
	if (strcmp(dash + 1, rt->layers[n].ops->name) != 0)
		return NULL;
	return &rt->layers[n];
}

/* Step from directory pos into its subdirectory name; false if none. */
static bool enter(struct tree_pos *pos, const char *name)
{
	struct xdm_runtime *rt = pos->rt;
	uint64_t id;

	switch (pos->level) {
	case AT_ROOT:
		pos->rt = find_runtime(name);
		pos->level = AT_RUNTIME;
		return pos->rt != NULL;
	case AT_RUNTIME:
		if (strcmp(name, "blocks") == 0)
			pos->level = AT_BLOCKS;
		else if (strcmp(name, "streams") == 0)
			pos->level = AT_STREAMS;
		else if (strcmp(name, "layers") == 0)
			pos->level = AT_LAYERS;
		else if ((pos->layer = group_layer(rt, name)))
			pos->level = AT_LAYER;
		else
			return false;
		return true;
	case AT_BLOCKS:
		if (!parse_id(name, &id) || !xdm_tree_block_exists(rt, id))
			return false;
		pos->level = AT_BLOCK;
		pos->id = id;
		return true;
	case AT_STREAMS:
		if (!parse_id(name, &id) || id >= xdm_stream_count(rt))
			return false;
		pos->level = AT_STREAM;
		pos->id = id;
		return true;
	case AT_LAYERS:
		pos->layer = numbered_layer(rt, name);
		pos->level = AT_LAYER;
		return pos->layer != NULL;
	default:
		return false;
	}
}

static const struct tree_file *core_files(enum tree_level level)
{
	switch (level) {
	case AT_ROOT:
		return xdm_tree_root_files;
	case AT_RUNTIME:
		return xdm_tree_runtime_files;
	case AT_BLOCK:
		return xdm_tree_block_files;
	case AT_STREAM:
		return xdm_tree_stream_files;
	default:
		return NULL;
	}
}

/* What a walk found: a directory, or a file in dir. */
struct tree_hit {
	struct tree_pos dir;
	bool is_file;
	const struct tree_file *file;	/* a core file */
	const struct xdm_attr *attr;	/* a layer's attribute */
};

/*
 * Never group- or world-writable, whatever the module says: 0444, 0644, or
 * 0200 for an action with nothing to show (logging's flush).
 */
static unsigned int attr_mode(const struct xdm_attr *a)
{
	if (!a->show)
		return 0200;
	return a->store && (a->mode & 0200) ? 0644 : 0444;
}

/* A core file is read-only or write-only, never both. */
static unsigned int file_mode(const struct tree_file *f)
{
	return f->show ? 0444 : 0200;
}

static bool find_file(const struct tree_pos *dir, const char *name, struct tree_hit *hit)
{
	const struct tree_file *f = core_files(dir->level);

	for (; f && f->name; f++) {
		if (strcmp(f->name, name) == 0) {
			hit->file = f;
			return true;
		}
	}
	if (dir->level != AT_LAYER)
		return false;
	for (const struct xdm_attr *a = dir->layer->ops->attrs; a && a->name; a++) {
		if ((a->show || a->store) && entry_name_ok(a->name) && strcmp(a->name, name) == 0) {
			hit->attr = a;
			return true;
		}
	}
	return false;
}

/* Walk path; the caller holds the tree lock shared. */
static int walk(const char *path, struct tree_hit *hit)
{
	char *copy, *save = NULL, *name, *next;
	int err = 0;

	memset(hit, 0, sizeof(*hit));
	hit->dir.level = AT_ROOT;
	if (!path)
		return -EINVAL;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	name = strtok_r(copy, "/", &save);
	while (name) {
		next = strtok_r(NULL, "/", &save);
		if (hit->is_file) {
			err = -ENOTDIR;
			break;
		}
		struct tree_pos into = hit->dir;

		if (enter(&into, name)) {
			hit->dir = into;
		} else if (find_file(&hit->dir, name, hit)) {
			hit->is_file = true;
		} else {
			err = -ENOENT;
			break;
		}
		name = next;
	}
	free(copy);
	return err;
}

/* ---- the public calls -------------------------------------------------- */

static void tree_read_lock(void)
{
	pthread_rwlock_rdlock(&xdm_table()->tree_lock);
}

static void tree_unlock(void)
{
	pthread_rwlock_unlock(&xdm_table()->tree_lock);
}

static void hit_node(const struct tree_hit *hit, struct xdm_tree_node *out)
{
	out->dir = !hit->is_file;
	if (!hit->is_file)
		out->mode = DIR_MODE;
	else
		out->mode = hit->attr ? attr_mode(hit->attr) : file_mode(hit->file);
}

int xdm_tree_stat(const char *path, struct xdm_tree_node *out)
{
	struct tree_hit hit;
	int err;

	if (!out)
		return -EINVAL;
	tree_read_lock();
	err = walk(path, &hit);
	if (!err)
		hit_node(&hit, out);
	tree_unlock();
	return err;
}

static int list_files(const struct tree_pos *dir, tree_list_fn fn, void *arg)
{
	struct xdm_tree_node file = { .dir = false, .mode = 0444 };
	int err = 0;

	for (const struct tree_file *f = core_files(dir->level); !err && f && f->name; f++) {
		file.mode = file_mode(f);
		err = fn(f->name, &file, arg);
	}
	if (dir->level != AT_LAYER)
		return err;
	for (const struct xdm_attr *a = dir->layer->ops->attrs; !err && a && a->name; a++) {
		if ((!a->show && !a->store) || !entry_name_ok(a->name))
			continue;
		file.mode = attr_mode(a);
		err = fn(a->name, &file, arg);
	}
	return err;
}

static int list_dirs(const struct tree_pos *dir, tree_list_fn fn, void *arg)
{
	static const char *const runtime_dirs[] = { "blocks", "streams", "layers" };
	const struct xdm_tree_node sub = { .dir = true, .mode = DIR_MODE };
	struct xdm_runtime *rt = dir->rt;
	char name[NAME_MAX + 1];
	int err = 0;

	switch (dir->level) {
	case AT_ROOT:
		for (rt = xdm_table()->published; !err && rt; rt = rt->published_next)
			err = fn(rt->name, &sub, arg);
		return err;
	case AT_RUNTIME:
		for (size_t i = 0; !err && i < 3; i++)
			err = fn(runtime_dirs[i], &sub, arg);
		for (uint32_t i = 0; !err && i < rt->nlayers; i++) {
			const char *g = rt->layers[i].ops->attr_group;

			/* Shown once, for its topmost layer. */
			if (g && group_layer(rt, g) == &rt->layers[i])
				err = fn(g, &sub, arg);
		}
		return err;
	case AT_BLOCKS:
		return xdm_tree_list_blocks(rt, fn, arg);
	case AT_STREAMS:
		for (uint32_t i = 0, n = xdm_stream_count(rt); !err && i < n; i++) {
			snprintf(name, sizeof(name), "%u", i);
			err = fn(name, &sub, arg);
		}
		return err;
	case AT_LAYERS:
		for (uint32_t i = 0; !err && i < rt->nlayers; i++) {
			/* A name that does not fit could not be looked up again. */
			if ((size_t)snprintf(name, sizeof(name), "%u-%s", i,
					     rt->layers[i].ops->name) >= sizeof(name))
				continue;
			err = fn(name, &sub, arg);
		}
		return err;
	default:
		return 0;
	}
}

int xdm_tree_list(const char *path, tree_list_fn fn, void *arg)
{
	struct tree_hit hit;
	int err;

	if (!fn)
		return -EINVAL;
	tree_read_lock();
	err = walk(path, &hit);
	if (!err && hit.is_file)
		err = -ENOTDIR;
	if (!err)
		err = list_files(&hit.dir, fn, arg);
	if (!err)
		err = list_dirs(&hit.dir, fn, arg);
	tree_unlock();
	return err;
}

/* A module's show writes into a fixed buffer: grow it until the value fits. */
static int show_attr(const struct tree_hit *hit, struct tree_buf *b)
{
	size_t len = 4096;

	for (;;) {
		char *p = malloc(len);
		int n;

		if (!p)
			return -ENOMEM;
		n = hit->attr->show(hit->dir.layer, p, len);
		if (n >= 0 && (size_t)n < len) {
			free(b->p);
			b->p = p;
			b->len = (size_t)n;
			b->cap = len;
			p[n] = '\0';
			return 0;
		}
		free(p);
		if ((n != -EOVERFLOW && n != -EFBIG && n != -ENOSPC) || len >= (64u << 20))
			return n < 0 ? n : -EOVERFLOW;
		len *= 4;
	}
}

int xdm_tree_show(const char *path, char **text, size_t *len)
{
	struct tree_buf b = { 0 };
	struct tree_hit hit;
	int err;

	if (!text || !len)
		return -EINVAL;
	tree_read_lock();
	err = walk(path, &hit);
	if (!err && !hit.is_file)
		err = -EISDIR;
	if (!err && (hit.attr ? !hit.attr->show : !hit.file->show))
		err = -EACCES;		/* write-only */
	if (!err)
		err = hit.attr ? show_attr(&hit, &b) : hit.file->show(&hit.dir, &b);
	tree_unlock();
	if (!err)
		err = b.err;
	if (!err && !b.p)
		tree_printf(&b, "%s", "");	/* an empty value is still a string */
	if (!err)
		err = b.err;
	if (err) {
		free(b.p);
		return err;
	}
	*text = b.p;
	*len = b.len;
	return 0;
}

/* A module's attribute that its mode lets be written, or a core action. */
static bool store_allowed(const struct tree_hit *hit)
{
	if (hit->attr)
		return hit->attr->store && (attr_mode(hit->attr) & 0200);
	return hit->file->store && (file_mode(hit->file) & 0200);
}

int xdm_tree_store(const char *path, const char *value, size_t len)
{
	struct tree_hit hit;
	char *copy;
	int err;

	/* A value is a line; anything this long is no value of ours. */
	if (!value || len > XDM_TREE_VALUE_MAX)
		return -EINVAL;
	/* The module parses a NUL-terminated copy of exactly what was written. */
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, value, len);
	copy[len] = '\0';
	tree_read_lock();
	err = walk(path, &hit);
	if (!err && !hit.is_file)
		err = -EISDIR;
	if (!err && !store_allowed(&hit))
		err = -EACCES;
	if (!err && (len == 0 || strlen(copy) != len))
		err = -EINVAL;
	if (!err) {
		/* Tree calls leave the thread's error alone; a handler may not. */
		struct xdm_error saved = *xdm_last_error();

		err = hit.attr ? hit.attr->store(hit.dir.layer, copy, len)
			       : hit.file->store(&hit.dir, copy, len);
		xdm_error_restore(&saved);
	}
	tree_unlock();
	free(copy);
	return err > 0 ? 0 : err;
}
