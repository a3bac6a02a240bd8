/* SPDX-License-Identifier: MIT */
/*
 * fuzz_size.c - xdm_parse_size() against a second reading of its grammar.
 *
 * Sizes come from config files, stack specs and writes to the tree, so the
 * parser meets whatever a user types.  Each input is parsed with a few
 * percent bases and compared with a reference written here from xdm.conf(5)
 * alone: both must accept the same texts, and an accepted value must be the
 * exact floor of number times unit.  The reference does its arithmetic in
 * 128 bits on the first REF_DIGITS fraction digits; past those it only
 * brackets the value, which is enough to catch a wrong digit or rounding.
 * A refused text must leave the result untouched and say INVALID.
 */
#include "config.h"

#include <stdbool.h>
#include <xdm/xdm.h>

#include "tests/fuzz/fuzz.h"

/*
 * Fraction digits the reference multiplies out exactly: 10^16 * 101 * 2^64
 * < 2^128 for a percentage, and a unit's whole part is bounded first.
 */
#define REF_DIGITS 16

typedef unsigned __int128 u128;

struct ref {
	bool ok;
	bool exact;		/* lo == hi is the value; else it lies in [lo, hi] */
	bool either;		/* at the overflow edge: accepting or refusing is right */
	uint64_t lo, hi;
};

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

static char low(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Blanks, at most one newline, the end. */
static bool tail(const char *s)
{
	while (blank(*s))
		s++;
	if (*s == '\n')
		s++;
	return !*s;
}

static u128 pow10_128(unsigned int n)
{
	u128 p = 1;

	while (n--)
		p *= 10;
	return p;
}

/* floor(num * m / den) for num in [lo, hi] of the number, into r. */
static void bracket(struct ref *r, u128 num_lo, u128 num_hi, u128 m, u128 den)
{
	u128 lo = num_lo * m / den, hi = num_hi * m / den;

	r->exact = num_lo == num_hi;
	if (lo > UINT64_MAX) {
		r->ok = false;
		return;
	}
	r->ok = true;
	r->lo = (uint64_t)lo;
	if (hi > UINT64_MAX) {
		r->either = true;
		hi = UINT64_MAX;
	}
	r->hi = (uint64_t)hi;
}

static struct ref reference(const char *s, uint64_t base)
{
	struct ref r = { .ok = false };
	const char *ip, *fp = NULL;
	size_t nip, nfp = 0, kept;
	u128 whole = 0, frac = 0, den;
	bool more = false, percent = false;
	uint64_t m = 1;

	while (blank(*s))
		s++;
	if (tail(s))
		return r;
	if (low(s[0]) == 'm' && low(s[1]) == 'a' && low(s[2]) == 'x' && tail(s + 3)) {
		r.ok = r.exact = true;
		r.lo = r.hi = UINT64_MAX;
		return r;
	}
	for (ip = s; digit(*s); s++)
		;
	nip = (size_t)(s - ip);
	if (!nip)
		return r;
	if (*s == '.') {
		for (fp = ++s; digit(*s); s++)
			;
		nfp = (size_t)(s - fp);
		if (!nfp)
			return r;
	}
	switch (low(*s)) {
	case '%':
		percent = true;
		s++;
		break;
	case 'k':
		m = UINT64_C(1) << 10;
		break;
	case 'm':
		m = UINT64_C(1) << 20;
		break;
	case 'g':
		m = UINT64_C(1) << 30;
		break;
	case 't':
		m = UINT64_C(1) << 40;
		break;
	}
	if (m > 1) {
		s++;
		if (low(s[0]) == 'i' && low(s[1]) == 'b')
			s += 2;
		else if (low(*s) == 'b')
			s++;
	} else if (!percent && low(*s) == 'b') {
		s++;
	}
	if (!tail(s))
		return r;
	if (!percent && m == 1 && nfp)
		return r;
	/* An integer part past 2^64 is refused whatever follows it. */
	for (size_t i = 0; i < nip; i++) {
		whole = whole * 10 + (u128)(ip[i] - '0');
		if (whole > UINT64_MAX)
			return r;
	}
	/*
	 * A whole part that a unit alone takes past 2^64 is refused: that also
	 * keeps (whole * den + frac) * m below 2^128 (at most 2^64 * 10^16 *
	 * 2^40 would not be).
	 */
	if (!percent && whole * m > UINT64_MAX)
		return r;
	kept = nfp < REF_DIGITS ? nfp : REF_DIGITS;
	for (size_t i = 0; i < kept; i++)
		frac = frac * 10 + (u128)(fp[i] - '0');
	for (size_t i = kept; i < nfp; i++)
		more |= fp[i] != '0';
	den = pow10_128(REF_DIGITS);
	frac *= pow10_128((unsigned int)(REF_DIGITS - kept));
	if (percent) {
		/* 0 < p <= 100, and a base to take it of. */
		if (whole > 100 || (whole == 100 && (frac || more)) ||
		    (whole == 0 && !frac && !more) || base == 0)
			return r;
		bracket(&r, whole * den + frac, whole * den + frac + more, base, 100 * den);
		return r;
	}
	bracket(&r, whole * den + frac, whole * den + frac + more, m, den);
	return r;
}

static void check_one(const char *text, uint64_t base)
{
	const uint64_t untouched = UINT64_C(0x5ca1ab1e5ca1ab1e);
	struct ref want = reference(text, base);
	uint64_t got = untouched;
	enum xdm_status st = xdm_parse_size(text, base, &got);

	if (st != XDM_OK) {
		FUZZ_ASSERT(st == XDM_E_INVALID, "status %d for '%s'", st, text);
		FUZZ_ASSERT(xdm_last_error()->code == XDM_E_INVALID, "last error %d",
			    xdm_last_error()->code);
		FUZZ_ASSERT(got == untouched, "refused '%s' but wrote %llu", text,
			    (unsigned long long)got);
		FUZZ_ASSERT(!want.ok || want.either, "refused '%s' (base %llu): %s", text,
			    (unsigned long long)base, xdm_last_error()->message);
		return;
	}
	FUZZ_ASSERT(want.ok, "accepted '%s' (base %llu) as %llu", text,
		    (unsigned long long)base, (unsigned long long)got);
	FUZZ_ASSERT(got >= want.lo && got <= want.hi,
		    "'%s' (base %llu) is %llu, the reference says %llu..%llu", text,
		    (unsigned long long)base, (unsigned long long)got,
		    (unsigned long long)want.lo, (unsigned long long)want.hi);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* No base (a % is refused), the smallest, a GPU's, the largest. */
	static const uint64_t bases[] = { 0, 1, UINT64_C(80) << 30, UINT64_MAX };
	char *text = fuzz_string(data, size);

	if (!text)
		return 0;
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++)
		check_one(text, bases[i]);
	free(text);
	return 0;
}
