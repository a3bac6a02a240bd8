/* SPDX-License-Identifier: MIT */
/*
 * driver.c - the driver's real entry points, and which lookups get a hook.
 *
 * A program reaches the driver's allocation calls three ways, and the shim
 * stands in on each:
 *
 *  - linked with -lcuda, it calls the exported names (cuMemAlloc_v2): the
 *    shim, loaded first, exports the same names (hooks.c);
 *  - it dlopens libcuda.so.1 and asks dlsym for a name (dlsym.c);
 *  - it asks cuGetProcAddress for a base name, as the CUDA runtime does for
 *    every call (hooks.c wraps cuGetProcAddress itself).
 *
 * Whatever the way, a lookup is answered with the shim's hook only when
 * what the lookup found is libcuda's own export of the ABI the hook has:
 * cuGetProcAddress asked for an old version (cuMemAlloc of CUDA 3.1 took
 * 32-bit sizes) or a name another library defines is passed through,
 * uncounted, rather than called with the wrong prototype.  The real
 * function is learnt from libcuda by its exported name.
 */
#include "config.h"

#include <dlfcn.h>
#include <string.h>

#include "preload/preload.h"

extern struct preload_entry preload_entries[PRELOAD_CALL_COUNT];

/* libcuda.so.1 once the program has loaded it; the shim never loads it. */
static void *libcuda(void)
{
	static _Atomic(void *) handle;
	void *h = atomic_load_explicit(&handle, memory_order_acquire);

	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		atomic_store_explicit(&handle, h, memory_order_release);
	return h;
}

void *preload_driver_symbol(const char *abi)
{
	void *(*next_dlsym)(void *, const char *) = preload_next_dlsym_get();
	void *h = libcuda();

	return h && next_dlsym ? next_dlsym(h, abi) : NULL;
}

void *preload_real(enum preload_call call, bool ptsz)
{
	struct preload_entry *e = &preload_entries[call];
	_Atomic(void *) *slot = ptsz ? &e->real_ptsz : &e->real;
	void *fn = atomic_load_explicit(slot, memory_order_acquire);

	if (fn)
		return fn;
	fn = preload_driver_symbol(ptsz ? e->ptsz : e->abi);
	if (fn)
		atomic_store_explicit(slot, fn, memory_order_release);
	return fn;
}

/* found is the driver's own function of e's variant: learn it, answer the hook. */
static void *hook_if_driver(struct preload_entry *e, bool ptsz, void *found)
{
	const char *abi = ptsz ? e->ptsz : e->abi;
	void *hook = ptsz ? e->hook_ptsz : e->hook;

	if (!abi || found == hook)
		return found;
	if (found != preload_driver_symbol(abi))
		return NULL;
	atomic_store_explicit(ptsz ? &e->real_ptsz : &e->real, found, memory_order_release);
	return hook;
}

void *preload_hook_for(const char *name, void *found, bool by_base, bool ptsz)
{
	if (!found || !name || name[0] != 'c' || name[1] != 'u')
		return found;
	for (unsigned int i = 0; i < PRELOAD_CALL_COUNT; i++) {
		struct preload_entry *e = &preload_entries[i];
		void *hook = NULL;

		if (by_base) {
			if (!e->base || strcmp(e->base, name))
				continue;
			/* Only the async calls have a per-thread variant. */
			hook = hook_if_driver(e, ptsz && e->ptsz, found);
		} else if (!strcmp(e->abi, name)) {
			hook = hook_if_driver(e, false, found);
		} else if (e->ptsz && !strcmp(e->ptsz, name)) {
			hook = hook_if_driver(e, true, found);
		}
		if (hook)
			return hook;
	}
	return found;
}
