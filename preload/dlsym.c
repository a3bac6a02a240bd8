/* SPDX-License-Identifier: MIT */
/*
 * dlsym.c - the shim's dlsym.
 *
 * Programs that load the driver with dlopen (the CUDA runtime, JAX, CuPy)
 * find its entry points with dlsym on libcuda's handle, which never
 * searches the shim: so the shim exports dlsym itself and answers a lookup
 * of a wrapped call in libcuda with its hook (driver.c).
 *
 * Two kinds of lookup must not be answered by the shim:
 *
 *  - dlsym(RTLD_NEXT, name) means "the next definition after the caller",
 *    and the C library tells the caller by the return address.  Called
 *    from the shim's C code, it would search after the shim instead, and
 *    an interposer loaded after the shim would find itself.  So the
 *    exported dlsym is a few instructions of assembly that jump to the C
 *    library's dlsym for RTLD_NEXT, with the caller's return address
 *    untouched, and to preload_dlsym for everything else.
 *
 *  - xdm's own modules: their driver calls are charged by the budget
 *    layers of their stacks, and must not be charged twice.  An object
 *    that exports xdm_module_entry is an xdm module; its lookups get the
 *    driver's own functions.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "preload/preload.h"

/* The C library's dlsym: what RTLD_NEXT gives the shim itself. */
__attribute__((visibility("hidden"))) void *(*_Atomic preload_next_dlsym)(void *, const char *);

void *preload_next_dlsym_get(void)
{
	void *(*fn)(void *, const char *) = atomic_load_explicit(&preload_next_dlsym,
								 memory_order_acquire);

	if (fn)
		return (void *)fn;
	/* dlvsym is not wrapped: ask for dlsym by the versions glibc has used. */
	fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
	if (!fn)
		fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#elif defined(__aarch64__)
	if (!fn)
		fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
	if (fn)
		atomic_store_explicit(&preload_next_dlsym, fn, memory_order_release);
	return (void *)fn;
}

/*
 * Whether the code at addr belongs to an xdm module.  The answer is kept
 * for the last few objects asked about: lookups come in runs from one
 * object, and a miss costs a dladdr and a dlsym.
 */
#define CALLER_CACHE 8

struct caller_verdict {
	_Atomic uintptr_t base;
	_Atomic int module;
};

static bool from_xdm_module(const void *addr)
{
	static struct caller_verdict cache[CALLER_CACHE];
	static _Atomic unsigned int next;
	void *(*next_dlsym)(void *, const char *) = preload_next_dlsym_get();
	Dl_info info;
	void *h;
	bool module;
	unsigned int i;

	if (!dladdr(addr, &info) || !info.dli_fbase || !next_dlsym)
		return false;
	for (i = 0; i < CALLER_CACHE; i++)
		if (atomic_load_explicit(&cache[i].base, memory_order_acquire) ==
		    (uintptr_t)info.dli_fbase)
			return atomic_load_explicit(&cache[i].module, memory_order_relaxed);
	h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	module = h && next_dlsym(h, "xdm_module_entry") != NULL;
	if (h)
		dlclose(h);
	/* A racing writer may pair a base with the other's verdict for a
	 * moment: both verdicts are for real objects, so only the cache suffers. */
	i = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % CALLER_CACHE;
	atomic_store_explicit(&cache[i].module, module, memory_order_relaxed);
	atomic_store_explicit(&cache[i].base, (uintptr_t)info.dli_fbase, memory_order_release);
	return module;
}

/* Every lookup but RTLD_NEXT (the assembly below): reached by a jump, so
 * its return address is the caller's. */
__attribute__((noinline)) void *preload_dlsym(void *handle, const char *name)
{
	void *(*next_dlsym)(void *, const char *) = preload_next_dlsym_get();
	void *found;

	if (!next_dlsym)
		return NULL;
	found = next_dlsym(handle, name);
	if (!found || !name || (strncmp(name, "cu", 2) && strncmp(name, "nvml", 4)))
		return found;
	if (from_xdm_module(__builtin_return_address(0)))
		return found;
	return preload_hook_for(name, found, 0, false);
}

/*
 * dlsym itself.  The RTLD_NEXT case jumps to the C library's dlsym once it
 * is known (it is, from the shim's constructor on: state.c); before that,
 * and on other architectures, every lookup goes through preload_dlsym,
 * where RTLD_NEXT searches after the shim (documented in xdm-preload(7)).
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
#ifdef __CET__
	"	endbr64\n"
#endif
	"	cmpq $-1, %rdi\n"
	"	jne 1f\n"
	"	movq preload_next_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 1f\n"
	"	jmp *%rax\n"
	"1:	jmp preload_dlsym\n"
	".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	"dlsym:\n"
#if defined(__ARM_FEATURE_BTI_DEFAULT)
	"	bti c\n"
#endif
	"	cmn x0, #1\n"
	"	b.ne 1f\n"
	"	adrp x16, preload_next_dlsym\n"
	"	ldr x16, [x16, #:lo12:preload_next_dlsym]\n"
	"	cbz x16, 1f\n"
	"	br x16\n"
	"1:	b preload_dlsym\n"
	".size dlsym, .-dlsym\n");
#else
PRELOAD_EXPORT void *dlsym(void *handle, const char *name)
{
	return preload_dlsym(handle, name);
}
#endif
