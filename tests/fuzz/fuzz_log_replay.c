/* SPDX-License-Identifier: MIT */
/*
 * fuzz_log_replay.c - the logging suite's reader of the allocation log,
 * lr_parse() and lr_replay() of tests/lib/log_replay.c, on any text.
 *
 * The reader judges the adaptor's output, so it must not itself crash, leak
 * or misread: every log it accepts is written back the way the adaptor
 * writes rows (RFC 4180 quoting where a field needs it) and must read back
 * row for row the same, and its number fields must have been plain digits;
 * the replay of it must hand back a set of distinct live addresses, no
 * larger than the rows.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>

#include "tests/fuzz/fuzz.h"
#include "tests/lib/log_replay.h"

#define HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"

struct out {
	char *p;
	size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
	while (o->len + n + 1 > o->cap) {
		o->cap = o->cap ? 2 * o->cap : 1024;
		o->p = realloc(o->p, o->cap);
		FUZZ_ASSERT(o->p, "out of memory");
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

/* A field, quoted (quotes doubled) when it holds a comma, quote, CR or LF. */
static void put_field(struct out *o, const char *s, char sep)
{
	if (strpbrk(s, ",\"\r\n")) {
		put(o, "\"", 1);
		for (; *s; s++) {
			if (*s == '"')
				put(o, "\"", 1);
			put(o, s, 1);
		}
		put(o, "\"", 1);
	} else {
		put(o, s, strlen(s));
	}
	put(o, &sep, 1);
}

static void put_u64(struct out *o, const char *fmt, uint64_t v, char sep)
{
	char num[32];

	snprintf(num, sizeof(num), fmt, v);
	put_field(o, num, sep);
}

static void write_log(struct out *o, const struct lr_log *log)
{
	put(o, HEADER, strlen(HEADER));
	for (size_t i = 0; i < log->n; i++) {
		const struct lr_row *r = &log->rows[i];

		put_u64(o, "%" PRIu64, r->thread, ',');
		put_u64(o, "%" PRIu64, r->time, ',');
		put_field(o, r->action, ',');
		put_u64(o, "0x%" PRIx64, r->ptr, ',');
		put_u64(o, "%" PRIu64, r->bytes, ',');
		put_u64(o, "%" PRIu64, r->stream, ',');
		put_u64(o, "%" PRIu64, r->device, ',');
		put_field(o, r->tag, ',');
		put_u64(o, "%" PRIu64, r->query_id, '\n');
	}
}

/* [s, e) is digits of the base (16: "0x" first), at least one. */
static bool plain_number(const char *s, const char *e, bool hex)
{
	if (hex) {
		if (e - s < 2 || s[0] != '0' || s[1] != 'x')
			return false;
		s += 2;
	}
	if (s == e)
		return false;
	for (; s < e; s++)
		if (!((*s >= '0' && *s <= '9') ||
		      (hex && ((*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))))
			return false;
	return true;
}

/*
 * Is every number field of the rows in text written as numbers are written:
 * digits only, the ptr "0x" and hex digits?  A reader that takes "+5",
 * "\t5" or "0x0x5" would let a formatting bug of the adaptor through.  The
 * fields are cut here on their own, RFC 4180 style, after the header line;
 * a quoted field's content is what counts.
 */
static bool numbers_plain(const char *text)
{
	const char *s = strchr(text, '\n');
	unsigned int field = 0;

	if (!s)
		return true;
	for (s++; *s;) {
		const char *cs = s, *ce;
		bool escaped = false;

		if (*s == '"') {
			for (cs = ++s; *s && !(*s == '"' && s[1] != '"'); s++) {
				if (*s == '"') {	/* a doubled quote */
					escaped = true;
					s++;
				}
			}
			ce = s;
			if (*s)
				s++;
		} else {
			while (*s && *s != ',' && *s != '\n')
				s++;
			ce = s;
		}
		/* The action (2) and the tag (7) are text. */
		if (field != 2 && field != 7 && (escaped || !plain_number(cs, ce, field == 3)))
			return false;
		field = *s == '\n' ? 0 : field + 1;
		if (*s)
			s++;
	}
	return true;
}

static bool row_eq(const struct lr_row *a, const struct lr_row *b)
{
	return a->thread == b->thread && a->time == b->time && !strcmp(a->action, b->action) &&
	       a->ptr == b->ptr && a->bytes == b->bytes && a->stream == b->stream &&
	       a->device == b->device && !strcmp(a->tag, b->tag) && a->query_id == b->query_id &&
	       a->seq == b->seq;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lr_log log, again;
	struct lr_live *live = NULL;
	struct out written = { NULL, 0, 0 };
	size_t n_live = 0;
	char err[256];
	char *text = fuzz_string(data, size);

	if (!text)
		return 0;
	if (lr_parse(text, &log, err, sizeof(err)) != 0) {
		FUZZ_ASSERT(log.n == 0 && !log.rows, "a refused log kept rows");
		goto out;
	}
	FUZZ_ASSERT(numbers_plain(text), "a number field that is not plain digits was taken");
	write_log(&written, &log);
	FUZZ_ASSERT(lr_parse(written.p, &again, err, sizeof(err)) == 0,
		    "written back, the log is refused: %s", err);
	FUZZ_ASSERT(again.n == log.n, "%zu rows read back as %zu", log.n, again.n);
	for (size_t i = 0; i < log.n; i++)
		FUZZ_ASSERT(row_eq(&log.rows[i], &again.rows[i]), "row %zu reads back otherwise",
			    i);
	lr_free(&again);
	if (lr_replay(&log, &live, &n_live, err, sizeof(err)) == 0) {
		FUZZ_ASSERT(n_live <= log.n, "%zu live of %zu rows", n_live, log.n);
		for (size_t i = 0; i < n_live; i++)
			for (size_t k = 0; k < i; k++)
				FUZZ_ASSERT(live[i].ptr != live[k].ptr, "0x%" PRIx64 " live twice",
					    live[i].ptr);
		free(live);
	}
	lr_free(&log);
out:
	free(written.p);
	free(text);
	return 0;
}
