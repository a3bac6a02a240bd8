/* SPDX-License-Identifier: MIT */
/*
 * timeline_format.c - numbers for the people reading a timeline: the byte
 * ticks of the axes (other byte counts are xdmctl_human()'s), durations in
 * s, ms, us or ns, the steps of the ticks and the colours of the keys.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "timeline.h"

static const char *const byte_units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

void timeline_bytes_tick(char *buf, size_t len, uint64_t bytes)
{
	unsigned int u = 0;
	char *dot;

	while (u + 1 < sizeof(byte_units) / sizeof(byte_units[0]) && bytes >> (10 * (u + 1)))
		u++;
	/* A multiple of a power of two: two decimals at most, and no zeros after them. */
	snprintf(buf, len, "%.2f", (double)bytes / (double)(UINT64_C(1) << (10 * u)));
	dot = strchr(buf, '.');
	if (dot) {
		char *end = dot + strlen(dot);

		while (end > dot + 1 && end[-1] == '0')
			end--;
		if (end == dot + 1)
			end = dot;
		*end = '\0';
	}
	snprintf(buf + strlen(buf), len - strlen(buf), " %s", byte_units[u]);
}

struct time_unit {
	uint64_t ns;
	const char *name;
};

static const struct time_unit time_units[] = {
	{ 1000000000, "s" }, { 1000000, "ms" }, { 1000, "\xc2\xb5s" }, { 1, "ns" },
};

/* The largest unit that ns reaches (ns itself below one microsecond). */
static const struct time_unit *unit_for(uint64_t ns)
{
	size_t i = 0;

	while (time_units[i].ns > 1 && ns < time_units[i].ns)
		i++;
	return &time_units[i];
}

void timeline_duration(char *buf, size_t len, uint64_t ns)
{
	const struct time_unit *u = unit_for(ns);

	if (u->ns == 1)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else
		snprintf(buf, len, "%.3f %s", (double)ns / (double)u->ns, u->name);
}

uint64_t timeline_bytes_step(uint64_t top, unsigned int n)
{
	uint64_t step = 1;

	/* The smallest power of two that cuts top into at most n steps. */
	while (step < (UINT64_C(1) << 62) && top / step + (top % step != 0) > n)
		step <<= 1;
	return step;
}

uint64_t timeline_round_up(uint64_t v, uint64_t step)
{
	uint64_t q = v / step + (v % step != 0);

	/* Near 2^64 the next multiple does not exist: the top of the range. */
	return q > UINT64_MAX / step ? UINT64_MAX : q * step;
}

uint64_t timeline_time_step(uint64_t span, unsigned int n)
{
	static const unsigned int mult[] = { 1, 2, 5 };
	uint64_t pow = 1;

	for (;;) {
		for (size_t i = 0; i < 3; i++) {
			uint64_t step = pow * mult[i];

			if (span / step < n || pow > UINT64_MAX / 100)
				return step;
		}
		pow *= 10;
	}
}

void timeline_time_tick(char *buf, size_t len, uint64_t value, uint64_t span, uint64_t step)
{
	const struct time_unit *u = unit_for(span);
	uint64_t whole = u->ns;
	int decimals = 0;

	/* As many decimals as the step has digits below the unit. */
	while (whole > 1 && step % whole) {
		whole /= 10;
		decimals++;
	}
	if (u->ns == 1)
		snprintf(buf, len, "%llu ns", (unsigned long long)value);
	else
		snprintf(buf, len, "%.*f %s", decimals, (double)value / (double)u->ns, u->name);
}

/*
 * Colours that read on white and apart from each other; grey is kept for
 * "other".  A key's colour comes from a hash of its name, so that a tag
 * looks the same in every chart; where two keys of one chart hash alike,
 * the later one takes the next colour still free.
 */
static const uint32_t palette[] = {
	0x3366cc, 0xdc7633, 0x2e9e5b, 0xc0392b, 0x8e6bbf, 0xa0522d, 0xd45fa0, 0x1f8f8a,
	0xb8a02e, 0x2c8fb8, 0x7fae3e, 0xe0a030, 0x6a5acd, 0xcd5c5c, 0x4b6b2f, 0x9a7d0a,
};

#define PALETTE_SIZE (sizeof(palette) / sizeof(palette[0]))

uint32_t timeline_color(const char *name, const uint32_t *taken, uint32_t ntaken)
{
	uint32_t h = 2166136261u;	/* FNV-1a, 32 bits */
	size_t i;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	i = h % PALETTE_SIZE;
	for (size_t tries = 0; tries < PALETTE_SIZE; tries++, i = (i + 1) % PALETTE_SIZE) {
		bool used = false;

		for (uint32_t j = 0; j < ntaken && !used; j++)
			used = taken[j] == palette[i];
		if (!used)
			return palette[i];
	}
	return palette[h % PALETTE_SIZE];
}
