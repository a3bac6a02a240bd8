/* SPDX-License-Identifier: MIT */
/*
 * params.c - a layer's key=value parameters, checked against the module's
 * declared specs before its init runs, so that a bad value is reported with
 * the file, line and column it came from.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"

/* Decimal, or hex after 0x (byte patterns read best that way); never octal:
 * "010" is ten, not eight. */
static bool parse_uint(const char *text, uint64_t *out)
{
	int base = 10;
	char *end;

	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
		base = 16;
		text += 2;
	}
	if (!((text[0] >= '0' && text[0] <= '9') ||
	      (base == 16 && ((text[0] >= 'a' && text[0] <= 'f') ||
			      (text[0] >= 'A' && text[0] <= 'F')))))
		return false;
	errno = 0;
	*out = strtoull(text, &end, base);
	return errno == 0 && *end == '\0';
}

static bool parse_bool(const char *text, uint64_t *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = 1;
			return true;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = 0;
			return true;
		}
	}
	return false;
}

static const char *type_noun(enum xdm_param_type type)
{
	switch (type) {
	case XDM_PARAM_SIZE:
		return "a size (like 4096, 64K, 8G, 80% or max)";
	case XDM_PARAM_UINT:
		return "a non-negative integer (decimal, or hex after 0x)";
	case XDM_PARAM_BOOL:
		return "a boolean (true/false, yes/no, on/off, 1/0)";
	case XDM_PARAM_STRING:
		break;
	}
	return "a string";
}

static bool parse_value(struct xdm_param_value *v, uint64_t percent_base)
{
	switch (v->spec->type) {
	case XDM_PARAM_STRING:
		return true;
	case XDM_PARAM_SIZE:
		return xdm_parse_size(v->text, percent_base, &v->number) == XDM_OK;
	case XDM_PARAM_UINT:
		return parse_uint(v->text, &v->number);
	case XDM_PARAM_BOOL:
		return parse_bool(v->text, &v->number);
	}
	return false;
}

static size_t spec_count(const struct xdm_param_spec *spec)
{
	size_t n = 0;

	while (spec && spec[n].name)
		n++;
	return n;
}

static struct xdm_param_value *find_value(struct xdm_params *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].spec->name, name) == 0)
			return &p->v[i];
	return NULL;
}

static enum xdm_status apply_given(struct xdm_params *p, const struct xdm_module_rec *mod,
				   const struct xdm_conf_layer *layer, const char *source,
				   uint64_t percent_base)
{
	for (size_t i = 0; i < layer->nparams; i++) {
		const struct xdm_conf_param *cp = &layer->params[i];
		struct xdm_param_value *v = find_value(p, cp->key);

		if (!v)
			return xdm_error_set(XDM_E_CONFIG,
					     "%s:%u:%u: %s '%s' has no parameter '%s', at '%s'",
					     source, cp->line, cp->col, xdm_kind_name(mod->ops.kind),
					     mod->ops.name, cp->key, cp->key);
		if (v->given)
			return xdm_error_set(XDM_E_CONFIG,
					     "%s:%u:%u: parameter '%s' given twice, at '%s'", source,
					     cp->line, cp->col, cp->key, cp->key);
		free(v->text);
		v->text = strdup(cp->value);
		if (!v->text)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
		v->given = true;
		if (!parse_value(v, percent_base))
			return xdm_error_set(XDM_E_CONFIG,
					     "%s:%u:%u: parameter '%s' of %s '%s' must be %s, at '%s'",
					     source, cp->line, cp->col, cp->key,
					     xdm_kind_name(mod->ops.kind), mod->ops.name,
					     type_noun(v->spec->type), cp->value);
	}
	return XDM_OK;
}

enum xdm_status xdm_params_build(const struct xdm_module_rec *mod,
				 const struct xdm_conf_layer *layer, const char *source,
				 uint64_t percent_base, struct xdm_params **out)
{
	const struct xdm_param_spec *spec = mod->ops.params;
	struct xdm_params *p;
	enum xdm_status st;

	p = calloc(1, sizeof(*p));
	if (!p)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
	p->n = spec_count(spec);
	p->v = calloc(p->n ? p->n : 1, sizeof(*p->v));
	if (!p->v) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
		goto fail;
	}
	/* Defaults first: a bad default is the module's bug, not the user's. */
	for (size_t i = 0; i < p->n; i++) {
		struct xdm_param_value *v = &p->v[i];

		v->spec = &spec[i];
		if (!spec[i].default_value)
			continue;
		v->text = strdup(spec[i].default_value);
		if (!v->text) {
			st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
			goto fail;
		}
		if (!parse_value(v, percent_base)) {
			st = xdm_error_set(XDM_E_MODULE,
					   "module '%s' (%s): default '%s' of parameter '%s' is not %s",
					   mod->ops.name, mod->path, spec[i].default_value,
					   spec[i].name, type_noun(spec[i].type));
			goto fail;
		}
	}
	if (layer) {
		st = apply_given(p, mod, layer, source, percent_base);
		if (st)
			goto fail;
	}
	*out = p;
	return XDM_OK;

fail:
	xdm_params_free(p);
	return st;
}

void xdm_params_free(struct xdm_params *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n && p->v; i++)
		free(p->v[i].text);
	free(p->v);
	free(p);
}

static const struct xdm_param_value *get(const struct xdm_params *p, const char *name)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].spec->name, name) == 0)
			return p->v[i].text ? &p->v[i] : NULL;
	return NULL;
}

bool xdm_params_has(const struct xdm_params *p, const char *name)
{
	const struct xdm_param_value *v = get(p, name);

	return v && v->given;
}

const char *xdm_params_string(const struct xdm_params *p, const char *name)
{
	const struct xdm_param_value *v = get(p, name);

	return v ? v->text : NULL;
}

uint64_t xdm_params_size(const struct xdm_params *p, const char *name)
{
	const struct xdm_param_value *v = get(p, name);

	return v ? v->number : 0;
}

uint64_t xdm_params_uint(const struct xdm_params *p, const char *name)
{
	return xdm_params_size(p, name);
}

bool xdm_params_bool(const struct xdm_params *p, const char *name)
{
	return xdm_params_size(p, name) != 0;
}
