/* SPDX-License-Identifier: MIT */
/*
 * log_replay.h - reads the logging adaptor's CSV back and replays it into
 * the set of blocks it says are live, for the logging suite.
 */
#ifndef XDM_TESTS_LOG_REPLAY_H
#define XDM_TESTS_LOG_REPLAY_H

#include <stddef.h>
#include <stdint.h>

struct lr_row {
	uint64_t thread;
	uint64_t time;
	char action[24];
	uint64_t ptr;
	uint64_t bytes;
	uint64_t stream;
	uint64_t device;
	char *tag;		/* unquoted */
	uint64_t query_id;
	size_t seq;		/* position in the file */
};

struct lr_log {
	struct lr_row *rows;
	size_t n;
};

struct lr_live {
	uint64_t ptr;
	uint64_t bytes;
	const char *tag;
	uint64_t query_id;
};

/*
 * Parses a whole CSV (header first, exactly as the adaptor writes it).
 * Returns 0, or -1 with a reason in err.
 */
int lr_parse(const char *text, struct lr_log *log, char *err, size_t err_len);
void lr_free(struct lr_log *log);

/*
 * Sorts the rows by time (a free before an allocate at equal times) and
 * replays them: allocate adds ptr -> bytes, free and free_failure remove it;
 * allocate_failure and dropped change nothing.
 * A row that contradicts the set so far (an address allocated twice, a free
 * of an unknown address or with other bytes) is an error.  *live is malloc'd.
 */
int lr_replay(struct lr_log *log, struct lr_live **live, size_t *n_live, char *err,
	      size_t err_len);

#endif /* XDM_TESTS_LOG_REPLAY_H */
