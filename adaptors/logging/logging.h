/* SPDX-License-Identifier: MIT */
/*
 * logging.h - the logging adaptor's internal types, shared by its files.
 *
 * One layer instance (struct logging) owns a sink and a pthread key whose
 * per-thread value is that thread's row buffer (struct log_buf).  A thread
 * formats its rows into its own buffer under the buffer's own lock, which
 * only a flush from another thread ever contends; the sink sees one write()
 * per full buffer.  See xdm-logging(7).
 */
#ifndef XDM_ADAPTORS_LOGGING_H
#define XDM_ADAPTORS_LOGGING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <xdm/module.h>

#define LOG_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"
#define LOG_HEADER_LEN (sizeof(LOG_HEADER) - 1)

enum log_action {
	LOG_ALLOCATE,
	LOG_ALLOCATE_FAILURE,
	LOG_FREE,
	LOG_FREE_FAILURE,
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

/* ---- csv.c: formatting ------------------------------------------------ */

/* Longest row without its tag: nine fields, the widest action, 20-digit numbers. */
#define LOG_ROW_FIXED_MAX 192

/* The tag's length, and whether it needs quotes, in one pass. */
size_t csv_tag_scan(const char *tag, bool *quote);
/* Bytes the tag column takes at most, quotes included. */
size_t csv_tag_max(size_t tag_len, bool quote);
/*
 * Formats one row (newline included) at p, which has room for
 * LOG_ROW_FIXED_MAX + csv_tag_max() bytes; returns its length.  prefix is
 * the thread column and its comma, already formatted.
 */
size_t csv_row(char *p, const char *prefix, size_t prefix_len, const char *device,
	       size_t device_len, const struct log_event *ev, size_t tag_len, bool quote);
size_t csv_u64(char *p, uint64_t v);

/* ---- sink.c: where full buffers go ------------------------------------ */

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
	 * Serializes the writes of whole buffers so that a retried partial
	 * write never lets another buffer's rows in mid-row, and guards the
	 * memory sink's text.  Taken once per buffer written, never per row.
	 */
	pthread_mutex_t lock;
	bool torn;			/* a failed write left half a row */
	char *mem;			/* memory sink: the CSV, header first */
	size_t mem_len, mem_cap, mem_limit;
	atomic_uint_fast64_t bytes_written;
	atomic_uint_fast64_t write_errors;
	atomic_uint_fast64_t dropped;	/* rows lost to errors or the memory limit */
};

enum xdm_status log_sink_open(struct log_sink *s, const char *kind, const char *path_pattern,
			      uint32_t ordinal, uint64_t mem_limit);
void log_sink_close(struct log_sink *s);
/* Hands len bytes holding rows whole rows to the sink; never fails the caller. */
void log_sink_write(struct log_sink *s, const char *data, size_t len, uint64_t rows);
/* Copies the memory sink's CSV into buf with a NUL; -EFBIG if it does not fit. */
int log_sink_contents(struct log_sink *s, char *buf, size_t len);
const char *log_sink_kind_name(const struct log_sink *s);

/* ---- buffer.c: per-thread buffers -------------------------------------- */

struct logging;

struct log_buf {
	struct log_buf *next, *prev;	/* in logging.bufs, under list_lock */
	struct logging *lg;
	/*
	 * Taken by the owner for every row (uncontended) and by a flush from
	 * another thread (flush attribute, contents, exit hook, fini).  A
	 * spinlock: an uncontended pthread mutex costs ~110 instructions a row
	 * for lock and unlock, this ~10; a waiter yields after a few spins.
	 */
	atomic_bool lock;
	atomic_uint_fast64_t rows;	/* rows of this thread; only the owner adds */
	uint64_t pending;		/* rows in data, not yet handed to the sink */
	size_t len, cap;
	size_t prefix_len;
	char prefix[24];		/* "<tid>," */
	struct log_chunk *chunk;	/* where rows are written now */
	char *data;			/* chunk->data */
};

/* A buffer's worth of rows, handed to the writer thread when full. */
struct log_chunk {
	struct log_chunk *next;
	size_t len;
	uint64_t rows;
	char data[];
};

/* The file sink's writer thread and its queue (writer.c). */
struct log_writer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;		/* the writer waits for chunks */
	pthread_cond_t room;		/* producers and drains wait for the writer */
	struct log_chunk *head, *tail;	/* chunks to write, oldest first */
	struct log_chunk *spare;	/* written chunks, for reuse */
	size_t queued;
	uint64_t pushed, written;	/* chunks so far: a drain waits for its own */
	pid_t pid;			/* the process the thread runs in */
	bool busy;			/* a chunk is being written */
	bool stop;
	bool running;
	bool inited;
};

/* ---- the layer --------------------------------------------------------- */

struct log_exit_hook;

struct logging {
	struct log_sink sink;
	pthread_key_t key;		/* value: the calling thread's log_buf */
	bool key_created;
	pthread_mutex_t list_lock;	/* registration, exit and flush-all only */
	struct log_buf *bufs;
	atomic_uint_fast64_t rows_retired;	/* rows of buffers already gone */
	size_t buf_size;
	size_t device_len;
	char device[12];		/* the device column, formatted once */
	struct log_exit_hook *hook;
	struct log_writer writer;
};

enum xdm_status log_bufs_init(struct logging *lg);
void log_bufs_fini(struct logging *lg);
/* The hot path: formats ev into the calling thread's buffer. */
void log_row(struct logging *lg, const struct log_event *ev);
/* The null sink's hot path: counts a row and formats nothing. */
void log_count(struct logging *lg);
/* Hands every thread's buffered rows to the sink. */
void log_flush_all(struct logging *lg);
uint64_t log_rows(struct logging *lg);

/* ---- writer.c: the file sink's writer thread ----------------------------- */

/* Its locks always; its thread for a file sink only. */
enum xdm_status log_writer_start(struct logging *lg);
/* Drains nothing: callers drain first.  Frees the spare chunks. */
void log_writer_stop(struct logging *lg);
/* An empty chunk of buf_size bytes, or NULL. */
struct log_chunk *log_chunk_get(struct logging *lg);
void log_chunk_put(struct logging *lg, struct log_chunk *c);
/* Queue a full chunk; false when there is no writer (the caller writes). */
bool log_writer_push(struct logging *lg, struct log_chunk *c);
/* Wait until every chunk queued before the call is written. */
void log_writer_drain(struct logging *lg);
/* A writer thread runs in this process (not in a forked child). */
bool log_writer_here(struct logging *lg);
/* ---- attrs.c ---------------------------------------------------------- */

extern const struct xdm_attr logging_attrs[];

/* ---- exit.c: the flush at process exit --------------------------------- */

enum xdm_status log_exit_hook_add(struct logging *lg);
void log_exit_hook_drop(struct logging *lg);

#endif /* XDM_ADAPTORS_LOGGING_H */
