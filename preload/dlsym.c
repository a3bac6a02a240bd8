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

#include "preload/preload.h"

/*
 * A sanitizer's runtime (ASan, TSan) finds the functions it intercepts
 * with dlsym(RTLD_NEXT) while it initializes, before anything else of the
 * process has run, the shim's constructor included; and it calls the
 * first dlsym in the search order, the shim's.  So the code it reaches
 * must run before the sanitizer can: PRELOAD_RAW functions are not
 * instrumented, call nothing a sanitizer intercepts, and use no atomics
 * (which sanitizers instrument even there).  The pointer below is written
 * once with the one value it can have; a volatile aligned word is read
 * whole on every architecture the assembly supports.
 */
#if defined(__clang__)
#define PRELOAD_RAW __attribute__((no_sanitize("address", "thread", "undefined", "coverage"), \
				   noinline))
#else
#define PRELOAD_RAW __attribute__((no_sanitize("address", "thread", "undefined"), noinline))
#endif

/* The C library's dlsym: what RTLD_NEXT gives the shim itself. */
__attribute__((visibility("hidden"))) void *(*volatile preload_next_dlsym)(void *, const char *);

PRELOAD_RAW void *preload_next_dlsym_get(void)
{
	void *(*fn)(void *, const char *) = preload_next_dlsym;

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
		preload_next_dlsym = fn;
	return (void *)fn;
}

/* Whether name is one the shim may answer: the driver's, NVML's. */
PRELOAD_RAW static bool wrapped_family(const char *name)
{
	return name && ((name[0] == 'c' && name[1] == 'u') ||
			(name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'));
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

/* A lookup of the driver's or NVML's: the hook, unless an xdm module asks. */
__attribute__((noinline)) static void *answer(const char *name, void *found, void *caller)
{
	if (from_xdm_module(caller))
		return found;
	return preload_hook_for(name, found, 0, false);
}

/* Every lookup but RTLD_NEXT (the assembly below): reached by a jump, so
 * its return address is the caller's. */
PRELOAD_RAW void *preload_dlsym(void *handle, const char *name)
{
	void *(*next_dlsym)(void *, const char *) = preload_next_dlsym_get();
	void *found;

	if (!next_dlsym)
		return NULL;
	found = next_dlsym(handle, name);
	if (!found || !wrapped_family(name))
		return found;
	return answer(name, found, __builtin_return_address(0));
}

/*
 * dlsym itself.  The RTLD_NEXT case jumps to the C library's dlsym, found
 * first if need be (its arguments kept across the call), so the C
 * library sees the caller's return address.  On other architectures every
 * lookup goes through preload_dlsym, where RTLD_NEXT searches after the
 * shim (documented in xdm-preload(7)).
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
	"	jne 2f\n"
	"	movq preload_next_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 1f\n"
	"	pushq %rdi\n"
	"	pushq %rsi\n"
	"	subq $8, %rsp\n"
	"	call preload_next_dlsym_get\n"
	"	addq $8, %rsp\n"
	"	popq %rsi\n"
	"	popq %rdi\n"
	"	testq %rax, %rax\n"
	"	je 2f\n"
	"1:	jmp *%rax\n"
	"2:	jmp preload_dlsym\n"
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
	"	b.ne 2f\n"
	"	adrp x16, preload_next_dlsym\n"
	"	ldr x16, [x16, #:lo12:preload_next_dlsym]\n"
	"	cbnz x16, 1f\n"
	"	stp x29, x30, [sp, #-32]!\n"
	"	mov x29, sp\n"
	"	stp x0, x1, [sp, #16]\n"
	"	bl preload_next_dlsym_get\n"
	"	mov x16, x0\n"
	"	ldp x0, x1, [sp, #16]\n"
	"	ldp x29, x30, [sp], #32\n"
	"	cbz x16, 2f\n"
	"1:	br x16\n"
	"2:	b preload_dlsym\n"
	".size dlsym, .-dlsym\n");
#else
PRELOAD_EXPORT void *dlsym(void *handle, const char *name)
{
	return preload_dlsym(handle, name);
}
#endif
