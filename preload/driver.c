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
 * A lookup is answered with the shim's hook only for the exact ABI the
 * hook has: dlsym of the ABI name (cuMemAlloc_v2, never cuMemAlloc, the
 * 32-bit ABI of CUDA 3.1), or cuGetProcAddress of the base name for a
 * CUDA version that gets that ABI.  Anything else is passed through,
 * uncounted, rather than called with the wrong prototype.  The function
 * the lookup found is the real one the hook calls; a program linked with
 * -lcuda gets it from libcuda by its exported name.
 */
#include "config.h"

#include <dlfcn.h>
#include <string.h>

#include "preload/preload.h"

extern struct preload_entry preload_entries[PRELOAD_CALL_COUNT];

#define LIBCUDA "libcuda.so.1"

/* libcuda.so.1 once the program has loaded it; the shim never loads it. */
static void *libcuda(void)
{
	static _Atomic(void *) handle;
	void *h = atomic_load_explicit(&handle, memory_order_acquire);

	if (h)
		return h;
	h = dlopen(LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
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

void *preload_library_symbol(const char *lib, const char *abi)
{
	void *(*next_dlsym)(void *, const char *) = preload_next_dlsym_get();
	void *h, *fn;

	if (!strcmp(lib, LIBCUDA))
		return preload_driver_symbol(abi);
	/* Rare (NVML's figures): a reference more on the library is harmless. */
	h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	fn = h && next_dlsym ? next_dlsym(h, abi) : NULL;
	if (h)
		dlclose(h);
	return fn;
}

void *preload_real(enum preload_call call, bool ptsz)
{
	struct preload_entry *e = &preload_entries[call];
	_Atomic(void *) *slot = ptsz ? &e->real_ptsz : &e->real;
	void *fn = atomic_load_explicit(slot, memory_order_acquire);

	if (fn)
		return fn;
	fn = preload_library_symbol(e->lib, ptsz ? e->ptsz : e->abi);
	if (fn)
		atomic_store_explicit(slot, fn, memory_order_release);
	return fn;
}

/* The hook of e's variant in place of found, which it will call. */
static void *hook_in_place(struct preload_entry *e, bool ptsz, void *found)
{
	void *hook = ptsz ? e->hook_ptsz : e->hook;
	_Atomic(void *) *real = ptsz ? &e->real_ptsz : &e->real;
	void *none = NULL;

	/* RTLD_DEFAULT finds the shim's own export: it is the hook already. */
	if (found == hook)
		return found;
	atomic_compare_exchange_strong_explicit(real, &none, found, memory_order_acq_rel,
						memory_order_acquire);
	return hook;
}

void *preload_hook_for(const char *name, void *found, int version, bool ptsz)
{
	if (!found || !name || (strncmp(name, "cu", 2) && strncmp(name, "nvml", 4)))
		return found;
	for (unsigned int i = 0; i < PRELOAD_CALL_COUNT; i++) {
		struct preload_entry *e = &preload_entries[i];

		if (version > 0) {
			if (!e->base || strcmp(e->base, name) || version < e->since ||
			    (e->until && version >= e->until))
				continue;
			/* Only the stream-ordered calls have a per-thread variant. */
			return hook_in_place(e, ptsz && e->ptsz, found);
		}
		if (!strcmp(e->abi, name))
			return hook_in_place(e, false, found);
		if (e->ptsz && !strcmp(e->ptsz, name))
			return hook_in_place(e, true, found);
	}
	return found;
}
