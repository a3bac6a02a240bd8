/* SPDX-License-Identifier: MIT */
/*
 * preload_user.c - an unmodified CUDA program, for the preload shim's
 * tests: it allocates through the driver as the operations on its command
 * line say, one line of output each, so that a test can run it under
 * LD_PRELOAD=libxdm-preload.so and watch what the shim charges.
 *
 *   preload_user [--ptds] [--direct] OP...
 *
 * It reaches the driver as the CUDA runtime does: dlopen("libcuda.so.1"),
 * dlsym of cuGetProcAddress_v2 alone, and every other entry point through
 * that by its base name (flags CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * after --ptds).  --direct takes each entry point with dlsym by its ABI
 * name instead (cuMemAlloc_v2; cuMemAllocAsync_ptsz after --ptds), the
 * symbols a program built with -lcuda binds.  Built with
 * -DPRELOAD_USER_LINKED (preload_user_linked), it is such a program:
 * linked against the fake driver, it binds those symbols by name at load
 * time and opens nothing.
 *
 * The operations, each printing one line (sizes are printed in bytes;
 * they may be written with a binary K, M or G):
 *
 *   alloc:SIZE managed:SIZE async:SIZE pool:SIZE create:SIZE
 *                      -> OP SIZE RC; on success the allocation joins the
 *                         list, whose index counts successful allocations
 *                         of every kind from 0
 *   pitch:W:H          -> pitch W H RC PITCH (W bytes by H rows)
 *   free:I             -> free I RC, by the call matching how entry I was
 *                         made (again if it was freed: the driver's refusal)
 *   freeall            -> freeall N, freeing every live entry (N of them
 *                         freed)
 *   info               -> info RC FREE TOTAL
 *   device:N           -> device N (the fake's fakeCudaSetDevice)
 *   calls:SYMBOL       -> calls SYMBOL N (the fake's fakeCudaCalls)
 *   used:P             -> used P BYTES, what the fake holds on physical
 *                         device P (fakeCudaUsed)
 *   nvml:P, nvml2:P    -> nvml RC FREE TOTAL USED, nvml2 RC FREE TOTAL USED
 *                         RESERVED: nvmlDeviceGetMemoryInfo (_v2) of NVML's
 *                         device P, from libnvidia-ml.so.1 by dlopen
 *   asyncpairs:N:SIZE  -> asyncpairs RC: N cuMemAllocAsync/cuMemFreeAsync
 *                         pairs of SIZE on this thread; RC is the first
 *                         failure, or 0
 *   fork:SIZE          -> fork SIZE STATUS: a child (fork without exec)
 *                         allocates SIZE with cuMemAlloc, prints child
 *                         SIZE RC and exits(0) holding it; STATUS is its
 *                         exit status
 *   next               -> next N: xdm_next_probe_after() of the preloaded
 *                         tests/preload/next_a.so, which finds the next
 *                         xdm_next_probe with dlsym(RTLD_NEXT)
 *   hold               -> hold; then held once a line (or EOF) is read
 *                         from stdin
 *   module:SIZE        -> module SIZE RC: module_alloc(SIZE) of the shared
 *                         object $PRELOAD_TEST_MODULE
 *   threads:T:N:SIZE   -> threads RC: T threads on this thread's device,
 *                         each N cuMemAlloc/cuMemFree pairs of SIZE; RC is
 *                         the first failure, or 0
 *   abort, exit        -> no line: abort(), or exit(0), holding whatever
 *                         is allocated
 *
 * At the end it returns 0 without freeing anything.  Usage errors exit 2,
 * a driver that cannot be reached exits 1.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PRELOAD_USER_LINKED
#include "tests/preload/fake_cuda.h"
#else
#include "preload/cuda_abi.h"
#endif

/* The CUDA version this program says it was built for. */
#define USER_CUDA_VERSION 13000

typedef CUresult (*user_init_fn)(unsigned int flags);

/*
 * The entry points: member, type, base name, ABI name, and the ABI name
 * of the per-thread default stream's variant.
 */
#define USER_ENTRY_POINTS(X)							\
	X(init, user_init_fn, cuInit, cuInit, cuInit)				\
	X(alloc, cu_mem_alloc_fn, cuMemAlloc, cuMemAlloc_v2, cuMemAlloc_v2)	\
	X(alloc_pitch, cu_mem_alloc_pitch_fn, cuMemAllocPitch, cuMemAllocPitch_v2, \
	  cuMemAllocPitch_v2)							\
	X(alloc_managed, cu_mem_alloc_managed_fn, cuMemAllocManaged,		\
	  cuMemAllocManaged, cuMemAllocManaged)					\
	X(free, cu_mem_free_fn, cuMemFree, cuMemFree_v2, cuMemFree_v2)		\
	X(alloc_async, cu_mem_alloc_async_fn, cuMemAllocAsync, cuMemAllocAsync,	\
	  cuMemAllocAsync_ptsz)							\
	X(alloc_from_pool, cu_mem_alloc_from_pool_async_fn, cuMemAllocFromPoolAsync, \
	  cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)		\
	X(free_async, cu_mem_free_async_fn, cuMemFreeAsync, cuMemFreeAsync,	\
	  cuMemFreeAsync_ptsz)							\
	X(create, cu_mem_create_fn, cuMemCreate, cuMemCreate, cuMemCreate)	\
	X(release, cu_mem_release_fn, cuMemRelease, cuMemRelease, cuMemRelease) \
	X(get_info, cu_mem_get_info_fn, cuMemGetInfo, cuMemGetInfo_v2,		\
	  cuMemGetInfo_v2)							\
	X(default_pool, cu_device_get_default_mem_pool_fn, cuDeviceGetDefaultMemPool, \
	  cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)			\
	X(ctx_get_device, cu_ctx_get_device_fn, cuCtxGetDevice, cuCtxGetDevice,	\
	  cuCtxGetDevice)

static struct {
#define USER_MEMBER(member, type, base, abi, ptsz) type member;
	USER_ENTRY_POINTS(USER_MEMBER)
#undef USER_MEMBER
	/* The fake's hooks; NULL over a driver without them. */
	void (*set_device)(int ordinal);
	unsigned long long (*calls)(const char *symbol);
	unsigned long long (*used)(int physical);
} drv;

/* How an entry of the list was made, hence how it is freed. */
enum user_kind {
	USER_MEM,		/* cuMemAlloc, Pitch, Managed */
	USER_POOLED,		/* cuMemAllocAsync, FromPoolAsync */
	USER_HANDLE,		/* cuMemCreate */
};

struct user_alloc {
	unsigned long long key;		/* pointer or handle */
	enum user_kind kind;
	bool live;
};

static struct user_alloc *allocs;
static size_t nallocs, cap_allocs;

struct user_thread {
	pthread_t tid;
	unsigned long long rounds;
	size_t bytes;
	CUdevice dev;
	CUresult rc;
};

static __attribute__((format(printf, 1, 2))) void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static __attribute__((noreturn, format(printf, 2, 3))) void die(int status, const char *fmt,
								  ...)
{
	va_list ap;

	fputs("preload_user: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

#ifdef PRELOAD_USER_LINKED
static void load_driver(bool ptds, bool direct)
{
#define USER_BIND(member, type, base, abi, ptsz) drv.member = ptds ? ptsz : abi;
	USER_ENTRY_POINTS(USER_BIND)
#undef USER_BIND
	drv.set_device = fakeCudaSetDevice;
	drv.calls = fakeCudaCalls;
	drv.used = fakeCudaUsed;
}
#else
static void *load_entry(void *h, cu_get_proc_address_fn gpa, bool ptds, bool direct,
			const char *base, const char *abi, const char *ptsz)
{
	CUdriverProcAddressQueryResult status = 0;
	const char *name = ptds ? ptsz : abi;
	void *p = NULL;
	CUresult rc;

	if (direct) {
		p = dlsym(h, name);
		if (!p)
			die(1, "dlsym %s: %s", name, dlerror());
		return p;
	}
	rc = gpa(base, &p, USER_CUDA_VERSION,
		 ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT,
		 &status);
	if (rc != CUDA_SUCCESS || !p)
		die(1, "cuGetProcAddress %s: %d (status %d)", base, rc, status);
	return p;
}

static void load_driver(bool ptds, bool direct)
{
	cu_get_proc_address_fn gpa = NULL;
	void *h;

	h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		die(1, "dlopen libcuda.so.1: %s", dlerror());
	if (!direct) {
		gpa = (cu_get_proc_address_fn)dlsym(h, "cuGetProcAddress_v2");
		if (!gpa)
			die(1, "dlsym cuGetProcAddress_v2: %s", dlerror());
	}
#define USER_LOAD(member, type, base, abi, ptsz) \
	drv.member = (type)load_entry(h, gpa, ptds, direct, #base, #abi, #ptsz);
	USER_ENTRY_POINTS(USER_LOAD)
#undef USER_LOAD
	drv.set_device = (void (*)(int))dlsym(h, "fakeCudaSetDevice");
	drv.calls = (unsigned long long (*)(const char *))dlsym(h, "fakeCudaCalls");
	drv.used = (unsigned long long (*)(int))dlsym(h, "fakeCudaUsed");
}
#endif

/* A count of bytes (or of anything), decimal with a binary K, M or G. */
static bool parse_num(const char *s, size_t len, unsigned long long *out)
{
	unsigned long long v = 0;
	unsigned int shift = 0;
	size_t i;

	if (!len)
		return false;
	for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (~0ull - 9) / 10)
			return false;
		v = v * 10 + (unsigned long long)(s[i] - '0');
	}
	if (!i)
		return false;
	if (i + 1 == len) {
		shift = s[i] == 'K' ? 10 : s[i] == 'M' ? 20 : s[i] == 'G' ? 30 : 0;
		if (!shift)
			return false;
	} else if (i != len) {
		return false;
	}
	if (v > ~0ull >> shift)
		return false;
	*out = v << shift;
	return true;
}

/* Exactly n numbers, separated by ':', in args. */
static bool parse_args(const char *args, unsigned long long *v, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		const char *end;

		if (!args)
			return false;
		end = strchr(args, ':');
		if (!end)
			end = args + strlen(args);
		if (!parse_num(args, (size_t)(end - args), &v[i]))
			return false;
		args = *end ? end + 1 : NULL;
	}
	return !args;
}

/* NVML's memory figures of device p, as a monitoring agent reads them. */
static void op_nvml(unsigned long long p, bool v2)
{
	struct {
		unsigned long long total, free, used;
	} m = { 0 };
	struct {
		unsigned int version;
		unsigned long long total, reserved, free, used;
	} m2 = { 0 };
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	int (*init)(void), (*get)(unsigned int, void **), (*info)(void *, void *);
	void *device = NULL;
	int rc;

	if (!h)
		die(1, "nvml: no libnvidia-ml.so.1: %s", dlerror());
	init = (int (*)(void))dlsym(h, "nvmlInit_v2");
	get = (int (*)(unsigned int, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	info = (int (*)(void *, void *))dlsym(h, v2 ? "nvmlDeviceGetMemoryInfo_v2" :
						      "nvmlDeviceGetMemoryInfo");
	if (!init || !get || !info)
		die(1, "nvml: libnvidia-ml.so.1 lacks a call");
	rc = init();
	if (!rc)
		rc = get((unsigned int)p, &device);
	if (!rc)
		rc = info(device, v2 ? (void *)&m2 : (void *)&m);
	if (v2)
		say("nvml2 %d %llu %llu %llu %llu", rc, m2.free, m2.total, m2.used, m2.reserved);
	else
		say("nvml %d %llu %llu %llu", rc, m.free, m.total, m.used);
}

/* op is name, or name:ARGS (*args then points at ARGS, else is NULL). */
static bool op_is(const char *op, const char *name, const char **args)
{
	size_t n = strlen(name);

	if (strncmp(op, name, n) || (op[n] && op[n] != ':'))
		return false;
	*args = op[n] ? op + n + 1 : NULL;
	return true;
}

static void keep(unsigned long long key, enum user_kind kind)
{
	if (nallocs == cap_allocs) {
		size_t cap = cap_allocs ? 2 * cap_allocs : 64;
		struct user_alloc *a = realloc(allocs, cap * sizeof(*a));

		if (!a)
			die(1, "out of host memory");
		allocs = a;
		cap_allocs = cap;
	}
	allocs[nallocs++] = (struct user_alloc){ .key = key, .kind = kind, .live = true };
}

static CUresult free_entry(struct user_alloc *a)
{
	CUresult rc;

	if (a->kind == USER_HANDLE)
		rc = drv.release(a->key);
	else if (a->kind == USER_POOLED)
		rc = drv.free_async(a->key, NULL);
	else
		rc = drv.free(a->key);
	if (rc == CUDA_SUCCESS)
		a->live = false;
	return rc;
}

static void op_alloc(const char *name, size_t bytes)
{
	CUmemGenericAllocationHandle handle = 0;
	CUdeviceptr p = 0;
	CUmemoryPool pool = NULL;
	CUdevice dev = 0;
	CUresult rc;

	if (!strcmp(name, "alloc")) {
		rc = drv.alloc(&p, bytes);
		if (rc == CUDA_SUCCESS)
			keep(p, USER_MEM);
	} else if (!strcmp(name, "managed")) {
		/* CU_MEM_ATTACH_GLOBAL */
		rc = drv.alloc_managed(&p, bytes, 1);
		if (rc == CUDA_SUCCESS)
			keep(p, USER_MEM);
	} else if (!strcmp(name, "async")) {
		rc = drv.alloc_async(&p, bytes, NULL);
		if (rc == CUDA_SUCCESS)
			keep(p, USER_POOLED);
	} else if (!strcmp(name, "pool")) {
		rc = drv.ctx_get_device(&dev);
		if (rc == CUDA_SUCCESS)
			rc = drv.default_pool(&pool, dev);
		if (rc == CUDA_SUCCESS)
			rc = drv.alloc_from_pool(&p, bytes, pool, NULL);
		if (rc == CUDA_SUCCESS)
			keep(p, USER_POOLED);
	} else {
		struct xdm_cu_alloc_prop prop = {
			.type = 1,	/* CU_MEM_ALLOCATION_TYPE_PINNED */
			.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE },
		};

		rc = drv.ctx_get_device(&dev);
		prop.location.id = dev;
		if (rc == CUDA_SUCCESS)
			rc = drv.create(&handle, bytes, &prop, 0);
		if (rc == CUDA_SUCCESS)
			keep(handle, USER_HANDLE);
	}
	say("%s %zu %d", name, bytes, rc);
}

static void op_pitch(size_t width, size_t height)
{
	CUdeviceptr p = 0;
	size_t pitch = 0;
	CUresult rc;

	rc = drv.alloc_pitch(&p, &pitch, width, height, 4);
	if (rc == CUDA_SUCCESS)
		keep(p, USER_MEM);
	say("pitch %zu %zu %d %zu", width, height, rc, pitch);
}

static void op_freeall(void)
{
	size_t i, n = 0;

	for (i = 0; i < nallocs; i++)
		if (allocs[i].live && free_entry(&allocs[i]) == CUDA_SUCCESS)
			n++;
	say("freeall %zu", n);
}

static void op_info(void)
{
	size_t free_bytes = 0, total = 0;
	CUresult rc;

	rc = drv.get_info(&free_bytes, &total);
	say("info %d %zu %zu", rc, free_bytes, total);
}

static void op_hold(void)
{
	int c;

	say("hold");
	do
		c = getchar();
	while (c != '\n' && c != EOF);
	say("held");
}

static void op_module(size_t bytes)
{
	const char *path = getenv("PRELOAD_TEST_MODULE");
	int (*module_alloc)(size_t);
	void *h;

	if (!path)
		die(2, "module: PRELOAD_TEST_MODULE is not set");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		die(1, "dlopen %s: %s", path, dlerror());
	module_alloc = (int (*)(size_t))dlsym(h, "module_alloc");
	if (!module_alloc)
		die(1, "dlsym module_alloc: %s", dlerror());
	say("module %zu %d", bytes, module_alloc(bytes));
}

static void op_async_pairs(unsigned long long n, size_t bytes)
{
	CUresult rc = CUDA_SUCCESS;
	CUdeviceptr p;

	for (unsigned long long i = 0; i < n && rc == CUDA_SUCCESS; i++) {
		rc = drv.alloc_async(&p, bytes, NULL);
		if (rc == CUDA_SUCCESS)
			rc = drv.free_async(p, NULL);
	}
	say("asyncpairs %d", rc);
}

static void op_fork(size_t bytes)
{
	CUdeviceptr p;
	pid_t child;
	int status = -1;

	fflush(stdout);
	child = fork();
	if (child < 0)
		die(1, "fork failed");
	if (child == 0) {
		say("child %zu %d", bytes, drv.alloc(&p, bytes));
		exit(0);
	}
	if (waitpid(child, &status, 0) != child)
		die(1, "waitpid failed");
	say("fork %zu %d", bytes, WIFEXITED(status) ? WEXITSTATUS(status) : 128);
}

static void op_next(void)
{
	int (*after)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "xdm_next_probe_after");

	if (!after)
		die(2, "next: tests/preload/next_a.so is not preloaded");
	say("next %d", after());
}

static void *churn(void *arg)
{
	struct user_thread *t = arg;
	unsigned long long i;
	CUdeviceptr p;

	/* A new thread starts on device 0: follow the thread that made it. */
	if (drv.set_device)
		drv.set_device(t->dev);
	for (i = 0; i < t->rounds; i++) {
		t->rc = drv.alloc(&p, t->bytes);
		if (t->rc != CUDA_SUCCESS)
			break;
		t->rc = drv.free(p);
		if (t->rc != CUDA_SUCCESS)
			break;
	}
	return NULL;
}

static void op_threads(unsigned long long nthreads, unsigned long long rounds, size_t bytes)
{
	struct user_thread *t;
	CUresult rc = CUDA_SUCCESS;
	CUdevice dev = 0;
	size_t i, started;

	t = calloc(nthreads, sizeof(*t));
	if (!t)
		die(1, "out of host memory");
	rc = drv.ctx_get_device(&dev);
	for (started = 0; rc == CUDA_SUCCESS && started < nthreads; started++) {
		t[started].rounds = rounds;
		t[started].bytes = bytes;
		t[started].dev = dev;
		if (pthread_create(&t[started].tid, NULL, churn, &t[started]))
			die(1, "pthread_create failed");
	}
	for (i = 0; i < started; i++) {
		pthread_join(t[i].tid, NULL);
		if (rc == CUDA_SUCCESS)
			rc = t[i].rc;
	}
	free(t);
	say("threads %d", rc);
}

static void run_op(const char *op)
{
	static const char *const allocs_by_size[] = { "alloc", "managed", "async", "pool",
						      "create" };
	unsigned long long v[3];
	const char *args;
	size_t i;

	for (i = 0; i < sizeof(allocs_by_size) / sizeof(allocs_by_size[0]); i++) {
		if (!op_is(op, allocs_by_size[i], &args))
			continue;
		if (!parse_args(args, v, 1))
			goto usage;
		op_alloc(allocs_by_size[i], v[0]);
		return;
	}
	if (op_is(op, "pitch", &args)) {
		if (!parse_args(args, v, 2))
			goto usage;
		op_pitch(v[0], v[1]);
	} else if (op_is(op, "free", &args)) {
		if (!parse_args(args, v, 1) || v[0] >= nallocs)
			goto usage;
		say("free %llu %d", v[0], free_entry(&allocs[v[0]]));
	} else if (op_is(op, "freeall", &args) && !args) {
		op_freeall();
	} else if (op_is(op, "info", &args) && !args) {
		op_info();
	} else if (op_is(op, "device", &args)) {
		if (!parse_args(args, v, 1) || v[0] > 1024)
			goto usage;
		if (!drv.set_device)
			die(2, "device: the driver has no fakeCudaSetDevice");
		drv.set_device((int)v[0]);
		say("device %llu", v[0]);
	} else if (op_is(op, "calls", &args) && args) {
		if (!drv.calls)
			die(2, "calls: the driver has no fakeCudaCalls");
		say("calls %s %llu", args, drv.calls(args));
	} else if (op_is(op, "used", &args)) {
		if (!parse_args(args, v, 1) || v[0] > 1024)
			goto usage;
		if (!drv.used)
			die(2, "used: the driver has no fakeCudaUsed");
		say("used %llu %llu", v[0], drv.used((int)v[0]));
	} else if (op_is(op, "nvml", &args) || op_is(op, "nvml2", &args)) {
		if (!parse_args(args, v, 1))
			goto usage;
		op_nvml(v[0], op[4] == '2');
	} else if (op_is(op, "asyncpairs", &args)) {
		if (!parse_args(args, v, 2))
			goto usage;
		op_async_pairs(v[0], v[1]);
	} else if (op_is(op, "fork", &args)) {
		if (!parse_args(args, v, 1))
			goto usage;
		op_fork(v[0]);
	} else if (op_is(op, "next", &args) && !args) {
		op_next();
	} else if (op_is(op, "hold", &args) && !args) {
		op_hold();
	} else if (op_is(op, "module", &args)) {
		if (!parse_args(args, v, 1))
			goto usage;
		op_module(v[0]);
	} else if (op_is(op, "threads", &args)) {
		if (!parse_args(args, v, 3) || !v[0] || v[0] > 1024)
			goto usage;
		op_threads(v[0], v[1], v[2]);
	} else if (op_is(op, "abort", &args) && !args) {
		abort();
	} else if (op_is(op, "exit", &args) && !args) {
		exit(0);
	} else {
		goto usage;
	}
	return;
usage:
	die(2, "bad operation '%s' (see the head of tests/preload/preload_user.c)", op);
}

int main(int argc, char **argv)
{
	bool ptds = false, direct = false;
	CUresult rc;
	int i;

	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--ptds"))
			ptds = true;
		else if (!strcmp(argv[i], "--direct"))
			direct = true;
		else
			die(2, "unknown option %s", argv[i]);
	}
	load_driver(ptds, direct);
	rc = drv.init(0);
	if (rc != CUDA_SUCCESS)
		die(1, "cuInit: %d", rc);
	for (; i < argc; i++)
		run_op(argv[i]);
	return 0;
}
