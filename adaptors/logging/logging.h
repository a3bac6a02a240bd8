/* SPDX-License-Identifier: MIT */
/*
 * logging.h - the logging adaptor's internal types, shared by its files.
 *
 * One layer instance (struct logging) owns a sink, one or more writer
 * threads and a pthread key whose per-thread value is that thread's record
 * ring (struct log_ring).  An allocating thread only copies a fixed-size
 * binary record into its own ring: no lock, no syscall, no atomic
 * read-modify-write.  The writer threads drain the rings, format the CSV
 * text (csv.c) and write it to the sink.  See xdm-logging(7).
 *
 *	ring.c		the producer side: the hot path, a full ring, thread exit
 *	drain.c		the consumer side: records to text, flush, a forked child
 *	writer.c	the writer threads: kick, wait for room, the loop
 *	csv.c		one row of text
 *	sink.c		file, memory or null
 */
#ifndef XDM_ADAPTORS_LOGGING_H
#define XDM_ADAPTORS_LOGGING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <xdm/module.h>

#define LOG_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"
#define LOG_HEADER_LEN (sizeof(LOG_HEADER) - 1)

enum log_action {
	LOG_ALLOCATE,
	LOG_ALLOCATE_FAILURE,
	LOG_FREE,
	LOG_FREE_FAILURE,
	LOG_DROPPED,		/* a marker: bytes rows of this thread were lost here */
};

/* What one row says; the thread and device columns come from elsewhere. */
struct log_event {
	enum log_action action;
	uint64_t time_ns;	/* CLOCK_REALTIME, ns since the Unix epoch */
	uint64_t ptr;
	uint64_t bytes;
	uint64_t query_id;
	uint32_t stream;
	const char *tag;
};

/*
 * CLOCK_REALTIME in ns, so that rows line up with other logs and across
 * processes: a vDSO call, not a syscall.  Inline: each row reads it.
 */
static inline uint64_t log_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- csv.c: formatting ------------------------------------------------ */

/*
 * Longest row without its tag: nine fields, the widest action, 20-digit
 * numbers make 143 bytes; the rest is room for the fixed-size moves of
 * csv_row.
 */
#define LOG_ROW_FIXED_MAX 192
/* The thread column and its comma, and the device column: padded arrays. */
#define LOG_PREFIX_SIZE 24
#define LOG_DEVICE_SIZE 12

/* Whether a tag of len bytes needs quotes (RFC 4180). */
bool csv_tag_quote(const char *tag, size_t len);
/* Bytes the tag column takes at most, quotes included. */
size_t csv_tag_max(size_t tag_len, bool quote);
/* The time column's leading digits, kept by a writer from row to row. */
struct csv_clock {
	uint64_t high;			/* time / 10^8 */
	size_t len;			/* of text; 0: nothing kept yet */
	char text[16];			/* copied whole: at most 12 digits are used */
};

/*
 * Formats one row (newline included) at p, which has room for
 * LOG_ROW_FIXED_MAX + csv_tag_max() bytes; returns its length.  prefix is
 * the thread column and its comma, already formatted, in LOG_PREFIX_SIZE
 * readable bytes; device likewise in LOG_DEVICE_SIZE.  ev->tag holds
 * tag_len bytes, not necessarily NUL-terminated, in at least
 * LOG_REC_TAG_INLINE readable bytes.  clock may be NULL.
 */
size_t csv_row(char *p, const char *prefix, size_t prefix_len, const char *device,
	       size_t device_len, const struct log_event *ev, size_t tag_len, bool quote,
	       struct csv_clock *clock);
size_t csv_u64(char *p, uint64_t v);

/* ---- file_open.c: the file sink's file ------------------------------- */

/*
 * Open the file sink's file for appending: pattern with %p, %d and %%
 * expanded, or NULL for xdm-%p-%d.csv in the user's log directory
 * ($XDG_RUNTIME_DIR/xdm, else /tmp/xdm-<uid>, made 0700).  Never through a
 * symbolic link, never into a file of another user but root; *path gets
 * the expanded path (malloc'ed), *fd the file.  XDM_E_CONFIG with a
 * sentence naming the file otherwise, and nothing written.
 */
enum xdm_status log_file_open(const char *pattern, uint32_t ordinal, char **path, int *fd);

/* ---- sink.c: where the text goes ------------------------------------- */

enum log_sink_kind {
	LOG_SINK_FILE,
	LOG_SINK_MEMORY,
	LOG_SINK_NULL,
};

struct log_sink {
	enum log_sink_kind kind;
	int fd;				/* file sink */
	char *path;			/* file sink: the expanded path */
	pid_t pid;			/* rows of a forked child are dropped */
	/*
	 * Serializes the writes of whole pieces of text so that a retried
	 * partial write never lets another writer's rows in mid-row, and
	 * guards the memory sink's text.  Taken once per piece, never per row.
	 */
	pthread_mutex_t lock;
	bool torn;			/* a failed write left half a row */
	char *mem;			/* memory sink: the CSV, header first */
	size_t mem_len, mem_cap, mem_limit;
	atomic_uint_fast64_t bytes_written;
	atomic_uint_fast64_t write_errors;
	atomic_uint_fast64_t dropped;	/* rows lost to errors, the memory limit, a child */
};

enum xdm_status log_sink_open(struct log_sink *s, const char *kind, const char *path_pattern,
			      uint32_t ordinal, uint64_t mem_limit);
void log_sink_close(struct log_sink *s);
/* Hands len bytes holding rows whole rows to the sink; never fails the caller. */
void log_sink_write(struct log_sink *s, const char *data, size_t len, uint64_t rows);
/* Copies the memory sink's CSV into buf with a NUL; -EFBIG if it does not fit. */
int log_sink_contents(struct log_sink *s, char *buf, size_t len);
const char *log_sink_kind_name(const struct log_sink *s);

/* ---- the record ring ---------------------------------------------------- */

/*
 * One record in its ring slot: 64 bytes, a cache line.  A tag longer than
 * LOG_REC_TAG_INLINE bytes goes on into the slots that follow (wrapping
 * at the ring's end), so a record is 1 + ceil((tag_len - 24) / 64) slots.
 * The tag is copied, not pointed to: the module ABI promises a block's tag
 * outlives the block, not the row that a writer formats later (a failed
 * allocation's tag lives only for the call, a freed block's not after it).
 * A LOG_DROPPED record carries in bytes how many rows its thread had lost
 * in all when it was written.
 */
#define LOG_SLOT 64
#define LOG_REC_TAG_INLINE 24

struct log_rec {
	uint64_t time_ns;
	uint64_t ptr;
	uint64_t bytes;
	uint64_t query_id;
	uint32_t stream;
	uint16_t tag_len;
	uint8_t action;
	uint8_t unused;
	char tag[LOG_REC_TAG_INLINE];
};

_Static_assert(sizeof(struct log_rec) == LOG_SLOT, "a record header is one slot");

struct logging;
struct log_writer;

/*
 * A thread's ring: single producer (the thread), single consumer at a time
 * (whoever holds consume: its writer thread, a flush, the thread itself at
 * its exit, before an oversized row or when it finds the ring full).
 * Records [tail, head) are ready; head and tail run free and index slots
 * modulo nslots (a power of two).
 */
struct log_ring {
	/* The producer's line: only the owning thread writes these. */
	_Alignas(64) char *slots;
	uint64_t mask;			/* nslots - 1 */
	uint64_t head_own;		/* head, as the owner knows it */
	uint64_t tail_seen;		/* tail as the owner last read it */
	uint64_t kick_tail;		/* tail_seen at the owner's last kick */
	uint64_t drops_marked;		/* drops covered by a marker record in the ring */
	uint64_t streak_ns;		/* time of the first drop not yet marked */
	/*
	 * The head at which the fast path (row.h) must stop: the crossing of
	 * half the ring (a kick), the end of the room by tail_seen, or 0
	 * while drops wait for their marker.  Set by ring_fast_end().
	 */
	uint64_t fast_end;
	atomic_uint_fast64_t head;	/* published with release */
	atomic_uint_fast64_t rows;	/* rows of this thread, dropped ones included */
	atomic_uint_fast64_t drops;	/* rows dropped on a full ring (full=drop) */
	atomic_uint_fast64_t waits;	/* times the thread waited for room (full=wait) */

	/* The consumers' line: under consume. */
	_Alignas(64) pthread_mutex_t consume;
	atomic_uint_fast64_t tail;	/* published with release */
	uint64_t drops_reported;	/* drops a marker row in the text covers */
	/* The owner waiting for room (full=wait): under writer->lock. */
	pthread_cond_t room;
	bool waiting;
	/* The owner's text, made when it first drains its full ring itself. */
	struct log_text *text;

	/* Set once when the ring is made. */
	struct logging *lg;
	struct log_writer *writer;	/* the one that drains it */
	struct log_ring *next, *prev;	/* in logging.rings, under list_lock */
	size_t prefix_len;
	char prefix[LOG_PREFIX_SIZE];	/* "<tid>," */
};

/* Text being made from records: a writer's own, or the flush's. */
struct log_text {
	char *buf;
	size_t len, cap;
	uint64_t rows;			/* rows in buf, markers not counted */
	char *scratch;			/* a tag that wraps around the ring's end */
	struct csv_clock clock;
};

/* ---- writer.c: the writer threads -------------------------------------- */

struct log_writer {
	struct logging *lg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;		/* the writer waits for a kick */
	bool kicked;			/* a pass is wanted */
	bool stop;
	bool running;
	struct log_text text;
};

/* ---- the layer --------------------------------------------------------- */

struct log_exit_hook;

struct logging {
	struct log_sink sink;
	struct xdm_layer *upstream;	/* fixed before init: no call to ask per row */
	pid_t pid;			/* the process whose writers run */
	pthread_key_t key;		/* value: the calling thread's log_ring */
	uint64_t serial;		/* xdm_layer_serial: the key of log_ring_last */
	bool key_created;
	bool drop_when_full;		/* full=drop; else a full ring waits */
	/* Registration, exit and sums: never held across a syscall. */
	pthread_mutex_t list_lock;
	struct log_ring *rings;
	uint64_t rings_made;		/* spreads rings over the writers */
	/*
	 * Read-held by whoever walks the rings to drain them (writers,
	 * flush); write-held by an exiting thread to unlink and free its
	 * ring.  A ring's memory therefore outlives every walk that saw it.
	 */
	pthread_rwlock_t rings_lock;
	bool rings_lock_made;
	/* The flush's text, also used by an exiting thread and an oversized row. */
	pthread_mutex_t flush_lock;
	struct log_text flush_text;
	atomic_uint_fast64_t rows_retired;	/* counters of rings already gone */
	atomic_uint_fast64_t drops_retired;
	atomic_uint_fast64_t waits_retired;
	size_t buf_size;		/* the parameter: ring and text bytes */
	uint64_t nslots;		/* records of LOG_SLOT bytes per ring */
	size_t tag_max;			/* longer tags take the slow path */
	unsigned int nwriters;
	struct log_writer *writers;
	size_t device_len;
	char device[LOG_DEVICE_SIZE];	/* the device column, formatted once */
	struct log_exit_hook *hook;
};

/* True in a process forked from the one the layer was made in. */
bool log_forked(const struct logging *lg);
/* Takes list_lock; in a forked child only tries it (see ring.c). */
bool log_list_lock(struct logging *lg);

/* ---- ring.c: the producer side ------------------------------------------ */

enum xdm_status log_rings_init(struct logging *lg);
void log_rings_fini(struct logging *lg);
/*
 * Everything the inline hot path (row.h, log_row) does not: r NULL (the
 * thread's first row), a tag longer than a slot holds, or head_own at
 * r->fast_end.  Counts the row like the fast path.
 */
void log_row_slow(struct logging *lg, struct log_ring *r, const struct log_event *ev,
		  size_t tag_len);
/* The null sink's hot path: counts a row and records nothing. */
void log_count(struct logging *lg);
/* Sums over the rings, and those gone: exact at quiescence. */
uint64_t log_rows(struct logging *lg);
uint64_t log_drops(struct logging *lg);
uint64_t log_waits(struct logging *lg);

/* ---- drain.c: the consumer side ----------------------------------------- */

enum xdm_status log_text_init(struct log_text *t, const struct logging *lg);
void log_text_fini(struct log_text *t);
/*
 * Formats every record of r published so far into t, writes the text to
 * the sink, and adds a marker row for drops no marker covers yet.  Caller
 * holds r->consume or is its only possible consumer.
 */
void log_drain_ring(struct logging *lg, struct log_ring *r, struct log_text *t);
/* Drains every ring whose writer is w (NULL: every ring), under rings_lock. */
void log_drain_rings(struct logging *lg, struct log_writer *w, struct log_text *t);
/* Every thread's records, formatted and written before it returns. */
void log_flush_all(struct logging *lg);
/* A forked child: counts r's records as dropped and empties it. */
void log_discard_ring(struct logging *lg, struct log_ring *r);

/* ---- writer.c ------------------------------------------------------------ */

/* Its threads for the file and memory sinks; nothing for null. */
enum xdm_status log_writers_start(struct logging *lg, unsigned int n);
/* Joins the threads (none in a forked child) and frees the writers. */
void log_writers_stop(struct logging *lg);
/* Asks r's writer for a pass over its rings. */
void log_writer_kick(struct log_ring *r);
/* Blocks until r has room for need slots after head_own; kicks first. */
void log_writer_wait_room(struct log_ring *r, uint64_t need);
/* r was just drained: wakes its thread if it waits for room. */
void log_writer_ring_drained(struct log_ring *r);

/* ---- attrs.c ---------------------------------------------------------- */

extern const struct xdm_attr logging_attrs[];

/* ---- exit.c: the flush at process exit --------------------------------- */

enum xdm_status log_exit_hook_add(struct logging *lg);
void log_exit_hook_drop(struct logging *lg);

/* A record's fields but its tag, from an event (ring.c and row.h). */
static inline void log_rec_fill(struct log_rec *rec, const struct log_event *ev, size_t tag_len)
{
	rec->time_ns = ev->time_ns;
	rec->ptr = ev->ptr;
	rec->bytes = ev->bytes;
	rec->query_id = ev->query_id;
	rec->stream = ev->stream;
	rec->tag_len = (uint16_t)tag_len;
	rec->action = (uint8_t)ev->action;
}

/* The ring the calling thread last wrote (module.h, xdm_thread_last). */
extern _Thread_local struct xdm_thread_last log_ring_last;

/* The calling thread's ring through the key, or NULL (ring.c). */
struct log_ring *log_ring_find(struct logging *lg);

static inline struct log_ring *log_ring_mine(struct logging *lg)
{
	struct log_ring *r = xdm_thread_last_get(&log_ring_last, lg->serial);

	return r ? r : log_ring_find(lg);
}

#endif /* XDM_ADAPTORS_LOGGING_H */
