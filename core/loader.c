/* SPDX-License-Identifier: MIT */
/*
 * loader.c - finds module files in the module path and dlopens them.
 *
 * A module named N is the file N.so in the first directory of the path that
 * has one: $XDM_MODULE_PATH (colon-separated), then the config's module_dir,
 * then the directory the library was installed with.  A module family shares
 * one file named by the part before the first underscore: cuda_async is found
 * in cuda.so when there is no cuda_async.so.  Every failure is a
 * sentence naming the module, the file and what went wrong.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"

#define PATH_TEXT_MAX 1024

/* The search path as one colon-separated string, for lookup and messages. */
static void module_path(const char *module_dir, char *buf, size_t len)
{
	const char *env = getenv("XDM_MODULE_PATH");

	snprintf(buf, len, "%s%s%s%s%s", env && env[0] ? env : "", env && env[0] ? ":" : "",
		 module_dir ? module_dir : "", module_dir ? ":" : "", XDM_MODULE_DIR);
}

static bool find_file(const char *path, const char *name, char *out, size_t len)
{
	const char *dir = path;

	while (*dir) {
		size_t n = strcspn(dir, ":");
		struct stat st;

		if (n > 0) {
			snprintf(out, len, "%.*s/%s.so", (int)n, dir, name);
			if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
				return true;
		}
		dir += n;
		if (*dir == ':')
			dir++;
	}
	return false;
}

/*
 * N.so, else the file of N's family: the name up to its first underscore
 * (cuda_async and cuda_direct live in cuda.so with the cuda platform).
 */
static bool find_module_file(const char *path, const char *name, char *out, size_t len)
{
	const char *underscore = strchr(name, '_');
	char family[256];

	if (find_file(path, name, out, len))
		return true;
	if (!underscore || underscore == name || (size_t)(underscore - name) >= sizeof(family))
		return false;
	memcpy(family, name, (size_t)(underscore - name));
	family[underscore - name] = '\0';
	return find_file(path, family, out, len);
}

static bool file_loaded(struct xdm_module_table *t, void *handle)
{
	for (size_t i = 0; i < t->nfiles; i++)
		if (t->files[i].handle == handle)
			return true;
	return false;
}

static enum xdm_status remember_file(struct xdm_module_table *t, const char *path, void *handle)
{
	if (t->nfiles == t->capfiles) {
		size_t cap = t->capfiles ? t->capfiles * 2 : 8;
		struct xdm_module_file *files = realloc(t->files, cap * sizeof(*files));

		if (!files)
			return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory loading %s", path);
		t->files = files;
		t->capfiles = cap;
	}
	t->files[t->nfiles].path = strdup(path);
	if (!t->files[t->nfiles].path)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "out of memory loading %s", path);
	t->files[t->nfiles++].handle = handle;
	return XDM_OK;
}

/*
 * Register every table of one file.  All or nothing: if one table is
 * refused, the ones registered before it are taken back, so a later attempt
 * reports the same error instead of a confusing half-registration.
 */
static enum xdm_status register_file(struct xdm_module_table *t, const char *name,
				     const char *path, void *handle)
{
	const struct xdm_ops *const *tables;
	xdm_module_entry_fn entry;
	size_t before = t->nrecs;
	char who[PATH_TEXT_MAX + 512];
	enum xdm_status st;

	snprintf(who, sizeof(who), "module '%s' (%s)", name, path);
	*(void **)&entry = dlsym(handle, XDM_MODULE_ENTRY_SYMBOL);
	if (!entry)
		return xdm_error_set(XDM_E_MODULE, "%s: no entry symbol '%s'; is it an xdm module?",
				     who, XDM_MODULE_ENTRY_SYMBOL);
	tables = entry();
	if (!tables || !tables[0])
		return xdm_error_set(XDM_E_MODULE, "%s: the entry symbol returned no ops tables",
				     who);
	for (size_t i = 0; tables[i]; i++) {
		st = xdm_modules_add(t, tables[i], who, path);
		if (st)
			goto undo;
	}
	st = remember_file(t, path, handle);
	if (st)
		goto undo;
	return XDM_OK;

undo:
	while (t->nrecs > before) {
		struct xdm_module_rec *rec = t->recs[--t->nrecs];

		free(rec->path);
		free(rec);
	}
	return st;
}

static enum xdm_status load_file(struct xdm_module_table *t, const char *name, const char *path)
{
	enum xdm_status st;
	void *handle;

	/* RTLD_LOCAL: modules never resolve each other's symbols. */
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!handle)
		return xdm_error_set(XDM_E_MODULE,
				     "module '%s' (%s): dlopen failed: %s; check its dependencies "
				     "with 'ldd %s'", name, path, dlerror(), path);
	/* The same file reached twice (a symlink, say) registers once. */
	if (file_loaded(t, handle))
		return XDM_OK;
	st = register_file(t, name, path, handle);
	if (st)
		dlclose(handle);
	return st;
}

enum xdm_status xdm_modules_resolve(struct xdm_module_table *t, const char *name,
				    unsigned int kinds, const char *module_dir,
				    const struct xdm_module_rec **out)
{
	char path[PATH_TEXT_MAX], file[PATH_TEXT_MAX + 256];
	enum xdm_status st = XDM_OK;

	pthread_mutex_lock(&t->lock);
	*out = xdm_modules_lookup(t, name, kinds);
	if (*out)
		goto unlock;
	module_path(module_dir, path, sizeof(path));
	if (!find_module_file(path, name, file, sizeof(file))) {
		st = xdm_error_set(XDM_E_CONFIG, "unknown module '%s': no %s.so in the module path (%s)",
				   name, name, path);
		goto unlock;
	}
	st = load_file(t, name, file);
	if (st)
		goto unlock;
	*out = xdm_modules_lookup(t, name, kinds);
	if (!*out)
		st = xdm_error_set(XDM_E_MODULE, "module '%s' (%s): the file registers no %s named '%s'",
				   name, file,
				   kinds == XDM_KIND_BIT(XDM_KIND_PLATFORM) ? "platform"
									    : "backend or adaptor",
				   name);
unlock:
	pthread_mutex_unlock(&t->lock);
	return st;
}

bool xdm_module_path_find(const char *module_dir, const char *name, char *out, size_t len,
			  char *searched, size_t searched_len)
{
	char path[PATH_TEXT_MAX];

	module_path(module_dir, path, sizeof(path));
	if (searched)
		snprintf(searched, searched_len, "%s", path);
	return find_file(path, name, out, len);
}
