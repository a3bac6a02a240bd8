/* SPDX-License-Identifier: MIT */
/*
 * ipc_allow.c - who, besides the exporter's own user, its server answers:
 * the allow-list of ipc_allow (xdm.conf(5)) or $XDM_IPC_ALLOW.
 *
 * An entry is a user (a name or a uid) or a group (@name or @gid);
 * entries are separated by commas or blanks.  Names are resolved when the
 * list is read, so that a name no user has is an error then, not a peer
 * silently refused later.  A peer is admitted by its uid, its primary
 * gid, or any of its supplementary groups, as the kernel reports them for
 * the socket (SO_PEERCRED, SO_PEERGROUPS): never by what the peer says.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/internal.h"

static bool is_separator(char c)
{
	return c == ',' || c == ' ' || c == '\t';
}

/* A decimal id, all of word; not (id_t)-1, which means "none" to the kernel. */
static bool parse_id(const char *word, size_t len, uint32_t *id)
{
	unsigned long long v = 0;

	if (!len || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (word[i] < '0' || word[i] > '9')
			return false;
		v = v * 10 + (unsigned long long)(word[i] - '0');
	}
	if (v >= UINT32_MAX)
		return false;
	*id = (uint32_t)v;
	return true;
}

static bool user_id(const char *name, uid_t *uid)
{
	struct passwd pw, *found = NULL;
	char buf[4096];

	if (getpwnam_r(name, &pw, buf, sizeof(buf), &found) != 0 || !found)
		return false;
	*uid = found->pw_uid;
	return true;
}

static bool group_id(const char *name, gid_t *gid)
{
	struct group gr, *found = NULL;
	char buf[16384];

	if (getgrnam_r(name, &gr, buf, sizeof(buf), &found) != 0 || !found)
		return false;
	*gid = found->gr_gid;
	return true;
}

/* One entry of the list into a; false with why. */
static bool add_entry(struct xdm_ipc_allow *a, const char *word, size_t len, char *why,
		      size_t whylen)
{
	bool group = word[0] == '@';
	char name[256];
	uint32_t id;

	if (group) {
		word++;
		len--;
	}
	if (!len || len >= sizeof(name)) {
		snprintf(why, whylen, "an entry of ipc_allow is a user (name or uid) or a group "
			 "(@name or @gid)");
		return false;
	}
	if ((group ? a->ngids : a->nuids) >= XDM_IPC_ALLOW_MAX) {
		snprintf(why, whylen, "ipc_allow names more than %d %s", XDM_IPC_ALLOW_MAX,
			 group ? "groups" : "users");
		return false;
	}
	memcpy(name, word, len);
	name[len] = '\0';
	if (group) {
		gid_t gid;

		if (parse_id(name, len, &id))
			gid = (gid_t)id;
		else if (!group_id(name, &gid)) {
			snprintf(why, whylen, "ipc_allow: no group is named '%s'", name);
			return false;
		}
		a->gids[a->ngids++] = gid;
	} else {
		uid_t uid;

		if (parse_id(name, len, &id))
			uid = (uid_t)id;
		else if (!user_id(name, &uid)) {
			snprintf(why, whylen, "ipc_allow: no user is named '%s'", name);
			return false;
		}
		a->uids[a->nuids++] = uid;
	}
	return true;
}

bool xdm_ipc_allow_parse(const char *text, struct xdm_ipc_allow *out, size_t *at, size_t *len,
			 char *why, size_t whylen)
{
	struct xdm_ipc_allow a;
	size_t i = 0;

	memset(&a, 0, sizeof(a));
	while (text[i]) {
		size_t start, end;

		while (text[i] && is_separator(text[i]))
			i++;
		if (!text[i])
			break;
		start = i;
		while (text[i] && !is_separator(text[i]))
			i++;
		end = i;
		if (!add_entry(&a, text + start, end - start, why, whylen)) {
			*at = start;
			*len = end - start;
			return false;
		}
	}
	*out = a;
	return true;
}

static bool gid_listed(const struct xdm_ipc_allow *a, gid_t gid)
{
	for (uint32_t i = 0; i < a->ngids; i++)
		if (a->gids[i] == gid)
			return true;
	return false;
}

/* Whether any supplementary group of the socket's peer is listed. */
static bool peer_groups_listed(const struct xdm_ipc_allow *a, int fd)
{
	gid_t some[64], *groups = some;
	socklen_t len = sizeof(some);
	bool listed = false;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0) {
		if (errno != ERANGE || !(groups = malloc(len)))
			return false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
			len = 0;
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !listed; i++)
		listed = gid_listed(a, groups[i]);
	if (groups != some)
		free(groups);
	return listed;
}

bool xdm_ipc_allow_admits(const struct xdm_ipc_allow *a, uid_t self, int fd, uid_t uid,
			  gid_t gid)
{
	if (uid == self)
		return true;
	for (uint32_t i = 0; i < a->nuids; i++)
		if (a->uids[i] == uid)
			return true;
	if (!a->ngids)
		return false;
	return gid_listed(a, gid) || peer_groups_listed(a, fd);
}
