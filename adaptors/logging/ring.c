/* SPDX-License-Identifier: MIT */
/*
 * ring.c - each thread's record ring, the producer side: the hot path of
 * the log.
 *
 * A row costs a thread-local lookup, a strlen and copy of the tag, the
 * stores of one 64-byte record and a release store of the ring's head: no
 * lock, no syscall, no atomic read-modify-write (the caller reads the
 * clock).  That part is inlined into the methods (row.h); this file is
 * everything else a row may need.  Text is made later by a writer thread
 * (drain.c).
 *
 * The producer keeps its own copy of the head and the tail it last saw,
 * so the consumers' cache line is read only when the ring looks full.
 * When the ring's fill crosses one half, the thread kicks its writer (a
 * mutex and a condition signal, once per half ring); it kicks again at a
 * fresh read of the tail that still finds the ring half full, unless the
 * tail has not moved since its last kick (that pass is still to come).
 *
 * A full ring waits (full=wait, the default: nothing is lost): the thread
 * drains it itself when no writer is at it (ring_help), else sleeps until
 * its writer has made room.  Or it drops the row (full=drop).  A drop is
 * counted in the ring's drops; before its next record the thread puts a
 * LOG_DROPPED record, which the writer turns into a "dropped" row at the
 * very place of the loss.  Drops not yet followed by a record are written
 * by the consumer after the ring's last record (drain.c), so a flush
 * misses none.
 *
 * A tag longer than tag_max (a quarter of the ring) is the one slow row:
 * its thread drains its own ring and writes the row itself, in order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "adaptors/logging/logging.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline struct log_rec *ring_rec(struct log_ring *r, uint64_t at)
{
	return (struct log_rec *)(r->slots + (at & r->mask) * LOG_SLOT);
}

/* Slots a record with a tag of tag_len bytes takes. */
static inline uint64_t rec_slots(size_t tag_len)
{
	if (likely(tag_len <= LOG_REC_TAG_INLINE))
		return 1;
	return 1 + (tag_len - LOG_REC_TAG_INLINE + LOG_SLOT - 1) / LOG_SLOT;
}

/* Only the owner adds, so a plain load and store suffice: no lock prefix. */
static inline void bump(atomic_uint_fast64_t *v, uint64_t by)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + by,
			      memory_order_relaxed);
}

/* Copies len bytes to the ring from slot at on, wrapping at its end. */
static void ring_copy_in(struct log_ring *r, uint64_t at, const char *src, size_t len)
{
	size_t size = (size_t)(r->mask + 1) * LOG_SLOT;
	size_t off = (size_t)(at & r->mask) * LOG_SLOT;
	size_t first = len < size - off ? len : size - off;

	memcpy(r->slots + off, src, first);
	memcpy(r->slots, src + first, len - first);
}

static void ring_put(struct log_ring *r, uint64_t at, const struct log_event *ev,
		     size_t tag_len)
{
	struct log_rec *rec = ring_rec(r, at);

	log_rec_fill(rec, ev, tag_len);
	if (likely(tag_len <= LOG_REC_TAG_INLINE)) {
		memcpy(rec->tag, ev->tag, tag_len);
		return;
	}
	memcpy(rec->tag, ev->tag, LOG_REC_TAG_INLINE);
	ring_copy_in(r, at + 1, ev->tag + LOG_REC_TAG_INLINE, tag_len - LOG_REC_TAG_INLINE);
}

/* The record that says where rows were lost: one slot, before the next row. */
static uint64_t ring_put_marker(struct log_ring *r, uint64_t at)
{
	struct log_rec *rec = ring_rec(r, at);
	uint64_t drops = atomic_load_explicit(&r->drops, memory_order_relaxed);

	memset(rec, 0, sizeof(*rec));
	rec->action = LOG_DROPPED;
	rec->time_ns = r->streak_ns;
	rec->bytes = drops;
	r->drops_marked = drops;
	return at + 1;
}

static void ring_kick(struct log_ring *r)
{
	r->kick_tail = r->tail_seen;
	log_writer_kick(r);
}

/*
 * A full ring, full=wait, and no writer at it: the thread drains it itself
 * rather than sleep until a writer gets a CPU.  Where the writers cannot
 * keep up (more rows a second than they format, or no core free for them)
 * the threads would otherwise sleep while cores stand idle.  Its text
 * buffer is made the first time; false: a writer holds the ring, or no
 * memory, and the thread waits.
 */
static bool ring_help(struct log_ring *r)
{
	struct logging *lg = r->lg;

	if (!r->text) {
		r->text = malloc(sizeof(*r->text));
		if (!r->text)
			return false;
		if (log_text_init(r->text, lg) != XDM_OK) {
			free(r->text);
			r->text = NULL;
			return false;
		}
	}
	if (pthread_mutex_trylock(&r->consume) != 0)
		return false;
	log_drain_ring(lg, r, r->text);
	pthread_mutex_unlock(&r->consume);
	return true;
}

/*
 * The ring has no room for need slots by the tail last seen.  Reads the
 * tail again; true when there is room now (after waiting, with full=wait),
 * false when the row is to be dropped (full=drop).
 */
static bool ring_make_room(struct log_ring *r, uint64_t need)
{
	struct logging *lg = r->lg;
	uint64_t size = r->mask + 1, fill;

	for (;;) {
		r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
		fill = r->head_own - r->tail_seen;
		if (fill + need <= size) {
			if (fill + need >= size / 2 && r->tail_seen != r->kick_tail)
				ring_kick(r);
			return true;
		}
		/*
		 * A drop streak already under way has kicked and checked for a
		 * fork: the rest of it costs a load of the tail per row.
		 */
		if (lg->drop_when_full && r->drops_marked !=
		    atomic_load_explicit(&r->drops, memory_order_relaxed))
			return false;
		if (log_forked(lg)) {
			/* No writer here: the child's rows, and the parent's it copied, go. */
			log_discard_ring(lg, r);
			continue;
		}
		if (lg->drop_when_full) {
			if (r->tail_seen != r->kick_tail)
				ring_kick(r);
			return false;
		}
		bump(&r->waits, 1);
		if (!ring_help(r)) {
			r->kick_tail = r->tail_seen;
			log_writer_wait_room(r, need);
		}
	}
}

static void ring_publish(struct log_ring *r, uint64_t head, uint64_t added)
{
	uint64_t half = (r->mask + 1) / 2;
	uint64_t fill = head - r->tail_seen;

	atomic_store_explicit(&r->head, head, memory_order_release);
	r->head_own = head;
	/* Crossing half the ring: the writer has the other half to catch up. */
	if (unlikely(fill >= half && fill - added < half))
		ring_kick(r);
}

/* A row whose tag would take more than a quarter of the ring. */
static void ring_row_oversize(struct log_ring *r, const struct log_event *ev, size_t tag_len)
{
	struct logging *lg = r->lg;
	bool quote = csv_tag_quote(ev->tag, tag_len);
	char *row;
	size_t n;

	if (log_forked(lg)) {
		atomic_fetch_add_explicit(&lg->sink.dropped, 1, memory_order_relaxed);
		return;
	}
	row = malloc(LOG_ROW_FIXED_MAX + csv_tag_max(tag_len, quote));
	if (!row) {
		atomic_fetch_add_explicit(&lg->sink.dropped, 1, memory_order_relaxed);
		return;
	}
	n = csv_row(row, r->prefix, r->prefix_len, lg->device, lg->device_len, ev, tag_len,
		    quote, NULL);
	pthread_mutex_lock(&lg->flush_lock);
	pthread_mutex_lock(&r->consume);
	/* Everything the thread logged before it first: its order holds. */
	log_drain_ring(lg, r, &lg->flush_text);
	log_sink_write(&lg->sink, row, n, 1);
	pthread_mutex_unlock(&r->consume);
	pthread_mutex_unlock(&lg->flush_lock);
	free(row);
}

/*
 * The head at which the fast path must next come here: while drops wait
 * for their marker, at once; before the fill crosses half the ring, at the
 * crossing (ring_publish kicks there); after it, when the room by the tail
 * last seen is gone.  Called whenever head_own, tail_seen or drops moved.
 */
static void ring_fast_end(struct log_ring *r)
{
	uint64_t size = r->mask + 1, fill = r->head_own - r->tail_seen;

	if (r->drops_marked != atomic_load_explicit(&r->drops, memory_order_relaxed))
		r->fast_end = 0;
	else
		r->fast_end = r->tail_seen + (fill < size / 2 ? size / 2 - 1 : size);
}

/* Rows after a drop, and every full ring: the marker first, then the row. */
static void ring_row_slow(struct log_ring *r, const struct log_event *ev, size_t tag_len)
{
	bool marker = r->drops_marked != atomic_load_explicit(&r->drops, memory_order_relaxed);
	uint64_t need = rec_slots(tag_len), head;

	if (r->head_own + need + marker - r->tail_seen > r->mask + 1 &&
	    !ring_make_room(r, need + marker)) {
		/* Dropped: counted, and said in the log by the next marker. */
		if (!marker)
			r->streak_ns = ev->time_ns;
		atomic_store_explicit(&r->drops,
				      atomic_load_explicit(&r->drops, memory_order_relaxed) + 1,
				      memory_order_release);
		return;
	}
	head = r->head_own;
	if (marker)
		head = ring_put_marker(r, head);
	ring_put(r, head, ev, tag_len);
	ring_publish(r, head + need, need + marker);
}

/*
 * list_lock, except in a forked child, where a parent's writer may have
 * held it at the fork and no thread would ever let it go: there it is only
 * tried, and the caller makes do without (false).
 */
bool log_list_lock(struct logging *lg)
{
	if (!log_forked(lg)) {
		pthread_mutex_lock(&lg->list_lock);
		return true;
	}
	return pthread_mutex_trylock(&lg->list_lock) == 0;
}

static void ring_free(struct log_ring *r)
{
	if (r->text) {
		log_text_fini(r->text);
		free(r->text);
	}
	pthread_cond_destroy(&r->room);
	pthread_mutex_destroy(&r->consume);
	free(r->slots);
	free(r);
}

/* In a forked child: its mutex and condition may be copies held in the parent. */
static void ring_free_forked(struct log_ring *r)
{
	if (r->text) {
		log_text_fini(r->text);
		free(r->text);
	}
	free(r->slots);
	free(r);
}

static void ring_unlink(struct logging *lg, struct log_ring *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		lg->rings = r->next;
	if (r->next)
		r->next->prev = r->prev;
	atomic_fetch_add_explicit(&lg->rows_retired,
				  atomic_load_explicit(&r->rows, memory_order_relaxed),
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&lg->drops_retired,
				  atomic_load_explicit(&r->drops, memory_order_relaxed),
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&lg->waits_retired,
				  atomic_load_explicit(&r->waits, memory_order_relaxed),
				  memory_order_relaxed);
}

/* The key's destructor: the thread is exiting, its records go to the sink. */
static void ring_thread_exit(void *arg)
{
	struct log_ring *r = arg;
	struct logging *lg = r->lg;

	xdm_thread_last_forget(&log_ring_last, r);
	if (log_forked(lg)) {
		log_discard_ring(lg, r);
		/* Without the list lock the ring stays listed (and allocated). */
		if (!log_list_lock(lg))
			return;
		ring_unlink(lg, r);
		pthread_mutex_unlock(&lg->list_lock);
		ring_free_forked(r);
		return;
	}
	/* A joined thread's rows are in the sink, as a flush would leave them. */
	if (r->slots) {
		pthread_mutex_lock(&lg->flush_lock);
		pthread_mutex_lock(&r->consume);
		log_drain_ring(lg, r, &lg->flush_text);
		pthread_mutex_unlock(&r->consume);
		pthread_mutex_unlock(&lg->flush_lock);
	}
	/* No walk of the rings may still hold it once it is unlinked. */
	pthread_rwlock_wrlock(&lg->rings_lock);
	pthread_mutex_lock(&lg->list_lock);
	ring_unlink(lg, r);
	pthread_mutex_unlock(&lg->list_lock);
	pthread_rwlock_unlock(&lg->rings_lock);
	ring_free(r);
}

_Thread_local struct xdm_thread_last log_ring_last;

struct log_ring *log_ring_find(struct logging *lg)
{
	return xdm_thread_last_keep(&log_ring_last, lg->serial, pthread_getspecific(lg->key));
}

/* The calling thread's first row: one gettid, one allocation, one list insertion. */
static struct log_ring *ring_new(struct logging *lg)
{
	struct log_ring *r;
	size_t n;

	r = aligned_alloc(64, sizeof(*r));
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	/* The null sink counts rows only: its ring has no slots. */
	if (lg->sink.kind != LOG_SINK_NULL) {
		r->slots = aligned_alloc(64, lg->nslots * LOG_SLOT);
		if (!r->slots)
			goto err_free;
		r->mask = lg->nslots - 1;
	}
	if (pthread_mutex_init(&r->consume, NULL) != 0)
		goto err_slots;
	if (pthread_cond_init(&r->room, NULL) != 0)
		goto err_consume;
	r->lg = lg;
	n = csv_u64(r->prefix, (uint64_t)syscall(SYS_gettid));
	r->prefix[n++] = ',';
	r->prefix_len = n;
	if (!log_list_lock(lg))
		goto err_mutex;
	if (pthread_setspecific(lg->key, r) != 0) {
		pthread_mutex_unlock(&lg->list_lock);
		goto err_mutex;
	}
	if (lg->nwriters)
		r->writer = &lg->writers[lg->rings_made % lg->nwriters];
	lg->rings_made++;
	r->prev = NULL;
	r->next = lg->rings;
	if (lg->rings)
		lg->rings->prev = r;
	lg->rings = r;
	pthread_mutex_unlock(&lg->list_lock);
	xdm_thread_last_set(&log_ring_last, lg->serial, r);
	return r;

err_mutex:
	pthread_cond_destroy(&r->room);
err_consume:
	pthread_mutex_destroy(&r->consume);
err_slots:
	free(r->slots);
err_free:
	free(r);
	return NULL;
}

void log_row_slow(struct logging *lg, struct log_ring *r, const struct log_event *ev,
		  size_t tag_len)
{
	if (unlikely(!r)) {
		r = ring_new(lg);
		if (!r) {
			atomic_fetch_add_explicit(&lg->sink.dropped, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&lg->rows_retired, 1, memory_order_relaxed);
			return;
		}
	}
	bump(&r->rows, 1);
	if (tag_len > lg->tag_max)
		ring_row_oversize(r, ev, tag_len);
	else
		ring_row_slow(r, ev, tag_len);
	ring_fast_end(r);
}

void log_count(struct logging *lg)
{
	struct log_ring *r = log_ring_mine(lg);

	if (unlikely(!r))
		r = ring_new(lg);
	if (r)
		bump(&r->rows, 1);
	else
		atomic_fetch_add_explicit(&lg->rows_retired, 1, memory_order_relaxed);
}

enum xdm_status log_rings_init(struct logging *lg)
{
	pthread_rwlockattr_t attr;

	if (pthread_mutex_init(&lg->list_lock, NULL) != 0)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot create its list lock");
	if (pthread_mutex_init(&lg->flush_lock, NULL) != 0)
		goto err_list;
	/*
	 * Writer-preferring: walks are long (a blocked sink), and an exiting
	 * thread must get its turn between them.
	 */
	if (pthread_rwlockattr_init(&attr) != 0)
		goto err_flush;
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (pthread_rwlock_init(&lg->rings_lock, &attr) != 0) {
		pthread_rwlockattr_destroy(&attr);
		goto err_flush;
	}
	pthread_rwlockattr_destroy(&attr);
	lg->rings_lock_made = true;
	if (pthread_key_create(&lg->key, ring_thread_exit) != 0) {
		pthread_rwlock_destroy(&lg->rings_lock);
		lg->rings_lock_made = false;
		pthread_mutex_destroy(&lg->flush_lock);
		pthread_mutex_destroy(&lg->list_lock);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY,
				     "logging: no pthread key left for the thread rings");
	}
	lg->key_created = true;
	atomic_init(&lg->rows_retired, 0);
	atomic_init(&lg->drops_retired, 0);
	atomic_init(&lg->waits_retired, 0);
	return XDM_OK;

err_flush:
	pthread_mutex_destroy(&lg->flush_lock);
err_list:
	pthread_mutex_destroy(&lg->list_lock);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot create its locks");
}

/*
 * Called after the last method call has returned, with the writers
 * stopped.  No destructor can start once the key is deleted, so every ring
 * left in the list belongs to a live thread that will never hand it over:
 * fini drains and frees it.  A thread still inside the destructor at this
 * moment would race; the core's contract (no call into a layer during its
 * fini) covers thread exit too.
 */
void log_rings_fini(struct logging *lg)
{
	bool forked = log_forked(lg);
	struct log_ring *r, *next;

	if (!lg->key_created)
		return;
	pthread_key_delete(lg->key);
	lg->key_created = false;

	r = lg->rings;
	lg->rings = NULL;
	for (; r; r = next) {
		next = r->next;
		atomic_fetch_add_explicit(&lg->rows_retired,
					  atomic_load_explicit(&r->rows, memory_order_relaxed),
					  memory_order_relaxed);
		if (forked) {
			log_discard_ring(lg, r);
			ring_free_forked(r);
			continue;
		}
		if (r->slots)
			log_drain_ring(lg, r, &lg->flush_text);
		ring_free(r);
	}
	if (forked)
		return;
	pthread_rwlock_destroy(&lg->rings_lock);
	lg->rings_lock_made = false;
	pthread_mutex_destroy(&lg->flush_lock);
	pthread_mutex_destroy(&lg->list_lock);
}

static uint64_t ring_sum(struct logging *lg, size_t field, atomic_uint_fast64_t *retired)
{
	bool locked = log_list_lock(lg);
	struct log_ring *r;
	uint64_t sum;

	/* Unlocked only in a forked child whose copy of the lock is held. */
	sum = atomic_load_explicit(retired, memory_order_relaxed);
	for (r = lg->rings; r; r = r->next)
		sum += atomic_load_explicit((atomic_uint_fast64_t *)((char *)r + field),
					    memory_order_relaxed);
	if (locked)
		pthread_mutex_unlock(&lg->list_lock);
	return sum;
}

uint64_t log_rows(struct logging *lg)
{
	return ring_sum(lg, offsetof(struct log_ring, rows), &lg->rows_retired);
}

uint64_t log_drops(struct logging *lg)
{
	return ring_sum(lg, offsetof(struct log_ring, drops), &lg->drops_retired);
}

uint64_t log_waits(struct logging *lg)
{
	return ring_sum(lg, offsetof(struct log_ring, waits), &lg->waits_retired);
}

bool log_forked(const struct logging *lg)
{
	return getpid() != lg->pid;
}
