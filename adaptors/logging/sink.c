/* SPDX-License-Identifier: MIT */
/*
 * sink.c - where the rows go: a file, a growing text in memory, or nowhere.
 *
 * The sink is handed pieces of text of whole rows, made by a writer thread
 * or a flush (drain.c) up to the buffer size (64 KiB by default), so it is
 * entered once per piece, never once per row, and never by an allocation.
 * A failed write is counted and reported on stderr once per layer; the
 * rows are dropped and allocation never sees the failure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adaptors/logging/logging.h"

/* Counts a failure; only the first one of the layer is told on stderr. */
static void sink_failed(struct log_sink *s, int err, uint64_t rows)
{
	atomic_fetch_add_explicit(&s->dropped, rows, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&s->write_errors, 1, memory_order_relaxed) == 0)
		fprintf(stderr,
			"xdm logging: cannot write to %s: %s; rows are dropped while this "
			"lasts (see the write_errors and dropped attributes)\n",
			s->path, strerror(err));
}

/* Caller holds s->lock.  Returns 0 or the errno of the failed write. */
static int file_write(struct log_sink *s, const char *data, size_t len)
{
	size_t done = 0;
	ssize_t w;

	while (done < len) {
		w = write(s->fd, data + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (done)
				s->torn = true;
			atomic_fetch_add_explicit(&s->bytes_written, done, memory_order_relaxed);
			return w < 0 ? errno : EIO;
		}
		done += (size_t)w;
	}
	atomic_fetch_add_explicit(&s->bytes_written, done, memory_order_relaxed);
	return 0;
}

static void memory_append(struct log_sink *s, const char *data, size_t len, uint64_t rows)
{
	size_t cap;
	char *mem;

	if (len > s->mem_limit - s->mem_len) {
		atomic_fetch_add_explicit(&s->dropped, rows, memory_order_relaxed);
		return;
	}
	if (s->mem_len + len > s->mem_cap) {
		cap = s->mem_cap ? s->mem_cap : 4096;
		while (cap < s->mem_len + len)
			cap *= 2;
		if (cap > s->mem_limit)
			cap = s->mem_limit;
		mem = realloc(s->mem, cap);
		if (!mem) {
			atomic_fetch_add_explicit(&s->dropped, rows, memory_order_relaxed);
			return;
		}
		s->mem = mem;
		s->mem_cap = cap;
	}
	memcpy(s->mem + s->mem_len, data, len);
	s->mem_len += len;
	atomic_fetch_add_explicit(&s->bytes_written, len, memory_order_relaxed);
}

void log_sink_write(struct log_sink *s, const char *data, size_t len, uint64_t rows)
{
	int err;

	if (s->kind == LOG_SINK_NULL || !len)
		return;
	/*
	 * A forked child inherits the parent's pending rows and its file:
	 * writing them would duplicate the parent's rows under the parent's
	 * name.  One getpid() per piece of text, not per row.  (A child does
	 * not drain its rings at all, drain.c; this is the last guard.)
	 */
	if (getpid() != s->pid) {
		atomic_fetch_add_explicit(&s->dropped, rows, memory_order_relaxed);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (s->kind == LOG_SINK_MEMORY) {
		memory_append(s, data, len, rows);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* After half a row, start a fresh line so later rows stay whole. */
	if (s->torn && file_write(s, "\n", 1) == 0)
		s->torn = false;
	err = file_write(s, data, len);
	pthread_mutex_unlock(&s->lock);
	if (err)
		sink_failed(s, err, rows);
}

static enum xdm_status file_open(struct log_sink *s, const char *path_pattern, uint32_t ordinal)
{
	struct stat st;
	enum xdm_status status;
	int err;

	status = log_file_open(path_pattern, ordinal, &s->path, &s->fd);
	if (status)
		return status;
	/* Appending to an earlier log of the same name: one header only. */
	if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		return XDM_OK;
	err = file_write(s, LOG_HEADER, LOG_HEADER_LEN);
	if (err)
		sink_failed(s, err, 0);
	return XDM_OK;
}

enum xdm_status log_sink_open(struct log_sink *s, const char *kind, const char *path_pattern,
			      uint32_t ordinal, uint64_t mem_limit)
{
	enum xdm_status st;

	s->fd = -1;
	s->pid = getpid();
	atomic_init(&s->bytes_written, 0);
	atomic_init(&s->write_errors, 0);
	atomic_init(&s->dropped, 0);
	if (!strcmp(kind, "file"))
		s->kind = LOG_SINK_FILE;
	else if (!strcmp(kind, "memory"))
		s->kind = LOG_SINK_MEMORY;
	else if (!strcmp(kind, "null"))
		s->kind = LOG_SINK_NULL;
	else
		return xdm_error_set(XDM_E_CONFIG,
				     "logging: sink must be file, memory or null, not '%s'", kind);
	if (mem_limit < LOG_HEADER_LEN || mem_limit != (size_t)mem_limit)
		return xdm_error_set(XDM_E_CONFIG, "logging: memory_limit %llu is out of range",
				     (unsigned long long)mem_limit);
	s->mem_limit = (size_t)mem_limit;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: cannot create the sink lock");

	if (s->kind == LOG_SINK_FILE) {
		st = file_open(s, path_pattern, ordinal);
		if (st)
			goto err_lock;
	} else if (s->kind == LOG_SINK_MEMORY) {
		memory_append(s, LOG_HEADER, LOG_HEADER_LEN, 0);
		if (!s->mem) {
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "logging: no memory for the log");
			goto err_lock;
		}
	}
	return XDM_OK;

err_lock:
	pthread_mutex_destroy(&s->lock);
	return st;
}

void log_sink_close(struct log_sink *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->path);
	free(s->mem);
	pthread_mutex_destroy(&s->lock);
}

int log_sink_contents(struct log_sink *s, char *buf, size_t len)
{
	int n;

	if (s->kind != LOG_SINK_MEMORY)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->lock);
	if (s->mem_len >= len || s->mem_len > INT_MAX) {
		pthread_mutex_unlock(&s->lock);
		return -EFBIG;
	}
	memcpy(buf, s->mem, s->mem_len);
	buf[s->mem_len] = '\0';
	n = (int)s->mem_len;
	pthread_mutex_unlock(&s->lock);
	return n;
}

const char *log_sink_kind_name(const struct log_sink *s)
{
	switch (s->kind) {
	case LOG_SINK_FILE:
		return "file";
	case LOG_SINK_MEMORY:
		return "memory";
	default:
		return "null";
	}
}
