/* SPDX-License-Identifier: MIT */
/*
 * module_table.c - the registered ops tables and the checks every table
 * passes, whether it came from a file or from the program itself.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

const char *xdm_kind_name(enum xdm_module_kind kind)
{
	switch (kind) {
	case XDM_KIND_PLATFORM:
		return "platform";
	case XDM_KIND_BACKEND:
		return "backend";
	case XDM_KIND_ADAPTOR:
		return "adaptor";
	}
	return "unknown";
}

const struct xdm_module_rec *xdm_modules_lookup(struct xdm_module_table *t, const char *name,
						unsigned int kinds)
{
	for (size_t i = 0; i < t->nrecs; i++) {
		const struct xdm_module_rec *r = t->recs[i];

		if ((kinds & XDM_KIND_BIT(r->ops.kind)) && strcmp(r->ops.name, name) == 0)
			return r;
	}
	return NULL;
}

static bool valid_kind(uint32_t kind)
{
	return kind == XDM_KIND_PLATFORM || kind == XDM_KIND_BACKEND || kind == XDM_KIND_ADAPTOR;
}

/* The methods without which a kind cannot work at all. */
static const char *missing_method(const struct xdm_ops *o)
{
	if (o->kind == XDM_KIND_BACKEND) {
		if (!o->allocate)
			return "allocate";
		if (!o->deallocate)
			return "deallocate";
	}
	if (o->kind == XDM_KIND_PLATFORM) {
		if (!o->device_info)
			return "device_info";
		if (!o->stream_create || !o->stream_destroy || !o->stream_synchronize)
			return "stream methods";
		if (!o->event_create || !o->event_destroy || !o->event_record ||
		    !o->stream_wait_event || !o->event_query || !o->event_synchronize)
			return "event methods";
		if (!o->launch_host_func)
			return "launch_host_func";
	}
	return NULL;
}

static enum xdm_status check_ops(struct xdm_module_table *t, const struct xdm_ops *ops,
				 const char *who)
{
	const struct xdm_module_rec *other;
	const char *missing;

	if (ops->abi_major != XDM_ABI_MAJOR)
		return xdm_error_set(XDM_E_MODULE,
				     "%s: ABI major version %u, this libxdm speaks %u; rebuild the "
				     "module against this xdm's headers", who, ops->abi_major,
				     XDM_ABI_MAJOR);
	/* A newer module may rely on what this libxdm does not promise yet. */
	if (ops->abi_minor > XDM_ABI_MINOR)
		return xdm_error_set(XDM_E_MODULE,
				     "%s: ABI version %u.%u, this libxdm speaks %u.%u; use a libxdm "
				     "at least as new as the module's headers", who, ops->abi_major,
				     ops->abi_minor, XDM_ABI_MAJOR, XDM_ABI_MINOR);
	if (ops->size < XDM_OPS_MIN_SIZE)
		return xdm_error_set(XDM_E_MODULE,
				     "%s: ops table is %u bytes, at least %zu bytes are needed",
				     who, ops->size, (size_t)XDM_OPS_MIN_SIZE);
	if (!ops->name || !ops->name[0])
		return xdm_error_set(XDM_E_MODULE, "%s: ops table has no name", who);
	if (!valid_kind(ops->kind))
		return xdm_error_set(XDM_E_MODULE, "%s: ops table '%s' has unknown kind %u", who,
				     ops->name, (unsigned int)ops->kind);
	missing = missing_method(ops);
	if (missing)
		return xdm_error_set(XDM_E_MODULE, "%s: %s '%s' lacks %s", who,
				     xdm_kind_name(ops->kind), ops->name, missing);
	/* A stack position takes a backend or an adaptor: one name, one meaning. */
	other = xdm_modules_lookup(t, ops->name,
				   ops->kind == XDM_KIND_PLATFORM ? XDM_KIND_BIT(XDM_KIND_PLATFORM)
								  : XDM_KINDS_RESOURCE);
	if (other)
		return xdm_error_set(XDM_E_MODULE, "%s: %s '%s' is already registered by %s (as %s)",
				     who, xdm_kind_name(ops->kind), ops->name, other->path,
				     xdm_kind_name(other->ops.kind));
	return XDM_OK;
}

enum xdm_status xdm_modules_add(struct xdm_module_table *t, const struct xdm_ops *ops,
				const char *who, const char *path)
{
	struct xdm_module_rec *rec;
	enum xdm_status st;
	size_t copy;

	st = check_ops(t, ops, who);
	if (st)
		return st;
	if (t->nrecs == t->caprecs) {
		size_t cap = t->caprecs ? t->caprecs * 2 : 16;
		struct xdm_module_rec **recs = realloc(t->recs, cap * sizeof(*recs));

		if (!recs)
			goto oom;
		t->recs = recs;
		t->caprecs = cap;
	}
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		goto oom;
	rec->path = strdup(path);
	if (!rec->path)
		goto oom_rec;
	/* A shorter, older table leaves the appended methods NULL. */
	copy = ops->size < sizeof(rec->ops) ? ops->size : sizeof(rec->ops);
	memcpy(&rec->ops, ops, copy);
	rec->ops.size = (uint32_t)copy;
	t->recs[t->nrecs++] = rec;
	return XDM_OK;

oom_rec:
	free(rec);
oom:
	return xdm_error_set(XDM_E_OUT_OF_MEMORY, "%s: out of memory registering a module", who);
}

enum xdm_status xdm_module_register(const struct xdm_ops *ops)
{
	struct xdm_module_table *t = &xdm_table()->modules;
	enum xdm_status st;

	if (!ops)
		return xdm_error_set(XDM_E_INVALID, "xdm_module_register: ops is NULL");
	pthread_mutex_lock(&t->lock);
	st = xdm_modules_add(t, ops, "in-process module", "<in-process>");
	pthread_mutex_unlock(&t->lock);
	return st;
}
