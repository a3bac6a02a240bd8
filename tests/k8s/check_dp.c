/* SPDX-License-Identifier: MIT */
/*
 * check_dp.c - the device plugin's logic (tools/device-plugin/dp.h) on
 * GPUs made by hand, without NVML or gRPC: flags, device IDs, the packing
 * of GetPreferredAllocation, Allocate's answer and refusals, the budget
 * directory's checks.  The gRPC layer and NVML are tests/k8s/plugin.sh's.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/device-plugin/dp.h"

static struct xdm_dp_state s;
static char tmp[] = "/tmp/xdm-check-dp.XXXXXX";

/* Two GPUs of 8 and 4 units of 1 MiB; a budget directory of ours. */
static void setup(void)
{
	char shim[PATH_MAX];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(tmp));
	xdm_dp_config_defaults(&s.cfg);
	s.cfg.unit = 1 << 20;
	snprintf(s.cfg.budget_dir, sizeof(s.cfg.budget_dir), "%s/budget", tmp);
	snprintf(shim, sizeof(shim), "%s/shim.so", tmp);
	f = fopen(shim, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	snprintf(s.cfg.shim, sizeof(s.cfg.shim), "%s", shim);
	s.ngpus = 2;
	snprintf(s.gpus[0].uuid, sizeof(s.gpus[0].uuid), "GPU-aaaa");
	s.gpus[0].units = 8;
	s.gpus[0].healthy = true;
	snprintf(s.gpus[1].uuid, sizeof(s.gpus[1].uuid), "GPU-bbbb");
	s.gpus[1].units = 4;
	s.gpus[1].healthy = true;
	s.nvml = NULL;
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(tmp + strlen(tmp) - 6, "XXXXXX", 6);
}

START_TEST(flags)
{
	struct xdm_dp_config c;
	char err[XDM_DP_ERR_MAX];
	char *ok[] = { "x", "--unit", "512M", "--gpu-fraction=90%", "--health-interval", "2" };
	char *bad[] = { "x", "--unit", "lots" };
	char *rel[] = { "x", "--budget-dir=run/xdm" };
	int i = 1;

	xdm_dp_config_defaults(&c);
	ck_assert_uint_eq(c.unit, 1ull << 30);
	ck_assert_str_eq(c.resource, "xdm.io/gpu-memory");
	ck_assert_int_eq(xdm_dp_config_flag(&c, 6, ok, &i, err, sizeof(err)), 1);
	ck_assert_int_eq(xdm_dp_config_flag(&c, 6, ok, &i, err, sizeof(err)), 1);
	ck_assert_int_eq(xdm_dp_config_flag(&c, 6, ok, &i, err, sizeof(err)), 1);
	ck_assert_int_eq(i, 6);
	ck_assert_uint_eq(c.unit, 512ull << 20);
	ck_assert_uint_eq(c.fraction, 90);
	ck_assert_uint_eq(c.health_interval, 2);
	i = 1;
	ck_assert_int_eq(xdm_dp_config_flag(&c, 3, bad, &i, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "--unit"));
	i = 1;
	ck_assert_int_eq(xdm_dp_config_flag(&c, 2, rel, &i, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "absolute"));
}
END_TEST

START_TEST(device_ids)
{
	char id[XDM_DP_ID_MAX + 1], err[XDM_DP_ERR_MAX];
	unsigned int u;
	int g;

	xdm_dp_device_id(&s.gpus[1], 3, id);
	ck_assert_str_eq(id, "GPU-bbbb-u3");
	ck_assert_int_eq(xdm_dp_parse_id(&s, id, &g, &u, err, sizeof(err)), 0);
	ck_assert_int_eq(g, 1);
	ck_assert_uint_eq(u, 3);
	ck_assert_int_eq(xdm_dp_parse_id(&s, "GPU-bbbb-u4", &g, &u, err, sizeof(err)), -1);
	ck_assert_int_eq(xdm_dp_parse_id(&s, "GPU-cccc-u0", &g, &u, err, sizeof(err)), -1);
	ck_assert_int_eq(xdm_dp_parse_id(&s, "GPU-aaaa", &g, &u, err, sizeof(err)), -1);
	ck_assert_uint_eq(xdm_dp_device_count(&s), 12);
}
END_TEST

START_TEST(prefer_best_fit)
{
	/* GPU 0 has 5 free, GPU 1 has 3: 3 units go to GPU 1, 4 to GPU 0. */
	const char *avail[] = { "GPU-aaaa-u7", "GPU-aaaa-u2", "GPU-aaaa-u3", "GPU-aaaa-u4",
				"GPU-aaaa-u6", "GPU-bbbb-u3", "GPU-bbbb-u1", "GPU-bbbb-u0" };
	const char *must[] = { "GPU-aaaa-u6" };
	const char *out[8];
	char err[XDM_DP_ERR_MAX];

	ck_assert_int_eq(xdm_dp_prefer(&s, avail, 8, NULL, 0, 3, out, err, sizeof(err)), 0);
	ck_assert_str_eq(out[0], "GPU-bbbb-u0");
	ck_assert_str_eq(out[1], "GPU-bbbb-u1");
	ck_assert_str_eq(out[2], "GPU-bbbb-u3");
	ck_assert_int_eq(xdm_dp_prefer(&s, avail, 8, NULL, 0, 4, out, err, sizeof(err)), 0);
	ck_assert_str_eq(out[0], "GPU-aaaa-u2");
	ck_assert_str_eq(out[3], "GPU-aaaa-u6");
	ck_assert_int_eq(xdm_dp_prefer(&s, avail, 8, must, 1, 2, out, err, sizeof(err)), 0);
	ck_assert_str_eq(out[0], "GPU-aaaa-u6");
	ck_assert_str_eq(out[1], "GPU-aaaa-u2");
	ck_assert_int_eq(xdm_dp_prefer(&s, avail, 8, NULL, 0, 6, out, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "no GPU has 6"));
}
END_TEST

static const char *env(const struct xdm_dp_answer *a, const char *key)
{
	for (int i = 0; i < XDM_DP_NENV; i++)
		if (!strcmp(a->env[i].key, key))
			return a->env[i].value;
	return NULL;
}

START_TEST(allocate_answer)
{
	const char *ids[] = { "GPU-aaaa-u5", "GPU-aaaa-u1", "GPU-aaaa-u2" };
	struct xdm_dp_answer a, b;
	char err[XDM_DP_ERR_MAX];

	ck_assert_int_eq(xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(xdm_dp_allocate(&s, ids, 3, &a, err, sizeof(err)), 0);
	ck_assert_str_eq(env(&a, "CUDA_VISIBLE_DEVICES"), "GPU-aaaa");
	ck_assert_str_eq(env(&a, "NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa");
	ck_assert_str_eq(env(&a, "LD_PRELOAD"), "/usr/lib/xdm/libxdm-preload.so");
	ck_assert_str_eq(env(&a, "XDM_BUDGET_DIR"), s.cfg.budget_dir);
	ck_assert_str_eq(env(&a, "XDM_BUDGET_GROUP_LIMIT"), "3145728");
	ck_assert_int_eq(strncmp(env(&a, "XDM_BUDGET_GROUP"), "k8s-aaaa-u1x3-", 14), 0);
	ck_assert_uint_le(strlen(env(&a, "XDM_BUDGET_GROUP")), XDM_DP_GROUP_MAX);
	ck_assert_str_eq(a.mounts[0].host, s.cfg.budget_dir);
	ck_assert_str_eq(a.mounts[0].container, s.cfg.budget_dir);
	ck_assert(!a.mounts[0].read_only);
	ck_assert_str_eq(a.mounts[1].host, s.cfg.shim);
	ck_assert_str_eq(a.mounts[1].container, "/usr/lib/xdm/libxdm-preload.so");
	ck_assert(a.mounts[1].read_only);
	ck_assert_int_eq(a.nmounts, 2);
	/* The same devices again: a group of its own. */
	ck_assert_int_eq(xdm_dp_allocate(&s, ids, 3, &b, err, sizeof(err)), 0);
	ck_assert_str_ne(env(&a, "XDM_BUDGET_GROUP"), env(&b, "XDM_BUDGET_GROUP"));
}
END_TEST

/* libxdm.so.0 beside the host's shim (as in $(libdir)): mounted beside the
 * container's shim, read-only, and preloaded before it. */
START_TEST(allocate_shim_library)
{
	const char *ids[] = { "GPU-bbbb-u0" };
	char lib[PATH_MAX], real[PATH_MAX], err[XDM_DP_ERR_MAX];
	struct xdm_dp_answer a;
	FILE *f;

	snprintf(real, sizeof(real), "%s/libxdm.so.0.0.0", tmp);
	f = fopen(real, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	snprintf(lib, sizeof(lib), "%s/libxdm.so.0", tmp);
	ck_assert_int_eq(symlink("libxdm.so.0.0.0", lib), 0);
	ck_assert_int_eq(xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(xdm_dp_allocate(&s, ids, 1, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(a.nmounts, 3);
	ck_assert_str_eq(a.mounts[2].host, real);
	ck_assert_str_eq(a.mounts[2].container, "/usr/lib/xdm/libxdm.so.0");
	ck_assert(a.mounts[2].read_only);
	ck_assert_str_eq(env(&a, "LD_PRELOAD"),
			 "/usr/lib/xdm/libxdm.so.0 /usr/lib/xdm/libxdm-preload.so");
}
END_TEST

START_TEST(allocate_refusals)
{
	const char *two[] = { "GPU-aaaa-u0", "GPU-bbbb-u0" };
	const char *dup[] = { "GPU-aaaa-u0", "GPU-aaaa-u0" };
	const char *one[] = { "GPU-bbbb-u0" };
	struct xdm_dp_answer a;
	char err[XDM_DP_ERR_MAX];

	ck_assert_int_eq(xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(xdm_dp_allocate(&s, two, 2, &a, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "one container's slice lives on one GPU"));
	ck_assert_int_eq(xdm_dp_allocate(&s, dup, 2, &a, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	s.gpus[1].healthy = false;
	ck_assert_int_eq(xdm_dp_allocate(&s, one, 1, &a, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "Unhealthy"));
	s.gpus[1].healthy = true;
	/* A budget directory others may write in refuses every pod. */
	ck_assert_int_eq(chmod(s.cfg.budget_dir, 0777), 0);
	ck_assert_int_eq(xdm_dp_allocate(&s, one, 1, &a, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "writable by nobody else"));
	ck_assert_int_eq(rmdir(s.cfg.budget_dir), 0);
	ck_assert_int_eq(xdm_dp_allocate(&s, one, 1, &a, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cannot be used"));
}
END_TEST

START_TEST(budget_dir_made)
{
	struct stat st;
	char err[XDM_DP_ERR_MAX];

	snprintf(s.cfg.budget_dir, sizeof(s.cfg.budget_dir), "%s/a/b/k8s", tmp);
	ck_assert_int_eq(xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(lstat(s.cfg.budget_dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	ck_assert_uint_eq(st.st_uid, geteuid());
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("device plugin");
	TCase *tc = tcase_create("logic");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, flags);
	tcase_add_test(tc, device_ids);
	tcase_add_test(tc, prefer_best_fit);
	tcase_add_test(tc, allocate_answer);
	tcase_add_test(tc, allocate_shim_library);
	tcase_add_test(tc, allocate_refusals);
	tcase_add_test(tc, budget_dir_made);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
