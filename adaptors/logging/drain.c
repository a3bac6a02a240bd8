/* SPDX-License-Identifier: MIT */
/*
 * drain.c - the consumer side of the rings: records become CSV text.
 *
 * Whoever holds a ring's consume lock drains it: its writer thread (the
 * common case, off every allocation path), a flush (the flush attribute,
 * contents, reap_pending, the exit hook), the ring's own thread at its exit
 * or before an oversized row, and fini.  A drain formats every record
 * published so far into a text buffer, writes the text to the sink before
 * it lets the ring go, and only then may another drain of the same ring
 * write: so a thread's rows reach the sink in the order of its calls.
 *
 * Drops.  A LOG_DROPPED record carries its thread's drop count at the time
 * it was written; the drain writes a "dropped" row for what that count adds
 * to what the text already said.  After the last record, the drain also
 * says the drops that no record follows yet, with the drop count read
 * before the head: every record published before those drops is then in
 * the drain, and none published after them (the thread puts a marker
 * before its next row), so the row stands exactly where the rows were lost.
 *
 * The walk over all rings holds rings_lock for reading: a ring is freed
 * only under it for writing, so no walk ever sees freed memory, and a ring
 * registered during a walk (inserted at the head, under list_lock) is left
 * to the next one.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "adaptors/logging/logging.h"

static uint64_t rec_slots(size_t tag_len)
{
	if (tag_len <= LOG_REC_TAG_INLINE)
		return 1;
	return 1 + (tag_len - LOG_REC_TAG_INLINE + LOG_SLOT - 1) / LOG_SLOT;
}

static const struct log_rec *rec_at(const struct log_ring *r, uint64_t at)
{
	return (const struct log_rec *)(r->slots + (at & r->mask) * LOG_SLOT);
}

enum xdm_status log_text_init(struct log_text *t, const struct logging *lg)
{
	t->len = 0;
	t->rows = 0;
	t->clock.len = 0;
	t->cap = lg->buf_size;
	t->buf = malloc(t->cap);
	t->scratch = malloc(lg->tag_max + 1);
	if (t->buf && t->scratch)
		return XDM_OK;
	log_text_fini(t);
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for a text buffer");
}

void log_text_fini(struct log_text *t)
{
	free(t->buf);
	free(t->scratch);
	t->buf = NULL;
	t->scratch = NULL;
}

static void text_write(struct logging *lg, struct log_text *t)
{
	if (!t->len)
		return;
	log_sink_write(&lg->sink, t->buf, t->len, t->rows);
	t->len = 0;
	t->rows = 0;
}

/* tag_max keeps every row within an empty text buffer. */
static void text_row(struct logging *lg, const struct log_ring *r, struct log_text *t,
		     const struct log_event *ev, size_t tag_len)
{
	bool quote = csv_tag_quote(ev->tag, tag_len);

	if (LOG_ROW_FIXED_MAX + csv_tag_max(tag_len, quote) > t->cap - t->len)
		text_write(lg, t);
	t->len += csv_row(t->buf + t->len, r->prefix, r->prefix_len, lg->device, lg->device_len,
			  ev, tag_len, quote, &t->clock);
}

/* "<tid>,<time>,dropped,0x0,<rows lost>,0,<device>,,0" */
static void text_marker(struct logging *lg, struct log_ring *r, struct log_text *t,
			uint64_t drops, uint64_t time_ns)
{
	static const char no_tag[LOG_REC_TAG_INLINE];	/* csv_row() reads that many */
	struct log_event ev = {
		.action = LOG_DROPPED,
		.time_ns = time_ns,
		.bytes = drops - r->drops_reported,
		.tag = no_tag,
	};

	text_row(lg, r, t, &ev, 0);
	r->drops_reported = drops;
}

/* The tag of the record at tail: in place, or copied where it wraps. */
static const char *rec_tag(const struct log_ring *r, uint64_t at, const struct log_rec *rec,
			   uint64_t slots, struct log_text *t)
{
	size_t size = (size_t)(r->mask + 1) * LOG_SLOT;
	size_t rest = (size_t)rec->tag_len - LOG_REC_TAG_INLINE;
	size_t off, first;

	if ((at & r->mask) + slots <= r->mask + 1)
		return rec->tag;
	memcpy(t->scratch, rec->tag, LOG_REC_TAG_INLINE);
	off = (size_t)((at + 1) & r->mask) * LOG_SLOT;
	first = size - off < rest ? size - off : rest;
	memcpy(t->scratch + LOG_REC_TAG_INLINE, r->slots + off, first);
	memcpy(t->scratch + LOG_REC_TAG_INLINE + first, r->slots, rest - first);
	return t->scratch;
}

void log_drain_ring(struct logging *lg, struct log_ring *r, struct log_text *t)
{
	/* The drops first, then the head: see the top of this file. */
	uint64_t drops = atomic_load_explicit(&r->drops, memory_order_acquire);
	uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	while (tail != head) {
		const struct log_rec *rec = rec_at(r, tail);
		uint64_t slots = rec_slots(rec->tag_len);

		if (rec->action == LOG_DROPPED) {
			if (rec->bytes > r->drops_reported)
				text_marker(lg, r, t, rec->bytes, rec->time_ns);
		} else {
			struct log_event ev = {
				.action = rec->action,
				.time_ns = rec->time_ns,
				.ptr = rec->ptr,
				.bytes = rec->bytes,
				.query_id = rec->query_id,
				.stream = rec->stream,
				.tag = rec_tag(r, tail, rec, slots, t),
			};

			text_row(lg, r, t, &ev, rec->tag_len);
			t->rows++;
		}
		tail += slots;
		/* Room for a waiting producer as soon as the record is copied out. */
		atomic_store_explicit(&r->tail, tail, memory_order_release);
	}
	if (drops > r->drops_reported)
		text_marker(lg, r, t, drops, log_now_ns());
	text_write(lg, t);
}

void log_drain_rings(struct logging *lg, struct log_writer *w, struct log_text *t)
{
	struct log_ring *r;

	pthread_rwlock_rdlock(&lg->rings_lock);
	pthread_mutex_lock(&lg->list_lock);
	r = lg->rings;
	pthread_mutex_unlock(&lg->list_lock);
	for (; r; r = r->next) {
		if (!r->slots || (w && r->writer != w))
			continue;
		pthread_mutex_lock(&r->consume);
		log_drain_ring(lg, r, t);
		pthread_mutex_unlock(&r->consume);
		log_writer_ring_drained(r);
	}
	pthread_rwlock_unlock(&lg->rings_lock);
}

/*
 * In a forked child.  Its locks may be copies held by the parent's
 * threads, so none is taken here (the callers only try list_lock); a
 * compare-and-swap of the tail keeps two of the child's threads from
 * counting the same records.
 */
void log_discard_ring(struct logging *lg, struct log_ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint64_t head, at, rows;

	if (!r->slots)
		return;
	do {
		head = atomic_load_explicit(&r->head, memory_order_acquire);
		rows = 0;
		for (at = tail; at < head; at += rec_slots(rec_at(r, at)->tag_len))
			rows += rec_at(r, at)->action != LOG_DROPPED;
	} while (!atomic_compare_exchange_weak_explicit(&r->tail, &tail, head,
							memory_order_acq_rel,
							memory_order_acquire));
	atomic_fetch_add_explicit(&lg->sink.dropped, rows, memory_order_relaxed);
}

void log_flush_all(struct logging *lg)
{
	struct log_ring *r;

	if (lg->sink.kind == LOG_SINK_NULL)
		return;
	if (log_forked(lg)) {
		if (!log_list_lock(lg))
			return;	/* the rings fill and let their rows go themselves */
		for (r = lg->rings; r; r = r->next)
			log_discard_ring(lg, r);
		pthread_mutex_unlock(&lg->list_lock);
		return;
	}
	pthread_mutex_lock(&lg->flush_lock);
	log_drain_rings(lg, NULL, &lg->flush_text);
	pthread_mutex_unlock(&lg->flush_lock);
}
