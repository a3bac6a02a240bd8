/* SPDX-License-Identifier: MIT */
/*
 * logcsv.c - reads the logging adaptor's CSV (xdm-logging(7)) for the
 * programs of tools/, merges its threads into the replay order and keeps
 * the live set a replay matches frees against.
 *
 * A file that cannot be used is a usage error, like a bad option: every
 * complaint is one sentence naming FILE:LINE, said here after the
 * caller's prefix, and the caller only picks its exit code.
 *
 * Order.  Each thread's rows are in the order of its calls, but the
 * threads' buffers reach the file in any order, so the replay order is
 * each thread's rows in file order, merged by time (a free first where
 * two threads' rows have the same time), as xdm-logging(7) prescribes for
 * rebuilding the live set.  For a log written by one thread that is
 * exactly file order, whatever the clock did.
 *
 * Tags are interned: a log of a million rows has a handful of distinct
 * tags, and a row carries the index of its tag, not a copy.
 *
 * Losses.  A log written with full=drop may hold "dropped" rows, each
 * saying how many rows its thread lost at that point (in the bytes
 * column).  They are summed into log->dropped, not replayed; where the
 * replay then finds a free of a block it never saw allocated, the
 * complaint says the log lost rows.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logcsv.h"

#define CSV_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id"
#define CSV_FIELDS 9

struct reader {
	struct logcsv *log;
	const char *p, *end;	/* what is left of the file */
	uint64_t line;		/* of p */
	char *scratch;		/* a quoted tag with its doubled quotes undone */
	size_t scratch_cap;
};

int logcsv_say(const struct logcsv *log, uint64_t line, const char *fmt, ...)
{
	va_list ap;

	if (line)
		fprintf(log->complaints, "%s: %s:%llu: ", log->who, log->path, (unsigned long long)line);
	else
		fprintf(log->complaints, "%s: %s: ", log->who, log->path);
	va_start(ap, fmt);
	vfprintf(log->complaints, fmt, ap);
	va_end(ap);
	fputs(".\n", log->complaints);
	return LOGCSV_BAD;
}

/* The whole file, NUL-terminated; read in pieces so that a pipe works too. */
static int slurp(const struct logcsv *log, char **text, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	FILE *f = fopen(log->path, "rb");

	if (!f || !buf) {
		int err = errno;

		free(buf);
		if (f)
			fclose(f);
		logcsv_say(log, 0, "cannot be read: %s", strerror(f ? ENOMEM : err));
		return f ? LOGCSV_NOMEM : LOGCSV_BAD;
	}
	for (;;) {
		size_t got;

		if (cap - n < 2) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger) {
				free(buf);
				fclose(f);
				logcsv_say(log, 0, "is too large to hold in memory");
				return LOGCSV_NOMEM;
			}
			buf = bigger;
			cap *= 2;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		int err = errno;

		free(buf);
		fclose(f);
		return logcsv_say(log, 0, "cannot be read: %s", strerror(err));
	}
	fclose(f);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return LOGCSV_OK;
}

/* ---- the tags ----------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);	/* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
	return h;
}

static bool tags_grow_table(struct logcsv_tags *t)
{
	size_t cap = t->slot ? 2 * (t->mask + 1) : 64;
	uint32_t *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return false;
	for (uint32_t i = 0; i < t->n; i++) {
		const char *name = t->text + t->off[i];
		size_t j = hash_bytes(name, strlen(name)) & (cap - 1);

		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = i + 1;
	}
	free(t->slot);
	t->slot = slot;
	t->mask = cap - 1;
	return true;
}

/* The index of the tag [s, s + len), added if new; false: out of memory. */
static bool tags_intern(struct logcsv_tags *t, const char *s, size_t len, uint32_t *out)
{
	size_t j;

	if (!t->slot || 2 * ((size_t)t->n + 1) > t->mask + 1) {
		if (t->n == UINT32_MAX - 1 || !tags_grow_table(t))
			return false;
	}
	for (j = hash_bytes(s, len) & t->mask; t->slot[j]; j = (j + 1) & t->mask) {
		const char *name = t->text + t->off[t->slot[j] - 1];

		if (strncmp(name, s, len) == 0 && name[len] == '\0') {
			*out = t->slot[j] - 1;
			return true;
		}
	}
	if (t->n == t->ncap) {
		uint32_t ncap = t->ncap ? 2 * t->ncap : 16;
		size_t *off = realloc(t->off, ncap * sizeof(*off));

		if (!off)
			return false;
		t->off = off;
		t->ncap = ncap;
	}
	if (t->cap - t->len < len + 1) {
		size_t cap = t->cap ? t->cap : 256;
		char *text;

		while (cap - t->len < len + 1)
			cap *= 2;
		text = realloc(t->text, cap);
		if (!text)
			return false;
		t->text = text;
		t->cap = cap;
	}
	memcpy(t->text + t->len, s, len);
	t->text[t->len + len] = '\0';
	t->off[t->n] = t->len;
	t->len += len + 1;
	t->slot[j] = t->n + 1;
	*out = t->n++;
	return true;
}

static void tags_free(struct logcsv_tags *t)
{
	free(t->text);
	free(t->off);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

/* ---- the rows ----------------------------------------------------------- */

/* A field's text: [start, start + len), unquoted unless quoted says so. */
struct field {
	const char *start;
	size_t len;
	bool quoted;
};

/*
 * One field at r->p, RFC 4180: quoted (doubled quotes inside, newlines
 * allowed) or plain (no quote, comma or newline).  *sep gets what ended
 * it: ',' or '\n', or 0 at the end of the file.
 */
static int next_field(struct reader *r, uint64_t row_line, struct field *f, char *sep)
{
	const char *s = r->p;

	f->quoted = s < r->end && *s == '"';
	if (f->quoted) {
		f->start = ++s;
		for (;;) {
			if (s == r->end)
				return logcsv_say(r->log, row_line, "a quoted field is not closed before the end of the file");
			if (*s == '"' && s + 1 < r->end && s[1] == '"') {
				s += 2;
				continue;
			}
			if (*s == '"')
				break;
			if (*s == '\n')
				r->line++;
			s++;
		}
		f->len = (size_t)(s - f->start);
		s++;
	} else {
		f->start = s;
		while (s < r->end && *s != ',' && *s != '\n') {
			if (*s == '"')
				return logcsv_say(r->log, row_line, "a double quote inside an unquoted field");
			s++;
		}
		f->len = (size_t)(s - f->start);
	}
	if (s == r->end) {
		*sep = 0;
	} else if (*s == ',' || *s == '\n') {
		*sep = *s++;
	} else {
		return logcsv_say(r->log, row_line, "a quoted field is followed by '%c', not by a comma or the end of the line",
				  *s);
	}
	r->p = s;
	return LOGCSV_OK;
}

/* Digits only, in base 10 or 16, without overflow. */
static bool field_u64(const struct field *f, unsigned int base, uint64_t *out)
{
	uint64_t v = 0;

	if (f->quoted || f->len == 0)
		return false;
	for (size_t i = 0; i < f->len; i++) {
		char c = f->start[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			return false;
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

static bool field_is(const struct field *f, const char *word)
{
	return !f->quoted && f->len == strlen(word) && memcmp(f->start, word, f->len) == 0;
}

static const char *const field_names[CSV_FIELDS] = {
	"thread", "time", "action", "ptr", "bytes", "stream", "device", "tag", "query_id",
};

/* What a field holds, quoted for a message and cut short if long. */
static void field_shown(const struct field *f, char *buf, size_t len)
{
	int n = f->len > 40 ? 40 : (int)f->len;

	snprintf(buf, len, "'%.*s%s'", n, f->start, f->len > 40 ? "..." : "");
}

static int bad_field(struct reader *r, uint64_t line, int i, const struct field *f,
		     const char *want)
{
	char shown[64];

	field_shown(f, shown, sizeof(shown));
	return logcsv_say(r->log, line, "the %s field %s is not %s", field_names[i], shown, want);
}

/* The tag field's index: a quoted one has its doubled quotes undone first. */
static int field_tag(struct reader *r, uint64_t line, const struct field *f, uint32_t *tag)
{
	const char *s = f->start;
	size_t len = f->len;

	if (f->quoted && memchr(s, '"', len)) {
		size_t n = 0;

		if (r->scratch_cap < len) {
			char *bigger = realloc(r->scratch, len);

			if (!bigger)
				goto nomem;
			r->scratch = bigger;
			r->scratch_cap = len;
		}
		for (size_t i = 0; i < len; i++) {
			r->scratch[n++] = s[i];
			i += s[i] == '"';	/* the second of a pair */
		}
		s = r->scratch;
		len = n;
	}
	if (tags_intern(&r->log->tags, s, len, tag))
		return LOGCSV_OK;
nomem:
	logcsv_say(r->log, line, "out of memory for the tags");
	return LOGCSV_NOMEM;
}

/*
 * A "dropped" row: "<thread>,<time>,dropped,0x0,<rows lost>,..."; its
 * count goes to log->dropped, and where it stood to log->drops.  Returns
 * 1 when the row was one.
 */
static int parse_drop_mark(struct reader *r, uint64_t line, const struct field *f,
			   uint64_t thread)
{
	struct logcsv *log = r->log;
	uint64_t v;

	if (!field_is(&f[2], "dropped"))
		return 0;
	if (!field_is(&f[3], "0x0"))
		return bad_field(r, line, 3, &f[3], "0x0 in a dropped row");
	if (!field_u64(&f[4], 10, &v) || v == 0)
		return bad_field(r, line, 4, &f[4], "the number of rows lost, 1 or more");
	if (v > UINT64_MAX - r->log->dropped)
		return logcsv_say(r->log, line, "more than 2^64 rows dropped in all");
	if (log->ndrops == log->drops_cap) {
		size_t cap = log->drops_cap ? 2 * log->drops_cap : 16;
		struct logcsv_drop *d = realloc(log->drops, cap * sizeof(*d));

		if (!d) {
			logcsv_say(log, line, "out of memory for the dropped rows");
			return LOGCSV_NOMEM;
		}
		log->drops = d;
		log->drops_cap = cap;
	}
	log->drops[log->ndrops++] = (struct logcsv_drop){ .thread = thread, .rows = v,
							  .line = line, .seq = log->nrows };
	log->dropped += v;
	return 1;
}

/*
 * One row into *row; the nine fields and their types are checked here.
 * Returns 1, not LOGCSV_OK, for a "dropped" row, which fills no row.
 */
static int parse_row(struct reader *r, struct logcsv_row *row)
{
	struct field f[CSV_FIELDS];
	uint64_t line = r->line, v;
	char sep = 0;
	int rc;

	for (int i = 0; i < CSV_FIELDS; i++) {
		rc = next_field(r, line, &f[i], &sep);
		if (rc)
			return rc;
		if (i < CSV_FIELDS - 1 && sep != ',')
			return logcsv_say(r->log, line, "the row ends after %d field%s; the log has %d",
					  i + 1, i ? "s" : "", CSV_FIELDS);
	}
	if (sep == ',')
		return logcsv_say(r->log, line, "the row has more than %d fields", CSV_FIELDS);
	if (sep != '\n')
		return logcsv_say(r->log, line, "the last row does not end in a newline (was the file cut short?)");
	r->line++;

	row->line = line;
	if (!field_u64(&f[0], 10, &row->thread))
		return bad_field(r, line, 0, &f[0], "a decimal thread id");
	if (!field_u64(&f[1], 10, &row->time))
		return bad_field(r, line, 1, &f[1], "nanoseconds in decimal");
	rc = parse_drop_mark(r, line, f, row->thread);
	if (rc)
		return rc;
	if (field_is(&f[2], "allocate"))
		row->action = LOGCSV_ALLOCATE;
	else if (field_is(&f[2], "allocate_failure"))
		row->action = LOGCSV_ALLOCATE_FAILURE;
	else if (field_is(&f[2], "free"))
		row->action = LOGCSV_FREE;
	else if (field_is(&f[2], "free_failure"))
		row->action = LOGCSV_FREE_FAILURE;
	else
		return bad_field(r, line, 2, &f[2],
				 "allocate, allocate_failure, free, free_failure or dropped");
	if (f[3].quoted || f[3].len < 3 || f[3].start[0] != '0' || f[3].start[1] != 'x')
		return bad_field(r, line, 3, &f[3], "an address written 0x and hexadecimal digits");
	f[3].start += 2;
	f[3].len -= 2;
	if (!field_u64(&f[3], 16, &row->ptr)) {
		f[3].start -= 2;
		f[3].len += 2;
		return bad_field(r, line, 3, &f[3], "an address written 0x and hexadecimal digits");
	}
	if (!field_u64(&f[4], 10, &row->bytes))
		return bad_field(r, line, 4, &f[4], "a decimal byte count");
	if (!field_u64(&f[5], 10, &v) || v > UINT32_MAX)
		return bad_field(r, line, 5, &f[5], "a decimal stream id");
	row->stream = (uint32_t)v;
	if (!field_u64(&f[6], 10, &v) || v > UINT32_MAX)
		return bad_field(r, line, 6, &f[6], "a decimal device ordinal");
	row->device = (uint32_t)v;
	/* f[7], the tag, may be anything the adaptor wrote. */
	rc = field_tag(r, line, &f[7], &row->tag);
	if (rc)
		return rc;
	if (!field_u64(&f[8], 10, &row->query_id))
		return bad_field(r, line, 8, &f[8], "a decimal query id");
	if (row->action != LOGCSV_ALLOCATE_FAILURE && row->ptr == 0)
		return logcsv_say(r->log, line, "a%s row with the address 0x0",
				  row->action == LOGCSV_ALLOCATE ? "n allocate" : " free");
	if (row->action == LOGCSV_ALLOCATE && row->bytes == 0)
		return logcsv_say(r->log, line, "an allocation of 0 bytes, which xdm never hands out");
	if (row->action == LOGCSV_ALLOCATE && row->bytes > SIZE_MAX)
		return logcsv_say(r->log, line, "an allocation of %llu bytes, more than this machine can ask for",
				  (unsigned long long)row->bytes);
	return LOGCSV_OK;
}

/* Rows, at most: one per newline (quoted newlines make it a few too many). */
static size_t count_lines(const char *p, const char *end)
{
	size_t n = 0;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		n++;
		p++;
	}
	return n;
}

static int parse(struct logcsv *log, const char *text, size_t len)
{
	struct reader r = { log, text, text + len, 1, NULL, 0 };
	const size_t hlen = sizeof(CSV_HEADER) - 1;
	size_t cap;
	const char *nul;
	int rc = LOGCSV_OK;

	if (len == 0)
		return logcsv_say(log, 0, "is empty, not a log of the logging adaptor");
	nul = memchr(text, '\0', len);
	if (nul) {
		for (const char *c = text; c < nul; c++)
			r.line += *c == '\n';
		return logcsv_say(log, r.line, "a NUL byte, which the logging adaptor never writes");
	}
	if (len < hlen + 1 || memcmp(text, CSV_HEADER, hlen) != 0 || text[hlen] != '\n')
		return logcsv_say(log, 1, "the first line is not the logging adaptor's header '%s'",
				  CSV_HEADER);
	r.p += hlen + 1;
	r.line = 2;
	/* One allocation, sized by the newlines, plus one for a last row cut short. */
	cap = count_lines(r.p, r.end) + 1;
	log->rows = malloc(cap * sizeof(*log->rows));
	if (!log->rows) {
		logcsv_say(log, 0, "out of memory for %zu rows", cap);
		return LOGCSV_NOMEM;
	}
	while (r.p < r.end) {
		rc = parse_row(&r, &log->rows[log->nrows]);
		if (rc == 1) {
			rc = LOGCSV_OK;
			continue;
		}
		if (rc)
			break;
		log->rows[log->nrows].seq = log->nrows;
		log->nrows++;
	}
	free(r.scratch);
	return rc;
}

/* ---- the merge ---------------------------------------------------------- */

static int by_thread(const void *a, const void *b)
{
	const struct logcsv_row *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static bool is_free(const struct logcsv_row *r)
{
	return r->action == LOGCSV_FREE || r->action == LOGCSV_FREE_FAILURE;
}

/* Whether a should be replayed before b; both are heads of their threads. */
static bool before(const struct logcsv_row *a, const struct logcsv_row *b)
{
	if (a->time != b->time)
		return a->time < b->time;
	/* An address is handed out again only after its free was stamped. */
	if (is_free(a) != is_free(b))
		return is_free(a);
	return a->seq < b->seq;
}

/* One thread's rows, [next, end) of the rows sorted by thread. */
struct cursor {
	size_t next, end;
};

static void sift_down(struct cursor *h, size_t n, size_t i, const struct logcsv_row *rows)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct cursor t;

		if (l < n && before(&rows[h[l].next], &rows[h[m].next]))
			m = l;
		if (l + 1 < n && before(&rows[h[l + 1].next], &rows[h[m].next]))
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/*
 * Sorts the rows by thread (file order kept within each), then writes the
 * merged order into log->order: a heap of one cursor per thread, keyed by
 * each thread's next row.
 */
static int merge(struct logcsv *log)
{
	struct logcsv_row *rows = log->rows;
	size_t n = log->nrows, nthreads = 0, hn = 0;
	struct cursor *heap;

	qsort(rows, n, sizeof(*rows), by_thread);
	for (size_t i = 0; i < n; i++)
		nthreads += i == 0 || rows[i].thread != rows[i - 1].thread;
	log->order = malloc((n ? n : 1) * sizeof(*log->order));
	heap = malloc((nthreads ? nthreads : 1) * sizeof(*heap));
	if (!log->order || !heap) {
		free(heap);
		logcsv_say(log, 0, "out of memory merging the threads' rows");
		return LOGCSV_NOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || rows[i].thread != rows[i - 1].thread)
			heap[hn++] = (struct cursor){ i, i };
		heap[hn - 1].end = i + 1;
	}
	for (size_t i = hn / 2; i-- > 0;)
		sift_down(heap, hn, i, rows);
	for (size_t k = 0; k < n; k++) {
		log->order[k] = heap[0].next++;
		if (heap[0].next == heap[0].end)
			heap[0] = heap[--hn];
		sift_down(heap, hn, 0, rows);
	}
	free(heap);
	log->threads = nthreads;
	return LOGCSV_OK;
}

int logcsv_parse(struct logcsv *log, const char *who, const char *path, const char *text,
		 size_t len, FILE *complaints)
{
	int rc;

	memset(log, 0, sizeof(*log));
	log->who = who;
	log->path = path;
	log->complaints = complaints;
	rc = parse(log, text, len);
	if (rc == LOGCSV_OK)
		rc = merge(log);
	if (rc)
		logcsv_free(log);
	return rc;
}

int logcsv_load(struct logcsv *log, const char *who, const char *path)
{
	struct logcsv named = { .who = who, .path = path, .complaints = stderr };
	size_t len = 0;
	char *text = NULL;
	int rc;

	memset(log, 0, sizeof(*log));
	rc = slurp(&named, &text, &len);
	if (rc)
		return rc;
	rc = logcsv_parse(log, who, path, text, len, stderr);
	free(text);
	return rc;
}

void logcsv_free(struct logcsv *log)
{
	free(log->rows);
	free(log->order);
	free(log->drops);
	tags_free(&log->tags);
	log->rows = NULL;
	log->order = NULL;
	log->drops = NULL;
	log->nrows = log->ndrops = log->drops_cap = 0;
}

const char *logcsv_action_name(enum logcsv_action a)
{
	static const char *const names[] = { "allocate", "allocate_failure", "free",
					     "free_failure" };

	return names[a];
}

/* ---- the live set ------------------------------------------------------- */

/* Open addressing with linear probing; ptr 0 is empty. */

static size_t hash_ptr(uint64_t ptr)
{
	/* Blocks are aligned: the low bits say little. */
	return (size_t)(((ptr >> 8) * UINT64_C(0x9e3779b97f4a7c15)) >> 17);
}

static struct logcsv_block *map_find(const struct logcsv_live *m, uint64_t ptr)
{
	for (size_t i = hash_ptr(ptr) & m->mask;; i = (i + 1) & m->mask) {
		if (m->e[i].ptr == ptr || m->e[i].ptr == 0)
			return &m->e[i];
	}
}

/* Backward-shift deletion: no tombstones, so a long log never slows down. */
static void map_remove(struct logcsv_live *m, struct logcsv_block *gone)
{
	size_t i = (size_t)(gone - m->e), j = i;

	for (;;) {
		size_t home;

		j = (j + 1) & m->mask;
		if (m->e[j].ptr == 0)
			break;
		home = hash_ptr(m->e[j].ptr) & m->mask;
		/* Move e[j] into the hole unless its home lies cyclically in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			m->e[i] = m->e[j];
			i = j;
		}
	}
	m->e[i].ptr = 0;
}

/* Twice the entries; false: out of memory, and the map as it was. */
static bool map_grow(struct logcsv_live *m)
{
	size_t cap = 2 * (m->mask + 1);
	struct logcsv_live bigger = { calloc(cap, sizeof(*m->e)), cap - 1, m->n };

	if (!bigger.e)
		return false;
	for (size_t i = 0; i <= m->mask; i++) {
		if (m->e[i].ptr)
			*map_find(&bigger, m->e[i].ptr) = m->e[i];
	}
	free(m->e);
	*m = bigger;
	return true;
}

int logcsv_live_init(const struct logcsv *log, struct logcsv_live *m)
{
	const size_t cap = 1024;

	m->e = calloc(cap, sizeof(*m->e));
	m->mask = cap - 1;
	m->n = 0;
	if (m->e)
		return LOGCSV_OK;
	logcsv_say(log, 0, "out of memory for the live blocks");
	return LOGCSV_NOMEM;
}

void logcsv_live_fini(struct logcsv_live *m)
{
	free(m->e);
	m->e = NULL;
	m->n = 0;
}

int logcsv_live_step(const struct logcsv *log, struct logcsv_live *m, const struct logcsv_row *r,
		     uint32_t value, struct logcsv_block *gone)
{
	struct logcsv_block *e;

	if (r->action == LOGCSV_ALLOCATE_FAILURE)
		return LOGCSV_OK;
	/* At most half full, so a probe stays short and always ends. */
	if (r->action == LOGCSV_ALLOCATE && 2 * (m->n + 1) > m->mask + 1 && !map_grow(m)) {
		logcsv_say(log, r->line, "out of memory for %zu live blocks", m->n + 1);
		return LOGCSV_NOMEM;
	}
	e = map_find(m, r->ptr);
	if (r->action == LOGCSV_ALLOCATE) {
		if (e->ptr)
			return logcsv_say(log, r->line, "0x%llx is allocated again while the block allocated at line %llu is live",
					  (unsigned long long)r->ptr, (unsigned long long)e->line);
		*e = (struct logcsv_block){ r->ptr, r->bytes, r->line, value };
		m->n++;
		return LOGCSV_OK;
	}
	if (!e->ptr && log->dropped)
		return logcsv_say(log, r->line, "%s of 0x%llx, which no earlier row (in each thread's order, merged by time) left live; the log says %llu rows were dropped (the logging adaptor's full=drop), so it cannot be replayed whole",
				  logcsv_action_name(r->action), (unsigned long long)r->ptr,
				  (unsigned long long)log->dropped);
	if (!e->ptr)
		return logcsv_say(log, r->line, "%s of 0x%llx, which no earlier row (in each thread's order, merged by time) left live",
				  logcsv_action_name(r->action), (unsigned long long)r->ptr);
	if (e->bytes != r->bytes)
		return logcsv_say(log, r->line, "%s of 0x%llx says %llu bytes, and its allocation at line %llu says %llu",
				  logcsv_action_name(r->action), (unsigned long long)r->ptr,
				  (unsigned long long)r->bytes, (unsigned long long)e->line,
				  (unsigned long long)e->bytes);
	*gone = *e;
	map_remove(m, e);
	m->n--;
	return LOGCSV_OK;
}
