/* SPDX-License-Identifier: MIT */
/*
 * member_config.c - what a process says about itself before it attaches
 * (the segment's name, its directory, its group, who it is), and the
 * sentence of a refusal.  The budget adaptor takes these from its
 * parameters and the preload shim from its environment; the rules, and
 * the words of the errors, are the same for both.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "lib/names/names.h"

enum xdm_status budget_member_name(struct budget_member *m, const char *who, const char *key)
{
	size_t pre = strlen(BUDGET_NAME_PREFIX), len = 0;
	char expanded[BUDGET_KEY_MAX + 1];

	for (const char *k = key; *k; k++) {
		const char *piece = k;
		size_t n = 1;

		if (k[0] == '%' && k[1] == 'u') {
			piece = m->uuid;
			n = strlen(m->uuid);
			k++;
		} else if (k[0] == '%' && k[1] == '%') {
			k++;
		} else if (k[0] == '%') {
			return xdm_error_set(XDM_E_CONFIG, "%s: in key '%s', '%%' must be "
					     "followed by 'u' (the device's UUID) or '%%'", who, key);
		}
		if (len + n > BUDGET_KEY_MAX)
			return xdm_error_set(XDM_E_CONFIG, "%s: key must be 1 to %d characters "
					     "(after %%u is replaced), not '%s'", who,
					     BUDGET_KEY_MAX, key);
		memcpy(expanded + len, piece, n);
		len += n;
	}
	if (len == 0)
		return xdm_error_set(XDM_E_CONFIG, "%s: key must be 1 to %d characters", who,
				     BUDGET_KEY_MAX);
	memcpy(m->name, BUDGET_NAME_PREFIX, pre);
	for (size_t i = 0; i < len; i++) {
		char c = expanded[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-';

		m->name[pre + i] = ok ? c : '_';
	}
	m->name[pre + len] = '\0';
	return XDM_OK;
}

/*
 * A directory a group shares: its members only.  Root too is refused, not
 * for want of permission: every member can write the segments there, and
 * root never locks or writes inside a file another user can write.
 */
static enum xdm_status shared_dir_member(struct budget_member *m, const char *who,
					 const char *dir, const struct stat *st)
{
	char group[64];

	names_group(st->st_gid, group, sizeof(group));
	if (geteuid() == 0)
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: %s is the budget directory of group '%s' (gid %u), and "
				     "root does not use it: its segments are writable by every "
				     "member. Run as a member of '%s', or set dir= or "
				     "XDM_BUDGET_DIR to a directory of root's (/dev/shm)",
				     who, dir, group, (unsigned)st->st_gid, group);
	if (!budget_in_group(st->st_gid))
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: %s is the budget directory of group '%s' (gid %u), and "
				     "this process (uid %u) is not in that group. Ask to be added "
				     "to it (usermod -aG %s USER, then log in again), or set dir= "
				     "or XDM_BUDGET_DIR to a directory of your own for a budget of "
				     "your own",
				     who, dir, group, (unsigned)st->st_gid, (unsigned)geteuid(), group);
	m->shared = true;
	m->shared_gid = st->st_gid;
	return XDM_OK;
}

/* After budget_member_name: the path is the directory and the name. */
enum xdm_status budget_member_dir(struct budget_member *m, const char *who, const char *dir)
{
	enum xdm_status st_err;
	struct stat st;

	m->shared = false;
	if (dir[0] != '/')
		return xdm_error_set(XDM_E_CONFIG, "%s: dir must be an absolute path, not '%s'",
				     who, dir);
	if (stat(dir, &st) != 0)
		return xdm_error_set(XDM_E_CONFIG, "%s: dir %s: %s", who, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return xdm_error_set(XDM_E_CONFIG, "%s: dir %s is not a directory", who, dir);
	if (strlen(dir) + strlen(m->name) >= sizeof(m->path))
		return xdm_error_set(XDM_E_CONFIG, "%s: dir %s is too long", who, dir);
	if (budget_dir_is_shared(&st)) {
		st_err = shared_dir_member(m, who, dir, &st);
		if (st_err)
			return st_err;
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: dir %s belongs to uid %u, who could replace the "
				     "segment: use a directory of root's or of uid %u",
				     who, dir, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: dir %s is writable by others (mode %03o) without the "
				     "sticky bit: any of them could replace the segment. To share "
				     "it with a group, make it root's and set-group-ID, writable "
				     "by the group only (mode 2770)",
				     who, dir, (unsigned)(st.st_mode & 0777));
	}
	memcpy(m->dir, dir, strlen(dir) + 1);
	memcpy(m->path, dir, strlen(dir));
	memcpy(m->path + strlen(dir), m->name, strlen(m->name) + 1);
	return XDM_OK;
}

enum xdm_status budget_member_group(struct budget_member *m, const char *who, const char *name,
				    const char *limit)
{
	m->group_limit = UINT64_MAX;
	m->group_name[0] = '\0';
	if (!name) {
		if (limit)
			return xdm_error_set(XDM_E_CONFIG, "%s: group_limit without a group: "
					     "name one with group= or XDM_BUDGET_GROUP", who);
		return XDM_OK;
	}
	if (strlen(name) >= sizeof(m->group_name) || strchr(name, '\n'))
		return xdm_error_set(XDM_E_CONFIG, "%s: a group name is one line of at most %d "
				     "bytes, not '%s'", who, BUDGET_GROUP_NAME_MAX - 1, name);
	snprintf(m->group_name, sizeof(m->group_name), "%s", name);
	if (limit && xdm_parse_size(limit, m->device_total, &m->group_limit) != XDM_OK)
		return xdm_error_set(XDM_E_CONFIG, "%s: group_limit '%s' is not a size "
				     "(K/M/G/T, %% of the device, max)", who, limit);
	return XDM_OK;
}

enum xdm_status budget_member_identity(struct budget_member *m, const char *who,
				       const char *container)
{
	int err;

	m->pid = getpid();
	err = budget_self_identity(container, &m->start_time, &m->pidns, m->comm, m->container);
	if (err)
		return xdm_error_set(XDM_E_NOT_SUPPORTED,
				     "%s: cannot read this process's start time from "
				     "/proc/self/stat (%s): with its pid it names the process's "
				     "slot", who, strerror(-err));
	return XDM_OK;
}

/*
 * Every refusal counts in the device's refusals; the group's count their
 * own.  A process in a group is told both figures (the group refused when
 * it has less room than was asked).
 */
void budget_member_refusal(struct budget_member *m, const char *who, uint64_t requested,
			   uint64_t remaining, const char *why, char *buf, size_t len)
{
	struct budget_shm *s = m->shm;
	struct budget_group *g = m->group;
	uint64_t limit = atomic_load_explicit(&s->limit, memory_order_relaxed);
	uint64_t device_room = budget_room(&s->used, &s->limit), group_room, group_limit;

	atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
	if (!g) {
		snprintf(buf, len, "%s: %s%" PRIu64 " bytes requested, %" PRIu64 " remaining of "
			 "limit %" PRIu64 " on device %s", who, why, requested, remaining, limit,
			 m->uuid);
		return;
	}
	group_room = budget_room(&g->used, &g->limit);
	group_limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
	if (group_room < requested && group_room <= device_room) {
		atomic_fetch_add_explicit(&g->refusals, 1, memory_order_relaxed);
		snprintf(buf, len, "%s: %sgroup '%s' refused: %" PRIu64 " bytes requested, "
			 "%" PRIu64 " remaining of the group's limit %" PRIu64 " (the device %s "
			 "has %" PRIu64 " remaining of %" PRIu64 ")", who, why, m->group_name,
			 requested, group_room, group_limit, m->uuid, device_room, limit);
		return;
	}
	snprintf(buf, len, "%s: %sthe device refused: %" PRIu64 " bytes requested, %" PRIu64
		 " remaining of limit %" PRIu64 " on device %s (group '%s' has %" PRIu64
		 " remaining of %" PRIu64 ")", who, why, requested, device_room, limit, m->uuid,
		 m->group_name, group_room, group_limit);
}
