/* SPDX-License-Identifier: MIT */
/*
 * scheduler_env.c - the group a device's budget puts this process in: xdm's
 * own XDM_BUDGET_GROUP and XDM_BUDGET_GROUP_LIMIT, else the container
 * limits that GPU-sharing schedulers inject for their own LD_PRELOAD
 * limiter, so that the shim enforces them where those schedulers run,
 * with no change to the scheduler.
 *
 * A scheduler's limit is a container's: every process of the container
 * shares it, on each device the container sees.  That is a group of the
 * device's budget, whose limit is the scheduler's value and whose name,
 * unless XDM_BUDGET_GROUP gives one, is the container's (see
 * container_group below).  The variables, first found wins, are those of
 * xdm-preload(7), SCHEDULERS:
 *
 *   CUDA_DEVICE_MEMORY_LIMIT_<ordinal>   HAMi's device plugin, per device
 *   CUDA_DEVICE_MEMORY_LIMIT             HAMi-core's limit of every device
 *                                        (and what KAI's hamicore plugin
 *                                        writes)
 *   GPU_MEMORY_LIMIT                     KAI's limit in bytes
 *   GPU_PORTION                          KAI's fraction of the device
 *
 * Sizes are read as HAMi-core reads them, a number with an optional k, m
 * or g (KiB, MiB, GiB) and bytes without, and a value of 0 sets no limit,
 * as there.  Where HAMi-core would read a value some way it did not mean
 * (a stray suffix, octal, a number that overflows) or quietly as no limit
 * (text), xdm refuses it with a sentence naming the variable: the
 * device's attach fails, and the shim fails closed as for its own bad
 * variables.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "preload/preload.h"

#define HAMI_LIMIT "CUDA_DEVICE_MEMORY_LIMIT"

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* HAMi-core's form: digits, then k, m or g (binary) or nothing (bytes). */
static enum xdm_status parse_hami_size(const char *var, const char *text, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	const char *s = text;

	if (s[0] == '0' && s[1] != '\0' && is_digit(s[1]))
		goto bad;	/* HAMi-core would read it as octal */
	for (; is_digit(*s); s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			goto bad;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (s == text)
		goto bad;
	switch (*s) {
	case 'k': case 'K': mult = 1ull << 10; s++; break;
	case 'm': case 'M': mult = 1ull << 20; s++; break;
	case 'g': case 'G': mult = 1ull << 30; s++; break;
	}
	if (*s != '\0' || (v && v > UINT64_MAX / mult))
		goto bad;
	*out = v * mult;
	return XDM_OK;
bad:
	return xdm_error_set(XDM_E_CONFIG, PRELOAD_WHO ": %s '%s' is not a size as HAMi-core "
			     "reads one (decimal digits, then k, m or g for KiB, MiB or GiB, or "
			     "nothing for bytes)", var, text);
}

/* KAI's portion of one GPU: "0.50" of total is half its bytes, rounded down. */
static enum xdm_status parse_portion(const char *var, const char *text, uint64_t total,
				     uint64_t *out)
{
	uint64_t whole = 0, frac = 0, scale = 1;
	const char *s = text;

	for (; is_digit(*s) && whole < 10; s++)
		whole = whole * 10 + (uint64_t)(*s - '0');
	if (s == text)
		goto bad;
	if (*s == '.') {
		for (s++; is_digit(*s) && scale < 1000000000ull; s++) {
			frac = frac * 10 + (uint64_t)(*s - '0');
			scale *= 10;
		}
		if (scale == 1)
			goto bad;
	}
	if (*s != '\0' || whole > 1 || (whole == 1 && frac))
		goto bad;
	/* total * frac / scale without overflow: scale is at most 10^9. */
	*out = whole ? total : total / scale * frac + total % scale * frac / scale;
	return XDM_OK;
bad:
	return xdm_error_set(XDM_E_CONFIG, PRELOAD_WHO ": %s '%s' is not a portion of one GPU "
			     "(a decimal from 0 to 1, at most 9 places, such as 0.25)", var, text);
}

/*
 * The scheduler's limit for device ordinal: the first variable set and
 * not 0 (*var NULL where none is), and its bytes.
 */
static enum xdm_status scheduler_limit(int ordinal, uint64_t total, const char **var,
				       char name[static 48], uint64_t *bytes)
{
	static const char *const whole[] = { HAMI_LIMIT, "GPU_MEMORY_LIMIT", "GPU_PORTION" };
	enum xdm_status st;
	const char *v;

	*var = NULL;
	snprintf(name, 48, HAMI_LIMIT "_%d", ordinal);
	v = env(name);
	if (v) {
		st = parse_hami_size(name, v, bytes);
		if (st || *bytes) {
			*var = name;
			return st;
		}
	}
	for (unsigned int i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		v = env(whole[i]);
		if (!v)
			continue;
		if (!strcmp(whole[i], "GPU_PORTION"))
			st = parse_portion(whole[i], v, total, bytes);
		else
			st = parse_hami_size(whole[i], v, bytes);
		if (st || *bytes) {
			*var = whole[i];
			return st;
		}
	}
	return XDM_OK;
}

/* FNV-1a, 64 bits: a short, stable name for a long identity. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * The container's group name: "container-" and a hash of the process's
 * cgroup namespace and its cgroups, which every process of a container
 * shares and no other container has.  The cgroup path alone will not do:
 * in a cgroup namespace of its own (containerd's and Docker's default on
 * cgroup v2) every container reads "0::/".
 */
static void container_group(char *out, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char buf[512];
	struct stat st;
	FILE *f;
	size_t n;

	if (stat("/proc/self/ns/cgroup", &st) == 0) {
		h = fnv1a(h, &st.st_dev, sizeof(st.st_dev));
		h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
	}
	f = fopen("/proc/self/cgroup", "re");
	while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		h = fnv1a(h, buf, n);
	if (f)
		fclose(f);
	snprintf(out, len, "container-%016" PRIx64, h);
}

enum xdm_status preload_group_config(struct budget_member *m, int ordinal, char *from,
				     size_t from_len)
{
	const char *group = env("XDM_BUDGET_GROUP");
	const char *limit = env("XDM_BUDGET_GROUP_LIMIT");
	char derived[BUDGET_GROUP_NAME_MAX], name[48];
	const char *var;
	enum xdm_status st;
	uint64_t bytes = 0;

	from[0] = '\0';
	/* xdm's own limit wins: the schedulers' are not read at all. */
	if (limit)
		return budget_member_group(m, PRELOAD_WHO, group, limit);
	st = scheduler_limit(ordinal, m->device_total, &var, name, &bytes);
	if (st)
		return st;
	if (!var)
		return budget_member_group(m, PRELOAD_WHO, group, NULL);
	if (!group) {
		container_group(derived, sizeof(derived));
		group = derived;
	}
	st = budget_member_group(m, PRELOAD_WHO, group, NULL);
	if (st)
		return st;
	m->group_limit = bytes;
	snprintf(from, from_len, "%s", var);
	return XDM_OK;
}
