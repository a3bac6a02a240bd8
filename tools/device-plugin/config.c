/* SPDX-License-Identifier: MIT */
/*
 * config.c - the flags of xdm-device-plugin and their defaults, parsed the
 * same way by the plugin and by tests/k8s/xdm_k8s_allocate, so that the
 * test program answers what the plugin would.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/xdm.h>

#include "tools/device-plugin/dp.h"

#ifndef XDM_DP_DEFAULT_SHIM
#define XDM_DP_DEFAULT_SHIM "/usr/lib/libxdm-preload.so"
#endif

void xdm_dp_config_defaults(struct xdm_dp_config *c)
{
	memset(c, 0, sizeof(*c));
	c->unit = 1ull << 30;
	c->fraction = 100;
	snprintf(c->budget_dir, sizeof(c->budget_dir), "%s/k8s", XDM_BUDGET_SHARED_DIR);
	snprintf(c->shim, sizeof(c->shim), "%s", XDM_DP_DEFAULT_SHIM);
	snprintf(c->container_shim, sizeof(c->container_shim), "/usr/lib/xdm/libxdm-preload.so");
	snprintf(c->kubelet_dir, sizeof(c->kubelet_dir), "/var/lib/kubelet/device-plugins");
	snprintf(c->resource, sizeof(c->resource), "xdm.io/gpu-memory");
	c->health_interval = 5;
}

static int copy_path(char *dst, size_t len, const char *flag, const char *v, char *err,
		     size_t errlen)
{
	if (v[0] != '/') {
		snprintf(err, errlen, "%s needs an absolute path, not '%s'", flag, v);
		return -1;
	}
	if (strlen(v) >= len) {
		snprintf(err, errlen, "%s: the path is longer than %zu bytes", flag, len - 1);
		return -1;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int parse_uint(const char *v, unsigned long lo, unsigned long hi, unsigned int *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || n < lo || n > hi)
		return -1;
	*out = (unsigned int)n;
	return 0;
}

static int take(struct xdm_dp_config *c, const char *flag, const char *v, char *err,
		size_t errlen)
{
	if (!strcmp(flag, "--unit")) {
		uint64_t unit = 0;

		/* xdm's own sizes (xdm.conf(5)); a percent has no base here and reads 0. */
		if (xdm_parse_size(v, 0, &unit) != XDM_OK || unit == 0 || unit == UINT64_MAX) {
			snprintf(err, errlen,
				 "--unit takes a size above 0 such as 1G, 512M or 1073741824, not '%s'",
				 v);
			return -1;
		}
		c->unit = unit;
	} else if (!strcmp(flag, "--gpu-fraction")) {
		char pct[16];
		size_t n = strlen(v);

		/* 90 or 90%. */
		if (n && n < sizeof(pct) && v[n - 1] == '%')
			n--;
		if (n >= sizeof(pct) || (memcpy(pct, v, n), pct[n] = 0,
					 parse_uint(pct, 1, 100, &c->fraction))) {
			snprintf(err, errlen, "--gpu-fraction takes a percent from 1 to 100, not '%s'",
				 v);
			return -1;
		}
	} else if (!strcmp(flag, "--budget-dir")) {
		return copy_path(c->budget_dir, sizeof(c->budget_dir), flag, v, err, errlen);
	} else if (!strcmp(flag, "--shim")) {
		return copy_path(c->shim, sizeof(c->shim), flag, v, err, errlen);
	} else if (!strcmp(flag, "--container-shim")) {
		return copy_path(c->container_shim, sizeof(c->container_shim), flag, v, err, errlen);
	} else if (!strcmp(flag, "--kubelet-dir")) {
		return copy_path(c->kubelet_dir, sizeof(c->kubelet_dir), flag, v, err, errlen);
	} else if (!strcmp(flag, "--resource")) {
		/* vendor-domain/name, as the kubelet checks it: one slash. */
		const char *slash = strchr(v, '/');

		if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/') ||
		    strlen(v) >= sizeof(c->resource) || strspn(v, "abcdefghijklmnopqrstuvwxyz"
								   "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
								   "0123456789-._/") != strlen(v)) {
			snprintf(err, errlen,
				 "--resource takes a name of the form domain/name such as xdm.io/gpu-memory, not '%s'",
				 v);
			return -1;
		}
		memcpy(c->resource, v, strlen(v) + 1);
	} else if (!strcmp(flag, "--health-interval")) {
		if (parse_uint(v, 1, 3600, &c->health_interval)) {
			snprintf(err, errlen,
				 "--health-interval takes whole seconds from 1 to 3600, not '%s'", v);
			return -1;
		}
	} else {
		return 0;
	}
	return 1;
}

int xdm_dp_config_flag(struct xdm_dp_config *c, int argc, char **argv, int *i, char *err,
		       size_t errlen)
{
	static const char *const flags[] = { "--unit", "--gpu-fraction", "--budget-dir",
					      "--shim", "--container-shim", "--kubelet-dir",
					      "--resource", "--health-interval" };
	const char *arg = argv[*i], *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
	char flag[32];
	size_t k;
	int rc;

	for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
		if (strlen(flags[k]) == len && !strncmp(flags[k], arg, len))
			break;
	if (k == sizeof(flags) / sizeof(flags[0]))
		return 0;
	snprintf(flag, sizeof(flag), "%s", flags[k]);
	if (eq) {
		rc = take(c, flag, eq + 1, err, errlen);
		*i += 1;
	} else if (*i + 1 >= argc) {
		snprintf(err, errlen, "%s needs a value", flag);
		return -1;
	} else {
		rc = take(c, flag, argv[*i + 1], err, errlen);
		*i += 2;
	}
	return rc < 0 ? -1 : 1;
}
