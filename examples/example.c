/* SPDX-License-Identifier: MIT */
/*
 * example.c - an adaptor module to copy when you write your own.
 *
 * "example" sits anywhere above a backend, e.g.
 *
 *	stack = example label=hi fail_over=1G | host
 *
 * and does three small things:
 *  - it counts the allocations and frees that pass through it (the
 *    attributes "allocs" and "frees");
 *  - it refuses any single allocation larger than its "fail_over" parameter;
 *  - it carries a "label", set by a parameter and changeable at run time
 *    through a writable attribute (/mnt/xdm/<dev>/layers/<n>-example/label).
 *
 * Everything else (bytes_outstanding, reap_pending, the block-use tracking
 * methods) is left NULL in the ops table, and the core forwards those calls
 * to the layer below: an adaptor only writes the methods it changes.
 *
 * It builds in the xdm tree (with config.h) and out of it, with nothing but
 * the installed headers:
 *
 *	cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags xdm) \
 *		example.c -o example.so $(pkg-config --libs xdm)
 *
 * See doc/writing-modules.md and xdm-module(7).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xdm/module.h>

/* Room for the label and its NUL; longer labels are refused, not cut. */
#define EXAMPLE_LABEL_MAX 64

/*
 * The state of one layer.  A module may be stacked several times, on several
 * devices, so nothing lives in globals: each layer gets its own copy in init
 * and finds it again with xdm_layer_priv().
 */
struct example {
	/*
	 * Methods run concurrently on many threads, and the introspection
	 * tree reads attributes from its own thread, so the counters are
	 * atomics: exact, and readable without a lock.
	 */
	atomic_uint_fast64_t allocs;
	atomic_uint_fast64_t frees;

	/* Set once in init, read-only after: no locking needed. */
	uint64_t fail_over;

	/*
	 * The label can be rewritten while another thread reads it, so it is
	 * copied in and out under a lock.  The lock is held only for a short
	 * copy and never across a call into another layer or a syscall: the
	 * introspection thread must never wait on an allocation path.
	 */
	pthread_mutex_t lock;
	char label[EXAMPLE_LABEL_MAX];
};

static struct example *example_of(const struct xdm_layer *self)
{
	return xdm_layer_priv(self);
}

/*
 * A label is one line of 1 to EXAMPLE_LABEL_MAX - 1 printable characters:
 * it is served as one value in one file, so it may hold no newline.
 */
static bool label_valid(const char *text, size_t len)
{
	if (len == 0 || len >= EXAMPLE_LABEL_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

static void label_get(struct example *ex, char *out)
{
	pthread_mutex_lock(&ex->lock);
	memcpy(out, ex->label, EXAMPLE_LABEL_MAX);
	pthread_mutex_unlock(&ex->lock);
}

/* Caller has checked the text with label_valid(). */
static void label_set(struct example *ex, const char *text, size_t len)
{
	pthread_mutex_lock(&ex->lock);
	memcpy(ex->label, text, len);
	ex->label[len] = '\0';
	pthread_mutex_unlock(&ex->lock);
}

/* ---- lifetime ---------------------------------------------------------- */

/*
 * The core has already checked every parameter against example_params
 * (unknown keys and badly typed values never reach here), so init only
 * checks what the types cannot say.
 */
static enum xdm_status example_init(struct xdm_layer *self, const struct xdm_params *params)
{
	const char *label = xdm_params_string(params, "label");
	struct example *ex;

	/* The value is not echoed: it may hold the control characters refused. */
	if (!label_valid(label, strlen(label)))
		return xdm_error_set(XDM_E_CONFIG,
				     "example: label must be 1 to %d printable characters",
				     EXAMPLE_LABEL_MAX - 1);

	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "example: no memory for its state");
	if (pthread_mutex_init(&ex->lock, NULL) != 0) {
		free(ex);
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "example: cannot create its lock");
	}
	atomic_init(&ex->allocs, 0);
	atomic_init(&ex->frees, 0);
	ex->fail_over = xdm_params_size(params, "fail_over");
	label_set(ex, label, strlen(label));

	xdm_layer_set_priv(self, ex);
	return XDM_OK;
}

/* Called once, after the last method call has returned. */
static void example_fini(struct xdm_layer *self)
{
	struct example *ex = example_of(self);

	xdm_layer_set_priv(self, NULL);
	pthread_mutex_destroy(&ex->lock);
	free(ex);
}

/* ---- the methods this adaptor changes ---------------------------------- */

static enum xdm_status example_allocate(struct xdm_layer *self, size_t bytes,
					xdm_stream_id stream, const char *tag,
					struct xdm_block *out)
{
	struct example *ex = example_of(self);
	enum xdm_status st;

	if (bytes > ex->fail_over) {
		char label[EXAMPLE_LABEL_MAX];

		/* The sentence the caller reads from xdm_last_error_message(). */
		label_get(ex, label);
		return xdm_error_set(XDM_E_INVALID,
				     "example '%s': %zu bytes is more than fail_over=%" PRIu64,
				     label, bytes, ex->fail_over);
	}

	/* Pass the call down; the upstream fills *out and sets any error. */
	st = xdm_up_allocate(xdm_layer_upstream(self), bytes, stream, tag, out);
	if (st == XDM_OK)
		atomic_fetch_add_explicit(&ex->allocs, 1, memory_order_relaxed);
	return st;
}

static enum xdm_status example_deallocate(struct xdm_layer *self, struct xdm_block *block)
{
	struct example *ex = example_of(self);
	enum xdm_status st;

	st = xdm_up_deallocate(xdm_layer_upstream(self), block);
	/* Count the frees the stack accepted, so allocs - frees is what is live. */
	if (st == XDM_OK)
		atomic_fetch_add_explicit(&ex->frees, 1, memory_order_relaxed);
	return st;
}

/* ---- attributes --------------------------------------------------------- */

/*
 * sysfs rules: show writes one value and a newline and returns its length,
 * or a negative errno; store takes the whole value (a trailing newline is
 * allowed), returns 0, or -EINVAL and changes nothing.
 */
static int show_u64(char *buf, size_t len, uint64_t value)
{
	int n = snprintf(buf, len, "%" PRIu64 "\n", value);

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int example_allocs_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, atomic_load_explicit(&example_of(self)->allocs,
						       memory_order_relaxed));
}

static int example_frees_show(struct xdm_layer *self, char *buf, size_t len)
{
	return show_u64(buf, len, atomic_load_explicit(&example_of(self)->frees,
						       memory_order_relaxed));
}

static int example_label_show(struct xdm_layer *self, char *buf, size_t len)
{
	char label[EXAMPLE_LABEL_MAX];
	int n;

	label_get(example_of(self), label);
	n = snprintf(buf, len, "%s\n", label);
	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

static int example_label_store(struct xdm_layer *self, const char *buf, size_t len)
{
	/* `echo hi > label` writes "hi\n": one trailing newline is not part of it. */
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (!label_valid(buf, len))
		return -EINVAL;
	label_set(example_of(self), buf, len);
	return 0;
}

/* ---- the ops table ------------------------------------------------------ */

/* The core rejects any key not listed here, and checks each value's type. */
static const struct xdm_param_spec example_params[] = {
	{
		.name = "label",
		.type = XDM_PARAM_STRING,
		.default_value = "example",
		.help = "a name for this layer, shown in its label attribute and its refusals",
	},
	{
		.name = "fail_over",
		.type = XDM_PARAM_SIZE,
		.default_value = "max",
		.help = "refuse any single allocation larger than this (bytes, K/M/G/T, %)",
	},
	{ .name = NULL },
};

static const struct xdm_attr example_attrs[] = {
	{
		.name = "allocs",
		.mode = 0444,
		.help = "allocations this layer passed down that succeeded",
		.show = example_allocs_show,
	},
	{
		.name = "frees",
		.mode = 0444,
		.help = "deallocations this layer passed down that succeeded",
		.show = example_frees_show,
	},
	{
		.name = "label",
		.mode = 0644,
		.help = "the layer's label: 1 to 63 printable characters",
		.show = example_label_show,
		.store = example_label_store,
	},
	{ .name = NULL },
};

static const struct xdm_ops example_ops = {
	/* ABI version, the size of this table as compiled, name and kind. */
	XDM_OPS_HEADER("example", XDM_KIND_ADAPTOR),
	.description = "counts allocations and frees, refuses those over fail_over",
	.params = example_params,
	.attrs = example_attrs,
	.init = example_init,
	.fini = example_fini,
	.allocate = example_allocate,
	.deallocate = example_deallocate,
	/*
	 * Not set, so forwarded to the upstream by the core: bytes_outstanding,
	 * reap_pending, record_block_use, supports_block_use_tracking,
	 * prepare_block_use, finish_block_use.  The platform methods are for
	 * platform modules only.
	 */
};

/* The one exported symbol: xdm_module_entry(), returning {&example_ops, NULL}. */
XDM_MODULE(&example_ops)
