/* SPDX-License-Identifier: MIT */
/*
 * allocate.c - Allocate for one container: its devices, all units of one
 * GPU, become a group of that GPU's budget with the units' bytes as its
 * limit, in the budget directory every pod of the node mounts, enforced
 * by the preload shim on whatever the container runs.
 *
 * The budget directory is the plugin's own (root's, mode 0700, made here
 * where it is missing): pods run as root by default, and root does not use
 * a directory that a group may write in (xdm-budget(7), OTHER USERS), so
 * the pods' budgets live in one that only root can change.  Allocate looks
 * at it again each time, so that a directory removed, replaced or made
 * unusable after the plugin started refuses pods with a sentence rather
 * than starting them without a budget.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/device-plugin/dp.h"

int xdm_dp_budget_dir_check(const struct xdm_dp_config *c, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(c->budget_dir, &st)) {
		snprintf(err, errlen, "the budget directory %s (--budget-dir) cannot be used: %s",
			 c->budget_dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen,
			 "the budget directory %s (--budget-dir) is not a directory (a link is not followed)",
			 c->budget_dir);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(err, errlen,
			 "the budget directory %s (--budget-dir) must be the plugin's (uid %u) and writable by nobody else, not uid %u mode %04o: another user could put a file of theirs under a GPU's budget",
			 c->budget_dir, (unsigned int)geteuid(), (unsigned int)st.st_uid,
			 (unsigned int)(st.st_mode & 07777));
		return -1;
	}
	if (access(c->budget_dir, R_OK | W_OK | X_OK)) {
		snprintf(err, errlen, "the budget directory %s (--budget-dir) cannot be used: %s",
			 c->budget_dir, strerror(errno));
		return -1;
	}
	if (access(c->shim, R_OK)) {
		snprintf(err, errlen,
			 "the preload shim %s (--shim) cannot be read: %s; pods would run without a budget",
			 c->shim, strerror(errno));
		return -1;
	}
	return 0;
}

/* mkdir -p, the parents that are missing mode 0755 (the tmpfiles.d entry
 * of the shared directory sets its own mode at boot), the last one 0700. */
static int make_dir(const char *path, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		goto fail;
	/* A set-group-ID parent (the shared directory) gives its group and
	 * its bit to what is made in it: this directory is the plugin's alone. */
	if (chown(buf, geteuid(), getegid()) || chmod(buf, 0700))
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot make the budget directory %s (--budget-dir): %s: %s", path,
		 buf, strerror(errno));
	return -1;
}

int xdm_dp_budget_dir_prepare(const struct xdm_dp_config *c, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(c->budget_dir, &st) && errno == ENOENT) {
		if (make_dir(c->budget_dir, err, errlen))
			return -1;
		xdm_dp_log("made the budget directory %s (uid %u, mode 0700)", c->budget_dir,
			   (unsigned int)geteuid());
	}
	return xdm_dp_budget_dir_check(c, err, errlen);
}

/*
 * The shim needs libxdm.so.0 (its NEEDED entry), which a container's image
 * does not have: the loader would then ignore the preload and run the
 * program without a budget.  Where the library is beside the host's shim
 * (the installed shim is in $(libdir), libxdm's directory), it is mounted
 * beside the container's shim and preloaded first, so that the shim's
 * NEEDED entry finds it loaded.  (A shim of a build tree finds its
 * libxdm by its RUNPATH.)  Writes the library's resolved host path.
 */
static bool shim_library(const struct xdm_dp_config *c, char *host, size_t len)
{
	char dir[PATH_MAX], lib[PATH_MAX], real[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", c->shim);
	if (snprintf(lib, sizeof(lib), "%s/libxdm.so.0", dirname(dir)) >= (int)sizeof(lib) ||
	    !realpath(lib, real) || strlen(real) >= len)
		return false;
	memcpy(host, real, strlen(real) + 1);
	return true;
}

/* k8s-<first 8 hex of the UUID>-u<first unit>x<units>-<8 random hex>: the
 * devices say where it lives, the random part that no later allocation of
 * the same devices joins a group a lingering process still holds. */
static int group_name(const struct xdm_dp_gpu *g, unsigned int first, unsigned int units,
		      char *out, size_t len, char *err, size_t errlen)
{
	const char *hex = strncmp(g->uuid, "GPU-", 4) ? g->uuid : g->uuid + 4;
	unsigned int r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		return -1;
	}
	snprintf(out, len, "k8s-%.8s-u%ux%u-%08x", hex, first, units, r);
	return 0;
}

int xdm_dp_allocate(const struct xdm_dp_state *s, const char *const *ids, size_t nids,
		    struct xdm_dp_answer *a, char *err, size_t errlen)
{
	static const char *const keys[XDM_DP_NENV] = {
		"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD",
		"XDM_BUDGET_DIR", "XDM_BUDGET_GROUP", "XDM_BUDGET_GROUP_LIMIT",
	};
	const struct xdm_dp_config *c = &s->cfg;
	unsigned int first = ~0u, u;
	const struct xdm_dp_gpu *g;
	char group[XDM_DP_GROUP_MAX + 1];
	size_t i, j;
	int gpu = -1, k;

	memset(a, 0, sizeof(*a));
	if (!nids) {
		snprintf(err, errlen, "no device was asked for");
		return -1;
	}
	for (i = 0; i < nids; i++) {
		if (xdm_dp_parse_id(s, ids[i], &k, &u, err, errlen))
			return -1;
		for (j = 0; j < i; j++)
			if (!strcmp(ids[i], ids[j])) {
				snprintf(err, errlen, "device %s is asked for twice", ids[i]);
				return -1;
			}
		if (gpu >= 0 && k != gpu) {
			snprintf(err, errlen,
				 "devices %s and %s are on two GPUs: one container's slice lives on one GPU (ask for at most %u units, which the plugin's preferred allocation packs onto one)",
				 ids[0], ids[i], s->gpus[gpu].units);
			return -1;
		}
		gpu = k;
		if (u < first)
			first = u;
	}
	g = &s->gpus[gpu];
	if (!g->healthy) {
		snprintf(err, errlen, "GPU %s is Unhealthy (it does not answer NVML)", g->uuid);
		return -1;
	}
	if (xdm_dp_budget_dir_check(c, err, errlen))
		return -1;
	if (group_name(g, first, (unsigned int)nids, group, sizeof(group), err, errlen))
		return -1;
	a->gpu = gpu;
	a->units = (unsigned int)nids;
	for (k = 0; k < XDM_DP_NENV; k++)
		a->env[k].key = keys[k];
	snprintf(a->env[0].value, sizeof(a->env[0].value), "%s", g->uuid);
	snprintf(a->env[1].value, sizeof(a->env[1].value), "%s", g->uuid);
	if (shim_library(c, a->mounts[2].host, sizeof(a->mounts[2].host))) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", c->container_shim);
		snprintf(a->mounts[2].container, sizeof(a->mounts[2].container),
			 "%s/libxdm.so.0", dirname(dir));
		a->mounts[2].read_only = true;
		a->nmounts = 3;
		/* ld.so takes spaces or colons between; paths have neither. */
		if (snprintf(a->env[2].value, sizeof(a->env[2].value), "%s %s",
			     a->mounts[2].container, c->container_shim) >=
		    (int)sizeof(a->env[2].value)) {
			snprintf(err, errlen, "--container-shim %s: the path is too long",
				 c->container_shim);
			return -1;
		}
	} else {
		a->nmounts = 2;
		snprintf(a->env[2].value, sizeof(a->env[2].value), "%s", c->container_shim);
	}
	snprintf(a->env[3].value, sizeof(a->env[3].value), "%s", c->budget_dir);
	snprintf(a->env[4].value, sizeof(a->env[4].value), "%s", group);
	snprintf(a->env[5].value, sizeof(a->env[5].value), "%llu",
		 (unsigned long long)nids * c->unit);
	snprintf(a->mounts[0].host, sizeof(a->mounts[0].host), "%s", c->budget_dir);
	snprintf(a->mounts[0].container, sizeof(a->mounts[0].container), "%s", c->budget_dir);
	a->mounts[0].read_only = false;
	snprintf(a->mounts[1].host, sizeof(a->mounts[1].host), "%s", c->shim);
	snprintf(a->mounts[1].container, sizeof(a->mounts[1].container), "%s", c->container_shim);
	a->mounts[1].read_only = true;
	return 0;
}
