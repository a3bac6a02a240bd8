/* SPDX-License-Identifier: MIT */
/*
 * gpus.c - the GPUs the plugin serves and the devices it advertises: one
 * device per unit of memory per GPU, <UUID>-u<N>, floor(limit / unit) of
 * them, the limit being --gpu-fraction of the GPU's memory.  The kubelet
 * counts devices; the budget enforces bytes: a container given n devices
 * of one GPU is a group of n units' bytes in that GPU's budget.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/device-plugin/dp.h"

static unsigned int units_of(const struct xdm_dp_config *c, unsigned long long total)
{
	/* total / 100 * fraction, exact: a GPU's bytes are far below 2^64/100. */
	unsigned long long limit = total / 100 * c->fraction + total % 100 * c->fraction / 100;
	unsigned long long n = limit / c->unit;

	/* Each device is an ID of the kubelet's: keep their number sane. */
	return n > 4096 ? 4096 : (unsigned int)n;
}

void xdm_dp_state_init(struct xdm_dp_state *s)
{
	char err[XDM_DP_ERR_MAX];
	int i;

	s->ngpus = 0;
	s->nvml = NULL;
	if (xdm_dp_nvml_open(&s->nvml, err, sizeof(err))) {
		xdm_dp_log("%s; the plugin advertises 0 devices", err);
		return;
	}
	if (xdm_dp_nvml_list(s->nvml, s->gpus, XDM_DP_MAX_GPUS, &s->ngpus, err, sizeof(err))) {
		xdm_dp_log("%s; the plugin advertises 0 devices", err);
		return;
	}
	if (!s->ngpus)
		xdm_dp_log("NVML lists no GPU on this node: the plugin advertises 0 devices");
	for (i = 0; i < s->ngpus; i++) {
		struct xdm_dp_gpu *g = &s->gpus[i];

		g->units = units_of(&s->cfg, g->total);
		if (strlen(g->uuid) > XDM_DP_ID_MAX - 6) {
			g->units = 0;
			xdm_dp_log("GPU %s: its UUID is too long for a device ID of the kubelet (%d bytes): it advertises 0 units",
				   g->uuid, XDM_DP_ID_MAX);
		} else if (!g->units)
			/* Said once, here: the units never change while the plugin runs. */
			xdm_dp_log("GPU %s: %u%% of its %llu bytes is less than one unit of %llu bytes (--unit): it advertises 0 units",
				   g->uuid, s->cfg.fraction, g->total, s->cfg.unit);
		else
			xdm_dp_log("GPU %s: %llu bytes, %u units of %llu bytes (%u%%)", g->uuid,
				   g->total, g->units, s->cfg.unit, s->cfg.fraction);
	}
}

void xdm_dp_state_fini(struct xdm_dp_state *s)
{
	xdm_dp_nvml_close(s->nvml);
	s->nvml = NULL;
}

bool xdm_dp_refresh_health(struct xdm_dp_state *s)
{
	bool changed = false;
	int i;

	if (!s->nvml)
		return false;
	for (i = 0; i < s->ngpus; i++) {
		struct xdm_dp_gpu *g = &s->gpus[i];
		char why[256] = "";
		bool ok = xdm_dp_nvml_healthy(s->nvml, g->uuid, why, sizeof(why));

		if (ok == g->healthy)
			continue;
		g->healthy = ok;
		changed = true;
		if (ok)
			xdm_dp_log("GPU %s answers NVML again: its %u units are Healthy", g->uuid,
				   g->units);
		else
			xdm_dp_log("GPU %s does not answer NVML (%s): its %u units are Unhealthy",
				   g->uuid, why, g->units);
	}
	return changed;
}

void xdm_dp_device_id(const struct xdm_dp_gpu *gpu, unsigned int n, char id[XDM_DP_ID_MAX + 1])
{
	/* state_init left out GPUs whose UUID leaves no room for -u4095. */
	snprintf(id, XDM_DP_ID_MAX + 1, "%.*s-u%u", XDM_DP_ID_MAX - 6, gpu->uuid, n);
}

int xdm_dp_parse_id(const struct xdm_dp_state *s, const char *id, int *gpu, unsigned int *unit,
		    char *err, size_t errlen)
{
	const char *u = strrchr(id, '-');
	char *end;
	unsigned long n;
	size_t len;
	int i;

	if (!u || u[1] != 'u' || u[2] < '0' || u[2] > '9')
		goto bad;
	n = strtoul(u + 2, &end, 10);
	if (*end)
		goto bad;
	len = (size_t)(u - id);
	for (i = 0; i < s->ngpus; i++) {
		const struct xdm_dp_gpu *g = &s->gpus[i];

		if (strlen(g->uuid) != len || strncmp(g->uuid, id, len))
			continue;
		if (n >= g->units) {
			snprintf(err, errlen, "device %s: GPU %s has %u units", id, g->uuid,
				 g->units);
			return -1;
		}
		*gpu = i;
		*unit = (unsigned int)n;
		return 0;
	}
	snprintf(err, errlen, "device %s: no such GPU on this node", id);
	return -1;
bad:
	snprintf(err, errlen, "device %s: not a device of this plugin (<GPU-UUID>-u<N>)", id);
	return -1;
}

unsigned int xdm_dp_device_count(const struct xdm_dp_state *s)
{
	unsigned int n = 0;
	int i;

	for (i = 0; i < s->ngpus; i++)
		n += s->gpus[i].units;
	return n;
}
