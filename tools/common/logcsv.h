/* SPDX-License-Identifier: MIT */
/*
 * logcsv.h - the logging adaptor's CSV (xdm-logging(7)) as xdm's programs
 * read it: xdm-bench's --replay and xdmctl's timeline and snapshot.
 *
 * One reader for all of them, so that a file one accepts the others accept
 * and every complaint reads the same: one sentence naming FILE:LINE after
 * the caller's prefix ("xdm-bench: --replay", "xdmctl: timeline").  The
 * logging suite (tests/unit/check_logging.c) reads what the adaptor wrote
 * with it too: a log the adaptor writes and the programs refuse fails a
 * test, and the reader is shared code that does not mirror the adaptor's
 * formatting code.
 */
#ifndef XDM_TOOLS_LOGCSV_H
#define XDM_TOOLS_LOGCSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum logcsv_action {
	LOGCSV_ALLOCATE,
	LOGCSV_ALLOCATE_FAILURE,
	LOGCSV_FREE,
	LOGCSV_FREE_FAILURE,
};

/* What went wrong, said already: the caller only picks its exit code. */
enum logcsv_err {
	LOGCSV_OK = 0,
	LOGCSV_BAD = -1,	/* the file cannot be read or is not a good log */
	LOGCSV_NOMEM = -2,	/* it is too large for this machine's memory */
};

struct logcsv_row {
	uint64_t thread;
	uint64_t time;		/* ns since the epoch, as logged */
	uint64_t ptr;
	uint64_t bytes;
	uint64_t query_id;
	uint64_t line;		/* where the row starts in the file */
	size_t seq;		/* its index in file order */
	uint32_t stream;
	uint32_t device;
	uint32_t tag;		/* an index of logcsv_tag() */
	uint8_t action;		/* enum logcsv_action */
};

/* Distinct tags, unquoted, each stored once however many rows carry it. */
struct logcsv_tags {
	char *text;		/* the names, each NUL-terminated */
	size_t len, cap;
	size_t *off;		/* of each name in text */
	uint32_t n, ncap;
	uint32_t *slot;		/* hash table: index + 1, 0 empty */
	size_t mask;
};

/* A "dropped" row: rows its thread lost at that point of the file. */
struct logcsv_drop {
	uint64_t thread;
	uint64_t rows;		/* how many were lost */
	uint64_t line;
	size_t seq;		/* rows (of any thread) before it in the file */
};

struct logcsv {
	const char *who;	/* the prefix of every complaint */
	FILE *complaints;	/* where they go: stderr but for the fuzz target */
	const char *path;
	struct logcsv_row *rows;	/* grouped by thread, file order within each */
	size_t nrows;
	size_t *order;		/* the replay order: indexes of rows */
	uint64_t threads;	/* distinct thread ids */
	struct logcsv_tags tags;
	/*
	 * "dropped" rows (the adaptor's full=drop: its thread lost bytes
	 * rows there) are not rows of the replay: they are summed here.
	 */
	uint64_t dropped;	/* rows the log says were lost */
	struct logcsv_drop *drops;	/* the "dropped" rows, in file order */
	size_t ndrops, drops_cap;
};

/*
 * Reads PATH whole and merges its threads' rows into the replay order of
 * xdm-logging(7): each thread's rows in file order, merged by time, a free
 * first where two threads' rows have the same time.  Returns LOGCSV_OK,
 * or an error said on standard error as "WHO: PATH:LINE: sentence.".
 */
int logcsv_load(struct logcsv *log, const char *who, const char *path);
/*
 * The same for a log already in memory: text[0, len) named path in the
 * complaints, which go to complaints (a fuzz target's /dev/null).
 */
int logcsv_parse(struct logcsv *log, const char *who, const char *path, const char *text,
		 size_t len, FILE *complaints);
void logcsv_free(struct logcsv *log);

/* The k-th row of the replay order. */
static inline const struct logcsv_row *logcsv_at(const struct logcsv *log, size_t k)
{
	return &log->rows[log->order[k]];
}

/*
 * The replay clock at the k-th row, given the clock at the row before:
 * the rows' time, except that it never goes back.  The merge keeps each
 * thread's rows in file order, and a step of the system clock within one
 * thread would otherwise put a row before the one replayed ahead of it.
 */
static inline uint64_t logcsv_clock(const struct logcsv *log, size_t k, uint64_t before)
{
	uint64_t t = logcsv_at(log, k)->time;

	return k == 0 || t > before ? t : before;
}

/* A tag's name, unquoted as the application gave it. */
static inline const char *logcsv_tag(const struct logcsv *log, uint32_t tag)
{
	return log->tags.text + log->tags.off[tag];
}

const char *logcsv_action_name(enum logcsv_action a);

/* One sentence, "WHO: PATH:LINE: ...", LINE left out when 0; LOGCSV_BAD. */
int logcsv_say(const struct logcsv *log, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- the live set ------------------------------------------------------- */

/*
 * The blocks live at one point of the replay, by address: what a free is
 * matched against.  value is the caller's (the bench's slot, the
 * timeline's series), given at the allocate and handed back at the free.
 */
struct logcsv_block {
	uint64_t ptr;		/* 0: an empty entry */
	uint64_t bytes;
	uint64_t line;		/* of the allocate */
	uint32_t value;
};

struct logcsv_live {
	struct logcsv_block *e;
	size_t mask;
	size_t n;		/* blocks live now */
};

int logcsv_live_init(const struct logcsv *log, struct logcsv_live *m);
void logcsv_live_fini(struct logcsv_live *m);

/*
 * Replays one row on the live set.  An allocate enters it with value; a
 * free or free_failure leaves it (a free_failure ends a block's life too,
 * see xdm-logging(7)) and *gone gets the block as allocated; an
 * allocate_failure changes nothing.  An allocate of a live address, or a
 * free of one no earlier row left live or with other bytes, is said and
 * LOGCSV_BAD returned.
 */
int logcsv_live_step(const struct logcsv *log, struct logcsv_live *m, const struct logcsv_row *r,
		     uint32_t value, struct logcsv_block *gone);

#endif /* XDM_TOOLS_LOGCSV_H */
