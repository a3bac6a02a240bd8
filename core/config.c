/* SPDX-License-Identifier: MIT */
/*
 * config.c - the xdm.conf parser (the format is documented in xdm.conf(5)).
 *
 * Parsing runs in two steps per logical line.  First the physical lines are
 * joined where one ends in a backslash and comments are cut off; each
 * joined piece remembers its physical line, so that a column in the joined
 * text still maps back to the line and column the user sees in an editor.
 * Then the logical line is read as a section header or "key = value".
 *
 * The parser knows the keys of the file but not the modules: a stack spec
 * is kept as module names and key=value strings with their positions, and
 * the runtime checks them against the loaded modules later.
 *
 * Every error names SOURCE:LINE:COL and the offending token, and frees all
 * that was built, so a caller never sees half a configuration.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/module.h>

#include "core/conf.h"
#include "core/ipc.h"

/* A config is a short text; anything this large is a mistake (a binary). */
#define CONF_MAX_BYTES (1024 * 1024)
/* Longest token quoted in an error message before it is cut with "...". */
#define TOKEN_SHOW 40

static const char embedded_text[] = "platform = cuda, host\n";

/* ---- logical lines ------------------------------------------------------ */

/* Where a stretch of a logical line starts: offset there, physical line. */
struct piece {
	size_t start;
	unsigned int line;
};

/* Physical lines joined at trailing backslashes, with comments removed. */
struct lline {
	char *buf;		/* NUL-terminated; never longer than the text */
	size_t len;
	struct piece *pieces;	/* one per physical line joined in */
	size_t npieces;
};

/* Keys of the file, and where each may appear. */
enum conf_key {
	KEY_MODULE_DIR,
	KEY_MOUNT,
	KEY_PLATFORM,
	KEY_STREAMS,
	KEY_STACK,
	KEY_IPC_ALLOW,
	KEY_COUNT
};

static const struct {
	const char *name;
	bool top;		/* before the first section */
	bool device;		/* inside a [device] section */
} conf_keys[KEY_COUNT] = {
	[KEY_MODULE_DIR] = { "module_dir", true, false },
	[KEY_MOUNT] = { "mount", true, false },
	[KEY_PLATFORM] = { "platform", true, false },
	[KEY_STREAMS] = { "streams", true, true },
	[KEY_STACK] = { "stack", false, true },
	[KEY_IPC_ALLOW] = { "ipc_allow", true, false },
};

struct parser {
	const char *source;
	const char *next;		/* the text not yet read */
	unsigned int lineno;		/* physical lines read so far */
	struct lline ll;
	struct xdm_config *cfg;
	bool in_section;		/* cfg->devices[ndevices - 1] is current */
	unsigned int seen_top[KEY_COUNT];	/* line a key was set on, or 0 */
	unsigned int seen_section[KEY_COUNT];
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_word_char(char c)
{
	return is_alpha(c) || is_digit(c) || c == '_';
}

/* [A-Za-z0-9_]+ */
static bool is_word(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_word_char(s[i]))
			return false;
	return true;
}

/* A module name: a word that starts with a letter. */
static bool is_name(const char *s, size_t n)
{
	return is_word(s, n) && is_alpha(s[0]);
}

/*
 * Scan one physical line of n bytes: how many bytes belong to the logical
 * line (*keep) and whether it continues on the next (*cont).  *quoted
 * carries an open double quote across joined lines, because a '#' inside
 * quotes is text, not a comment, and "\\" or "\"" inside quotes is one
 * escaped character, not a line-ending backslash.  A comment ends the
 * logical line even when it ends in a backslash: comments never continue.
 */
static void scan_physical(const char *s, size_t n, bool *quoted, size_t *keep, bool *cont)
{
	if (n && s[n - 1] == '\r')
		n--;
	*cont = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 == n) {
			*keep = i;
			*cont = true;
			return;
		}
		if (*quoted && s[i] == '\\') {
			i++;
		} else if (s[i] == '"') {
			*quoted = !*quoted;
		} else if (!*quoted && s[i] == '#') {
			*keep = i;
			return;
		}
	}
	*keep = n;
}

/* Read the next logical line into p->ll; false at the end of the text. */
static bool next_line(struct parser *p)
{
	struct lline *ll = &p->ll;
	bool quoted = false, cont = true;

	ll->len = 0;
	ll->npieces = 0;
	if (!*p->next)
		return false;
	while (cont && *p->next) {
		const char *s = p->next, *eol = strchr(s, '\n');
		size_t n = eol ? (size_t)(eol - s) : strlen(s), keep;

		p->next = eol ? eol + 1 : s + n;
		p->lineno++;
		scan_physical(s, n, &quoted, &keep, &cont);
		ll->pieces[ll->npieces].start = ll->len;
		ll->pieces[ll->npieces].line = p->lineno;
		ll->npieces++;
		memcpy(ll->buf + ll->len, s, keep);
		ll->len += keep;
	}
	ll->buf[ll->len] = '\0';
	return true;
}

/* The physical line and column of offset off in the logical line. */
static void position(const struct lline *ll, size_t off, unsigned int *line, unsigned int *col)
{
	size_t k = 0;

	while (k + 1 < ll->npieces && ll->pieces[k + 1].start <= off)
		k++;
	*line = ll->pieces[k].line;
	*col = (unsigned int)(off - ll->pieces[k].start + 1);
}

static unsigned int line_at(const struct lline *ll, size_t off)
{
	unsigned int line, col;

	position(ll, off, &line, &col);
	return line;
}

/* ---- errors ------------------------------------------------------------- */

/* The token as quoted in a message: one line, at most TOKEN_SHOW bytes. */
static void show_token(const char *tok, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n && i < TOKEN_SHOW; i++) {
		unsigned char c = (unsigned char)tok[i];

		out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (i < n) {
		memcpy(out + TOKEN_SHOW - 3, "...", 3);
		i = TOKEN_SHOW;
	}
	out[i] = '\0';
}

static enum xdm_status vfail_at(const char *source, unsigned int line, unsigned int col,
				const char *tok, size_t toklen, const char *fmt, va_list ap)
	__attribute__((format(printf, 6, 0)));
static enum xdm_status vfail_at(const char *source, unsigned int line, unsigned int col,
				const char *tok, size_t toklen, const char *fmt, va_list ap)
{
	char what[256], shown[TOKEN_SHOW + 1];

	vsnprintf(what, sizeof(what), fmt, ap);
	show_token(tok, toklen, shown);
	return xdm_error_set(XDM_E_CONFIG, "%s:%u:%u: %s, at '%s'", source, line, col, what,
			     shown);
}

/* A syntax error at offset off of the current logical line, toklen long. */
static enum xdm_status fail(const struct parser *p, size_t off, size_t toklen, const char *fmt,
			    ...) __attribute__((format(printf, 4, 5)));
static enum xdm_status fail(const struct parser *p, size_t off, size_t toklen, const char *fmt,
			    ...)
{
	unsigned int line, col;
	enum xdm_status st;
	va_list ap;

	position(&p->ll, off, &line, &col);
	va_start(ap, fmt);
	st = vfail_at(p->source, line, col, p->ll.buf + off, toklen, fmt, ap);
	va_end(ap);
	return st;
}

/* An error at a position in raw text, before or outside logical lines. */
static enum xdm_status fail_at(const char *source, unsigned int line, unsigned int col,
			       const char *tok, size_t toklen, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static enum xdm_status fail_at(const char *source, unsigned int line, unsigned int col,
			       const char *tok, size_t toklen, const char *fmt, ...)
{
	enum xdm_status st;
	va_list ap;

	va_start(ap, fmt);
	st = vfail_at(source, line, col, tok, toklen, fmt, ap);
	va_end(ap);
	return st;
}

static enum xdm_status no_memory(const char *source)
{
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "%s: out of memory while parsing the config",
			     source);
}

/* ---- values ------------------------------------------------------------- */

static size_t skip_blanks(const char *b, size_t i, size_t end)
{
	while (i < end && is_blank(b[i]))
		i++;
	return i;
}

/* The end of a run of bytes that are neither blank nor in stop. */
static size_t run_end(const char *b, size_t i, size_t end, const char *stop)
{
	while (i < end && !is_blank(b[i]) && !strchr(stop, b[i]))
		i++;
	return i;
}

/* Room for one more elem-sized item after n; NULL if no memory (array kept). */
static void *grow(void *array, size_t n, size_t elem)
{
	return realloc(array, (n + 1) * elem);
}

/*
 * A double-quoted value starting at b[q] == '"': copy it without quotes,
 * escapes resolved, into *out; *after is the offset past the closing quote.
 */
static enum xdm_status parse_quoted(struct parser *p, size_t q, size_t end, size_t *after,
				    char **out)
{
	const char *b = p->ll.buf;
	size_t i = q + 1, n = 0;
	char *s = malloc(end - q);

	if (!s)
		return no_memory(p->source);
	for (;;) {
		if (i >= end)
			goto unterminated;
		if (b[i] == '"')
			break;
		if (b[i] == '\\') {
			if (i + 1 >= end)
				goto unterminated;
			if (b[i + 1] != '"' && b[i + 1] != '\\') {
				free(s);
				return fail(p, i, 2, "unknown escape in a quoted value (only "
					    "\\\" and \\\\ exist)");
			}
			i++;
		}
		s[n++] = b[i++];
	}
	if (n == 0) {
		free(s);
		return fail(p, q, 2, "empty value");
	}
	s[n] = '\0';
	*after = i + 1;
	*out = s;
	return XDM_OK;

unterminated:
	free(s);
	return fail(p, q, end - q, "unterminated quoted value");
}

/*
 * One value, quoted or a run of non-blank bytes other than those in stop,
 * starting at b[i].  *after is where it ends.  A stray '"' inside an
 * unquoted value is refused: it would have hidden a '#' comment from the
 * line reader, and the user almost certainly meant to quote the value.
 */
static enum xdm_status parse_value(struct parser *p, size_t i, size_t end, const char *stop,
				   size_t *after, char **out)
{
	const char *b = p->ll.buf;
	size_t e;
	const char *quote;

	if (i < end && b[i] == '"')
		return parse_quoted(p, i, end, after, out);
	e = run_end(b, i, end, stop);
	quote = memchr(b + i, '"', e - i);
	if (quote)
		return fail(p, (size_t)(quote - b), e - (size_t)(quote - b),
			    "a '\"' may only open a quoted value; quote the whole value");
	*out = strndup(b + i, e - i);
	if (!*out)
		return no_memory(p->source);
	*after = e;
	return XDM_OK;
}

/* The value of module_dir or mount: one word or one quoted string. */
static enum xdm_status parse_single(struct parser *p, size_t v, size_t end, char **out)
{
	enum xdm_status st;
	size_t after;
	char *s;

	st = parse_value(p, v, end, "", &after, &s);
	if (st)
		return st;
	if (after != end) {
		after = skip_blanks(p->ll.buf, after, end);
		free(s);
		return fail(p, after, end - after,
			    "junk after the value (quote a value that contains blanks)");
	}
	*out = s;
	return XDM_OK;
}

/* streams: an integer in 1..XDM_MAX_STREAMS, digits only. */
static enum xdm_status parse_streams(struct parser *p, size_t v, size_t end, uint32_t *out)
{
	const char *b = p->ll.buf;
	uint32_t n = 0;

	for (size_t i = v; i < end; i++) {
		if (!is_digit(b[i]) || n > XDM_MAX_STREAMS)
			goto bad;
		n = n * 10 + (uint32_t)(b[i] - '0');
	}
	if (n < 1 || n > XDM_MAX_STREAMS)
		goto bad;
	*out = n;
	return XDM_OK;
bad:
	return fail(p, v, end - v, "streams must be an integer in 1..%d", XDM_MAX_STREAMS);
}

/* ---- stack specs -------------------------------------------------------- */

static void free_layer(struct xdm_conf_layer *l)
{
	for (size_t i = 0; i < l->nparams; i++) {
		free(l->params[i].key);
		free(l->params[i].value);
	}
	free(l->params);
	free(l->module);
}

void xdm_conf_stack_free(struct xdm_conf_stack *stack)
{
	if (!stack)
		return;
	for (size_t i = 0; i < stack->nlayers; i++)
		free_layer(&stack->layers[i]);
	free(stack->layers);
	stack->layers = NULL;
	stack->nlayers = 0;
}

/*
 * One key=value after a module name, at b[*i]; *i moves past it.  stop is
 * the character that ends the layer: '|' in a stack, ',' in a platform list.
 */
static enum xdm_status parse_param(struct parser *p, size_t *i, size_t end, const char *stop,
				   struct xdm_conf_layer *l)
{
	const char *b = p->ll.buf;
	char key_stop[4] = { stop[0], '=', '\0' };
	size_t k = *i, ke = run_end(b, k, end, key_stop), after;
	struct xdm_conf_param *prm;
	enum xdm_status st;
	char *value;
	void *bigger;

	if (ke == k)
		return fail(p, k, run_end(b, k, end, stop) - k, "parameter has no name before '='");
	if ((ke == end || b[ke] != '=') && stop[0] == ',')
		return fail(p, k, ke - k, "expected ',' between platform names, or a key=value "
			    "parameter of the platform");
	if (ke == end || b[ke] != '=')
		return fail(p, k, ke - k, "expected a key=value parameter");
	if (!is_word(b + k, ke - k))
		return fail(p, k, ke - k,
			    "invalid parameter name (letters, digits and '_')");
	for (size_t j = 0; j < l->nparams; j++)
		if (strlen(l->params[j].key) == ke - k && !memcmp(l->params[j].key, b + k, ke - k))
			return fail(p, k, ke - k, "parameter given twice in one layer");
	if (ke + 1 == end || is_blank(b[ke + 1]) || b[ke + 1] == stop[0])
		return fail(p, k, ke + 1 - k, "empty value for the parameter");
	st = parse_value(p, ke + 1, end, stop, &after, &value);
	if (st)
		return st;
	if (after < end && !is_blank(b[after]) && b[after] != stop[0]) {
		free(value);
		return fail(p, after, run_end(b, after, end, stop) - after,
			    "junk after the closing quote");
	}
	bigger = grow(l->params, l->nparams, sizeof(*l->params));
	if (!bigger) {
		free(value);
		return no_memory(p->source);
	}
	l->params = bigger;
	prm = &l->params[l->nparams];
	prm->value = value;
	prm->key = strndup(b + k, ke - k);
	if (!prm->key) {
		free(value);
		return no_memory(p->source);
	}
	position(&p->ll, k, &prm->line, &prm->col);
	l->nparams++;
	*i = after;
	return XDM_OK;
}

/* One module name and its parameters, at b[*i] up to stop (a one-character string) or end. */
static enum xdm_status parse_layer(struct parser *p, size_t *i, size_t end, const char *stop,
				   struct xdm_conf_layer *l)
{
	const char *b = p->ll.buf;
	size_t n = *i, ne = run_end(b, n, end, stop);
	enum xdm_status st;

	if (memchr(b + n, '=', ne - n))
		return fail(p, n, ne - n, "a layer starts with a module name, not a parameter");
	if (!is_name(b + n, ne - n))
		return fail(p, n, ne - n, "invalid module name (letters, digits and '_', "
			    "starting with a letter)");
	l->module = strndup(b + n, ne - n);
	if (!l->module)
		return no_memory(p->source);
	position(&p->ll, n, &l->line, &l->col);
	*i = skip_blanks(b, ne, end);
	while (*i < end && b[*i] != stop[0]) {
		st = parse_param(p, i, end, stop, l);
		if (st)
			return st;
		*i = skip_blanks(b, *i, end);
	}
	return XDM_OK;
}

/* Layers separated by '|', top first, in b[i..end). */
static enum xdm_status parse_stack_at(struct parser *p, size_t i, size_t end,
				      struct xdm_conf_stack *out)
{
	const char *b = p->ll.buf;
	struct xdm_conf_stack st = { NULL, 0 };
	struct xdm_conf_layer layer;
	size_t bar = end;
	enum xdm_status rc;
	void *bigger;

	for (;;) {
		i = skip_blanks(b, i, end);
		if (i == end && bar == end) {
			rc = fail(p, i, 0, "a stack needs at least one layer");
			goto fail;
		}
		if (i == end || b[i] == '|') {
			rc = fail(p, i < end ? i : bar, 1, "empty layer in the stack");
			goto fail;
		}
		memset(&layer, 0, sizeof(layer));
		rc = parse_layer(p, &i, end, "|", &layer);
		if (rc)
			goto fail_layer;
		bigger = grow(st.layers, st.nlayers, sizeof(*st.layers));
		if (!bigger) {
			rc = no_memory(p->source);
			goto fail_layer;
		}
		st.layers = bigger;
		st.layers[st.nlayers++] = layer;
		if (i == end)
			break;
		bar = i++;
	}
	*out = st;
	return XDM_OK;

fail_layer:
	free_layer(&layer);
fail:
	xdm_conf_stack_free(&st);
	return rc;
}

/*
 * platform: entries separated by commas, in order of preference; each is a
 * module name and its parameters, as a layer of a stack is
 * ("cuda, host devices=2 memory=8G").
 */
static enum xdm_status parse_platforms(struct parser *p, size_t v, size_t end)
{
	struct xdm_config *cfg = p->cfg;
	const char *b = p->ll.buf;
	size_t i = v, comma = v;

	for (;;) {
		struct xdm_conf_layer entry = { 0 };
		enum xdm_status st;
		void *bigger;
		size_t e;

		i = skip_blanks(b, i, end);
		e = run_end(b, i, end, ",");
		if (e == i)
			return fail(p, i < end ? i : comma, 1, "empty platform name in the list");
		if (!is_name(b + i, e - i))
			return fail(p, i, e - i, "invalid platform name (a module name: letters, "
				    "digits and '_', starting with a letter)");
		for (size_t k = 0; k < cfg->nplatforms; k++)
			if (strlen(cfg->platforms[k]) == e - i &&
			    !memcmp(cfg->platforms[k], b + i, e - i))
				return fail(p, i, e - i, "platform named twice in the list");
		st = parse_layer(p, &i, end, ",", &entry);
		if (st)
			goto fail_entry;
		st = no_memory(p->source);
		bigger = grow(cfg->platforms, cfg->nplatforms, sizeof(*cfg->platforms));
		if (!bigger)
			goto fail_entry;
		cfg->platforms = bigger;
		bigger = grow(cfg->platform_specs, cfg->nplatforms, sizeof(*cfg->platform_specs));
		if (!bigger)
			goto fail_entry;
		cfg->platform_specs = bigger;
		cfg->platforms[cfg->nplatforms] = strdup(entry.module);
		if (!cfg->platforms[cfg->nplatforms])
			goto fail_entry;
		cfg->platform_specs[cfg->nplatforms++] = entry;
		if (i == end)
			return XDM_OK;
		comma = i++;
		continue;
fail_entry:
		free_layer(&entry);
		return st;
	}
}

/* ---- lines -------------------------------------------------------------- */

static struct xdm_conf_device *current_device(struct parser *p)
{
	return p->in_section ? &p->cfg->devices[p->cfg->ndevices - 1] : NULL;
}

/* "[device 3]" or "[device *]" for messages. */
static const char *section_name(const struct xdm_conf_device *d, char *buf, size_t len)
{
	if (d->wildcard)
		snprintf(buf, len, "[device *]");
	else
		snprintf(buf, len, "[device %u]", (unsigned int)d->ordinal);
	return buf;
}

/* The argument of [device ARG]: an ordinal or '*'. */
static enum xdm_status parse_ordinal(struct parser *p, size_t a, size_t ae,
				     struct xdm_conf_device *d)
{
	const char *b = p->ll.buf;
	uint32_t n = 0;

	if (ae - a == 1 && b[a] == '*') {
		d->wildcard = true;
		return XDM_OK;
	}
	for (size_t i = a; i < ae; i++) {
		if (!is_digit(b[i]))
			return fail(p, a, ae - a, "a device ordinal is a number or '*'");
		if (n < XDM_MAX_DEVICES)
			n = n * 10 + (uint32_t)(b[i] - '0');
	}
	if (n >= XDM_MAX_DEVICES)
		return fail(p, a, ae - a, "device ordinal out of range 0..%d",
			    XDM_MAX_DEVICES - 1);
	d->ordinal = n;
	return XDM_OK;
}

/* A section header starting at b[i] == '['. */
static enum xdm_status parse_header(struct parser *p, size_t i)
{
	struct xdm_config *cfg = p->cfg;
	const char *b = p->ll.buf;
	size_t end = p->ll.len, close, w, we, a, ae, tail;
	struct xdm_conf_device d = { 0 };
	const char *rb = strchr(b + i, ']');
	enum xdm_status st;
	void *bigger;

	if (!rb)
		return fail(p, i, end - i, "unterminated section header (no ']')");
	close = (size_t)(rb - b);
	w = skip_blanks(b, i + 1, close);
	we = run_end(b, w, close, "");
	if (we - w != 6 || memcmp(b + w, "device", 6))
		return fail(p, we > w ? w : i, we > w ? we - w : close + 1 - i,
			    "unknown section (sections are [device N] and [device *])");
	a = skip_blanks(b, we, close);
	ae = run_end(b, a, close, "");
	if (a == ae)
		return fail(p, i, close + 1 - i, "section [device] needs an ordinal or '*'");
	st = parse_ordinal(p, a, ae, &d);
	if (st)
		return st;
	tail = skip_blanks(b, ae, close);
	if (tail != close)
		return fail(p, tail, close - tail, "junk in the section header");
	tail = skip_blanks(b, close + 1, end);
	if (tail != end)
		return fail(p, tail, end - tail, "junk after the section header");
	for (size_t k = 0; k < cfg->ndevices; k++) {
		const struct xdm_conf_device *o = &cfg->devices[k];

		if (o->wildcard == d.wildcard && (d.wildcard || o->ordinal == d.ordinal))
			return fail(p, i, close + 1 - i, "duplicate section (first on line %u)",
				    o->line);
	}
	bigger = grow(cfg->devices, cfg->ndevices, sizeof(*cfg->devices));
	if (!bigger)
		return no_memory(p->source);
	cfg->devices = bigger;
	d.line = line_at(&p->ll, i);
	cfg->devices[cfg->ndevices++] = d;
	p->in_section = true;
	memset(p->seen_section, 0, sizeof(p->seen_section));
	return XDM_OK;
}

/* Is key k allowed here?  If not, say why. */
static enum xdm_status check_scope(struct parser *p, enum conf_key k, size_t at, size_t n)
{
	const struct xdm_conf_device *d = current_device(p);
	char sec[32];

	if (!d && !conf_keys[k].top)
		return fail(p, at, n, "'%s' belongs in a [device N] or [device *] section",
			    conf_keys[k].name);
	if (d && !conf_keys[k].device)
		return fail(p, at, n, "global key '%s' inside section %s; move it above the "
			    "first section", conf_keys[k].name, section_name(d, sec, sizeof(sec)));
	return XDM_OK;
}

/*
 * ipc_allow's list, kept as written and checked now (names resolved), so
 * that a user or group that does not exist is an error at its column.
 */
static enum xdm_status parse_ipc_allow(struct parser *p, size_t v, size_t end, char **out)
{
	struct xdm_ipc_allow allow;
	size_t at, len;
	char why[192];
	char *text;

	text = strndup(p->ll.buf + v, end - v);
	if (!text)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "%s: no memory", p->source);
	if (!xdm_ipc_allow_parse(text, &allow, &at, &len, why, sizeof(why))) {
		free(text);
		return fail(p, v + at, len, "%s", why);
	}
	*out = text;
	return XDM_OK;
}

static enum xdm_status set_value(struct parser *p, enum conf_key k, size_t v, size_t end)
{
	struct xdm_conf_device *d = current_device(p);
	struct xdm_config *cfg = p->cfg;
	enum xdm_status st;

	switch (k) {
	case KEY_MODULE_DIR:
		return parse_single(p, v, end, &cfg->module_dir);
	case KEY_MOUNT:
		return parse_single(p, v, end, &cfg->mount);
	case KEY_PLATFORM:
		position(&p->ll, v, &cfg->platform_line, &cfg->platform_col);
		return parse_platforms(p, v, end);
	case KEY_STREAMS:
		return parse_streams(p, v, end, d ? &d->streams : &cfg->streams);
	case KEY_STACK:
		st = parse_stack_at(p, v, end, &d->stack);
		d->has_stack = st == XDM_OK;
		return st;
	case KEY_IPC_ALLOW:
		return parse_ipc_allow(p, v, end, &cfg->ipc_allow);
	case KEY_COUNT:
		break;
	}
	return XDM_OK;
}

/* "key = value" starting at b[i]. */
static enum xdm_status parse_assignment(struct parser *p, size_t i)
{
	const char *b = p->ll.buf;
	size_t end = p->ll.len, k = i, ke = run_end(b, i, end, "="), v;
	unsigned int *seen;
	enum xdm_status st;
	enum conf_key key;

	if (ke == k)
		return fail(p, k, end - k, "missing key before '='");
	if (!is_word(b + k, ke - k))
		return fail(p, k, ke - k, "invalid key (letters, digits and '_')");
	i = skip_blanks(b, ke, end);
	if (i == end)
		return fail(p, k, ke - k, "expected '=' after the key");
	if (b[i] != '=')
		return fail(p, i, run_end(b, i, end, "") - i, "expected '=' after the key");
	for (key = 0; key < KEY_COUNT; key++)
		if (strlen(conf_keys[key].name) == ke - k &&
		    !memcmp(conf_keys[key].name, b + k, ke - k))
			break;
	if (key == KEY_COUNT)
		return fail(p, k, ke - k, p->in_section ?
			    "unknown key (a device section takes stack and streams)" :
			    "unknown key (the global keys are module_dir, mount, platform, "
			    "streams and ipc_allow)");
	st = check_scope(p, key, k, ke - k);
	if (st)
		return st;
	seen = p->in_section ? p->seen_section : p->seen_top;
	if (seen[key])
		return fail(p, k, ke - k, "duplicate key (first set on line %u)", seen[key]);
	seen[key] = line_at(&p->ll, k);
	v = skip_blanks(b, i + 1, end);
	while (end > v && is_blank(b[end - 1]))
		end--;
	if (v == end)
		return fail(p, k, ke - k, "empty value");
	return set_value(p, key, v, end);
}

static enum xdm_status parse_line(struct parser *p)
{
	size_t i = skip_blanks(p->ll.buf, 0, p->ll.len);

	if (i == p->ll.len)
		return XDM_OK;
	if (p->ll.buf[i] == '[')
		return parse_header(p, i);
	return parse_assignment(p, i);
}

/* ---- parser set-up ------------------------------------------------------ */

/* Buffers for the logical lines of text: none is longer than the text. */
static enum xdm_status parser_init(struct parser *p, const char *source, const char *text)
{
	size_t lines = 1;

	memset(p, 0, sizeof(*p));
	p->source = source;
	p->next = text;
	for (const char *s = strchr(text, '\n'); s; s = strchr(s + 1, '\n'))
		lines++;
	p->ll.buf = malloc(strlen(text) + 1);
	p->ll.pieces = calloc(lines, sizeof(*p->ll.pieces));
	if (!p->ll.buf || !p->ll.pieces) {
		free(p->ll.buf);
		free(p->ll.pieces);
		return no_memory(source);
	}
	return XDM_OK;
}

static void parser_fini(struct parser *p)
{
	free(p->ll.buf);
	free(p->ll.pieces);
}

/* What a file leaves unset. */
static enum xdm_status apply_defaults(struct xdm_config *cfg)
{
	static const char *const platforms[] = { "cuda", "host" };

	if (cfg->streams == 0)
		cfg->streams = XDM_DEFAULT_STREAMS;
	if (cfg->nplatforms)
		return XDM_OK;
	cfg->platforms = calloc(2, sizeof(*cfg->platforms));
	cfg->platform_specs = calloc(2, sizeof(*cfg->platform_specs));
	if (!cfg->platforms || !cfg->platform_specs)
		return no_memory(cfg->source);
	for (size_t i = 0; i < 2; i++) {
		cfg->platforms[i] = strdup(platforms[i]);
		cfg->platform_specs[i].module = strdup(platforms[i]);
		cfg->nplatforms++;
		if (!cfg->platforms[i] || !cfg->platform_specs[i].module)
			return no_memory(cfg->source);
	}
	return XDM_OK;
}

/* ---- the interface of config.h ------------------------------------------ */

static void free_platforms(struct xdm_config *cfg)
{
	for (size_t i = 0; i < cfg->nplatforms; i++) {
		free(cfg->platforms[i]);
		free_layer(&cfg->platform_specs[i]);
	}
	free(cfg->platforms);
	free(cfg->platform_specs);
	cfg->platforms = NULL;
	cfg->platform_specs = NULL;
	cfg->nplatforms = 0;
}

void xdm_config_free(struct xdm_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->ndevices; i++)
		xdm_conf_stack_free(&cfg->devices[i].stack);
	free(cfg->devices);
	free_platforms(cfg);
	free(cfg->mount);
	free(cfg->ipc_allow);
	free(cfg->module_dir);
	free(cfg->text);
	free(cfg->source);
	free(cfg);
}

enum xdm_status xdm_config_parse(const char *source, const char *text, struct xdm_config **out)
{
	struct xdm_config *cfg;
	struct parser p;
	enum xdm_status st;

	if (!source || !text || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_config_parse: NULL argument");
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return no_memory(source);
	cfg->source = strdup(source);
	cfg->text = strdup(text);
	if (!cfg->source || !cfg->text) {
		st = no_memory(source);
		goto fail_cfg;
	}
	st = parser_init(&p, source, text);
	if (st)
		goto fail_cfg;
	p.cfg = cfg;
	while (next_line(&p)) {
		st = parse_line(&p);
		if (st)
			goto fail_parser;
	}
	st = apply_defaults(cfg);
	if (st)
		goto fail_parser;
	parser_fini(&p);
	*out = cfg;
	return XDM_OK;

fail_parser:
	parser_fini(&p);
fail_cfg:
	xdm_config_free(cfg);
	return st;
}

/* A stack spec is one (logical) line: anything but blanks after it is refused. */
static enum xdm_status only_blank_after(const struct parser *p)
{
	unsigned int line = p->lineno + 1, col = 1;
	const char *s;

	for (s = p->next; *s && (is_blank(*s) || *s == '\n' || *s == '\r'); s++) {
		col++;
		if (*s == '\n') {
			line++;
			col = 1;
		}
	}
	if (!*s)
		return XDM_OK;
	return fail_at(p->source, line, col, s, strcspn(s, "\r\n"),
		       "a stack spec is one line");
}

/*
 * A text that must be one logical line (a stack spec, a platform list):
 * read it, refuse more lines but blank ones, and give its end without
 * trailing blanks.  empty is the message for a text with no line at all.
 */
static enum xdm_status one_line(struct parser *p, const char *text, const char *empty,
				size_t *end)
{
	enum xdm_status st;

	if (!next_line(p))
		return fail_at(p->source, 1, 1, text, 0, "%s", empty);
	/* Blank lines after it are what shells and sysfs-style writes add. */
	st = only_blank_after(p);
	if (st)
		return st;
	*end = p->ll.len;
	while (*end && is_blank(p->ll.buf[*end - 1]))
		(*end)--;
	return XDM_OK;
}

enum xdm_status xdm_config_parse_stack(const char *source, const char *spec,
				       struct xdm_conf_stack *out)
{
	struct parser p;
	enum xdm_status st;
	size_t end;

	if (!source || !spec || !out)
		return xdm_error_set(XDM_E_INVALID, "xdm_config_parse_stack: NULL argument");
	st = parser_init(&p, source, spec);
	if (st)
		return st;
	st = one_line(&p, spec, "a stack needs at least one layer", &end);
	if (st == XDM_OK)
		st = parse_stack_at(&p, 0, end, out);
	parser_fini(&p);
	return st;
}

enum xdm_status xdm_config_set_platforms(struct xdm_config *cfg, const char *source,
					 const char *list)
{
	struct xdm_config parsed = { .source = (char *)source };
	struct parser p;
	enum xdm_status st;
	size_t end;

	if (!cfg || !source || !list)
		return xdm_error_set(XDM_E_INVALID, "xdm_config_set_platforms: NULL argument");
	st = parser_init(&p, source, list);
	if (st)
		return st;
	p.cfg = &parsed;
	st = one_line(&p, list, "empty platform name in the list", &end);
	if (st)
		goto out;
	st = parse_platforms(&p, 0, end);
	if (st) {
		free_platforms(&parsed);
		goto out;
	}
	free_platforms(cfg);
	cfg->platforms = parsed.platforms;
	cfg->platform_specs = parsed.platform_specs;
	cfg->nplatforms = parsed.nplatforms;
	cfg->platform_line = 1;
	cfg->platform_col = 1;
out:
	parser_fini(&p);
	return st;
}

const struct xdm_conf_device *xdm_config_device(const struct xdm_config *cfg, uint32_t ordinal)
{
	const struct xdm_conf_device *any = NULL;

	if (!cfg)
		return NULL;
	for (size_t i = 0; i < cfg->ndevices; i++) {
		const struct xdm_conf_device *d = &cfg->devices[i];

		if (!d->wildcard && d->ordinal == ordinal)
			return d;
		if (d->wildcard)
			any = d;
	}
	return any;
}

const char *xdm_config_embedded(void)
{
	return embedded_text;
}

/* ---- loading ------------------------------------------------------------ */

static enum xdm_status cannot_read(const char *path, const char *why)
{
	return xdm_error_set(XDM_E_CONFIG, "cannot read config '%s': %s", path, why);
}

/* The whole file as a string; a NUL byte or more than CONF_MAX_BYTES is refused. */
static enum xdm_status read_text(const char *path, char **out)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *nul;
	enum xdm_status st;
	int fd = -1;

	if (!buf)
		return no_memory(path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto fail_errno;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *bigger;

			if (cap > CONF_MAX_BYTES) {
				st = cannot_read(path, "larger than the 1 MiB limit");
				goto fail;
			}
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				st = no_memory(path);
				goto fail;
			}
			buf = bigger;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail_errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CONF_MAX_BYTES) {
		st = cannot_read(path, "larger than the 1 MiB limit");
		goto fail;
	}
	nul = memchr(buf, '\0', len);
	if (nul) {
		st = cannot_read(path, "it holds a NUL byte; a config is text");
		goto fail;
	}
	close(fd);
	if (len == cap) {
		char *bigger = realloc(buf, len + 1);

		if (!bigger) {
			free(buf);
			return no_memory(path);
		}
		buf = bigger;
	}
	buf[len] = '\0';
	*out = buf;
	return XDM_OK;

fail_errno:
	st = cannot_read(path, strerror(errno));
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return st;
}

static enum xdm_status load_file(const char *path, struct xdm_config **out)
{
	enum xdm_status st;
	char *text = NULL;

	st = read_text(path, &text);
	if (st)
		return st;
	st = xdm_config_parse(path, text, out);
	free(text);
	return st;
}

enum xdm_status xdm_config_load(struct xdm_config **out)
{
	const char *path = getenv("XDM_CONFIG");

	if (!out)
		return xdm_error_set(XDM_E_INVALID, "xdm_config_load: NULL argument");
	/* An empty XDM_CONFIG counts as unset, as an empty PATH entry would. */
	if (path && *path)
		return load_file(path, out);
	if (access(XDM_SYSCONF_FILE, F_OK) == 0)
		return load_file(XDM_SYSCONF_FILE, out);
	return xdm_config_parse("<embedded>", embedded_text, out);
}
