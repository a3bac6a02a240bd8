/* SPDX-License-Identifier: MIT */
/*
 * fuzz_logcsv.c - the programs' reader of the allocation log,
 * logcsv_parse() and the live set of tools/common/logcsv.c (what xdm-bench
 * --replay, xdmctl timeline and xdmctl snapshot read a user's file with),
 * on any text.
 *
 * Properties: a log it accepts, written back the way the adaptor writes
 * rows, reads back row for row the same; its replay order is a
 * permutation that keeps each thread's rows in file order; and replaying
 * it on the live set either stops at a row it says is wrong, or ends with
 * exactly the blocks its allocations minus its frees leave live.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>

#include "tests/fuzz/fuzz.h"
#include "tools/common/logcsv.h"

#define HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"

static FILE *quiet;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Complaints are the reader's answer to bad input, not a finding. */
	quiet = fopen("/dev/null", "w");
	FUZZ_ASSERT(quiet, "cannot open /dev/null");
	return 0;
}

/*
 * The log written back in file order (the rows are kept grouped by
 * thread; seq is each one's place in the file): the adaptor's format,
 * RFC 4180 quoting of tags.
 */
static char *write_back(const struct logcsv *log, size_t *len)
{
	const struct logcsv_row **by_seq = calloc(log->nrows + 1, sizeof(*by_seq));
	char *text = NULL;
	FILE *f = open_memstream(&text, len);

	FUZZ_ASSERT(f && by_seq, "out of memory");
	for (size_t i = 0; i < log->nrows; i++) {
		FUZZ_ASSERT(log->rows[i].seq < log->nrows && !by_seq[log->rows[i].seq],
			    "row %zu has the place %zu of another", i, log->rows[i].seq);
		by_seq[log->rows[i].seq] = &log->rows[i];
	}
	fputs(HEADER, f);
	for (size_t i = 0; i < log->nrows; i++) {
		const struct logcsv_row *r = by_seq[i];
		const char *tag = logcsv_tag(log, r->tag);

		fprintf(f, "%" PRIu64 ",%" PRIu64 ",%s,0x%" PRIx64 ",%" PRIu64 ",%" PRIu32 ",%" PRIu32 ",",
			r->thread, r->time, logcsv_action_name((enum logcsv_action)r->action), r->ptr,
			r->bytes, r->stream, r->device);
		if (strpbrk(tag, ",\"\r\n")) {
			fputc('"', f);
			for (const char *c = tag; *c; c++) {
				if (*c == '"')
					fputc('"', f);
				fputc(*c, f);
			}
			fputc('"', f);
		} else {
			fputs(tag, f);
		}
		fprintf(f, ",%" PRIu64 "\n", r->query_id);
	}
	fclose(f);
	free(by_seq);
	return text;
}

static void same_rows(const struct logcsv *a, const struct logcsv *b)
{
	FUZZ_ASSERT(a->nrows == b->nrows, "%zu rows read back as %zu", a->nrows, b->nrows);
	for (size_t i = 0; i < a->nrows; i++) {
		const struct logcsv_row *x = &a->rows[i], *y = &b->rows[i];

		FUZZ_ASSERT(x->thread == y->thread && x->time == y->time && x->ptr == y->ptr &&
				    x->bytes == y->bytes && x->stream == y->stream &&
				    x->device == y->device && x->query_id == y->query_id &&
				    x->action == y->action && x->seq == y->seq,
			    "row %zu reads back otherwise", i);
		FUZZ_ASSERT(strcmp(logcsv_tag(a, x->tag), logcsv_tag(b, y->tag)) == 0,
			    "row %zu's tag reads back otherwise", i);
	}
}

/* A permutation of the rows that keeps each thread's file order. */
static void check_order(const struct logcsv *log)
{
	bool *seen = calloc(log->nrows + 1, 1);
	uint64_t threads = 0;

	FUZZ_ASSERT(seen, "out of memory");
	for (size_t i = 0; i < log->nrows; i++)
		threads += i == 0 || log->rows[i].thread != log->rows[i - 1].thread;
	FUZZ_ASSERT(threads == log->threads, "%" PRIu64 " threads counted as %" PRIu64, threads,
		    log->threads);
	for (size_t k = 0; k < log->nrows; k++) {
		size_t i = log->order[k];

		FUZZ_ASSERT(i < log->nrows && !seen[i], "the order repeats or leaves row %zu", i);
		seen[i] = true;
		/* Rows are grouped by thread in file order: the previous row of the
		 * same thread must have been replayed already. */
		if (i > 0 && log->rows[i - 1].thread == log->rows[i].thread)
			FUZZ_ASSERT(seen[i - 1], "row %zu of a thread is replayed before row %zu", i,
				    i - 1);
		FUZZ_ASSERT(i == 0 || log->rows[i - 1].thread != log->rows[i].thread ||
				    log->rows[i - 1].seq < log->rows[i].seq,
			    "a thread's rows are out of file order");
	}
	free(seen);
}

/* The live set after the replay: allocations minus frees, or a stop. */
static void check_replay(const struct logcsv *log)
{
	struct logcsv_live m;
	size_t live = 0;

	if (logcsv_live_init(log, &m) != LOGCSV_OK)
		return;
	for (size_t k = 0; k < log->nrows; k++) {
		const struct logcsv_row *r = logcsv_at(log, k);
		struct logcsv_block gone;

		if (logcsv_live_step(log, &m, r, (uint32_t)k, &gone) != LOGCSV_OK)
			goto out;
		if (r->action == LOGCSV_ALLOCATE) {
			live++;
		} else if (r->action != LOGCSV_ALLOCATE_FAILURE) {
			FUZZ_ASSERT(gone.ptr == r->ptr && gone.bytes == r->bytes,
				    "a free of 0x%" PRIx64 " took 0x%" PRIx64, r->ptr, gone.ptr);
			live--;
		}
		FUZZ_ASSERT(m.n == live, "%zu blocks live, the live set has %zu", live, m.n);
	}
out:
	logcsv_live_fini(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct logcsv log, again;
	size_t len = 0;
	char *text;

	if (logcsv_parse(&log, "fuzz", "input", (const char *)data, size, quiet) != LOGCSV_OK)
		return 0;
	check_order(&log);
	check_replay(&log);
	text = write_back(&log, &len);
	FUZZ_ASSERT(logcsv_parse(&again, "fuzz", "written back", text, len, quiet) == LOGCSV_OK,
		    "an accepted log is refused once written back");
	same_rows(&log, &again);
	logcsv_free(&again);
	free(text);
	logcsv_free(&log);
	return 0;
}
