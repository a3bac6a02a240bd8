/* SPDX-License-Identifier: MIT */
/*
 * conf.h - the parsed form of xdm.conf (see man/xdm.conf.5).
 *
 * The parser checks syntax and the keys it knows; whether a module or a
 * module's parameter exists is checked later, when the runtime loads the
 * stack, using the line and column kept here so that every error still
 * names file:line:column.
 */
#ifndef XDM_CORE_CONFIG_H
#define XDM_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <xdm/xdm.h>

/* "key=value" after a module name in a stack spec. */
struct xdm_conf_param {
	char *key;
	char *value;
	unsigned int line, col;		/* where the key starts */
};

/* One layer of a stack spec: a module name and its parameters. */
struct xdm_conf_layer {
	char *module;
	unsigned int line, col;		/* where the module name starts */
	struct xdm_conf_param *params;
	size_t nparams;
};

/* A stack spec, top layer first: "budget limit=8G | pool | cuda_async". */
struct xdm_conf_stack {
	struct xdm_conf_layer *layers;
	size_t nlayers;
};

/* A [device N] or [device *] section. */
struct xdm_conf_device {
	bool wildcard;			/* [device *] */
	uint32_t ordinal;		/* when !wildcard */
	unsigned int line;		/* the section header's line */
	bool has_stack;
	struct xdm_conf_stack stack;
	uint32_t streams;		/* 0: inherit the global value */
};

struct xdm_config {
	char *source;			/* file path, or "<embedded>" / "<stack>" */
	char *text;			/* the text that was parsed, for display */
	char *module_dir;		/* NULL if not set */
	char *mount;			/* NULL if not set */
	char *ipc_allow;		/* as written; NULL if not set (ipc_allow.c) */
	char **platforms;		/* names, in order of preference */
	/* The same entries with their parameters ("host devices=2"), file positions kept. */
	struct xdm_conf_layer *platform_specs;
	size_t nplatforms;
	unsigned int platform_line, platform_col;
	uint32_t streams;		/* stream pool size; default 16 */
	struct xdm_conf_device *devices;
	size_t ndevices;
};

#define XDM_DEFAULT_STREAMS 16

/*
 * Parse text (named source in messages).  On error returns XDM_E_CONFIG with
 * the thread's error message "SOURCE:LINE:COL: what, at 'TOKEN'", and *out is
 * untouched: nothing is left allocated.
 */
enum xdm_status xdm_config_parse(const char *source, const char *text,
				 struct xdm_config **out);

/*
 * Load the process configuration: the file named by $XDM_CONFIG if set (an
 * unreadable file is an error, not a fallback), else XDM_SYSCONF_FILE if it
 * exists, else the embedded default.
 */
enum xdm_status xdm_config_load(struct xdm_config **out);

/* The embedded default text. */
const char *xdm_config_embedded(void);

/*
 * Parse a stack spec on its own (xdm-bench --stack, xdm_runtime_create()).
 * Line is 1; columns count from 1 within spec.
 */
enum xdm_status xdm_config_parse_stack(const char *source, const char *spec,
				       struct xdm_conf_stack *out);
void xdm_conf_stack_free(struct xdm_conf_stack *stack);

/*
 * Replace cfg's platform list with list, in the syntax of the platform key
 * ("host devices=2, cuda"); errors name source:1:COL.  On error cfg is
 * untouched.
 */
enum xdm_status xdm_config_set_platforms(struct xdm_config *cfg, const char *source,
					 const char *list);

/*
 * The section for ordinal: an exact [device N] first, else [device *], else
 * NULL.
 */
const struct xdm_conf_device *xdm_config_device(const struct xdm_config *cfg,
						uint32_t ordinal);

void xdm_config_free(struct xdm_config *cfg);

#endif /* XDM_CORE_CONFIG_H */
