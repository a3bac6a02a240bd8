/* SPDX-License-Identifier: MIT */
/*
 * conf_text.h - for the config and stack-spec targets: a parsed stack
 * written back as text, two parsed stacks compared, and the position an
 * error message names checked against the text it was about.
 *
 * Writing a parse back and parsing that again is the targets' oracle: a
 * parser that accepts a text must have understood it well enough that the
 * same thing, written plainly (every value quoted), reads back the same.
 */
#ifndef XDM_TESTS_FUZZ_CONF_TEXT_H
#define XDM_TESTS_FUZZ_CONF_TEXT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/conf.h"
#include "tests/fuzz/fuzz.h"

/* A growing string; a fuzz target has no use for recovering from ENOMEM. */
struct text {
	char *p;
	size_t len, cap;
};

static void text_putc(struct text *t, char c)
{
	if (t->len + 2 > t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->p = realloc(t->p, t->cap);
		FUZZ_ASSERT(t->p, "out of memory");
	}
	t->p[t->len++] = c;
	t->p[t->len] = '\0';
}

static void text_puts(struct text *t, const char *s)
{
	while (*s)
		text_putc(t, *s++);
}

/* "value", with '"' and '\' escaped as xdm.conf(5) says. */
static void text_quoted(struct text *t, const char *s)
{
	text_putc(t, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			text_putc(t, '\\');
		text_putc(t, *s);
	}
	text_putc(t, '"');
}

/* "module k="v" k2="v2" | module2 ...", top first. */
static void text_stack(struct text *t, const struct xdm_conf_stack *st)
{
	for (size_t i = 0; i < st->nlayers; i++) {
		const struct xdm_conf_layer *l = &st->layers[i];

		if (i)
			text_puts(t, " | ");
		text_puts(t, l->module);
		for (size_t k = 0; k < l->nparams; k++) {
			text_putc(t, ' ');
			text_puts(t, l->params[k].key);
			text_putc(t, '=');
			text_quoted(t, l->params[k].value);
		}
	}
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Same layers, modules, keys and values, in the same order. */
static bool stack_eq(const struct xdm_conf_stack *a, const struct xdm_conf_stack *b)
{
	if (a->nlayers != b->nlayers)
		return false;
	for (size_t i = 0; i < a->nlayers; i++) {
		const struct xdm_conf_layer *x = &a->layers[i], *y = &b->layers[i];

		if (!str_eq(x->module, y->module) || x->nparams != y->nparams)
			return false;
		for (size_t k = 0; k < x->nparams; k++)
			if (!str_eq(x->params[k].key, y->params[k].key) ||
			    !str_eq(x->params[k].value, y->params[k].value))
				return false;
	}
	return true;
}

/* What the parser promises of any stack it returns. */
static void check_stack_shape(const struct xdm_conf_stack *st)
{
	FUZZ_ASSERT(st->nlayers >= 1 && st->layers, "a stack of %zu layers", st->nlayers);
	for (size_t i = 0; i < st->nlayers; i++) {
		const struct xdm_conf_layer *l = &st->layers[i];

		FUZZ_ASSERT(l->module && *l->module && l->line >= 1 && l->col >= 1,
			    "layer %zu", i);
		for (size_t k = 0; k < l->nparams; k++)
			FUZZ_ASSERT(l->params[k].key && *l->params[k].key && l->params[k].value &&
				    *l->params[k].value, "parameter %zu of layer %zu", k, i);
	}
}

/* Physical lines of text: one more than its newlines. */
static unsigned int text_lines(const char *text)
{
	unsigned int n = 1;

	for (const char *s = strchr(text, '\n'); s; s = strchr(s + 1, '\n'))
		n++;
	return n;
}

/*
 * A refusal is XDM_E_CONFIG with "SOURCE:LINE:COL: ..." naming a line of the
 * text and a column from 1.
 */
static void check_refusal(enum xdm_status st, const char *source, const char *text)
{
	const struct xdm_error *e = xdm_last_error();
	size_t n = strlen(source);
	unsigned int line = 0, col = 0;

	FUZZ_ASSERT(st == XDM_E_CONFIG && e->code == XDM_E_CONFIG, "status %d, last error %d",
		    st, e->code);
	FUZZ_ASSERT(strncmp(e->message, source, n) == 0 && e->message[n] == ':' &&
		    sscanf(e->message + n, ":%u:%u: ", &line, &col) == 2,
		    "message without a position: %s", e->message);
	FUZZ_ASSERT(line >= 1 && line <= text_lines(text) && col >= 1,
		    "position %u:%u outside the text: %s", line, col, e->message);
}

#endif /* XDM_TESTS_FUZZ_CONF_TEXT_H */
