/* SPDX-License-Identifier: MIT */
/*
 * xdm_k8s_allocate - what xdm-device-plugin would answer, without gRPC or
 * a kubelet: the same flags, the same GPUs (NVML by dlopen), the same
 * code (tools/device-plugin/dp.h).  For the GPU machine, which has no
 * gRPC (tests/gpu/k8s_pods_gpu.sh), and for the tests' pods.
 *
 *   xdm_k8s_allocate [PLUGIN FLAGS] --list
 *        one line per device the plugin would advertise: ID HEALTH
 *   xdm_k8s_allocate [PLUGIN FLAGS] ID...
 *        Allocate's answer for one container given those devices:
 *        KEY=VALUE per environment variable, then
 *        mount HOST CONTAINER ro|rw per mount
 *
 * The budget directory is made if it is missing, as the plugin does when
 * it starts.  A refusal is the plugin's sentence on standard error, exit 1;
 * a usage error exits 2.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/device-plugin/dp.h"

int main(int argc, char **argv)
{
	static struct xdm_dp_state s;
	const char *ids[256];
	char err[XDM_DP_ERR_MAX];
	struct xdm_dp_answer a;
	size_t nids = 0;
	bool list = false;
	int i, g, rc = 1;

	xdm_dp_config_defaults(&s.cfg);
	for (i = 1; i < argc;) {
		int r = xdm_dp_config_flag(&s.cfg, argc, argv, &i, err, sizeof(err));

		if (r < 0) {
			fprintf(stderr, "xdm_k8s_allocate: %s\n", err);
			return 2;
		}
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--list")) {
			list = true;
		} else if (argv[i][0] == '-' || nids == sizeof(ids) / sizeof(ids[0])) {
			fprintf(stderr, "usage: xdm_k8s_allocate [PLUGIN FLAGS] --list | ID...\n");
			return 2;
		} else {
			ids[nids++] = argv[i];
		}
		i++;
	}
	if (list == (nids > 0)) {
		fprintf(stderr, "usage: xdm_k8s_allocate [PLUGIN FLAGS] --list | ID...\n");
		return 2;
	}
	xdm_dp_state_init(&s);
	xdm_dp_refresh_health(&s);
	if (list) {
		for (g = 0; g < s.ngpus; g++)
			for (unsigned int u = 0; u < s.gpus[g].units; u++) {
				char id[XDM_DP_ID_MAX + 1];

				xdm_dp_device_id(&s.gpus[g], u, id);
				printf("%s %s\n", id, s.gpus[g].healthy ? "Healthy" : "Unhealthy");
			}
		rc = 0;
		goto out;
	}
	if (xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)) ||
	    xdm_dp_allocate(&s, ids, nids, &a, err, sizeof(err))) {
		fprintf(stderr, "xdm_k8s_allocate: %s\n", err);
		goto out;
	}
	for (i = 0; i < XDM_DP_NENV; i++)
		printf("%s=%s\n", a.env[i].key, a.env[i].value);
	for (i = 0; i < a.nmounts; i++)
		printf("mount %s %s %s\n", a.mounts[i].host, a.mounts[i].container,
		       a.mounts[i].read_only ? "ro" : "rw");
	rc = 0;
out:
	xdm_dp_state_fini(&s);
	return rc;
}
