/* SPDX-License-Identifier: MIT */
/*
 * log_replay.c - an independent reader of the allocation log: RFC 4180
 * fields, the nine columns of xdm-logging(7), and a replay of the rows.
 * It shares no code with the adaptor, so a formatting bug cannot be
 * mirrored by a parsing bug.  A "dropped" row (full=drop: bytes rows of
 * its thread were lost there) is read like any row and skipped by the
 * replay.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/log_replay.h"

#define LR_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id"
#define LR_FIELDS 9

static int fail(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* One field at *p, unquoted into a malloc'd string; *p moves past its separator. */
static char *next_field(const char **p, char *sep)
{
	const char *s = *p;
	size_t cap = 16, n = 0;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	if (*s == '"') {
		s++;
		for (;;) {
			if (*s == '\0') {
				free(out);
				return NULL;
			}
			if (*s == '"' && s[1] == '"') {
				s++;
			} else if (*s == '"') {
				s++;
				break;
			}
			if (n + 2 > cap) {
				cap *= 2;
				out = realloc(out, cap);
			}
			out[n++] = *s++;
		}
	} else {
		while (*s && *s != ',' && *s != '\n') {
			if (*s == '"') {
				free(out);
				return NULL;
			}
			if (n + 2 > cap) {
				cap *= 2;
				out = realloc(out, cap);
			}
			out[n++] = *s++;
		}
	}
	out[n] = '\0';
	*sep = *s;
	if (*s)
		s++;
	*p = s;
	return out;
}

/*
 * Digits of base only, as the adaptor writes numbers.  strtoull() alone
 * would also take a sign, leading white space and, in base 16, a second
 * "0x": "+5", "\t5" and "0x0x5" are no output of the adaptor, and reading
 * them would let a formatting bug through (found by tests/fuzz).
 */
static int to_u64(const char *text, int base, uint64_t *out)
{
	const char *digits = base == 16 ? "0123456789abcdefABCDEF" : "0123456789";
	char *end;

	if (!*text || strspn(text, digits) != strlen(text))
		return -1;
	errno = 0;
	*out = strtoull(text, &end, base);
	return errno || *end ? -1 : 0;
}

int lr_parse(const char *text, struct lr_log *log, char *err, size_t err_len)
{
	const char *p = text;
	size_t cap = 64, line = 1;

	memset(log, 0, sizeof(*log));
	if (strncmp(p, LR_HEADER "\n", sizeof(LR_HEADER)) != 0)
		return fail(err, err_len, "the header is not '%s'", LR_HEADER);
	p += sizeof(LR_HEADER);
	log->rows = malloc(cap * sizeof(*log->rows));
	while (*p) {
		char *f[LR_FIELDS] = { NULL };
		struct lr_row r;
		char sep = 0;
		int i, bad = 0;

		line++;
		for (i = 0; i < LR_FIELDS; i++) {
			f[i] = next_field(&p, &sep);
			if (!f[i] || (i < LR_FIELDS - 1 && sep != ',') ||
			    (i == LR_FIELDS - 1 && sep != '\n')) {
				bad = 1;
				break;
			}
		}
		memset(&r, 0, sizeof(r));
		if (!bad) {
			bad = to_u64(f[0], 10, &r.thread) || to_u64(f[1], 10, &r.time) ||
			      strlen(f[2]) >= sizeof(r.action) || strncmp(f[3], "0x", 2) ||
			      to_u64(f[3] + 2, 16, &r.ptr) || to_u64(f[4], 10, &r.bytes) ||
			      to_u64(f[5], 10, &r.stream) || to_u64(f[6], 10, &r.device) ||
			      to_u64(f[8], 10, &r.query_id);
		}
		if (!bad) {
			strcpy(r.action, f[2]);
			r.tag = f[7];
			f[7] = NULL;
		}
		for (i = 0; i < LR_FIELDS; i++)
			free(f[i]);
		if (bad) {
			lr_free(log);
			return fail(err, err_len, "line %zu is not a row of nine fields", line);
		}
		if (log->n == cap) {
			cap *= 2;
			log->rows = realloc(log->rows, cap * sizeof(*log->rows));
		}
		r.seq = log->n;
		log->rows[log->n++] = r;
	}
	return 0;
}

void lr_free(struct lr_log *log)
{
	for (size_t i = 0; i < log->n; i++)
		free(log->rows[i].tag);
	free(log->rows);
	memset(log, 0, sizeof(*log));
}

static int is_free(const struct lr_row *r)
{
	return !strcmp(r->action, "free") || !strcmp(r->action, "free_failure");
}

static int by_time(const void *a, const void *b)
{
	const struct lr_row *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	/* One thread's rows are in call order in the file; across threads a
	 * free goes first, since an address is reused only after its free. */
	if (x->thread != y->thread && is_free(x) != is_free(y))
		return is_free(y) - is_free(x);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int lr_replay(struct lr_log *log, struct lr_live **live, size_t *n_live, char *err,
	      size_t err_len)
{
	struct lr_live *set = malloc((log->n + 1) * sizeof(*set));
	size_t n = 0, i, j;

	qsort(log->rows, log->n, sizeof(*log->rows), by_time);
	for (i = 0; i < log->n; i++) {
		struct lr_row *r = &log->rows[i];

		for (j = 0; j < n && set[j].ptr != r->ptr; j++)
			;
		if (!strcmp(r->action, "allocate")) {
			if (j < n) {
				free(set);
				return fail(err, err_len, "0x%llx allocated while live",
					    (unsigned long long)r->ptr);
			}
			set[n++] = (struct lr_live){ r->ptr, r->bytes, r->tag, r->query_id };
		} else if (is_free(r)) {
			if (j == n || set[j].bytes != r->bytes) {
				free(set);
				return fail(err, err_len, "free of 0x%llx (%llu bytes) not live",
					    (unsigned long long)r->ptr,
					    (unsigned long long)r->bytes);
			}
			set[j] = set[--n];
		} else if (strcmp(r->action, "allocate_failure") != 0 &&
			   strcmp(r->action, "dropped") != 0) {
			free(set);
			return fail(err, err_len, "unknown action '%s'", r->action);
		}
	}
	*live = set;
	*n_live = n;
	return 0;
}
