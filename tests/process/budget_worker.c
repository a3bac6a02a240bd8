/* SPDX-License-Identifier: MIT */
/*
 * budget_worker.c - one process of the budget's multi-process tests.  The
 * suite execs it (never merely forks) so that a CUDA stack starts clean in
 * every worker.  budget_test.h has the protocol.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/xdm.h>

#include "tests/lib/budget_test.h"

#define HELD_MAX 16

struct churn {
	struct xdm_runtime *rt;
	pthread_barrier_t stop;		/* every thread reached the round's end */
	pthread_barrier_t start;	/* the parent said go */
	unsigned int rounds;
	unsigned long ops;
	uint64_t limit;
	size_t maxsize;
};

struct thread {
	struct churn *c;
	pthread_t tid;
	uint64_t rng;
	struct xdm_block held[HELD_MAX];
	unsigned int nheld;
	unsigned long long live;	/* this thread's own tally of its bytes */
	unsigned long long refusals;
	unsigned long long bad;
};

static uint64_t next_rand(uint64_t *s)
{
	/* xorshift64*: enough for test sizes, and the same in every libc. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void give_back(struct thread *t, unsigned int i)
{
	struct xdm_block b = t->held[i];

	if (xdm_deallocate(t->c->rt, &b) != XDM_OK)
		t->bad++;
	t->live -= b.bytes;
	t->held[i] = t->held[--t->nheld];
}

static void one_op(struct thread *t)
{
	const struct xdm_error *e;
	struct xdm_block b;
	enum xdm_status st;
	size_t bytes;

	/* Allocate two times in three while there is room, else free. */
	if (t->nheld == HELD_MAX || (t->nheld && next_rand(&t->rng) % 3 == 0)) {
		give_back(t, (unsigned int)(next_rand(&t->rng) % t->nheld));
		return;
	}
	bytes = 1 + (size_t)(next_rand(&t->rng) % t->c->maxsize);
	st = xdm_allocate(t->c->rt, bytes, 0, "budget_worker", &b);
	if (st == XDM_OK) {
		t->held[t->nheld++] = b;
		t->live += b.bytes;
		return;
	}
	e = xdm_last_error();
	if (st != XDM_E_OUT_OF_BUDGET) {
		fprintf(stderr, "budget_worker: allocate %zu: %s (%s)\n", bytes, xdm_strerror(st),
			e->message);
		t->bad++;
		return;
	}
	t->refusals++;
	if (e->code != st || e->requested != bytes || e->remaining >= bytes ||
	    e->remaining > t->c->limit) {
		fprintf(stderr, "budget_worker: refusal of %zu bytes says requested %zu, "
			"remaining %zu (limit %" PRIu64 "): %s\n",
			bytes, e->requested, e->remaining, t->c->limit, e->message);
		t->bad++;
	}
}

static void *churn_thread(void *arg)
{
	struct thread *t = arg;

	for (unsigned int r = 0; r < t->c->rounds; r++) {
		for (unsigned long i = 0; i < t->c->ops; i++)
			one_op(t);
		pthread_barrier_wait(&t->c->stop);
		pthread_barrier_wait(&t->c->start);
	}
	while (t->nheld)
		give_back(t, t->nheld - 1);
	return NULL;
}

static bool wait_go(void)
{
	char line[16];

	return fgets(line, sizeof(line), stdin) && strcmp(line, BT_GO) == 0;
}

static int churn(struct xdm_runtime *rt, char **argv)
{
	/* LIMIT THREADS ROUNDS OPS SEED MAXSIZE */
	unsigned int nthreads = (unsigned int)strtoul(argv[1], NULL, 0);
	struct churn c = {
		.rt = rt,
		.limit = strtoull(argv[0], NULL, 0),
		.rounds = (unsigned int)strtoul(argv[2], NULL, 0),
		.ops = strtoul(argv[3], NULL, 0),
		.maxsize = strtoull(argv[5], NULL, 0),
	};
	uint64_t seed = strtoull(argv[4], NULL, 0);
	struct thread *t;
	int rc = 0;

	if (!nthreads || !c.rounds || !c.maxsize)
		return BT_EXIT_USAGE;
	t = calloc(nthreads, sizeof(*t));
	if (!t)
		return BT_EXIT_RUNTIME;
	pthread_barrier_init(&c.stop, NULL, nthreads + 1);
	pthread_barrier_init(&c.start, NULL, nthreads + 1);
	for (unsigned int i = 0; i < nthreads; i++) {
		t[i].c = &c;
		t[i].rng = (seed * 0x9e3779b97f4a7c15ull) ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
		if (!t[i].rng)
			t[i].rng = 1;
		pthread_create(&t[i].tid, NULL, churn_thread, &t[i]);
	}
	for (unsigned int r = 0; r < c.rounds; r++) {
		unsigned long long live = 0, refusals = 0, bad = 0;

		pthread_barrier_wait(&c.stop);
		/* Quiescent: every thread waits, so the tallies are exact. */
		for (unsigned int i = 0; i < nthreads; i++) {
			live += t[i].live;
			refusals += t[i].refusals;
			bad += t[i].bad;
		}
		printf(BT_REPORT_FMT, r, live, refusals, bad);
		fflush(stdout);
		if (!wait_go())
			rc = BT_EXIT_PROTOCOL;	/* the threads still finish */
		pthread_barrier_wait(&c.start);
	}
	for (unsigned int i = 0; i < nthreads; i++) {
		pthread_join(t[i].tid, NULL);
		if (t[i].bad)
			rc = rc ? rc : 1;
	}
	pthread_barrier_destroy(&c.stop);
	pthread_barrier_destroy(&c.start);
	free(t);
	return rc;
}

static int hold(struct xdm_runtime *rt, const char *bytes_text)
{
	size_t bytes = strtoull(bytes_text, NULL, 0);
	struct xdm_block b;
	char line[16];

	if (xdm_allocate(rt, bytes, 0, "budget_worker", &b) != XDM_OK) {
		fprintf(stderr, "budget_worker: hold %zu: %s\n", bytes, xdm_last_error_message());
		return BT_EXIT_RUNTIME;
	}
	fputs(BT_READY, stdout);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return xdm_deallocate(rt, &b) == XDM_OK ? 0 : 1;
}

/*
 * "devices": the runtimes this process can make, one line each, "ORDINAL
 * UUID", then "devices N": the ordinals as this process sees them (after
 * CUDA_VISIBLE_DEVICES), and the physical device each one is.
 */
static int list_devices(const char *platform, const char *stack)
{
	uint32_t n = 0;

	for (; n < XDM_MAX_DEVICES; n++) {
		struct xdm_device_info info;
		struct xdm_runtime *rt;
		enum xdm_status st = xdm_runtime_create(n, platform, stack, &rt);

		if (st == XDM_E_NO_DEVICE)
			break;
		if (st) {
			fprintf(stderr, "budget_worker: device %u: %s\n", n,
				xdm_last_error_message());
			return BT_EXIT_RUNTIME;
		}
		st = xdm_runtime_device(rt, &info);
		xdm_runtime_destroy(rt);
		if (st)
			return BT_EXIT_RUNTIME;
		printf("%u %s\n", n, info.uuid);
	}
	printf("devices %u\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	struct xdm_device_info info;
	struct xdm_runtime *rt;
	uint32_t ordinal = 0;
	enum xdm_status st;
	int rc;

	if (argc == 4 && strcmp(argv[1], "devices") == 0)
		return list_devices(argv[2], argv[3]);
	if (argc < 5 || (strcmp(argv[1], "hold") != 0 && strcmp(argv[1], "churn") != 0) ||
	    (strcmp(argv[1], "hold") == 0 && argc > 6) ||
	    (strcmp(argv[1], "churn") == 0 && argc != 10)) {
		fprintf(stderr, "usage: budget_worker hold PLATFORM STACK BYTES [ORDINAL]\n"
				"       budget_worker churn PLATFORM STACK LIMIT THREADS ROUNDS "
				"OPS SEED MAXSIZE\n"
				"       budget_worker devices PLATFORM STACK\n");
		return BT_EXIT_USAGE;
	}
	if (strcmp(argv[1], "hold") == 0 && argc == 6)
		ordinal = (uint32_t)strtoul(argv[5], NULL, 10);
	st = xdm_runtime_create(ordinal, argv[2], argv[3], &rt);
	if (st) {
		fprintf(stderr, "budget_worker: runtime '%s' on '%s': %s (%s)\n", argv[3], argv[2],
			xdm_strerror(st), xdm_last_error_message());
		return BT_EXIT_RUNTIME;
	}
	if (strcmp(argv[1], "hold") == 0) {
		/* Which physical device this ordinal is, for the tests of orders. */
		if (argc == 6 && xdm_runtime_device(rt, &info) == XDM_OK)
			printf("uuid %s\n", info.uuid);
		rc = hold(rt, argv[4]);
	} else {
		rc = churn(rt, argv + 4);
	}
	xdm_runtime_destroy(rt);
	return rc;
}
