/* SPDX-License-Identifier: MIT */
/*
 * snapshot_live.c - xdmctl snapshot --pid PID | --chunks FILE: what a live
 * process's stacks hold, from its tree's chunks files (xdm-fs(7)), as the
 * pickled snapshot PyTorch's memory viewer reads (xdmctl(1), SNAPSHOT).
 *
 * Each chunk becomes a segment, as torch's caching allocator reports the
 * memory it reserved, and its pieces the segment's blocks: an active piece
 * (a live block starts in it) "active_allocated", any other "inactive".
 * So the viewer's segment view shows what a log cannot: the memory
 * reserved around the blocks, and how it is cut up.  A tree has no
 * history: device_traces holds an empty list per device.
 *
 * The files are read by children with a deadline (tree_read.c) and parsed
 * strictly (chunks_parse.c): the tree is served by the process it
 * describes, which may be stopped, hung, or written to lie.  A tree of
 * another user cannot be read at all (FUSE lets only its own user in), and
 * is refused with a sentence, as ps names it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "output.h"
#include "pickle.h"
#include "segments.h"
#include "snapshot.h"
#include "tree_read.h"

#define CMD "snapshot"

/* No tree writes a chunks file this large: past it the file is refused. */
#define CHUNKS_MAX_BYTES ((size_t)256 << 20)

struct live {
	FILE *f;
	bool memo[SNAP_K_COUNT];
	struct xdmctl_chunks m;
	uint32_t ndevices;	/* the highest ordinal read, plus one */
};

/* One chunks file into l->m, as of device: an exit code, any failure said. */
static int read_chunks(struct live *l, const char *path, uint32_t device, int timeout_ms)
{
	char *text = NULL;
	size_t len = 0;
	int err = xdmctl_tree_read(path, CHUNKS_MAX_BYTES, timeout_ms, &text, &len);
	int rc;

	switch (err) {
	case 0:
		break;
	case ETIMEDOUT:
		return xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "%s: not read within %d ms (its process "
				   "is stopped or hung)", path, timeout_ms);
	case EFBIG:
		return xdmctl_fail(XDMCTL_EXIT_USAGE, CMD, "%s: more than %zu MiB: not a chunks "
				   "file", path, CHUNKS_MAX_BYTES >> 20);
	default:
		return xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "%s: cannot be read: %s", path,
				   strerror(err));
	}
	rc = xdmctl_chunks_parse(&l->m, CMD, path, text, len, device);
	free(text);
	if (device >= l->ndevices)
		l->ndevices = device + 1;
	if (rc == XDMCTL_CHUNKS_NOMEM)
		return XDMCTL_EXIT_FAIL;
	return rc ? XDMCTL_EXIT_USAGE : XDMCTL_EXIT_OK;
}

/* Why a tree could not be read, as ps says it. */
static const char *tree_trouble(int err)
{
	switch (err) {
	case EACCES:
	case EPERM:
		return "it is another user's: run xdmctl as that user";
	case ETIMEDOUT:
		return "it does not answer (its process is stopped or hung)";
	case ENOTCONN:
		return "its process is gone";
	default:
		return strerror(err);
	}
}

/*
 * The ordinal of a runtime's directory, "N" or "N.K" (xdm-fs(7)); -1 for
 * any other name of the tree's root (its files) or one out of range.
 */
static long runtime_ordinal(const char *name, size_t len)
{
	size_t digits = 0, dot = 0;
	long ordinal = 0;

	for (size_t i = 0; i < len; i++) {
		if (name[i] == '.' && !dot && digits && i + 1 < len) {
			dot = i;
			continue;
		}
		if (name[i] < '0' || name[i] > '9' || ++digits > 20)
			return -1;
		if (!dot && (ordinal = ordinal * 10 + (name[i] - '0')) > 4095)
			return -1;
	}
	return digits ? ordinal : -1;
}

/* Each runtime directory of the tree at mount: an exit code, any failure said. */
static int read_runtimes(struct live *l, const char *mount, int timeout_ms)
{
	char *names = NULL, *at, *nl;
	char path[4096 + 64];
	size_t len = 0;
	int err = xdmctl_tree_list(mount, CHUNKS_MAX_BYTES, timeout_ms, &names, &len);
	int rc = XDMCTL_EXIT_OK;

	if (err == ETIMEDOUT)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "%s: not listed within %d ms (its "
				   "process is stopped or hung)", mount, timeout_ms);
	if (err)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "%s: cannot be listed: %s", mount,
				   strerror(err));
	for (at = names; !rc && (nl = memchr(at, '\n', len - (size_t)(at - names))); at = nl + 1) {
		long ordinal = runtime_ordinal(at, (size_t)(nl - at));

		if (ordinal < 0)
			continue;
		*nl = '\0';
		snprintf(path, sizeof(path), "%s/%s/chunks", mount, at);
		rc = read_chunks(l, path, (uint32_t)ordinal, timeout_ms);
	}
	free(names);
	return rc;
}

/* Every runtime of the tree pid serves: an exit code, any failure said. */
static int read_process(const struct xdmctl_ctx *ctx, struct live *l, long pid, int timeout_ms)
{
	const struct xdmctl_mount *m;
	struct xdmctl_mount *mounts = NULL;
	size_t n = 0, unread = 0;
	int rc;

	rc = xdmctl_mounts_read(ctx, false, timeout_ms, &mounts, &n);
	if (rc)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "the mounted trees cannot be listed: %s",
				   strerror(-rc));
	m = xdmctl_mount_of(mounts, n, (pid_t)pid);
	for (size_t i = 0; !m && i < n; i++)
		unread += mounts[i].err != 0;
	if (!m && unread == 1) {
		for (size_t i = 0; i < n; i++)
			if (mounts[i].err)
				rc = xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "no tree of pid %ld; the tree at "
						 "%s cannot be read: %s", pid, mounts[i].path,
						 tree_trouble(mounts[i].err));
		goto out;
	}
	if (!m) {
		rc = xdmctl_fail(XDMCTL_EXIT_NONE, CMD, "no tree of pid %ld is mounted%s", pid,
				 unread ? " among those that could be read (xdmctl ps says why "
					  "the others could not)" : " (xdmctl ps lists the trees)");
		goto out;
	}
	rc = read_runtimes(l, m->path, timeout_ms);
out:
	free(mounts);
	return rc;
}

static int by_device_address(const void *a, const void *b)
{
	const struct xdmctl_chunk *x = a, *y = b;

	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

static void put_key(struct live *l, enum snap_key k)
{
	snap_put_key(l->f, l->memo, k);
}

/* "frames": []: a tree keeps no stacks. */
static void put_no_frames(struct live *l)
{
	struct pickle_list none;

	put_key(l, SNAP_K_FRAMES);
	pickle_list_begin(&none, l->f);
	pickle_list_end(&none);
}

static void put_block(struct live *l, const struct xdmctl_piece *p)
{
	pickle_dict_begin(l->f);
	put_key(l, SNAP_K_ADDRESS);
	pickle_uint(l->f, p->ptr);
	put_key(l, SNAP_K_SIZE);
	pickle_uint(l->f, p->bytes);
	/* The bytes asked for are the registry's; a piece's are all the viewer gets. */
	put_key(l, SNAP_K_REQUESTED_SIZE);
	pickle_uint(l->f, p->active ? p->bytes : 0);
	put_key(l, SNAP_K_STATE);
	put_key(l, p->active ? SNAP_K_ACTIVE_ALLOCATED : SNAP_K_INACTIVE);
	put_no_frames(l);
	pickle_dict_end(l->f);
}

/* A chunk as a segment, its pieces as its blocks. */
static void put_segment(struct live *l, const struct xdmctl_chunk *c)
{
	const struct xdmctl_piece *p = l->m.p + c->first;
	struct pickle_list blocks;
	uint64_t active = 0;

	for (uint32_t i = 0; i < c->npieces; i++)
		active += p[i].active ? p[i].bytes : 0;
	pickle_dict_begin(l->f);
	put_key(l, SNAP_K_DEVICE);
	pickle_uint(l->f, c->device);
	put_key(l, SNAP_K_ADDRESS);
	pickle_uint(l->f, c->ptr);
	put_key(l, SNAP_K_TOTAL_SIZE);
	pickle_uint(l->f, c->bytes);
	put_key(l, SNAP_K_ALLOCATED_SIZE);
	pickle_uint(l->f, active);
	/* Nothing is pending a free in a tree's view: active is what is allocated. */
	put_key(l, SNAP_K_ACTIVE_SIZE);
	pickle_uint(l->f, active);
	put_key(l, SNAP_K_REQUESTED_SIZE);
	pickle_uint(l->f, active);
	put_key(l, SNAP_K_STREAM);
	pickle_uint(l->f, c->stream);
	put_key(l, SNAP_K_SEGMENT_TYPE);
	put_key(l, c->bytes > SNAP_SMALL_SEGMENT ? SNAP_K_LARGE : SNAP_K_SMALL);
	put_key(l, SNAP_K_IS_EXPANDABLE);
	pickle_bool(l->f, false);
	put_no_frames(l);
	put_key(l, SNAP_K_BLOCKS);
	pickle_list_begin(&blocks, l->f);
	for (uint32_t i = 0; i < c->npieces; i++) {
		pickle_list_item(&blocks);
		put_block(l, &p[i]);
	}
	pickle_list_end(&blocks);
	pickle_dict_end(l->f);
}

static void put_snapshot(struct live *l)
{
	struct pickle_list list, none;

	pickle_begin(l->f);
	pickle_dict_begin(l->f);
	put_key(l, SNAP_K_SEGMENTS);
	pickle_list_begin(&list, l->f);
	for (size_t i = 0; i < l->m.n; i++) {
		pickle_list_item(&list);
		put_segment(l, &l->m.c[i]);
	}
	pickle_list_end(&list);
	put_key(l, SNAP_K_DEVICE_TRACES);
	pickle_list_begin(&list, l->f);
	for (uint32_t d = 0; d < l->ndevices; d++) {
		pickle_list_item(&list);
		pickle_list_begin(&none, l->f);
		pickle_list_end(&none);
	}
	pickle_list_end(&list);
	pickle_dict_end(l->f);
	pickle_end(l->f);
}

int xdmctl_snapshot_live(const struct xdmctl_ctx *ctx, const struct snap_live_source *src,
			 const char *out)
{
	struct live l = { 0 };
	int rc;

	if (src->pid > 0)
		rc = read_process(ctx, &l, src->pid, (int)src->timeout_ms);
	else
		rc = read_chunks(&l, src->chunks, (uint32_t)src->device, (int)src->timeout_ms);
	if (rc)
		goto out;
	/* Files that held nothing made no array: qsort takes no NULL. */
	if (l.m.n)
		qsort(l.m.c, l.m.n, sizeof(*l.m.c), by_device_address);
	l.f = xdmctl_output_open(CMD, out);
	if (!l.f) {
		rc = XDMCTL_EXIT_FAIL;
		goto out;
	}
	put_snapshot(&l);
	rc = xdmctl_output_close(CMD, out, l.f, true);
out:
	xdmctl_chunks_free(&l.m);
	return rc;
}
