/* SPDX-License-Identifier: MIT */
/*
 * replay_csv.c - turns the logging adaptor's CSV (xdm-logging(7)),
 * read by logcsv.c, into the script the replay workload runs.
 *
 * A file that cannot be replayed is a usage error, like a bad option: the
 * reader says why in one sentence naming FILE:LINE, and the bench exits 2
 * before it builds a runtime.
 *
 * Everything a run needs is decided here, outside the timing: frees are
 * matched to their allocations by address, each block gets a slot of the
 * live array (reused once freed, so there are as many slots as blocks
 * were live at once), and the peak of live bytes is counted as logged.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tools/common/logcsv.h"

/* Replays the merged rows on paper: slots, steps and the peaks. */
static int build_script(const struct logcsv *log, struct bench_replay *rp)
{
	struct logcsv_live m = { NULL, 0, 0 };
	uint32_t *free_slots = NULL;
	size_t nfree = 0, n = log->nrows;
	uint64_t asked = 0;
	int rc;

	rc = logcsv_live_init(log, &m);
	if (rc)
		return rc;
	free_slots = malloc((n ? n : 1) * sizeof(*free_slots));
	rp->steps = malloc((n ? n : 1) * sizeof(*rp->steps));
	if (!free_slots || !rp->steps) {
		rc = logcsv_say(log, 0, "out of memory for the replay of %zu rows", n);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const struct logcsv_row *r = logcsv_at(log, k);
		struct bench_replay_step *st = &rp->steps[rp->nsteps];
		struct logcsv_block gone;
		uint32_t slot = 0;

		if (r->action == LOGCSV_ALLOCATE_FAILURE) {
			rp->failures_skipped++;
			continue;
		}
		if (r->action == LOGCSV_ALLOCATE) {
			if (!nfree && rp->nslots > UINT32_MAX - 1) {
				rc = logcsv_say(log, r->line, "more than %u blocks live at once",
						UINT32_MAX);
				goto out;
			}
			slot = nfree ? free_slots[nfree - 1] : (uint32_t)rp->nslots;
		}
		rc = logcsv_live_step(log, &m, r, slot, &gone);
		if (rc)
			goto out;
		if (r->action == LOGCSV_ALLOCATE) {
			if (nfree)
				nfree--;
			else
				rp->nslots++;
			*st = (struct bench_replay_step){ r->bytes, r->stream, slot };
			rp->allocs++;
			asked += r->bytes;
			if (asked > rp->peak_bytes)
				rp->peak_bytes = asked;
			if (m.n > rp->peak_blocks)
				rp->peak_blocks = m.n;
		} else {
			*st = (struct bench_replay_step){ 0, 0, gone.value };
			free_slots[nfree++] = gone.value;
			rp->frees++;
			asked -= r->bytes;
		}
		rp->nsteps++;
	}
	if (rp->nsteps == 0) {
		rc = logcsv_say(log, 0, "has no allocate row to replay (it has %llu row%s)",
				(unsigned long long)rp->rows, rp->rows == 1 ? "" : "s");
		goto out;
	}
	/* What the log never freed is freed after the clock stops. */
	rp->left_live = m.n;
out:
	free(free_slots);
	logcsv_live_fini(&m);
	return rc;
}

/* The last component of the path, cut to fit the table's param column. */
static void short_name(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash && slash[1] ? slash + 1 : path;

	snprintf(buf, len, "%s", base);
}

int bench_replay_load(const char *path, struct bench_replay *out)
{
	struct logcsv log;
	int rc;

	memset(out, 0, sizeof(*out));
	out->path = path;
	short_name(path, out->name, sizeof(out->name));
	if (logcsv_load(&log, "xdm-bench: --replay", path))
		return BENCH_EXIT_USAGE;
	out->rows = log.nrows;
	out->threads = log.threads;
	rc = build_script(&log, out);
	logcsv_free(&log);
	if (rc) {
		bench_replay_free(out);
		return BENCH_EXIT_USAGE;
	}
	return 0;
}

void bench_replay_free(struct bench_replay *r)
{
	free(r->steps);
	r->steps = NULL;
	r->nsteps = 0;
}
