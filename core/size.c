/* SPDX-License-Identifier: MIT */
/*
 * size.c - xdm_parse_size(): "4096", "64K", "1.5GiB", "80%", "max".
 *
 * Sizes arrive from config files, stack specs and sysfs-style writes
 * ("echo 8G > budget/limit" sends "8G\n"), so blanks around the value and
 * one trailing newline are accepted; anything else that is not part of the
 * grammar in xdm.conf(5) is refused, never guessed at.  The arithmetic is
 * exact: a fraction is multiplied out digit by digit in 64-bit integers, so
 * "0.1G" is 107374182 bytes on every machine and no double rounding creeps in.
 */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <xdm/module.h>

/* The text as it may appear in a message: bounded and one line. */
#define SHOW_MAX 48

struct size_text {
	char s[SHOW_MAX + 4];
};

static struct size_text show(const char *text)
{
	struct size_text t;
	size_t n = strlen(text), i;

	/* The newline that "echo" adds is not part of what the user typed. */
	if (n && text[n - 1] == '\n')
		n--;
	for (i = 0; i < n && i < SHOW_MAX; i++) {
		unsigned char c = (unsigned char)text[i];

		t.s[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (i < n) {
		memcpy(t.s + i, "...", 3);
		i += 3;
	}
	t.s[i] = '\0';
	return t;
}

static enum xdm_status bad(const char *text, const char *why)
{
	return xdm_error_set(XDM_E_INVALID, "invalid size '%s': %s", show(text).s, why);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/*
 * floor(0.d1d2...dn * m) for the n digits at d, exactly and without
 * overflow for any m.  Going from the last digit to the first, q is the
 * integer part of 0.di...dn * m; the fractional part never matters because
 * floor((A + r) / 10) == floor(A / 10) for an integer A and 0 <= r < 1.
 * Splitting m and q by ten keeps every intermediate below m.  q is passed
 * in so that a digit string held in two pieces can be walked as one: call
 * with the right-hand piece first.
 */
static uint64_t frac_mul(uint64_t q, const char *d, size_t n, uint64_t m)
{
	uint64_t mh = m / 10, ml = m % 10;

	while (n--) {
		uint64_t dig = (uint64_t)(d[n] - '0');

		q = dig * mh + q / 10 + (dig * ml + q % 10) / 10;
	}
	return q;
}

/* Binary unit letter to its multiplier; 0 if c is not one. */
static uint64_t unit_of(char c)
{
	switch (lower(c)) {
	case 'k':
		return UINT64_C(1) << 10;
	case 'm':
		return UINT64_C(1) << 20;
	case 'g':
		return UINT64_C(1) << 30;
	case 't':
		return UINT64_C(1) << 40;
	}
	return 0;
}

/* The number part, split into its integer digits and fraction digits. */
struct number {
	const char *ip, *fp;
	size_t nip, nfp;
};

/* Scan digits[.digits] at s; returns the end, or NULL if malformed. */
static const char *scan_number(const char *s, struct number *num)
{
	num->ip = s;
	while (is_digit(*s))
		s++;
	num->nip = (size_t)(s - num->ip);
	num->fp = s;
	num->nfp = 0;
	if (num->nip == 0)
		return NULL;
	if (*s != '.')
		return s;
	num->fp = ++s;
	while (is_digit(*s))
		s++;
	num->nfp = (size_t)(s - num->fp);
	return num->nfp ? s : NULL;
}

/* The integer digits as a number; false on overflow. */
static bool int_part(const struct number *num, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < num->nip; i++) {
		uint64_t dig = (uint64_t)(num->ip[i] - '0');

		if (v > (UINT64_MAX - dig) / 10)
			return false;
		v = v * 10 + dig;
	}
	*out = v;
	return true;
}

static bool all_zero(const char *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (d[i] != '0')
			return false;
	return true;
}

/*
 * p% of base, 0 < p <= 100.  p/100 is the decimal fraction whose digits are
 * the two low integer digits of p followed by p's fraction digits, so the
 * exact frac_mul() serves here too.
 */
static enum xdm_status percent_of(const char *text, const struct number *num, uint64_t base,
				  uint64_t *out)
{
	char hundredths[2];
	uint64_t p;

	if (!int_part(num, &p) || p > 100 || (p == 100 && !all_zero(num->fp, num->nfp)))
		return bad(text, "a percentage is at most 100");
	if (p == 0 && all_zero(num->fp, num->nfp))
		return bad(text, "a percentage must be more than 0");
	if (base == 0)
		return bad(text, "a percentage needs a total to take it of, and there is none");
	if (p == 100) {
		*out = base;
		return XDM_OK;
	}
	hundredths[0] = (char)('0' + p / 10);
	hundredths[1] = (char)('0' + p % 10);
	*out = frac_mul(frac_mul(0, num->fp, num->nfp, base), hundredths, 2, base);
	return XDM_OK;
}

/* n units of m plus a fraction of a unit, rounded down; false on overflow. */
static bool scale(const struct number *num, uint64_t m, uint64_t *out)
{
	uint64_t whole, part;

	if (!int_part(num, &whole) || (whole && whole > UINT64_MAX / m))
		return false;
	whole *= m;
	part = frac_mul(0, num->fp, num->nfp, m);
	if (part > UINT64_MAX - whole)
		return false;
	*out = whole + part;
	return true;
}

/*
 * The unit after the number: "", "B", K/M/G/T with an optional "B" or
 * "iB", or "%".  Returns the end of the unit; *mult is 0 for "%".
 */
static const char *scan_unit(const char *s, uint64_t *mult)
{
	uint64_t m = unit_of(*s);

	if (*s == '%') {
		*mult = 0;
		return s + 1;
	}
	if (!m) {
		*mult = 1;
		return lower(*s) == 'b' ? s + 1 : s;
	}
	*mult = m;
	s++;
	if (lower(s[0]) == 'i' && lower(s[1]) == 'b')
		return s + 2;
	return lower(*s) == 'b' ? s + 1 : s;
}

/* Blanks, then at most one newline, then the end. */
static bool only_tail(const char *s)
{
	while (is_blank(*s))
		s++;
	if (*s == '\n')
		s++;
	return *s == '\0';
}

static bool is_max(const char *s)
{
	return lower(s[0]) == 'm' && lower(s[1]) == 'a' && lower(s[2]) == 'x' && only_tail(s + 3);
}

enum xdm_status xdm_parse_size(const char *text, uint64_t percent_base, uint64_t *out)
{
	struct number num;
	const char *s, *end;
	uint64_t mult, v;

	if (!text || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_parse_size: NULL text or result");
	for (s = text; is_blank(*s); s++)
		;
	if (only_tail(s))
		return bad(text, "it is empty");
	if (is_max(s)) {
		*out = UINT64_MAX;
		return XDM_OK;
	}
	if (*s == '-')
		return bad(text, "a size cannot be negative");
	end = scan_number(s, &num);
	if (!end)
		return bad(text, "expected digits, an optional fraction, then K, M, G, T or %");
	end = scan_unit(end, &mult);
	if (!only_tail(end))
		return bad(text, "unexpected text after the number and its unit");
	if (mult == 0)
		return percent_of(text, &num, percent_base, out);
	if (mult == 1 && num.nfp)
		return bad(text, "a fraction needs a unit (K, M, G, T or %)");
	if (!scale(&num, mult, &v))
		return bad(text, "it is larger than 2^64 - 1 bytes");
	*out = v;
	return XDM_OK;
}
