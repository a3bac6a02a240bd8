/* SPDX-License-Identifier: MIT */
/*
 * segment_churn.c - the hostile owner of a budget segment, for
 * tests/tools/xdmctl_hostile.sh: its file cut short and grown back, over
 * and over, while xdmctl reads it from another user.
 *
 *   segment_churn fill FILE    every free row of FILE (a copy of a
 *                              segment) given the row of its first
 *                              process, so that a reader spends long in
 *                              the rows (each one's liveness asked)
 *   segment_churn churn FILE   until killed: FILE whole for 0.3 ms,
 *                              then cut to a length of its own choosing
 *                              and written whole again, over and over;
 *                              "churning" on standard output once it has
 *                              begun
 *
 * A reader that maps the file faults (SIGBUS) when it touches a page the
 * cut took away; one that copies it with pread(2) reads fewer bytes.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

static int fill(const char *path)
{
	struct budget_shm *s = malloc(sizeof(*s));
	const struct budget_slot *first = NULL;
	int fd = open(path, O_RDWR);

	if (!s || fd < 0 || pread(fd, s, sizeof(*s), 0) != (ssize_t)sizeof(*s)) {
		perror(path);
		return 1;
	}
	for (unsigned int i = 0; i < BUDGET_SLOTS && !first; i++)
		if (atomic_load(&s->slots[i].pid))
			first = &s->slots[i];
	if (!first) {
		fprintf(stderr, "%s: no process in the segment to copy\n", path);
		return 1;
	}
	for (unsigned int i = 0; i < BUDGET_SLOTS; i++)
		if (!atomic_load(&s->slots[i].pid))
			memcpy(&s->slots[i], first, sizeof(*first));
	if (pwrite(fd, s, sizeof(*s), 0) != (ssize_t)sizeof(*s)) {
		perror(path);
		return 1;
	}
	close(fd);
	free(s);
	return 0;
}

static int churn(const char *path)
{
	char *good = malloc(sizeof(struct budget_shm));
	size_t size = sizeof(struct budget_shm);
	unsigned int seed = (unsigned int)getpid();
	int fd = open(path, O_RDWR);

	if (!good || fd < 0 || pread(fd, good, size, 0) != (ssize_t)size) {
		perror(path);
		return 1;
	}
	printf("churning\n");
	fflush(stdout);
	for (;;) {
		/*
		 * Whole for a moment, so that a reader finds it whole and
		 * begins; then a page or more short, anywhere from empty to
		 * the last page, and at once whole again.
		 */
		struct timespec whole = { 0, 300 * 1000 };

		nanosleep(&whole, NULL);
		seed = seed * 1103515245u + 12345u;
		if (ftruncate(fd, (off_t)((seed >> 8) % (size - 4096))) != 0 ||
		    pwrite(fd, good, size, 0) != (ssize_t)size) {
			perror(path);
			return 1;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "fill"))
		return fill(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "churn"))
		return churn(argv[2]);
	fprintf(stderr, "usage: segment_churn fill|churn FILE\n");
	return 2;
}
