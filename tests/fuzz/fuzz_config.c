/* SPDX-License-Identifier: MIT */
/*
 * fuzz_config.c - the xdm.conf parser, xdm_config_parse(), on any text.
 *
 * A refused config must leave nothing behind: the result pointer untouched,
 * no memory held (LeakSanitizer checks every input), no runtime in the
 * tree, and an XDM_E_CONFIG naming a line and column of the text.  An
 * accepted one must hold only what the format allows and read back the same
 * when written out plainly (every value quoted, every default spelled out).
 */
#include "config.h"

#include <errno.h>

#include "tests/fuzz/conf_text.h"

static const char source[] = "fuzz.conf";

static void check_shape(const struct xdm_config *cfg, const char *text)
{
	FUZZ_ASSERT(strcmp(cfg->source, source) == 0 && strcmp(cfg->text, text) == 0,
		    "source or text not kept");
	FUZZ_ASSERT(cfg->streams >= 1 && cfg->streams <= XDM_MAX_STREAMS, "streams %u",
		    cfg->streams);
	FUZZ_ASSERT(cfg->nplatforms >= 1, "no platform");
	for (size_t i = 0; i < cfg->nplatforms; i++) {
		FUZZ_ASSERT(cfg->platforms[i] && *cfg->platforms[i], "platform %zu", i);
		FUZZ_ASSERT(cfg->platform_specs[i].module &&
			    !strcmp(cfg->platform_specs[i].module, cfg->platforms[i]),
			    "platform %zu's entry", i);
		for (size_t k = 0; k < i; k++)
			FUZZ_ASSERT(strcmp(cfg->platforms[i], cfg->platforms[k]),
				    "platform '%s' twice", cfg->platforms[i]);
	}
	for (size_t i = 0; i < cfg->ndevices; i++) {
		const struct xdm_conf_device *d = &cfg->devices[i];

		FUZZ_ASSERT(d->wildcard || d->ordinal < XDM_MAX_DEVICES, "ordinal %u",
			    d->ordinal);
		FUZZ_ASSERT(d->streams <= XDM_MAX_STREAMS, "device streams %u", d->streams);
		if (d->has_stack)
			check_stack_shape(&d->stack);
		else
			FUZZ_ASSERT(!d->stack.nlayers && !d->stack.layers, "a stack not had");
		for (size_t k = 0; k < i; k++)
			FUZZ_ASSERT(d->wildcard != cfg->devices[k].wildcard ||
				    (!d->wildcard && d->ordinal != cfg->devices[k].ordinal),
				    "section %zu twice", i);
		/* The lookup the runtime does finds a section for its ordinal. */
		FUZZ_ASSERT(xdm_config_device(cfg, d->wildcard ? XDM_MAX_DEVICES : d->ordinal),
			    "section %zu not found", i);
	}
}

/* The config as a file that says everything explicitly. */
static void write_config(struct text *t, const struct xdm_config *cfg)
{
	char num[32];

	if (cfg->module_dir) {
		text_puts(t, "module_dir = ");
		text_quoted(t, cfg->module_dir);
		text_putc(t, '\n');
	}
	if (cfg->mount) {
		text_puts(t, "mount = ");
		text_quoted(t, cfg->mount);
		text_putc(t, '\n');
	}
	text_puts(t, "platform = ");
	for (size_t i = 0; i < cfg->nplatforms; i++) {
		/* An entry is written as a one-layer stack: name, then key="value". */
		struct xdm_conf_stack entry = { &cfg->platform_specs[i], 1 };

		text_puts(t, i ? ", " : "");
		text_stack(t, &entry);
	}
	snprintf(num, sizeof(num), "\nstreams = %u\n", cfg->streams);
	text_puts(t, num);
	for (size_t i = 0; i < cfg->ndevices; i++) {
		const struct xdm_conf_device *d = &cfg->devices[i];

		if (d->wildcard)
			snprintf(num, sizeof(num), "[device *]\n");
		else
			snprintf(num, sizeof(num), "[device %u]\n", d->ordinal);
		text_puts(t, num);
		if (d->streams) {
			snprintf(num, sizeof(num), "streams = %u\n", d->streams);
			text_puts(t, num);
		}
		if (d->has_stack) {
			text_puts(t, "stack = ");
			text_stack(t, &d->stack);
			text_putc(t, '\n');
		}
	}
}

static bool config_eq(const struct xdm_config *a, const struct xdm_config *b)
{
	if (!str_eq(a->module_dir, b->module_dir) || !str_eq(a->mount, b->mount) ||
	    a->streams != b->streams || a->nplatforms != b->nplatforms ||
	    a->ndevices != b->ndevices)
		return false;
	for (size_t i = 0; i < a->nplatforms; i++) {
		struct xdm_conf_stack x = { &a->platform_specs[i], 1 };
		struct xdm_conf_stack y = { &b->platform_specs[i], 1 };

		if (strcmp(a->platforms[i], b->platforms[i]) || !stack_eq(&x, &y))
			return false;
	}
	for (size_t i = 0; i < a->ndevices; i++) {
		const struct xdm_conf_device *x = &a->devices[i], *y = &b->devices[i];

		if (x->wildcard != y->wildcard || x->ordinal != y->ordinal ||
		    x->streams != y->streams || x->has_stack != y->has_stack ||
		    !stack_eq(&x->stack, &y->stack))
			return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xdm_config *const untouched = (struct xdm_config *)(uintptr_t)0x5ca1ab1e;
	struct xdm_config *cfg = untouched, *again = NULL;
	struct text written = { NULL, 0, 0 };
	struct xdm_tree_node node;
	enum xdm_status st;
	char *text = fuzz_string(data, size);

	if (!text)
		return 0;
	st = xdm_config_parse(source, text, &cfg);
	if (st != XDM_OK) {
		check_refusal(st, source, text);
		FUZZ_ASSERT(cfg == untouched, "a refused config was handed out");
		/* Parsing never builds a runtime; a refusal must not have either. */
		FUZZ_ASSERT(xdm_tree_stat("0", &node) == -ENOENT, "a runtime is in the tree");
		goto out;
	}
	check_shape(cfg, text);
	write_config(&written, cfg);
	st = xdm_config_parse(source, written.p, &again);
	FUZZ_ASSERT(st == XDM_OK, "written back as\n%s\nit is refused: %s", written.p,
		    xdm_last_error()->message);
	FUZZ_ASSERT(config_eq(cfg, again), "written back as\n%s\nit reads differently",
		    written.p);
	xdm_config_free(again);
	xdm_config_free(cfg);
out:
	free(written.p);
	free(text);
	return 0;
}
