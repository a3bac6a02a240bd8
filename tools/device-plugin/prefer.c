/* SPDX-License-Identifier: MIT */
/*
 * prefer.c - GetPreferredAllocation: a container's units packed onto one
 * GPU, best fit.  A container's slice is a group in one GPU's budget, so
 * its devices must all be of one GPU (Allocate refuses others); among the
 * GPUs with enough available units, the one with the fewest is chosen, so
 * that the GPUs with the most room stay whole for larger requests.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/device-plugin/dp.h"

struct pick {
	const char *id;
	unsigned int unit;
};

static int by_unit(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;

	return x->unit < y->unit ? -1 : x->unit > y->unit;
}

static bool listed(const char *const *ids, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(ids[i], id))
			return true;
	return false;
}

int xdm_dp_prefer(const struct xdm_dp_state *s, const char *const *avail, size_t navail,
		  const char *const *must, size_t nmust, size_t size, const char **out,
		  char *err, size_t errlen)
{
	size_t count[XDM_DP_MAX_GPUS] = { 0 }, i, n;
	struct pick *picks = NULL;
	int must_gpu = -1, best = -1, g;
	unsigned int u;
	char why[XDM_DP_ERR_MAX];

	if (nmust > size) {
		snprintf(err, errlen, "%zu devices must be included in an allocation of %zu", nmust,
			 size);
		return -1;
	}
	for (i = 0; i < nmust; i++) {
		if (xdm_dp_parse_id(s, must[i], &g, &u, err, errlen))
			return -1;
		if (must_gpu >= 0 && g != must_gpu) {
			snprintf(err, errlen,
				 "the devices that must be included are on two GPUs (%s and %s): one container's slice lives on one GPU",
				 s->gpus[must_gpu].uuid, s->gpus[g].uuid);
			return -1;
		}
		must_gpu = g;
	}
	for (i = 0; i < navail; i++)
		if (!xdm_dp_parse_id(s, avail[i], &g, &u, why, sizeof(why)))
			count[g]++;
	for (g = 0; g < s->ngpus; g++) {
		if (count[g] < size || (must_gpu >= 0 && g != must_gpu))
			continue;
		if (best < 0 || count[g] < count[best])
			best = g;
	}
	if (best < 0) {
		snprintf(err, errlen, "no GPU has %zu available units%s", size,
			 must_gpu >= 0 ? " beside the devices that must be included" : "");
		return -1;
	}
	picks = calloc(navail ? navail : 1, sizeof(*picks));
	if (!picks) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0, n = 0; i < navail; i++)
		if (!xdm_dp_parse_id(s, avail[i], &g, &u, why, sizeof(why)) && g == best &&
		    !listed(must, nmust, avail[i]))
			picks[n++] = (struct pick){ avail[i], u };
	qsort(picks, n, sizeof(*picks), by_unit);
	for (i = 0; i < nmust; i++)
		out[i] = must[i];
	for (i = 0; nmust + i < size && i < n; i++)
		out[nmust + i] = picks[i].id;
	free(picks);
	if (nmust + i < size) {
		/* must was not all in avail: the request contradicts itself. */
		snprintf(err, errlen, "GPU %s has too few available units beside those that must be included",
			 s->gpus[best].uuid);
		return -1;
	}
	return 0;
}
