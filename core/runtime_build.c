/* SPDX-License-Identifier: MIT */
/*
 * runtime_build.c - composing a runtime: platform, streams, the stack of
 * layers, bottom up; and taking it apart, top down.
 *
 * A build either returns a whole runtime or leaves nothing behind: every
 * failure unwinds through xdm_runtime_teardown(), which copes with a runtime
 * in any state of construction.
 */
#include "config.h"

#include <stdio.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* Where a layer's module name came from, for messages. */
struct stack_source {
	const char *name;			/* file, "<stack>", or "<platform default>" */
	const struct xdm_conf_stack *stack;
	struct xdm_conf_stack owned;		/* parsed here; freed at the end */
	bool own;
	uint32_t streams;
};

static enum xdm_status init_platform(struct xdm_runtime *rt, const struct xdm_config *cfg,
				     const struct xdm_conf_layer *spec, const char *source)
{
	struct xdm_module_table *t = &xdm_table()->modules;
	const struct xdm_module_rec *mod;
	struct xdm_layer *p = &rt->platform;
	enum xdm_status st;

	st = xdm_modules_resolve(t, spec->module, XDM_KIND_BIT(XDM_KIND_PLATFORM), cfg->module_dir,
				 &mod);
	if (st)
		return st;
	p->mod = mod;
	p->ops = &mod->ops;
	p->rt = rt;
	st = xdm_params_build(mod, spec, source, 0, &p->params);
	if (st)
		goto fail;
	if (p->ops->init) {
		st = p->ops->init(p, p->params);
		if (st)
			goto fail;
	}
	p->inited = true;
	st = p->ops->device_info(p, &rt->device);
	if (st)
		goto fail;
	snprintf(rt->device.platform, sizeof(rt->device.platform), "%s", mod->ops.name);
	return XDM_OK;

fail:
	if (p->inited && p->ops->fini)
		p->ops->fini(p);
	xdm_params_free(p->params);
	memset(p, 0, sizeof(*p));
	return st;
}

/*
 * The first platform that initializes wins.  With one candidate its own
 * error stands; with several, the error lists why each one failed.
 */
static enum xdm_status try_platforms(struct xdm_runtime *rt, const struct xdm_config *cfg,
				     const struct xdm_config *list, const char *source)
{
	char reasons[sizeof(((struct xdm_error *)0)->message)] = "";
	enum xdm_status st = XDM_E_NO_DEVICE;

	if (list->nplatforms == 0)
		return xdm_error_set(XDM_E_CONFIG, "%s: no platform is configured", source);
	for (size_t i = 0; i < list->nplatforms; i++) {
		size_t used = strlen(reasons);

		st = init_platform(rt, cfg, &list->platform_specs[i], source);
		if (st == XDM_OK)
			return XDM_OK;
		snprintf(reasons + used, sizeof(reasons) - used, "%s%s: %s", used ? "; " : "",
			 list->platforms[i], xdm_last_error_message());
	}
	if (list->nplatforms == 1) {
		/* A parameter's error already names its own line and column. */
		if (list == cfg && strncmp(xdm_last_error_message(), source, strlen(source)))
			xdm_error_locate(source, list->platform_line, list->platform_col);
		return st;
	}
	return xdm_error_set(XDM_E_NO_DEVICE, "no platform could serve device %u (%s)",
			     rt->ordinal, reasons);
}

/*
 * The file's platform list, or the one a caller named: a list in the
 * syntax of the platform key ("host devices=2"), its errors located in
 * "<platform>".
 */
static enum xdm_status choose_platform(struct xdm_runtime *rt, const struct xdm_config *cfg,
				       const char *platform)
{
	struct xdm_config *named;
	enum xdm_status st;

	if (!platform)
		return try_platforms(rt, cfg, cfg, cfg->source);
	named = calloc(1, sizeof(*named));
	if (!named)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
	st = xdm_config_set_platforms(named, "<platform>", platform);
	if (st == XDM_OK)
		st = try_platforms(rt, cfg, named, "<platform>");
	xdm_config_free(named);
	return st;
}

static enum xdm_status pick_stack(struct xdm_runtime *rt, const struct xdm_config *cfg,
				  const char *spec, struct stack_source *src)
{
	const struct xdm_conf_device *dev = xdm_config_device(cfg, rt->ordinal);
	enum xdm_status st;

	src->streams = dev && dev->streams ? dev->streams : cfg->streams;
	if (!spec && dev && dev->has_stack) {
		src->name = cfg->source;
		src->stack = &dev->stack;
		return XDM_OK;
	}
	src->name = spec ? "<stack>" : "<platform default>";
	if (!spec)
		spec = rt->platform.ops->default_stack;
	if (!spec)
		return xdm_error_set(XDM_E_CONFIG,
				     "%s: no stack is configured for device %u and platform '%s' "
				     "has no default", cfg->source, rt->ordinal,
				     rt->platform.ops->name);
	st = xdm_config_parse_stack(src->name, spec, &src->owned);
	if (st)
		return st;
	src->own = true;
	src->stack = &src->owned;
	return XDM_OK;
}

static char *layer_spec(const struct xdm_conf_layer *cl)
{
	size_t len = strlen(cl->module) + 1;
	char *s, *p;

	for (size_t i = 0; i < cl->nparams; i++)
		len += strlen(cl->params[i].key) + strlen(cl->params[i].value) + 2;
	s = malloc(len);
	if (!s)
		return NULL;
	p = s + sprintf(s, "%s", cl->module);
	for (size_t i = 0; i < cl->nparams; i++)
		p += sprintf(p, " %s=%s", cl->params[i].key, cl->params[i].value);
	return s;
}

/* Resolve and type-check one layer; the bottom one must be a backend. */
static enum xdm_status prepare_layer(struct xdm_runtime *rt, const struct xdm_config *cfg,
				     const struct stack_source *src, uint32_t i)
{
	const struct xdm_conf_layer *cl = &src->stack->layers[i];
	struct xdm_layer *l = &rt->layers[i];
	bool bottom = i + 1 == src->stack->nlayers;
	const struct xdm_module_rec *mod;
	enum xdm_status st;

	st = xdm_modules_resolve(&xdm_table()->modules, cl->module, XDM_KINDS_RESOURCE,
				 cfg->module_dir, &mod);
	if (st) {
		xdm_error_locate(src->name, cl->line, cl->col);
		return st;
	}
	if (bottom && mod->ops.kind != XDM_KIND_BACKEND)
		return xdm_error_set(XDM_E_CONFIG,
				     "%s:%u:%u: '%s' is an adaptor; the bottom of a stack must be a "
				     "backend, at '%s'", src->name, cl->line, cl->col, cl->module,
				     cl->module);
	if (!bottom && mod->ops.kind != XDM_KIND_ADAPTOR)
		return xdm_error_set(XDM_E_CONFIG,
				     "%s:%u:%u: '%s' is a backend; only the bottom layer of a stack "
				     "may be a backend, at '%s'", src->name, cl->line, cl->col,
				     cl->module, cl->module);
	l->mod = mod;
	l->ops = &mod->ops;
	l->rt = rt;
	st = xdm_params_build(mod, cl, src->name, rt->device.total_bytes, &l->params);
	if (st)
		return st;
	l->serial = xdm_runtime_serial();
	l->spec = layer_spec(cl);
	if (!l->spec)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
	return XDM_OK;
}

static enum xdm_status build_stack(struct xdm_runtime *rt, const struct xdm_config *cfg,
				   const struct stack_source *src)
{
	uint32_t n = (uint32_t)src->stack->nlayers;
	enum xdm_status st;

	if (n == 0)
		return xdm_error_set(XDM_E_CONFIG, "%s: the stack is empty", src->name);
	rt->layers = calloc(n, sizeof(*rt->layers));
	if (!rt->layers)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory");
	rt->nlayers = n;
	for (uint32_t i = 0; i < n; i++) {
		st = prepare_layer(rt, cfg, src, i);
		if (st)
			return st;
	}
	st = xdm_stream_pool_init(rt, src->streams);
	if (st)
		return st;
	/* Bottom up: each layer starts with a working upstream. */
	for (uint32_t i = n; i-- > 0;) {
		struct xdm_layer *l = &rt->layers[i];

		l->upstream = i + 1 < n ? &rt->layers[i + 1] : NULL;
		xdm_layer_resolve(l);
		if (l->ops->init) {
			st = l->ops->init(l, l->params);
			if (st) {
				const struct xdm_conf_layer *cl = &src->stack->layers[i];

				xdm_error_locate(src->name, cl->line, cl->col);
				return st;
			}
		}
		l->inited = true;
	}
	return XDM_OK;
}

enum xdm_status xdm_runtime_build(uint32_t ordinal, const struct xdm_config *cfg,
				  const char *platform, const char *stack, bool singleton,
				  struct xdm_runtime **out)
{
	struct stack_source src = { 0 };
	struct xdm_runtime *rt;
	enum xdm_status st;

	if (ordinal >= XDM_MAX_DEVICES)
		return xdm_error_set(XDM_E_NO_DEVICE, "device ordinal %u is past the maximum of %d",
				     ordinal, XDM_MAX_DEVICES - 1);
	/* Its shards and stream counters sit on cache lines of their own. */
	rt = aligned_alloc(alignof(struct xdm_runtime),
			   (sizeof(*rt) + alignof(struct xdm_runtime) - 1) &
			   ~(alignof(struct xdm_runtime) - 1));
	if (!rt)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory for a runtime");
	memset(rt, 0, sizeof(*rt));
	rt->ordinal = ordinal;
	rt->singleton = singleton;
	pthread_mutex_init(&rt->events.lock, NULL);
	pthread_mutex_init(&rt->streams.lock, NULL);
	pthread_mutex_init(&rt->tree_index.lock, NULL);
	xdm_capture_frees_init(&rt->capture_frees);
	xdm_registry_init(&rt->registry);
	st = xdm_ipc_init(&rt->ipc, cfg);
	if (st) {
		free(rt);
		return st;
	}
	st = xdm_counters_init(&rt->counters, xdm_runtime_serial());
	if (st)
		goto fail;

	st = choose_platform(rt, cfg, platform);
	if (st)
		goto fail;
	st = pick_stack(rt, cfg, stack, &src);
	if (st)
		goto fail;
	st = build_stack(rt, cfg, &src);
	if (st)
		goto fail;
	if (src.own)
		xdm_conf_stack_free(&src.owned);
	*out = rt;
	return XDM_OK;

fail:
	if (src.own)
		xdm_conf_stack_free(&src.owned);
	xdm_runtime_teardown(rt);
	return st;
}

static void sync_streams(struct xdm_runtime *rt)
{
	uint32_t nstreams = xdm_stream_count(rt);

	for (uint32_t i = 0; i < nstreams; i++)
		rt->platform.ops->stream_synchronize(&rt->platform, rt->streams.slots[i].handle);
}

/* A block the caller never freed goes back through the stack it came from. */
static void free_leftover(struct xdm_reg_entry *e, void *arg)
{
	struct xdm_runtime *rt = arg;

	xdm_track_release(rt, &e->block, &e->track, xdm_stream_capture(rt, e->block.stream));
	xdm_use_track_free(&e->track);
	xdm_up_deallocate(&rt->layers[0], &e->block);
}

/* Works on a runtime in any state of construction; keeps the thread error. */
void xdm_runtime_teardown(struct xdm_runtime *rt)
{
	struct xdm_error saved = *xdm_last_error();

	/* Queued frees call into the backend: let them run before its fini. */
	sync_streams(rt);
	/* Frees held for a capture wait for their uses and go to the stack. */
	if (rt->nlayers && rt->layers[0].inited)
		(void)xdm_capture_frees_release(rt, true);
	/* No importer reaches it from now on; what this runtime imported is unmapped. */
	xdm_ipc_fini(rt);
	/*
	 * Blocks still live are the caller's leak, but the memory is the
	 * stack's: free them through it (a pool, a budget, a log all see the
	 * free), then let those frees run too.
	 */
	if (rt->nlayers && rt->layers[0].inited) {
		xdm_registry_drain(&rt->registry, free_leftover, rt);
		sync_streams(rt);
	}
	for (uint32_t i = 0; i < rt->nlayers; i++) {
		struct xdm_layer *l = &rt->layers[i];

		if (l->inited && l->ops->fini)
			l->ops->fini(l);
		xdm_params_free(l->params);
		free(l->spec);
	}
	free(rt->layers);
	xdm_registry_fini(rt);
	xdm_capture_frees_fini(&rt->capture_frees);
	xdm_counters_fini(&rt->counters);
	if (rt->platform.ops)
		xdm_pending_frees_fini(rt);
	xdm_stream_pool_fini(rt);
	if (rt->platform.ops) {
		xdm_event_pool_fini(rt);
		if (rt->platform.inited && rt->platform.ops->fini)
			rt->platform.ops->fini(&rt->platform);
		xdm_params_free(rt->platform.params);
	}
	pthread_mutex_destroy(&rt->events.lock);
	pthread_mutex_destroy(&rt->tree_index.lock);
	pthread_mutex_destroy(&rt->ipc.exp.lock);
	pthread_mutex_destroy(&rt->ipc.imp.lock);
	free(rt->tree_index.v);
	free(rt);
	if (saved.code != XDM_OK)
		*(struct xdm_error *)xdm_last_error() = saved;
}
