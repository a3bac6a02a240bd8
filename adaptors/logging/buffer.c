/* SPDX-License-Identifier: MIT */
/*
 * buffer.c - each thread's row buffer: the hot path of the log.
 *
 * A row costs a pthread_getspecific, an uncontended lock of the thread's own
 * buffer, a vDSO clock read (by the caller) and some digit writing: no lock
 * that all threads share, no syscall.  The buffer goes to the sink with one
 * write when the next row might not fit, when its thread exits (the key's
 * destructor), on demand (log_flush_all) and at fini.
 *
 * The per-buffer lock exists for flushes from other threads only; the
 * thread list and its lock are touched when a thread logs for the first
 * time, when it exits, and by flush-all, never per row.
 *
 * Lock order: list_lock, then a buffer's lock, then the sink's lock.  The
 * exit destructor takes its buffer's lock and then, after releasing it,
 * the list lock, so it never nests them the other way.
 */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "adaptors/logging/logging.h"

/* Test and test-and-set; contended only by a flush from another thread. */
static inline void buf_lock(struct log_buf *b)
{
	unsigned int spins = 0;

	while (atomic_exchange_explicit(&b->lock, true, memory_order_acquire)) {
		while (atomic_load_explicit(&b->lock, memory_order_relaxed)) {
			if (++spins >= 128) {
				sched_yield();
				spins = 0;
			}
		}
	}
}

static inline void buf_unlock(struct log_buf *b)
{
	atomic_store_explicit(&b->lock, false, memory_order_release);
}

static void buf_count_row(struct log_buf *b)
{
	/* Only the owner adds, so a plain load and store suffice: no lock prefix. */
	atomic_store_explicit(&b->rows, atomic_load_explicit(&b->rows, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/*
 * Caller holds b->lock.  With a writer thread the full chunk is handed to
 * it and the buffer goes on in an empty one; without one (no file sink, a
 * forked child, no memory for a second chunk) the rows are written here.
 */
static void buf_flush_locked(struct log_buf *b)
{
	struct logging *lg = b->lg;
	struct log_chunk *next;

	if (!b->len)
		return;
	b->chunk->len = b->len;
	b->chunk->rows = b->pending;
	next = log_writer_here(lg) ? log_chunk_get(lg) : NULL;
	if (next && log_writer_push(lg, b->chunk)) {
		b->chunk = next;
		b->data = next->data;
	} else {
		log_chunk_put(lg, next);
		/* After whatever this thread queued before: its rows stay in order. */
		log_writer_drain(lg);
		log_sink_write(&lg->sink, b->data, b->len, b->pending);
	}
	b->len = 0;
	b->pending = 0;
}

static void buf_unlink(struct logging *lg, struct log_buf *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		lg->bufs = b->next;
	if (b->next)
		b->next->prev = b->prev;
	atomic_fetch_add_explicit(&lg->rows_retired,
				  atomic_load_explicit(&b->rows, memory_order_relaxed),
				  memory_order_relaxed);
}

/* The key's destructor: the thread is exiting, its rows go to the sink. */
static void buf_thread_exit(void *arg)
{
	struct log_buf *b = arg;
	struct logging *lg = b->lg;

	buf_lock(b);
	buf_flush_locked(b);
	buf_unlock(b);
	/* A joined thread's rows are in the file, as without a writer. */
	log_writer_drain(lg);

	pthread_mutex_lock(&lg->list_lock);
	buf_unlink(lg, b);
	pthread_mutex_unlock(&lg->list_lock);
	log_chunk_put(lg, b->chunk);
	free(b);
}

enum xdm_status log_bufs_init(struct logging *lg)
{
	if (pthread_mutex_init(&lg->list_lock, NULL) != 0)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot create its list lock");
	if (pthread_key_create(&lg->key, buf_thread_exit) != 0) {
		pthread_mutex_destroy(&lg->list_lock);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "logging: no pthread key left for the thread buffers");
	}
	lg->key_created = true;
	atomic_init(&lg->rows_retired, 0);
	return log_writer_start(lg);
}

/*
 * Called after the last method call has returned.  No destructor can start
 * once the key is deleted, so every buffer left in the list belongs to a
 * live thread that will never hand it over: fini writes and frees it.  A
 * thread still inside the destructor at this moment would race; the core's
 * contract (no call into a layer during its fini) covers thread exit too.
 */
void log_bufs_fini(struct logging *lg)
{
	struct log_buf *b, *next;

	if (!lg->key_created) {
		log_writer_stop(lg);
		return;
	}
	pthread_key_delete(lg->key);
	lg->key_created = false;

	pthread_mutex_lock(&lg->list_lock);
	b = lg->bufs;
	lg->bufs = NULL;
	pthread_mutex_unlock(&lg->list_lock);

	for (; b; b = next) {
		next = b->next;
		buf_lock(b);
		buf_flush_locked(b);
		buf_unlock(b);
		atomic_fetch_add_explicit(&lg->rows_retired,
					  atomic_load_explicit(&b->rows, memory_order_relaxed),
					  memory_order_relaxed);
		log_chunk_put(lg, b->chunk);
		free(b);
	}
	log_writer_drain(lg);
	log_writer_stop(lg);
	pthread_mutex_destroy(&lg->list_lock);
}

/* The calling thread's first row: one gettid and one list insertion. */
static struct log_buf *buf_new(struct logging *lg)
{
	struct log_buf *b;
	size_t n;

	b = malloc(sizeof(*b));
	if (!b)
		return NULL;
	b->chunk = log_chunk_get(lg);
	if (!b->chunk) {
		free(b);
		return NULL;
	}
	b->data = b->chunk->data;
	atomic_init(&b->lock, false);
	b->lg = lg;
	atomic_init(&b->rows, 0);
	b->pending = 0;
	b->len = 0;
	b->cap = lg->buf_size;
	n = csv_u64(b->prefix, (uint64_t)syscall(SYS_gettid));
	b->prefix[n++] = ',';
	b->prefix_len = n;
	if (pthread_setspecific(lg->key, b) != 0)
		goto err_free;

	pthread_mutex_lock(&lg->list_lock);
	b->prev = NULL;
	b->next = lg->bufs;
	if (lg->bufs)
		lg->bufs->prev = b;
	lg->bufs = b;
	pthread_mutex_unlock(&lg->list_lock);
	return b;

err_free:
	log_chunk_put(lg, b->chunk);
	free(b);
	return NULL;
}

static inline struct log_buf *buf_get(struct logging *lg)
{
	struct log_buf *b = pthread_getspecific(lg->key);

	return b ? b : buf_new(lg);
}

/* A row longer than the whole buffer (a huge tag) goes out on its own. */
static void row_oversize(struct log_buf *b, const struct log_event *ev, size_t tag_len,
			 bool quote)
{
	struct logging *lg = b->lg;
	char *row = malloc(LOG_ROW_FIXED_MAX + csv_tag_max(tag_len, quote));
	size_t n;

	if (!row) {
		atomic_fetch_add_explicit(&lg->sink.dropped, 1, memory_order_relaxed);
		return;
	}
	n = csv_row(row, b->prefix, b->prefix_len, lg->device, lg->device_len, ev, tag_len,
		    quote);
	/* After the rows this thread handed to the writer: its order holds. */
	log_writer_drain(lg);
	log_sink_write(&lg->sink, row, n, 1);
	free(row);
}

void log_row(struct logging *lg, const struct log_event *ev)
{
	struct log_buf *b = buf_get(lg);
	size_t tag_len, need;
	bool quote;

	if (!b) {
		atomic_fetch_add_explicit(&lg->sink.dropped, 1, memory_order_relaxed);
		return;
	}
	tag_len = csv_tag_scan(ev->tag, &quote);
	need = LOG_ROW_FIXED_MAX + csv_tag_max(tag_len, quote);

	buf_lock(b);
	if (need > b->cap - b->len)
		buf_flush_locked(b);
	if (need > b->cap) {
		row_oversize(b, ev, tag_len, quote);
	} else {
		b->len += csv_row(b->data + b->len, b->prefix, b->prefix_len, lg->device,
				  lg->device_len, ev, tag_len, quote);
		b->pending++;
	}
	buf_count_row(b);
	buf_unlock(b);
}

void log_count(struct logging *lg)
{
	struct log_buf *b = buf_get(lg);

	if (b)
		buf_count_row(b);
	else
		atomic_fetch_add_explicit(&lg->rows_retired, 1, memory_order_relaxed);
}

void log_flush_all(struct logging *lg)
{
	struct log_buf *b;

	pthread_mutex_lock(&lg->list_lock);
	for (b = lg->bufs; b; b = b->next) {
		buf_lock(b);
		buf_flush_locked(b);
		buf_unlock(b);
	}
	pthread_mutex_unlock(&lg->list_lock);
	/* A flush promises the rows are in the sink, not in a queue. */
	log_writer_drain(lg);
}

uint64_t log_rows(struct logging *lg)
{
	uint64_t rows;
	struct log_buf *b;

	pthread_mutex_lock(&lg->list_lock);
	rows = atomic_load_explicit(&lg->rows_retired, memory_order_relaxed);
	for (b = lg->bufs; b; b = b->next)
		rows += atomic_load_explicit(&b->rows, memory_order_relaxed);
	pthread_mutex_unlock(&lg->list_lock);
	return rows;
}
