/* SPDX-License-Identifier: MIT */
/*
 * stats.c - clock, summary statistics and the bench's own PRNG.
 *
 * The PRNG is splitmix64, written here rather than taken from rand(): the
 * random workload must replay the same operations for a given --seed on
 * every libc, and rand() promises neither its sequence nor its quality.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	/* MONOTONIC: wall-clock steps (NTP, settimeofday) must not land in a run. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The median rather than the mean: one run disturbed by the scheduler or a
 * page-fault storm should not move the reported number.  The minimum is the
 * best the machine did, the usual lower bound for "what the code costs".
 */
void bench_summarize(const double *samples, size_t n, double *median, double *min)
{
	double sorted[BENCH_MAX_REPEAT];

	if (n == 0 || n > BENCH_MAX_REPEAT) {
		*median = 0;
		*min = 0;
		return;
	}
	memcpy(sorted, samples, n * sizeof(*samples));
	qsort(sorted, n, sizeof(*sorted), cmp_double);
	*min = sorted[0];
	if (n % 2)
		*median = sorted[n / 2];
	else
		*median = (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

void bench_rng_seed(struct bench_rng *r, uint64_t seed)
{
	r->state = seed;
}

/* splitmix64: a Weyl sequence scrambled by two multiply-xorshift rounds. */
uint64_t bench_rng_next(struct bench_rng *r)
{
	uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in [0, 1): the top 53 bits fill a double's mantissa exactly. */
double bench_rng_unit(struct bench_rng *r)
{
	return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* "4K", "16M" where exact, plain bytes otherwise: what --sizes would accept. */
void bench_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, units[u]);
}
