/* SPDX-License-Identifier: MIT */
/*
 * budget_torture.c - processes churning on one budget, killed with SIGKILL
 * at random moments and restarted, the limit flipped under them; at the
 * end, with every worker dead and reclaimed, the usage must be exactly 0.
 *
 *	budget_torture [SECONDS [WORKERS [THREADS [KILL_MS [PARAMS]]]]]
 *	defaults: 3 s, 8 workers of 4 threads, a kill every 30 ms,
 *	PARAMS "limit=64M group=torture group_limit=48M"
 *
 * The suite runs the short default; a long run is the same program with a
 * larger SECONDS (DESIGN-NOTES says how it was used).  SECONDS is wall
 * time, and at least four kills per worker are made however long they take:
 * on a loaded machine the workers' threads keep the killer off the cores,
 * and a count of sleeps would stretch the run many times over.  Where the
 * kills land is up to the scheduler, but what is checked is not: the usage
 * at quiescence, after the reclaim, whatever happened before: the device's
 * and, where PARAMS names a group, the group's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "tests/lib/budget_test.h"

#define WORKERS_MAX 64
#define ROUNDS 100000	/* more than a worker lives: it never ends by itself */

struct torture {
	const char *worker;	/* tests/process/budget_worker */
	char stack[256];
	unsigned int threads;
	pid_t pid[WORKERS_MAX];
	unsigned long seed;
};

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A churning worker whose stdin says "go" to every round, stdout dropped. */
static pid_t worker_start(struct torture *t)
{
	char threads[16], rounds[16], seed[32];
	const char *argv[] = { t->worker, "churn", "host", t->stack, "67108864", threads,
			       rounds, "200", seed, "65536", NULL };
	int in[2];
	pid_t pid;

	snprintf(threads, sizeof(threads), "%u", t->threads);
	snprintf(rounds, sizeof(rounds), "%u", ROUNDS);
	snprintf(seed, sizeof(seed), "%lu", ++t->seed);
	if (pipe(in) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		close(in[0]);
		close(in[1]);
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	if (pid > 0) {
		/* A pipe holds 64K: enough "go"s for every round it will live. */
		for (int i = 0; i < 2000; i++)
			if (write(in[1], BT_GO, strlen(BT_GO)) < 0)
				break;
	}
	close(in[1]);
	return pid;
}

static void worker_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static uint64_t show(struct xdm_runtime *rt, const char *name)
{
	char buf[64];

	if (xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)) != XDM_OK)
		return UINT64_MAX;
	return strtoull(buf, NULL, 10);
}

int main(int argc, char **argv)
{
	long seconds = argc > 1 ? atol(argv[1]) : 3;
	unsigned int workers = argc > 2 ? (unsigned int)atoi(argv[2]) : 8;
	long kill_ms = argc > 4 ? atol(argv[4]) : 30;
	const char *params = argc > 5 ? argv[5] : "limit=64M group=torture group_limit=48M";
	const char *top = getenv("XDM_TOP_BUILDDIR");
	struct torture t = { .threads = argc > 3 ? (unsigned int)atoi(argv[3]) : 4 };
	struct xdm_runtime *rt, *other;
	char path[4096];
	unsigned long kills = 0, flips = 0;
	uint64_t used, unsettled, group_used = 0;
	long start, elapsed = 0, flipped_at = 0;

	if (seconds <= 0 || !workers || workers > WORKERS_MAX || !t.threads || kill_ms <= 0) {
		fprintf(stderr, "usage: budget_torture [SECONDS [WORKERS [THREADS [KILL_MS "
				"[PARAMS]]]]]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/tests/process/budget_worker", top ? top : ".");
	t.worker = path;
	t.seed = (unsigned long)getpid();
	snprintf(t.stack, sizeof(t.stack), "budget key=torture%d %s | host", (int)getpid(),
		 params);
	if (xdm_runtime_create(0, "host", t.stack, &rt) != XDM_OK) {
		fprintf(stderr, "budget_torture: %s\n", xdm_last_error_message());
		return 1;
	}
	for (unsigned int i = 0; i < workers; i++)
		t.pid[i] = worker_start(&t);

	srand((unsigned int)getpid());
	start = now_ms();
	while (elapsed < seconds * 1000 || kills < 4 * workers) {
		unsigned int victim = (unsigned int)rand() % workers;

		sleep_ms(kill_ms);
		worker_kill(t.pid[victim]);
		t.pid[victim] = worker_start(&t);
		kills++;
		elapsed = now_ms() - start;
		/* The limit flips every second, and at least once. */
		if (elapsed - flipped_at >= 1000 || !flips) {
			xdm_layer_attr_store(rt, 0, "limit", flips++ % 2 ? "64M" : "16M");
			flipped_at = elapsed;
		}
	}
	for (unsigned int i = 0; i < workers; i++)
		worker_kill(t.pid[i]);

	/* Everyone else is dead: an attach reclaims them all. */
	if (xdm_runtime_create(0, "host", t.stack, &other) != XDM_OK) {
		fprintf(stderr, "budget_torture: %s\n", xdm_last_error_message());
		return 1;
	}
	used = show(rt, "used");
	unsettled = show(rt, "unsettled");
	if (strstr(params, "group="))
		group_used = show(rt, "group_used");
	printf("budget_torture: %lu kills, %lu limit flips, %u workers x %u threads, "
	       "%s: used %" PRIu64 " bytes after the reclaim (expected 0), group_used %" PRIu64
	       " (expected 0), unsettled %" PRIu64 "\n",
	       kills, flips, workers, t.threads, params, used, group_used, unsettled);
	xdm_runtime_destroy(other);
	xdm_runtime_destroy(rt);
	return used == 0 && group_used == 0 && unsettled == 0 ? 0 : 1;
}
