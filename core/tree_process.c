/* SPDX-License-Identifier: MIT */
/*
 * tree_process.c - the files at the root of the tree: what process this
 * is, which library, which modules it loaded and the configuration in force.
 */
#include "config.h"

#include <unistd.h>

#include "core/tree.h"

static int show_version(const struct tree_pos *pos, struct tree_buf *b)
{
	(void)pos;
	tree_printf(b, "%s\n", xdm_version());
	return 0;
}

static int show_pid(const struct tree_pos *pos, struct tree_buf *b)
{
	(void)pos;
	tree_printf(b, "%ld\n", (long)getpid());
	return 0;
}

/* A table, one module per row: name, kind, ABI, file. */
static int show_modules(const struct tree_pos *pos, struct tree_buf *b)
{
	struct xdm_module_table *t = &xdm_table()->modules;

	(void)pos;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nrecs; i++) {
		const struct xdm_ops *ops = &t->recs[i]->ops;

		tree_printf(b, "%s %s %u.%u %s\n", ops->name, xdm_kind_name(ops->kind),
			    ops->abi_major, ops->abi_minor, t->recs[i]->path);
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/*
 * The configuration the singletons were built from; before there is one,
 * the configuration a runtime built now would read.
 */
static int show_config(const struct tree_pos *pos, struct tree_buf *b)
{
	struct xdm_config *cfg = atomic_load_explicit(&xdm_table()->config,
						      memory_order_acquire);
	struct xdm_config *fresh = NULL;

	(void)pos;
	if (!cfg) {
		if (xdm_config_load(&fresh) != XDM_OK)
			return -EIO;
		cfg = fresh;
	}
	tree_printf(b, "# %s\n%s", cfg->source, cfg->text ? cfg->text : "");
	if (b->len && b->p[b->len - 1] != '\n')
		tree_printf(b, "\n");
	xdm_config_free(fresh);
	return 0;
}

const struct tree_file xdm_tree_root_files[] = {
	{ "version", show_version, NULL },
	{ "pid", show_pid, NULL },
	{ "modules", show_modules, NULL },
	{ "config", show_config, NULL },
	{ NULL, NULL, NULL },
};
