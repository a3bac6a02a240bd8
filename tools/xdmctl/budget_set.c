/* SPDX-License-Identifier: MIT */
/*
 * budget_set.c - xdmctl budget --set: the limit of a device's budget, or
 * of one of its groups, changed for every process on it.
 *
 * It follows the rules of a write to a tree's budget/limit or
 * budget/group_limit: the size is read first, by xdm_parse_size() with the
 * device's memory as the base of a %, and a size that cannot be read is an
 * error that changes nothing.  The limit and its check word are then
 * written together under the segment's lock, taken the way the adaptor
 * takes it (both link lib/budget_segment), so a process validating the
 * segment at attach never sees one without the other.  A group is looked
 * up again under the lock: its last member may have left since the
 * listing, and its entry be another group's by now.  Lowering a limit
 * below the usage refuses new allocations until enough is freed; nothing
 * already held is taken back.
 *
 * Root never maps or locks a segment that another user can write
 * (as_owner.c says why): a child that has become the segment's owner does
 * all of it, and answers here what it did.  A user other than root works
 * in its own process, as the kernel lets it: another user's 0600 segment
 * is EACCES, said.  Nobody locks inside another user's file that sits
 * where anyone can make one (reader.c): the adaptor itself would not
 * attach to it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "lib/names/names.h"
#include "as_owner.h"
#include "segments.h"

/* How long the child that works as the owner may take: the lock's bound and some. */
#define SET_CHILD_TIMEOUT_MS ((BUDGET_LOCK_WAIT_S + 5) * 1000)

/* What a setting came to, wherever it was done (a child passes it back). */
struct set_outcome {
	int rc;			/* enum xdmctl_exit */
	uint64_t before, limit;
	char why[400];		/* the failure's sentence, without "xdmctl: budget: " */
};

/* What the setting is given. */
struct set_request {
	const struct xdmctl_segment *seg;
	const char *group;	/* NULL: the device's limit */
	const char *text;	/* the size */
	/* The file examined before: the one opened must be it (a child's open comes later). */
	dev_t dev;
	ino_t ino;
	uid_t owner;
	/* Refuse another user's file, reached in a directory anyone can write. */
	bool refuse_foreign;
};

__attribute__((format(printf, 3, 4)))
static void outcome_fail(struct set_outcome *out, int rc, const char *fmt, ...)
{
	va_list ap;

	out->rc = rc;
	va_start(ap, fmt);
	vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
}

/* The size text as bytes, with the device's memory as the base of a %. */
static void parse(const struct set_request *req, uint64_t device_total, uint64_t *limit,
		  struct set_outcome *out)
{
	if (xdm_parse_size(req->text, device_total, limit) == XDM_OK)
		return;
	if (strchr(req->text, '%') && device_total == 0)
		outcome_fail(out, XDMCTL_EXIT_USAGE,
			     "--set '%s': a %% needs the device's memory, which this budget does "
			     "not record; give bytes",
			     req->text);
	else
		outcome_fail(out, XDMCTL_EXIT_USAGE,
			     "--set '%s' is not a size: give bytes, K/M/G/T, a %% of the "
			     "device's memory, or max; the limit is unchanged",
			     req->text);
}

static void no_group(const struct set_request *req, struct set_outcome *out)
{
	outcome_fail(out, XDMCTL_EXIT_NONE,
		     "budget %s has no group '%s' (xdmctl budget %s lists its groups); nothing "
		     "is changed",
		     req->seg->key, req->group, req->seg->key);
}

/* Under the lock: the entry of the group named name, or NULL. */
static struct budget_group *group_locked(struct budget_shm *s, const char *name)
{
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++) {
		struct budget_group *g = &s->groups[i];

		if (g->members && strnlen(g->name, sizeof(g->name)) == strlen(name) &&
		    strncmp(g->name, name, sizeof(g->name)) == 0)
			return g;
	}
	return NULL;
}

/* Under the lock: the limit set, or why not. */
static void set_locked(const struct set_request *req, struct budget_shm *s, uint64_t limit,
		       struct set_outcome *out)
{
	const char *name = req->seg->name, *group = req->group;
	_Atomic uint64_t *limitp, *checkp;
	struct budget_group *g = NULL;

	/* The last process left since the listing: the name is gone with it. */
	if (s->unlinked) {
		outcome_fail(out, XDMCTL_EXIT_NONE,
			     "/%s went away (its last process left): nothing to set", name);
		return;
	}
	if (group) {
		g = group_locked(s, group);
		if (!g) {
			no_group(req, out);
			return;
		}
		limitp = &g->limit;
		checkp = &g->limit_check;
	} else {
		limitp = &s->limit;
		checkp = &s->limit_check;
	}
	out->before = atomic_load_explicit(limitp, memory_order_relaxed);
	/* A segment an attach would refuse is not mended behind its back. */
	if (atomic_load_explicit(checkp, memory_order_relaxed) != ~out->before) {
		outcome_fail(out, XDMCTL_EXIT_FAIL,
			     "the limit of /%s%s%s does not match its check word: the segment is "
			     "corrupt (xdm-budget(7), THE SEGMENT); the limit is unchanged",
			     name, group ? ", group " : "", group ? group : "");
		return;
	}
	if (g)
		budget_set_group_limit_locked(g, limit);
	else
		budget_set_limit_locked(s, limit);
	out->limit = limit;
	out->rc = XDMCTL_EXIT_OK;
}

/*
 * The setting, in this process: the segment mapped for writing, the size
 * read against its device, the limit set under its lock.  As root this
 * runs only in a child that has become the owner (or for root's own file).
 */
static void apply(void *arg, int dir, void *result)
{
	const struct set_request *req = arg;
	const char *name = req->seg->name;
	struct set_outcome *out = result;
	struct budget_shm *s;
	struct stat st;
	uint64_t limit;
	char why[160];
	int fd, err, lock;

	memset(out, 0, sizeof(*out));
	fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		outcome_fail(out, XDMCTL_EXIT_FAIL, "/%s cannot be opened for writing: %s%s", name,
			     strerror(errno),
			     errno != EACCES ? "" :
			     req->owner != geteuid() ? " (it is another user's budget)" :
			     " (its mode denies it to its own user)");
		return;
	}
	/* Mapped only once it is shown to be the file examined, and whose. */
	if (fstat(fd, &st) != 0 || st.st_dev != req->dev || st.st_ino != req->ino) {
		outcome_fail(out, XDMCTL_EXIT_FAIL,
			     "/%s was replaced by another file while it was being set: the limit "
			     "is unchanged; run it again", name);
		goto out_close;
	}
	if (req->refuse_foreign && st.st_uid != geteuid()) {
		outcome_fail(out, XDMCTL_EXIT_FAIL,
			     "/%s is uid %u's, in a directory anyone can write: xdmctl takes no "
			     "lock inside it (anyone could have made it); the limit is unchanged",
			     name, (unsigned int)st.st_uid);
		goto out_close;
	}
	s = budget_segment_map_fd(fd, true, why, sizeof(why));
	if (!s) {
		outcome_fail(out, XDMCTL_EXIT_FAIL, "/%s %s", name, why);
		goto out_close;
	}
	parse(req, s->device_total, &limit, out);
	if (out->why[0])
		goto out_unmap;
	lock = budget_lock(s, fd);
	if (lock < 0) {
		err = -lock;
		outcome_fail(out, XDMCTL_EXIT_FAIL,
			     "the lock of /%s cannot be taken (%s): the limit is unchanged", name,
			     err == ETIMEDOUT ? "a process holding it is stopped" : strerror(err));
		goto out_unmap;
	}
	set_locked(req, s, limit, out);
	budget_unlock(s, lock);
out_unmap:
	budget_segment_unmap(s);
out_close:
	close(fd);
}

static void say(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		const char *group, uint64_t before, uint64_t limit)
{
	char a[32], b[32];

	if (ctx->json) {
		printf("{\"key\": ");
		xdmctl_json_string(stdout, seg->key);
		if (group) {
			printf(", \"group\": ");
			xdmctl_json_string(stdout, group);
		}
		printf(", \"limit_before\": %" PRIu64 ", \"limit\": %" PRIu64 "}\n", before, limit);
		return;
	}
	printf("budget %s%s%s: limit %s -> %s\n", seg->key, group ? " group " : "",
	       group ? group : "", before == UINT64_MAX ? "none" : xdmctl_human(before, a, sizeof(a)),
	       limit == UINT64_MAX ? "none" : xdmctl_human(limit, b, sizeof(b)));
}

/* A sentence from a child is text another user's process wrote: one line of plain bytes. */
static void tame(char *text, size_t len)
{
	text[len - 1] = '\0';
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
}

/* Sets it in a child that has become whoever may write the file (as_owner.c). */
static void apply_as_owner(struct set_request *req, int dir, const struct xdmctl_identity *who,
			   struct set_outcome *out)
{
	char why[300], user[64];

	names_user(who->uid, user, sizeof(user));
	if (xdmctl_as_owner(who, dir, apply, req, out, sizeof(*out), SET_CHILD_TIMEOUT_MS, why,
			    sizeof(why)) == 0) {
		tame(out->why, sizeof(out->why));
		if (out->rc < XDMCTL_EXIT_OK || out->rc > XDMCTL_EXIT_NONE)
			outcome_fail(out, XDMCTL_EXIT_FAIL,
				     "/%s: the process that set it as uid %u answered nonsense",
				     req->seg->name, (unsigned int)who->uid);
		else if (out->rc != XDMCTL_EXIT_OK)
			snprintf(out->why + strlen(out->why), sizeof(out->why) - strlen(out->why),
				 " (as user %s (uid %u): root works inside a file that another "
				 "user can write only as that user)",
				 user, (unsigned int)who->uid);
		return;
	}
	outcome_fail(out, XDMCTL_EXIT_FAIL,
		     "/%s is writable by user %s (uid %u), so root sets it only as that user, "
		     "and %s; the limit may not have changed (xdmctl budget shows it)",
		     req->seg->name, user, (unsigned int)who->uid, why);
}

int xdmctl_budget_set(const struct xdmctl_ctx *ctx, const struct xdmctl_segment *seg,
		      const char *group, const char *text)
{
	struct set_request req = { .seg = seg, .group = group, .text = text };
	struct set_outcome out = { .rc = XDMCTL_EXIT_FAIL };
	struct xdmctl_identity who;
	struct stat st;
	int dir;

	/* Skipped for its owner is no reason to give up: root may reach it as that user. */
	if (seg->unreadable[0] && !seg->skipped)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "/%s %s", seg->name,
				   seg->unreadable);
	dir = open(ctx->shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "budget", "cannot open %s: %s", ctx->shm_dir,
				   strerror(errno));
	if (fstatat(dir, seg->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		outcome_fail(&out, XDMCTL_EXIT_FAIL, "/%s cannot be examined: %s", seg->name,
			     strerror(errno));
		goto out;
	}
	req.dev = st.st_dev;
	req.ino = st.st_ino;
	req.owner = st.st_uid;
	req.refuse_foreign = seg->skipped;
	if (geteuid() == 0 && xdmctl_owner_identity(&st, &who))
		apply_as_owner(&req, dir, &who, &out);
	else
		apply(&req, dir, &out);
out:
	close(dir);
	/* Said after the lock is let go: a full pipe must not hold it. */
	if (out.rc == XDMCTL_EXIT_OK)
		say(ctx, seg, group, out.before, out.limit);
	else
		xdmctl_fail(out.rc, "budget", "%s", out.why);
	return out.rc;
}
