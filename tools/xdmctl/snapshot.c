/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - xdmctl snapshot LOG.csv: a logging adaptor's CSV as
 * the pickled snapshot that PyTorch's memory viewer reads
 * (pytorch.org/memory_viz, torch.cuda._memory_viz), written without
 * PyTorch (xdmctl(1), SNAPSHOT).
 *
 * A snapshot is a dict: "device_traces", one list of events per device
 * ordinal, and "segments", the state after the last event.  Each logged
 * row becomes the events the caching allocator would have recorded:
 *
 *	allocate           segment_alloc, alloc
 *	free, free_failure free_requested, free_completed, segment_free
 *	allocate_failure   oom
 *
 * The log knows the blocks handed out, not the memory reserved under
 * them, so each block is its own segment: the viewer's reserved figures
 * equal its allocated ones.  The segments at the end are the blocks the
 * log left live, one each.  The viewer replays the events backwards from
 * that state and must find every block inside a segment, which this
 * gives it.  An event's frames are one frame naming the tag (filename
 * "xdm", line the query id): the log has no stacks.
 *
 * The command line is parsed here for both sources; --pid and --chunks
 * (a live process's chunks, with the memory reserved under its blocks)
 * go on to snapshot_live.c.
 */
#include "config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/common/logcsv.h"
#include "pickle.h"
#include "snapshot.h"
#include "xdmctl.h"
#include "args.h"
#include "output.h"

#define CMD "snapshot"

/* Device ordinals a snapshot lists, an empty list for each one below the last. */
#define MAX_DEVICES 4096
#define NO_ROW UINT32_MAX

/* A block the log left live. */
struct left {
	uint32_t device;
	uint32_t k;		/* its allocate, as a replay position */
	uint64_t ptr;
};

struct snapshot {
	const struct logcsv *log;
	FILE *f;
	uint32_t *alloc_of;	/* per replay position: a free's allocate, as a position */
	/*
	 * Each device's rows as a chain of replay positions, so that writing
	 * the traces reads every row once however many devices the log names.
	 */
	uint32_t first[MAX_DEVICES];	/* NO_ROW: the device has none */
	uint32_t *next;		/* per replay position: its device's next row */
	uint64_t *clock;	/* per replay position: logcsv_clock() there */
	struct left *left;	/* live after the last row, by device and address */
	size_t nleft;
	uint32_t ndevices;	/* the highest ordinal logged, plus one */
	bool *memo;		/* SNAP_K_COUNT + one per tag: written once already */
};

static void put_key(struct snapshot *s, enum snap_key k)
{
	snap_put_key(s->f, s->memo, k);
}

/* "frames": [{"filename": "xdm", "line": QUERY_ID, "name": TAG}] */
static void put_frames(struct snapshot *s, const struct logcsv_row *r)
{
	struct pickle_list l;

	put_key(s, SNAP_K_FRAMES);
	pickle_list_begin(&l, s->f);
	pickle_list_item(&l);
	pickle_dict_begin(s->f);
	put_key(s, SNAP_K_FILENAME);
	put_key(s, SNAP_K_XDM);
	put_key(s, SNAP_K_LINE);
	pickle_uint(s->f, r->query_id);
	put_key(s, SNAP_K_NAME);
	snap_put_memo(s->f, s->memo, SNAP_K_COUNT + r->tag, logcsv_tag(s->log, r->tag));
	pickle_dict_end(s->f);
	pickle_list_end(&l);
}

/* One trace event; block: the allocate row of the block it is about. */
static void put_event(struct snapshot *s, struct pickle_list *trace, enum snap_key action,
		      const struct logcsv_row *block, uint64_t time_ns)
{
	pickle_list_item(trace);
	pickle_dict_begin(s->f);
	put_key(s, SNAP_K_ACTION);
	put_key(s, action);
	/* Where an oom has its address, PyTorch has what the device had free: unknown here. */
	put_key(s, action == SNAP_K_OOM ? SNAP_K_DEVICE_FREE : SNAP_K_ADDR);
	pickle_uint(s->f, action == SNAP_K_OOM ? 0 : block->ptr);
	put_key(s, SNAP_K_SIZE);
	pickle_uint(s->f, block->bytes);
	put_key(s, SNAP_K_STREAM);
	pickle_uint(s->f, block->stream);
	put_key(s, SNAP_K_TIME_US);
	pickle_uint(s->f, time_ns / 1000);
	put_frames(s, block);
	pickle_dict_end(s->f);
}

/* One device's events, in the replay order. */
static void put_trace(struct snapshot *s, uint32_t device)
{
	const struct logcsv *log = s->log;
	struct pickle_list trace;

	pickle_list_begin(&trace, s->f);
	for (uint32_t k = s->first[device]; k != NO_ROW; k = s->next[k]) {
		const struct logcsv_row *r = logcsv_at(log, k);
		const struct logcsv_row *block;
		uint64_t t = s->clock[k];

		switch (r->action) {
		case LOGCSV_ALLOCATE:
			put_event(s, &trace, SNAP_K_SEGMENT_ALLOC, r, t);
			put_event(s, &trace, SNAP_K_ALLOC, r, t);
			break;
		case LOGCSV_ALLOCATE_FAILURE:
			put_event(s, &trace, SNAP_K_OOM, r, t);
			break;
		default:
			block = logcsv_at(log, s->alloc_of[k]);
			put_event(s, &trace, SNAP_K_FREE_REQUESTED, block, t);
			put_event(s, &trace, SNAP_K_FREE_COMPLETED, block, t);
			put_event(s, &trace, SNAP_K_SEGMENT_FREE, block, t);
			break;
		}
	}
	pickle_list_end(&trace);
}

/* A block the log left live, as a segment of its own holding it. */
static void put_segment(struct snapshot *s, const struct logcsv_row *r)
{
	struct pickle_list blocks;

	pickle_dict_begin(s->f);
	put_key(s, SNAP_K_DEVICE);
	pickle_uint(s->f, r->device);
	put_key(s, SNAP_K_ADDRESS);
	pickle_uint(s->f, r->ptr);
	put_key(s, SNAP_K_TOTAL_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_ALLOCATED_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_ACTIVE_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_REQUESTED_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_STREAM);
	pickle_uint(s->f, r->stream);
	put_key(s, SNAP_K_SEGMENT_TYPE);
	put_key(s, r->bytes > SNAP_SMALL_BLOCK ? SNAP_K_LARGE : SNAP_K_SMALL);
	put_key(s, SNAP_K_IS_EXPANDABLE);
	pickle_bool(s->f, false);
	put_frames(s, r);
	put_key(s, SNAP_K_BLOCKS);
	pickle_list_begin(&blocks, s->f);
	pickle_list_item(&blocks);
	pickle_dict_begin(s->f);
	put_key(s, SNAP_K_ADDRESS);
	pickle_uint(s->f, r->ptr);
	put_key(s, SNAP_K_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_REQUESTED_SIZE);
	pickle_uint(s->f, r->bytes);
	put_key(s, SNAP_K_STATE);
	put_key(s, SNAP_K_ACTIVE_ALLOCATED);
	put_frames(s, r);
	pickle_dict_end(s->f);
	pickle_list_end(&blocks);
	pickle_dict_end(s->f);
}

static void put_snapshot(struct snapshot *s)
{
	struct pickle_list l;

	pickle_begin(s->f);
	pickle_dict_begin(s->f);
	put_key(s, SNAP_K_SEGMENTS);
	pickle_list_begin(&l, s->f);
	for (size_t i = 0; i < s->nleft; i++) {
		pickle_list_item(&l);
		put_segment(s, logcsv_at(s->log, s->left[i].k));
	}
	pickle_list_end(&l);
	put_key(s, SNAP_K_DEVICE_TRACES);
	pickle_list_begin(&l, s->f);
	for (uint32_t d = 0; d < s->ndevices; d++) {
		pickle_list_item(&l);
		put_trace(s, d);
	}
	pickle_list_end(&l);
	pickle_dict_end(s->f);
	pickle_end(s->f);
}

/* The segments' order, PyTorch's: by device, then by address. */
static int by_device_address(const void *a, const void *b)
{
	const struct left *x = a, *y = b;

	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

/* What is live after the last row, into s->left in order: 0, or LOGCSV_NOMEM said. */
static int collect_left(struct snapshot *s, const struct logcsv_live *m)
{
	size_t n = 0;

	s->left = malloc((m->n ? m->n : 1) * sizeof(*s->left));
	if (!s->left) {
		logcsv_say(s->log, 0, "out of memory for the %zu blocks left live", m->n);
		return LOGCSV_NOMEM;
	}
	for (size_t i = 0; i <= m->mask; i++) {
		const struct logcsv_block *b = &m->e[i];

		if (b->ptr)
			s->left[n++] = (struct left){ logcsv_at(s->log, b->value)->device, b->value,
						      b->ptr };
	}
	s->nleft = n;
	qsort(s->left, n, sizeof(*s->left), by_device_address);
	return LOGCSV_OK;
}

/*
 * Checks every row on the live set (the reader's sentences), matches each
 * free to its allocate and collects what is live after the last row: 0,
 * or an enum logcsv_err said.
 */
static int replay(struct snapshot *s)
{
	const struct logcsv *log = s->log;
	static_assert(MAX_DEVICES <= 4096, "last[] lives on the stack");
	uint32_t last[MAX_DEVICES];
	struct logcsv_live m;
	uint64_t t = 0;
	int rc;

	if (log->nrows >= UINT32_MAX)
		return logcsv_say(log, 0, "has %u rows or more, more than a snapshot can number",
				  UINT32_MAX);
	s->alloc_of = malloc((log->nrows ? log->nrows : 1) * sizeof(*s->alloc_of));
	s->next = malloc((log->nrows ? log->nrows : 1) * sizeof(*s->next));
	s->clock = malloc((log->nrows ? log->nrows : 1) * sizeof(*s->clock));
	if (!s->alloc_of || !s->next || !s->clock) {
		logcsv_say(log, 0, "out of memory for the snapshot of %zu rows", log->nrows);
		return LOGCSV_NOMEM;
	}
	rc = logcsv_live_init(log, &m);
	if (rc)
		return rc;
	for (uint32_t d = 0; d < MAX_DEVICES; d++)
		last[d] = s->first[d] = NO_ROW;
	for (size_t k = 0; k < log->nrows; k++) {
		const struct logcsv_row *r = logcsv_at(log, k);
		struct logcsv_block gone = { 0 };

		if (r->device >= MAX_DEVICES) {
			rc = logcsv_say(log, r->line, "device %u: a snapshot lists devices 0 to %u",
					r->device, MAX_DEVICES - 1);
			goto out;
		}
		if (r->device >= s->ndevices)
			s->ndevices = r->device + 1;
		t = logcsv_clock(log, k, t);
		s->clock[k] = t;
		s->next[k] = NO_ROW;
		if (last[r->device] == NO_ROW)
			s->first[r->device] = (uint32_t)k;
		else
			s->next[last[r->device]] = (uint32_t)k;
		last[r->device] = (uint32_t)k;
		rc = logcsv_live_step(log, &m, r, (uint32_t)k, &gone);
		if (rc)
			goto out;
		s->alloc_of[k] = gone.value;
	}
	rc = collect_left(s, &m);
out:
	logcsv_live_fini(&m);
	return rc;
}

static void usage(FILE *f)
{
	fputs("Usage: xdmctl snapshot LOG.csv [-o FILE.pickle]\n"
	      "       xdmctl snapshot --pid PID [--timeout MS] [-o FILE.pickle]\n"
	      "       xdmctl snapshot --chunks FILE [--device N] [--timeout MS] [-o FILE.pickle]\n"
	      "\n"
	      "Write the pickled memory snapshot that PyTorch's memory viewer reads\n"
	      "(pytorch.org/memory_viz); PyTorch is not needed.  From a logging adaptor's\n"
	      "CSV: the events, and each block left live as a segment of its own.  From a\n"
	      "live process (its tree's chunks files): what its stacks hold now, each chunk\n"
	      "a segment with its blocks, active and inactive, and no events.\n"
	      "\n"
	      "  -o, --output FILE  write FILE, not standard output (not a terminal)\n"
	      "  --pid PID          every runtime of the tree that process PID serves (the\n"
	      "                     pid its tree shows, as xdmctl ps lists it)\n"
	      "  --chunks FILE      one chunks file (a tree's N/chunks, or a copy of one)\n"
	      "  --device N         the device ordinal of --chunks FILE (default 0)\n"
	      "  --timeout MS       how long a tree's file may take to read (default 5000)\n"
	      "\n"
	      "See xdmctl(1), SNAPSHOT.\n",
	      f);
}

/* What the command line names: a log, or a live source. */
struct snap_args {
	const char *log, *out;
	const char *pid, *device, *timeout;
	struct snap_live_source live;
};

/* --pid, --chunks, --device and --timeout: 1 taken, 0 another word, -1 said. */
static int live_option(int argc, char **argv, int *i, struct snap_args *a)
{
	static const char *const names[] = { "--pid", "--chunks", "--device", "--timeout" };
	const char **values[] = { &a->pid, &a->live.chunks, &a->device, &a->timeout };

	for (int k = 0; k < 4; k++) {
		int got = xdmctl_arg_value(CMD, argc, argv, i, names[k], NULL, values[k]);

		if (got)
			return got;
	}
	return 0;
}

/* The numbers of the live options, and that one source is named: 0, or -1 said. */
static int check_sources(struct snap_args *a)
{
	unsigned long v;

	a->live.timeout_ms = 5000;
	if (a->timeout && xdmctl_arg_uint(CMD, "--timeout", a->timeout, 1, 600000,
					  &a->live.timeout_ms))
		return -1;
	if (a->pid) {
		if (xdmctl_arg_uint(CMD, "--pid", a->pid, 1, 0x7fffffff, &v))
			return -1;
		a->live.pid = (long)v;
	}
	if (a->device && xdmctl_arg_uint(CMD, "--device", a->device, 0, 4095, &a->live.device))
		return -1;
	if (!!a->log + !!a->pid + !!a->live.chunks > 1)
		return xdmctl_fail(-1, CMD, "one source at a time: a log, --pid or --chunks");
	if (a->device && !a->live.chunks)
		return xdmctl_fail(-1, CMD, "--device goes with --chunks (a tree names its devices)");
	if (a->timeout && !a->pid && !a->live.chunks)
		return xdmctl_fail(-1, CMD, "--timeout goes with --pid or --chunks");
	if (a->pid || a->live.chunks)
		return 0;
	return xdmctl_arg_log_given(CMD, a->log, "xdmctl snapshot LOG.csv -o FILE.pickle, or "
				    "--pid PID");
}

/* The command line: 0, 1 when --help was answered, or -1 said. */
static int parse(int argc, char **argv, struct snap_args *a)
{
	for (int i = 1; i < argc; i++) {
		int got;

		if (xdmctl_arg_help(argv[i])) {
			usage(stdout);
			return 1;
		}
		got = xdmctl_arg_value(CMD, argc, argv, &i, "--output", "-o", &a->out);
		if (got == 0)
			got = live_option(argc, argv, &i, a);
		if (got < 0 || (got == 0 && xdmctl_arg_log(CMD, argv[i], &a->log)))
			return -1;
	}
	return check_sources(a);
}

int xdmctl_snapshot(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	struct snap_args a = { 0 };
	struct snapshot s = { 0 };
	const char *out;
	struct logcsv log;
	int rc;

	rc = parse(argc, argv, &a);
	if (rc)
		return rc > 0 ? XDMCTL_EXIT_OK : XDMCTL_EXIT_USAGE;
	out = a.out;
	if (ctx->json)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, CMD, "writes a pickle, not JSON (--json)");
	/* A pickle is bytes: never onto a terminal, and said before the log is read. */
	if (!out && isatty(STDOUT_FILENO))
		return xdmctl_fail(XDMCTL_EXIT_USAGE, CMD,
				   "will not write a pickle to a terminal: give -o FILE, or a pipe");
	if (!a.log)
		return xdmctl_snapshot_live(ctx, &a.live, out);
	rc = logcsv_load(&log, "xdmctl: " CMD, a.log);
	if (rc)
		return rc == LOGCSV_NOMEM ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_USAGE;
	s.log = &log;
	s.memo = calloc(SNAP_K_COUNT + (size_t)log.tags.n, sizeof(*s.memo));
	if (!s.memo) {
		logcsv_say(&log, 0, "out of memory for the snapshot's strings");
		rc = LOGCSV_NOMEM;
	} else {
		rc = replay(&s);
	}
	if (rc) {
		rc = rc == LOGCSV_NOMEM ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_USAGE;
		goto out;
	}
	s.f = xdmctl_output_open(CMD, out);
	if (!s.f) {
		rc = XDMCTL_EXIT_FAIL;
		goto out;
	}
	put_snapshot(&s);
	rc = xdmctl_output_close(CMD, out, s.f, true);
out:
	free(s.memo);
	free(s.alloc_of);
	free(s.next);
	free(s.clock);
	free(s.left);
	logcsv_free(&log);
	return rc;
}
