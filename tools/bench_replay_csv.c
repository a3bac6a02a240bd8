/* SPDX-License-Identifier: MIT */
/*
 * bench_replay_csv.c - reads the logging adaptor's CSV (xdm-logging(7))
 * into the script the replay workload runs.
 *
 * The bench has its own reader, not the test suite's: tests/ is not part
 * of the program, and a reader that only the bench uses can say exactly
 * which line of the user's file it cannot use.  Every complaint is one
 * sentence naming FILE:LINE, and the bench exits 2 before it builds a
 * runtime: a file that cannot be replayed is a usage error, like a bad
 * option.
 *
 * Order.  Each thread's rows are in the order of its calls, but the
 * threads' buffers reach the file in any order, so the replay order is
 * each thread's rows in file order, merged by time (a free first where
 * two threads' rows have the same time), as xdm-logging(7) prescribes for
 * rebuilding the live set.  For a log written by one thread that is
 * exactly file order, whatever the clock did.
 *
 * Everything a run needs is decided here, outside the timing: frees are
 * matched to their allocations by address, each block gets a slot of the
 * live array (reused once freed, so there are as many slots as blocks
 * were live at once), and the peak of live bytes is counted as logged.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define CSV_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id"
#define CSV_FIELDS 9

enum row_action { ROW_ALLOCATE, ROW_ALLOCATE_FAILURE, ROW_FREE, ROW_FREE_FAILURE };

struct row {
	uint64_t thread;
	uint64_t time;
	uint64_t ptr;
	uint64_t bytes;
	uint32_t stream;
	enum row_action action;
	uint64_t line;		/* where the row starts in the file */
	size_t seq;		/* its index in file order */
};

struct reader {
	const char *path;
	const char *p, *end;	/* what is left of the file */
	uint64_t line;		/* of p */
};

static int say(const char *path, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* One sentence: "xdm-bench: --replay: FILE:LINE: what is wrong." */
static int say(const char *path, uint64_t line, const char *fmt, ...)
{
	va_list ap;

	if (line)
		fprintf(stderr, "xdm-bench: --replay: %s:%llu: ", path, (unsigned long long)line);
	else
		fprintf(stderr, "xdm-bench: --replay: %s: ", path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(".\n", stderr);
	return BENCH_EXIT_USAGE;
}

/* The whole file, NUL-terminated; read in pieces so that a pipe works too. */
static int slurp(const char *path, char **text, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	FILE *f = fopen(path, "rb");

	if (!f || !buf) {
		int err = errno;

		free(buf);
		if (f)
			fclose(f);
		return say(path, 0, "cannot be read: %s", strerror(f ? ENOMEM : err));
	}
	for (;;) {
		size_t got;

		if (cap - n < 2) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger) {
				free(buf);
				fclose(f);
				return say(path, 0, "is too large to hold in memory");
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
		return say(path, 0, "cannot be read: %s", strerror(err));
	}
	fclose(f);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

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

	f->quoted = *s == '"';
	if (f->quoted) {
		f->start = ++s;
		for (;;) {
			if (s == r->end)
				return say(r->path, row_line, "a quoted field is not closed before the end of the file");
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
				return say(r->path, row_line, "a double quote inside an unquoted field");
			s++;
		}
		f->len = (size_t)(s - f->start);
	}
	if (s == r->end) {
		*sep = 0;
	} else if (*s == ',' || *s == '\n') {
		*sep = *s++;
	} else {
		return say(r->path, row_line, "a quoted field is followed by '%c', not by a comma or the end of the line",
			    *s);
	}
	r->p = s;
	return 0;
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
	return say(r->path, line, "the %s field %s is not %s", field_names[i], shown, want);
}

/* One row into *row; the nine fields and their types are checked here. */
static int parse_row(struct reader *r, struct row *row)
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
			return say(r->path, line, "the row ends after %d field%s; the log has %d",
				   i + 1, i ? "s" : "", CSV_FIELDS);
	}
	if (sep == ',')
		return say(r->path, line, "the row has more than %d fields", CSV_FIELDS);
	if (sep != '\n')
		return say(r->path, line, "the last row does not end in a newline (was the file cut short?)");
	r->line++;

	row->line = line;
	if (!field_u64(&f[0], 10, &row->thread))
		return bad_field(r, line, 0, &f[0], "a decimal thread id");
	if (!field_u64(&f[1], 10, &row->time))
		return bad_field(r, line, 1, &f[1], "nanoseconds in decimal");
	if (field_is(&f[2], "allocate"))
		row->action = ROW_ALLOCATE;
	else if (field_is(&f[2], "allocate_failure"))
		row->action = ROW_ALLOCATE_FAILURE;
	else if (field_is(&f[2], "free"))
		row->action = ROW_FREE;
	else if (field_is(&f[2], "free_failure"))
		row->action = ROW_FREE_FAILURE;
	else
		return bad_field(r, line, 2, &f[2], "allocate, allocate_failure, free or free_failure");
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
	if (!field_u64(&f[6], 10, &v))
		return bad_field(r, line, 6, &f[6], "a decimal device ordinal");
	/* f[7], the tag, may be anything the adaptor wrote. */
	if (!field_u64(&f[8], 10, &v))
		return bad_field(r, line, 8, &f[8], "a decimal query id");
	if (row->action != ROW_ALLOCATE_FAILURE && row->ptr == 0)
		return say(r->path, line, "a%s row with the address 0x0",
			   row->action == ROW_ALLOCATE ? "n allocate" : " free");
	if (row->action == ROW_ALLOCATE && row->bytes == 0)
		return say(r->path, line, "an allocation of 0 bytes, which xdm never hands out");
	if (row->action == ROW_ALLOCATE && row->bytes > SIZE_MAX)
		return say(r->path, line, "an allocation of %llu bytes, more than this machine can ask for",
			   (unsigned long long)row->bytes);
	return 0;
}

static int parse(const char *path, const char *text, size_t len, struct row **rows_out,
		 size_t *n_out)
{
	struct reader r = { path, text, text + len, 1 };
	const size_t hlen = sizeof(CSV_HEADER) - 1;
	struct row *rows = NULL;
	size_t n = 0, cap = 0;
	const char *nul;
	int rc;

	if (len == 0)
		return say(path, 0, "is empty, not a log of the logging adaptor");
	nul = memchr(text, '\0', len);
	if (nul) {
		for (const char *c = text; c < nul; c++)
			r.line += *c == '\n';
		return say(path, r.line, "a NUL byte, which the logging adaptor never writes");
	}
	if (len < hlen + 1 || memcmp(text, CSV_HEADER, hlen) != 0 || text[hlen] != '\n')
		return say(path, 1, "the first line is not the logging adaptor's header '%s'",
			   CSV_HEADER);
	r.p += hlen + 1;
	r.line = 2;
	while (r.p < r.end) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 1024;
			struct row *bigger = realloc(rows, ncap * sizeof(*rows));

			if (!bigger) {
				free(rows);
				return say(path, r.line, "out of memory reading the rows");
			}
			rows = bigger;
			cap = ncap;
		}
		rc = parse_row(&r, &rows[n]);
		if (rc) {
			free(rows);
			return rc;
		}
		rows[n].seq = n;
		n++;
	}
	*rows_out = rows;
	*n_out = n;
	return 0;
}

/* ---- the merge ---------------------------------------------------------- */

static int by_thread(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static bool is_free(const struct row *r)
{
	return r->action == ROW_FREE || r->action == ROW_FREE_FAILURE;
}

/* Whether a should be replayed before b; both are heads of their threads. */
static bool before(const struct row *a, const struct row *b)
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

static void sift_down(struct cursor *h, size_t n, size_t i, const struct row *rows)
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
 * Sorts rows by thread (file order kept within each), then writes the
 * merged order into order[]: a heap of one cursor per thread, keyed by
 * each thread's next row.
 */
static int merge(const char *path, struct row *rows, size_t n, size_t *order,
		 uint64_t *threads)
{
	struct cursor *heap;
	size_t nthreads = 0, hn;

	qsort(rows, n, sizeof(*rows), by_thread);
	for (size_t i = 0; i < n; i++)
		nthreads += i == 0 || rows[i].thread != rows[i - 1].thread;
	heap = malloc((nthreads ? nthreads : 1) * sizeof(*heap));
	if (!heap)
		return say(path, 0, "out of memory merging the threads' rows");
	hn = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || rows[i].thread != rows[i - 1].thread)
			heap[hn++] = (struct cursor){ i, i };
		heap[hn - 1].end = i + 1;
	}
	for (size_t i = hn / 2; i-- > 0;)
		sift_down(heap, hn, i, rows);
	for (size_t k = 0; k < n; k++) {
		order[k] = heap[0].next++;
		if (heap[0].next == heap[0].end)
			heap[0] = heap[--hn];
		sift_down(heap, hn, 0, rows);
	}
	free(heap);
	*threads = nthreads;
	return 0;
}

/* ---- matching frees to allocations -------------------------------------- */

/* Live addresses, open addressing with linear probing; ptr 0 is empty. */
struct live_map {
	struct live_entry {
		uint64_t ptr;
		uint64_t bytes;
		uint64_t line;
		uint32_t slot;
	} *e;
	size_t mask;
};

static size_t hash_ptr(uint64_t ptr)
{
	/* Blocks are aligned: the low bits say little. */
	return (size_t)(((ptr >> 8) * UINT64_C(0x9e3779b97f4a7c15)) >> 17);
}

static struct live_entry *map_find(struct live_map *m, uint64_t ptr)
{
	for (size_t i = hash_ptr(ptr) & m->mask;; i = (i + 1) & m->mask) {
		if (m->e[i].ptr == ptr || m->e[i].ptr == 0)
			return &m->e[i];
	}
}

/* Backward-shift deletion: no tombstones, so a long log never slows down. */
static void map_remove(struct live_map *m, struct live_entry *gone)
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

static const char *action_name(enum row_action a)
{
	static const char *const names[] = { "allocate", "allocate_failure", "free",
					     "free_failure" };

	return names[a];
}

/* Replays the merged rows on paper: slots, steps and the peaks. */
static int build_script(const char *path, const struct row *rows, const size_t *order,
			size_t n, struct bench_replay *rp)
{
	struct live_map m = { NULL, 0 };
	uint32_t *free_slots = NULL;
	size_t nfree = 0, cap = 64, live = 0;
	uint64_t asked = 0;
	int rc = 0;

	while (cap < 2 * n + 2)
		cap *= 2;
	m.e = calloc(cap, sizeof(*m.e));
	m.mask = cap - 1;
	free_slots = malloc((n ? n : 1) * sizeof(*free_slots));
	rp->steps = malloc((n ? n : 1) * sizeof(*rp->steps));
	if (!m.e || !free_slots || !rp->steps) {
		rc = say(path, 0, "out of memory for the replay of %zu rows", n);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const struct row *r = &rows[order[k]];
		struct bench_replay_step *st = &rp->steps[rp->nsteps];
		struct live_entry *e;

		if (r->action == ROW_ALLOCATE_FAILURE) {
			rp->failures_skipped++;
			continue;
		}
		e = map_find(&m, r->ptr);
		if (r->action == ROW_ALLOCATE) {
			if (e->ptr) {
				rc = say(path, r->line, "0x%llx is allocated again while the block allocated at line %llu is live",
					 (unsigned long long)r->ptr, (unsigned long long)e->line);
				goto out;
			}
			if (rp->nslots > UINT32_MAX - 1) {
				rc = say(path, r->line, "more than %u blocks live at once", UINT32_MAX);
				goto out;
			}
			*e = (struct live_entry){ r->ptr, r->bytes, r->line,
						  nfree ? free_slots[--nfree] : (uint32_t)rp->nslots++ };
			*st = (struct bench_replay_step){ r->bytes, r->stream, e->slot };
			rp->allocs++;
			live++;
			asked += r->bytes;
			if (asked > rp->peak_bytes)
				rp->peak_bytes = asked;
			if (live > rp->peak_blocks)
				rp->peak_blocks = live;
		} else {
			if (!e->ptr) {
				rc = say(path, r->line, "%s of 0x%llx, which no earlier row (in each thread's order, merged by time) left live",
					 action_name(r->action), (unsigned long long)r->ptr);
				goto out;
			}
			if (e->bytes != r->bytes) {
				rc = say(path, r->line, "%s of 0x%llx says %llu bytes, and its allocation at line %llu says %llu",
					 action_name(r->action), (unsigned long long)r->ptr,
					 (unsigned long long)r->bytes, (unsigned long long)e->line,
					 (unsigned long long)e->bytes);
				goto out;
			}
			/* A free_failure ends the block's life too: see xdm-logging(7). */
			*st = (struct bench_replay_step){ 0, 0, e->slot };
			free_slots[nfree++] = e->slot;
			map_remove(&m, e);
			rp->frees++;
			live--;
			asked -= r->bytes;
		}
		rp->nsteps++;
	}
	if (rp->nsteps == 0) {
		rc = say(path, 0, "has no allocate row to replay (it has %llu row%s)",
			 (unsigned long long)rp->rows, rp->rows == 1 ? "" : "s");
		goto out;
	}
	/* What the log never freed is freed after the clock stops. */
	rp->left_live = live;
out:
	free(free_slots);
	free(m.e);
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
	struct row *rows = NULL;
	size_t *order = NULL;
	size_t len = 0, n = 0;
	char *text = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->path = path;
	short_name(path, out->name, sizeof(out->name));
	rc = slurp(path, &text, &len);
	if (rc)
		return rc;
	rc = parse(path, text, len, &rows, &n);
	free(text);
	if (rc)
		return rc;
	out->rows = n;
	order = malloc((n ? n : 1) * sizeof(*order));
	if (!order) {
		rc = say(path, 0, "out of memory for the order of %zu rows", n);
		goto out;
	}
	rc = merge(path, rows, n, order, &out->threads);
	if (rc)
		goto out;
	rc = build_script(path, rows, order, n, out);
out:
	free(order);
	free(rows);
	if (rc)
		bench_replay_free(out);
	return rc;
}

void bench_replay_free(struct bench_replay *r)
{
	free(r->steps);
	r->steps = NULL;
	r->nsteps = 0;
}
