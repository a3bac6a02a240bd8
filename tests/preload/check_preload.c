/* SPDX-License-Identifier: MIT */
/*
 * check_preload.c - libxdm-preload.so over the fake driver
 * (tests/preload/fake_cuda.c): the shim's interposition on every path a
 * program reaches the driver by, its charges and refusals, cuMemGetInfo's
 * rewrite, one budget for several processes, the keying by UUID, xdm's
 * own modules passing uncounted, and its failure modes.
 *
 * Each test runs tests/preload/preload_user (an unmodified program) with
 * LD_PRELOAD naming the shim of this build tree and LD_LIBRARY_PATH
 * finding the fake libcuda.so.1, in a budget directory of its own, and
 * watches the budget segment from outside through lib/budget_segment's
 * reader, as xdmctl does.  "hold" stops the program with its memory held
 * until the test writes a line.  The programs charge exactly
 * (XDM_PRELOAD_CREDIT=0), so that the segment's usage is the sum of what
 * they hold, except in the test of the default, credit=auto.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"

#define MIB (1024ull * 1024ull)
#define FAKE_TOTAL (1024 * MIB)

extern char **environ;

/* ---- the program under the shim ----------------------------------------- */

struct user {
	pid_t pid;
	FILE *out;	/* its stdout, line by line */
	int in;		/* its stdin: a line releases a hold */
	char err[320];	/* the file its stderr goes to */
};

static char top_builddir[1024];
static char dir[256];	/* this test's budget directory */

static void path_in_build(char *out, size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", top_builddir, rel);
}

/* A limit a GPU-sharing scheduler injects: the test's own, never this process's. */
static bool scheduler_variable(const char *setting)
{
	return !strncmp(setting, "CUDA_DEVICE_MEMORY_LIMIT", 24) ||
	       !strncmp(setting, "GPU_MEMORY_LIMIT=", 17) || !strncmp(setting, "GPU_PORTION=", 12);
}

/*
 * Start program (relative to the build tree) with args, under the shim,
 * with extra "NAME=VALUE" settings (NULL-terminated) over this process's
 * environment.
 */
static void user_start_program(struct user *u, const char *program, const char *const *extra,
			       const char *const *args)
{
	char shim[1200], libdir[1200], path[1200], preload[1300], ldpath[1300], budget_dir[300];
	char asan[512];
	const char *argv[64];
	const char *envp[256];
	int in[2], out[2], n = 0, a = 0;

	path_in_build(shim, sizeof(shim), "preload/.libs/libxdm-preload.so");
	path_in_build(libdir, sizeof(libdir), "tests/preload/fake/.libs");
	path_in_build(path, sizeof(path), program);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", shim);
	/* A test may preload more after the shim: its LD_PRELOAD is whole. */
	for (const char *const *e = extra; e && *e; e++)
		if (!strncmp(*e, "LD_PRELOAD=", 11))
			preload[0] = '\0';
	snprintf(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s", libdir);
	snprintf(budget_dir, sizeof(budget_dir), "XDM_BUDGET_DIR=%s", dir);
	/* An instrumented program with the shim first: ASan would refuse. */
	snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
		 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
		 getenv("ASAN_OPTIONS") ? ":" : "");
	if (preload[0])
		envp[n++] = preload;
	envp[n++] = ldpath;
	envp[n++] = budget_dir;
	envp[n++] = asan;
	for (const char *const *e = extra; e && *e; e++)
		envp[n++] = *e;
	/* Exact charges unless a test says otherwise (an earlier entry wins). */
	envp[n++] = "XDM_PRELOAD_CREDIT=0";
	for (char **e = environ; *e && n < 250; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "LD_LIBRARY_PATH=", 16) &&
		    strncmp(*e, "XDM_", 4) && strncmp(*e, "ASAN_OPTIONS=", 13) &&
		    strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) && strncmp(*e, "FAKE_CUDA_", 10) &&
		    !scheduler_variable(*e))
			envp[n++] = *e;
	envp[n] = NULL;
	argv[a++] = path;
	for (const char *const *p = args; *p; p++)
		argv[a++] = *p;
	argv[a] = NULL;

	snprintf(u->err, sizeof(u->err), "%s/stderr-%d", dir, (int)getpid());
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	u->pid = fork();
	ck_assert_int_ge(u->pid, 0);
	if (u->pid == 0) {
		int fd = open(u->err, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(in[0], 0);
		dup2(out[1], 1);
		if (fd >= 0)
			dup2(fd, 2);
		close(in[1]);
		close(out[0]);
		execve(path, (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	u->in = in[1];
	u->out = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(u->out);
}

static void user_start(struct user *u, const char *const *extra, const char *const *args)
{
	user_start_program(u, "tests/preload/preload_user", extra, args);
}

/* The next line of its output, without the newline; fails at EOF. */
static const char *user_line(struct user *u)
{
	static char line[512];

	if (!fgets(line, sizeof(line), u->out))
		ck_abort_msg("the program ended early; its stderr: %s", u->err);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

static void user_expect(struct user *u, const char *want)
{
	const char *got = user_line(u);

	ck_assert_msg(!strcmp(got, want), "program said '%s', not '%s'", got, want);
}

static void user_release(struct user *u)
{
	ck_assert_int_eq(write(u->in, "\n", 1), 1);
	user_expect(u, "held");
}

/* Wait for it; its exit status (or 128 + signal). */
static int user_wait(struct user *u)
{
	int status;

	close(u->in);
	fclose(u->out);
	ck_assert_int_eq(waitpid(u->pid, &status, 0), u->pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Lines of its stderr that contain what. */
static int stderr_lines_with(const struct user *u, const char *what)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(u->err, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* ---- the budget from outside --------------------------------------------- */

/* The fake's device p (physical index), named as xdm names a GPU. */
static void fake_uuid(int p, char *out, size_t len)
{
	unsigned char b[16] = { 0xfa, 0xce, (unsigned char)p };

	for (int i = 3; i < 16; i++)
		b[i] = (unsigned char)(p + 1);
	xdm_uuid_format(b, out, len);
}

/*
 * A copy of the segment of physical device p in this test's directory, or
 * NULL: read as xdmctl reads it, never mapped (lib/budget_segment/reader.c).
 */
static struct budget_shm *segment_of(int p)
{
	char uuid[64], name[128], why[256];
	struct budget_shm *s = malloc(sizeof(*s));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);

	ck_assert_ptr_nonnull(s);
	ck_assert_int_ge(dfd, 0);
	fake_uuid(p, uuid, sizeof(uuid));
	snprintf(name, sizeof(name), "xdm-budget-%s", uuid);
	if (budget_segment_read(dfd, name, s, NULL, NULL, why, sizeof(why)) != BUDGET_READ_OK) {
		free(s);
		s = NULL;
	}
	close(dfd);
	return s;
}

static uint64_t used_of(int p)
{
	struct budget_shm *s = segment_of(p);
	uint64_t used;

	if (!s)
		return 0;	/* no segment: nobody holds anything */
	used = atomic_load(&s->used);
	free(s);
	return used;
}

/* The slot of pid in device p's segment: its kind, and what it holds. */
static bool slot_of(int p, pid_t pid, uint32_t *kind, uint64_t *used)
{
	struct budget_shm *s = segment_of(p);
	bool found = false;

	if (!s)
		return false;
	for (unsigned int i = 0; i < BUDGET_SLOTS && !found; i++) {
		if (atomic_load(&s->slots[i].pid) != pid)
			continue;
		*kind = s->slots[i].kind;
		*used = atomic_load(&s->slots[i].used);
		found = true;
	}
	free(s);
	return found;
}

/*
 * The one group in device p's segment with members: its name, limit and
 * usage, and how many members it has; false if there is not exactly one.
 */
static bool group_of(int p, char *name, size_t len, uint64_t *limit, uint64_t *used,
		     uint32_t *members)
{
	struct budget_shm *s = segment_of(p);
	int found = 0;

	if (!s)
		return false;
	for (unsigned int i = 0; i < BUDGET_GROUPS; i++) {
		struct budget_group *g = &s->groups[i];

		if (!g->members)
			continue;
		found++;
		snprintf(name, len, "%s", g->name);
		*limit = atomic_load(&g->limit);
		*used = atomic_load(&g->used);
		*members = g->members;
	}
	free(s);
	return found == 1;
}

/* ---- fixtures ----------------------------------------------------------- */

static void setup(void)
{
	const char *b = getenv("XDM_TOP_BUILDDIR");

	snprintf(top_builddir, sizeof(top_builddir), "%s", b ? b : ".");
	snprintf(dir, sizeof(dir), "/tmp/xdm-preload-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[600];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* ---- tests ---------------------------------------------------------------- */

/* Through cuGetProcAddress, as the CUDA runtime reaches the driver. */
START_TEST(test_charge_and_uncharge)
{
	const char *args[] = { "alloc:3M", "async:1M", "hold", "free:0", "free:1", "hold",
			       NULL };
	struct user u;
	uint32_t kind;
	uint64_t held;

	user_start(&u, NULL, args);
	user_expect(&u, "alloc 3145728 0");
	user_expect(&u, "async 1048576 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 4 * MIB);
	ck_assert(slot_of(0, u.pid, &kind, &held));
	ck_assert_uint_eq(kind, BUDGET_SLOT_PRELOAD);
	ck_assert_uint_eq(held, 4 * MIB);
	user_release(&u);
	user_expect(&u, "free 0 0");
	user_expect(&u, "free 1 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 0);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* Every kind of allocation, on each path: charged while held, all back after. */
static void every_kind(const char *mode)
{
	const char *args[] = { mode, "alloc:1M", "managed:2M", "async:4M", "pool:8M",
			       "create:16M", "pitch:1000:1024", "hold", "freeall", "hold", NULL };
	const char *const *a = mode ? args : args + 1;
	struct user u;

	user_start(&u, NULL, a);
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "managed 2097152 0");
	user_expect(&u, "async 4194304 0");
	user_expect(&u, "pool 8388608 0");
	user_expect(&u, "create 16777216 0");
	/* The fake's pitch is the width rounded up to 512: 1024 rows of 1024. */
	user_expect(&u, "pitch 1000 1024 0 1024");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 31 * MIB + 1024 * 1024);
	user_release(&u);
	user_expect(&u, "freeall 6");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 0);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}

START_TEST(test_every_kind_by_proc_address)
{
	every_kind(NULL);
}
END_TEST

START_TEST(test_every_kind_per_thread_stream)
{
	every_kind("--ptds");
}
END_TEST

START_TEST(test_every_kind_by_dlsym)
{
	every_kind("--direct");
}
END_TEST

/* A program linked with -lcuda binds the exported names at load time. */
START_TEST(test_linked_program)
{
	const char *args[] = { "alloc:2M", "async:2M", "hold", "freeall", "hold", NULL };
	struct user u;

	user_start_program(&u, "tests/preload/preload_user_linked", NULL, args);
	user_expect(&u, "alloc 2097152 0");
	user_expect(&u, "async 2097152 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 4 * MIB);
	user_release(&u);
	user_expect(&u, "freeall 2");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 0);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* Past the limit: the driver's own OOM, one line on stderr per burst. */
START_TEST(test_refusal_is_out_of_memory)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=8M", NULL };
	const char *args[] = { "alloc:6M", "alloc:4M", "async:3M", "alloc:2M", "alloc:3M",
			       "calls:cuMemAlloc_v2", "hold", NULL };
	struct user u;

	user_start(&u, extra, args);
	user_expect(&u, "alloc 6291456 0");
	user_expect(&u, "alloc 4194304 2");
	user_expect(&u, "async 3145728 2");
	user_expect(&u, "alloc 2097152 0");
	user_expect(&u, "alloc 3145728 2");
	/* A refused call never reached the driver. */
	user_expect(&u, "calls cuMemAlloc_v2 2");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 8 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
	/* Two bursts (the success between them ends the first). */
	ck_assert_int_eq(stderr_lines_with(&u, "xdm-preload: "), 2);
	ck_assert_int_eq(stderr_lines_with(&u, "4194304 bytes requested, 2097152 remaining of "
					   "limit 8388608"), 1);
	ck_assert_int_eq(stderr_lines_with(&u, "CUDA_ERROR_OUT_OF_MEMORY"), 2);
}
END_TEST

/* cuMemGetInfo: the limit is the total, its room what is free. */
START_TEST(test_mem_get_info)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=64M", NULL };
	const char *args[] = { "info", "alloc:16M", "info", NULL };
	struct user u;

	user_start(&u, extra, args);
	user_expect(&u, "info 0 67108864 67108864");
	user_expect(&u, "alloc 16777216 0");
	user_expect(&u, "info 0 50331648 67108864");
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* NVML's figures too, for the device the program allocates on. */
START_TEST(test_nvml_memory_info)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=64M", NULL };
	const char *args[] = { "nvml:0", "alloc:16M", "nvml:0", "nvml2:0", NULL };
	struct user u;

	user_start(&u, extra, args);
	/* Before any CUDA allocation the shim knows no budget of the device. */
	user_expect(&u, "nvml 0 1073741824 1073741824 0");
	user_expect(&u, "alloc 16777216 0");
	user_expect(&u, "nvml 0 50331648 67108864 16777216");
	user_expect(&u, "nvml2 0 50331648 67108864 16777216 0");
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* Two programs on one device: one budget, and the exit gives back. */
START_TEST(test_two_processes_one_budget)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=8M", NULL };
	const char *a_args[] = { "alloc:6M", "hold", NULL };
	const char *b_args[] = { "alloc:4M", "hold", "alloc:4M", "hold", NULL };
	struct user a, b;

	user_start(&a, extra, a_args);
	user_expect(&a, "alloc 6291456 0");
	user_expect(&a, "hold");
	user_start(&b, extra, b_args);
	user_expect(&b, "alloc 4194304 2");
	user_expect(&b, "hold");
	/* a exits holding 6M without freeing: its slot is given back. */
	user_release(&a);
	ck_assert_int_eq(user_wait(&a), 0);
	ck_assert_uint_eq(used_of(0), 0);
	user_release(&b);
	user_expect(&b, "alloc 4194304 0");
	user_expect(&b, "hold");
	ck_assert_uint_eq(used_of(0), 4 * MIB);
	user_release(&b);
	ck_assert_int_eq(user_wait(&b), 0);
	ck_assert_uint_eq(used_of(0), 0);
}
END_TEST

/* A program killed holding memory: the next refusal takes it back. */
START_TEST(test_dead_process_reclaimed)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=8M", NULL };
	const char *a_args[] = { "alloc:6M", "abort", NULL };
	const char *b_args[] = { "alloc:6M", "hold", NULL };
	struct user a, b;

	user_start(&a, extra, a_args);
	user_expect(&a, "alloc 6291456 0");
	ck_assert_int_eq(user_wait(&a), 128 + SIGABRT);
	user_start(&b, extra, b_args);
	user_expect(&b, "alloc 6291456 0");
	user_expect(&b, "hold");
	ck_assert_uint_eq(used_of(0), 6 * MIB);
	user_release(&b);
	ck_assert_int_eq(user_wait(&b), 0);
}
END_TEST

/* The budget is the device's, whatever CUDA_VISIBLE_DEVICES calls it. */
START_TEST(test_keyed_by_uuid)
{
	const char *a_extra[] = { "FAKE_CUDA_DEVICES=2", "CUDA_VISIBLE_DEVICES=1,0", NULL };
	const char *b_extra[] = { "FAKE_CUDA_DEVICES=2", NULL };
	const char *a_args[] = { "alloc:3M", "hold", NULL };
	const char *b_args[] = { "device:1", "alloc:5M", "device:0", "alloc:7M", "hold", NULL };
	struct user a, b;

	user_start(&a, a_extra, a_args);	/* its device 0 is physical 1 */
	user_expect(&a, "alloc 3145728 0");
	user_expect(&a, "hold");
	user_start(&b, b_extra, b_args);
	user_expect(&b, "device 1");
	user_expect(&b, "alloc 5242880 0");
	user_expect(&b, "device 0");
	user_expect(&b, "alloc 7340032 0");
	user_expect(&b, "hold");
	ck_assert_uint_eq(used_of(1), 8 * MIB);
	ck_assert_uint_eq(used_of(0), 7 * MIB);
	user_release(&a);
	user_release(&b);
	ck_assert_int_eq(user_wait(&a), 0);
	ck_assert_int_eq(user_wait(&b), 0);
}
END_TEST

/* An xdm module's own driver calls are its budget layer's to charge. */
START_TEST(test_xdm_module_uncounted)
{
	char module[1200], setting[1300];
	const char *extra[] = { setting, NULL };
	const char *args[] = { "module:4M", "alloc:1M", "hold", NULL };
	struct user u;

	path_in_build(module, sizeof(module), "tests/preload/.libs/xdm_like_module.so");
	snprintf(setting, sizeof(setting), "PRELOAD_TEST_MODULE=%s", module);
	user_start(&u, extra, args);
	user_expect(&u, "module 4194304 0");
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 1 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* No budget can be joined: refused (the default), or uncounted if open. */
START_TEST(test_fail_closed_and_open)
{
	const char *closed[] = { "XDM_PRELOAD_LIMIT=lots", NULL };
	const char *open_[] = { "XDM_PRELOAD_LIMIT=lots", "XDM_PRELOAD_FAIL=open", NULL };
	const char *args[] = { "alloc:1M", "alloc:1M", NULL };
	struct user u;

	user_start(&u, closed, args);
	user_expect(&u, "alloc 1048576 2");
	user_expect(&u, "alloc 1048576 2");
	ck_assert_int_eq(user_wait(&u), 0);
	ck_assert_int_eq(stderr_lines_with(&u, "XDM_PRELOAD_LIMIT 'lots' is not a size"), 2);
	ck_assert_int_eq(stderr_lines_with(&u, "refused 1048576 bytes"), 1);
	unlink(u.err);

	user_start(&u, open_, args);
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "alloc 1048576 0");
	ck_assert_int_eq(user_wait(&u), 0);
	ck_assert_int_eq(stderr_lines_with(&u, "XDM_PRELOAD_FAIL=open"), 1);
	ck_assert_uint_eq(used_of(0), 0);
}
END_TEST

/*
 * A driver pool that keeps freed memory (a release threshold): its slack
 * is charged at the shim's next look, and given back, the pool trimmed,
 * before the budget refuses anyone of this process.
 */
START_TEST(test_pool_slack)
{
	const char *extra[] = { "XDM_PRELOAD_LIMIT=64M", "FAKE_CUDA_POOL_KEEP=1", NULL };
	const char *args[] = { "async:16M", "free:0", "asyncpairs:40:1M", "hold", "alloc:60M",
			       "used:0", "hold", NULL };
	struct user u;

	user_start(&u, extra, args);
	user_expect(&u, "async 16777216 0");
	user_expect(&u, "free 0 0");
	/* 81 stream-ordered calls: the pool was looked at, 16M kept. */
	user_expect(&u, "asyncpairs 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 16 * MIB);
	user_release(&u);
	/* 60M fits only once the pool gave back what it kept. */
	user_expect(&u, "alloc 62914560 0");
	user_expect(&u, "used 0 62914560");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 60 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* A fork child charges a slot of its own, and its exit leaves the parent's. */
START_TEST(test_fork_child_own_slot)
{
	const char *args[] = { "alloc:2M", "fork:1M", "hold", NULL };
	struct user u;
	uint32_t kind;
	uint64_t held;

	user_start(&u, NULL, args);
	user_expect(&u, "alloc 2097152 0");
	user_expect(&u, "child 1048576 0");
	user_expect(&u, "fork 1048576 0");
	user_expect(&u, "hold");
	ck_assert(slot_of(0, u.pid, &kind, &held));
	ck_assert_uint_eq(held, 2 * MIB);
	ck_assert_uint_eq(used_of(0), 2 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* dlsym(RTLD_NEXT) from an interposer after the shim finds what follows it. */
START_TEST(test_rtld_next_of_another_interposer)
{
	char shim[1200], a[1200], b[1200], preload[3700];
	const char *extra[] = { preload, NULL };
	const char *args[] = { "next", NULL };
	struct user u;

	path_in_build(shim, sizeof(shim), "preload/.libs/libxdm-preload.so");
	path_in_build(a, sizeof(a), "tests/preload/.libs/next_a.so");
	path_in_build(b, sizeof(b), "tests/preload/.libs/next_b.so");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s %s", shim, a, b);
	user_start(&u, extra, args);
	user_expect(&u, "next 2");
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/* Threads allocating and freeing at once: exact at the end. */
START_TEST(test_threads_exact)
{
	const char *args[] = { "alloc:1M", "threads:4:2000:64K", "hold", NULL };
	struct user u;

	user_start(&u, NULL, args);
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "threads 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 1 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
}
END_TEST

/*
 * The default, per-thread credit: the usage holds what the threads drew
 * ahead (less than twice 16M each), a refusal comes only once the
 * refusing thread gave its own back, and the exit gives everything back.
 */
START_TEST(test_credit_auto)
{
	const char *extra[] = { "XDM_PRELOAD_CREDIT=auto", "XDM_PRELOAD_LIMIT=64M", NULL };
	const char *args[] = { "alloc:1M", "alloc:1M", "free:0", "hold", "alloc:62M", "alloc:2M",
			       "alloc:1M", "hold", NULL };
	struct user u;
	uint64_t used;

	user_start(&u, extra, args);
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "free 0 0");
	user_expect(&u, "hold");
	used = used_of(0);
	ck_assert_uint_ge(used, 1 * MIB);
	ck_assert_uint_lt(used, 1 * MIB + 32 * MIB);
	user_release(&u);
	/* 1M held and 62M more; then 2M passes 64M, whatever credit was out,
	 * and the last 1M fits exactly. */
	user_expect(&u, "alloc 65011712 0");
	user_expect(&u, "alloc 2097152 2");
	user_expect(&u, "alloc 1048576 0");
	user_expect(&u, "hold");
	ck_assert_uint_eq(used_of(0), 64 * MIB);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
	ck_assert_uint_eq(used_of(0), 0);
}
END_TEST

/* ---- the limits GPU-sharing schedulers inject ------------------------------ */

/* The name the shim gives a container's group: "container-" and 16 hex digits. */
static bool container_group_name(const char *name)
{
	if (strncmp(name, "container-", 10) || strlen(name) != 26)
		return false;
	return strspn(name + 10, "0123456789abcdef") == 16;
}

/*
 * Under extra, the program's device ordinal (physical p) is held to limit
 * bytes, in group (NULL: the container's): the limit fits, 4K more is
 * refused, and once 4K is given back 4K fits again.  cuMemGetInfo's
 * total is the limit, as HAMi-core reports it.
 */
static void held_to(const char *const *extra, int ordinal, int p, uint64_t limit,
		    const char *group)
{
	char device[32], fill[48], line[96], name[BUDGET_GROUP_NAME_MAX];
	const char *args[] = { device, fill, "alloc:4K", "alloc:4K", "free:1", "alloc:4K",
			       "info", "hold", NULL };
	uint64_t glimit, gused;
	uint32_t members;
	struct user u;

	snprintf(device, sizeof(device), "device:%d", ordinal);
	snprintf(fill, sizeof(fill), "alloc:%" PRIu64, limit - 4096);
	user_start(&u, extra, args);
	snprintf(line, sizeof(line), "device %d", ordinal);
	user_expect(&u, line);
	snprintf(line, sizeof(line), "alloc %" PRIu64 " 0", limit - 4096);
	user_expect(&u, line);
	user_expect(&u, "alloc 4096 0");
	/* The limit is reached: 4K more is the driver's out of memory. */
	user_expect(&u, "alloc 4096 2");
	user_expect(&u, "free 1 0");
	user_expect(&u, "alloc 4096 0");
	snprintf(line, sizeof(line), "info 0 0 %" PRIu64, limit);
	user_expect(&u, line);
	user_expect(&u, "hold");
	ck_assert(group_of(p, name, sizeof(name), &glimit, &gused, &members));
	ck_assert_uint_eq(glimit, limit);
	ck_assert_uint_eq(gused, limit);
	ck_assert_uint_eq(members, 1);
	if (group)
		ck_assert_str_eq(name, group);
	else
		ck_assert_msg(container_group_name(name), "group '%s'", name);
	user_release(&u);
	ck_assert_int_eq(user_wait(&u), 0);
	unlink(u.err);
}

/*
 * HAMi-core's CUDA_DEVICE_MEMORY_LIMIT: every device, the container's
 * processes together (a second process finds the first's usage).
 */
START_TEST(test_hami_whole)
{
	const char *extra[] = { "CUDA_DEVICE_MEMORY_LIMIT=8m", NULL };
	const char *a_args[] = { "alloc:6M", "hold", NULL };
	const char *b_args[] = { "alloc:4M", "alloc:2M", "hold", NULL };
	char name[BUDGET_GROUP_NAME_MAX];
	uint64_t limit, used;
	uint32_t members;
	struct user a, b;

	held_to(extra, 0, 0, 8 * MIB, NULL);
	user_start(&a, extra, a_args);
	user_expect(&a, "alloc 6291456 0");
	user_expect(&a, "hold");
	user_start(&b, extra, b_args);
	user_expect(&b, "alloc 4194304 2");
	user_expect(&b, "alloc 2097152 0");
	user_expect(&b, "hold");
	ck_assert(group_of(0, name, sizeof(name), &limit, &used, &members));
	ck_assert_uint_eq(members, 2);
	ck_assert_uint_eq(used, 8 * MIB);
	user_release(&a);
	user_release(&b);
	ck_assert_int_eq(user_wait(&a), 0);
	ck_assert_int_eq(user_wait(&b), 0);
	/* The refusal names the group, and where its limit came from. */
	ck_assert_int_eq(stderr_lines_with(&b, "the group's limit is CUDA_DEVICE_MEMORY_LIMIT's; "
					   "group 'container-"), 1);
	/* The device's own limit is untouched: the GPU's whole memory. */
	ck_assert_int_eq(stderr_lines_with(&b, "of the group's limit 8388608 (the device "), 1);
}
END_TEST

/*
 * HAMi's device plugin's CUDA_DEVICE_MEMORY_LIMIT_<i>: i is the ordinal
 * the process sees (here physical 1 is ordinal 0), each its own limit.
 */
START_TEST(test_hami_per_device)
{
	const char *extra[] = { "FAKE_CUDA_DEVICES=2", "CUDA_VISIBLE_DEVICES=1,0",
				"CUDA_DEVICE_MEMORY_LIMIT_0=4m", "CUDA_DEVICE_MEMORY_LIMIT_1=12m",
				NULL };

	held_to(extra, 0, 1, 4 * MIB, NULL);
	held_to(extra, 1, 0, 12 * MIB, NULL);
}
END_TEST

/* KAI's GPU_MEMORY_LIMIT, in bytes. */
START_TEST(test_kai_bytes)
{
	const char *extra[] = { "GPU_MEMORY_LIMIT=8388608", NULL };

	held_to(extra, 0, 0, 8 * MIB, NULL);
}
END_TEST

/* KAI's GPU_PORTION: a fraction of the device's memory (the fake's 1 GiB). */
START_TEST(test_kai_portion)
{
	const char *extra[] = { "GPU_PORTION=0.25", NULL };

	held_to(extra, 0, 0, 256 * MIB, NULL);
}
END_TEST

/*
 * xdm's own variables over HAMi's, HAMi's per device over its whole (0
 * there sets none, as in HAMi-core), HAMi's over KAI's, KAI's bytes over
 * its portion; a variable below the one that decides is not read.
 */
START_TEST(test_scheduler_precedence)
{
	const char *xdm_limit[] = { "XDM_BUDGET_GROUP=mine", "XDM_BUDGET_GROUP_LIMIT=4M",
				    "CUDA_DEVICE_MEMORY_LIMIT=junk", "GPU_MEMORY_LIMIT=16M",
				    NULL };
	const char *xdm_name[] = { "XDM_BUDGET_GROUP=mine", "CUDA_DEVICE_MEMORY_LIMIT=8m",
				   "GPU_MEMORY_LIMIT=16M", NULL };
	const char *hami[] = { "FAKE_CUDA_DEVICES=2", "CUDA_DEVICE_MEMORY_LIMIT_0=4m",
			       "CUDA_DEVICE_MEMORY_LIMIT_1=0", "CUDA_DEVICE_MEMORY_LIMIT=8m",
			       "GPU_MEMORY_LIMIT=16M", "GPU_PORTION=0.5", NULL };
	const char *kai[] = { "GPU_MEMORY_LIMIT=16m", "GPU_PORTION=junk", NULL };

	held_to(xdm_limit, 0, 0, 4 * MIB, "mine");
	held_to(xdm_name, 0, 0, 8 * MIB, "mine");
	held_to(hami, 0, 0, 4 * MIB, NULL);
	held_to(hami, 1, 1, 8 * MIB, NULL);
	held_to(kai, 0, 0, 16 * MIB, NULL);
}
END_TEST

/* A value the shim cannot read as its scheduler meant: refused, said why. */
START_TEST(test_scheduler_bad_value)
{
	static const char *const bad[][2] = {
		{ "CUDA_DEVICE_MEMORY_LIMIT=12x", "CUDA_DEVICE_MEMORY_LIMIT '12x' is not a size" },
		{ "CUDA_DEVICE_MEMORY_LIMIT_0=010m",
		  "CUDA_DEVICE_MEMORY_LIMIT_0 '010m' is not a size" },
		{ "GPU_MEMORY_LIMIT=2GiB", "GPU_MEMORY_LIMIT '2GiB' is not a size" },
		{ "GPU_PORTION=1.5", "GPU_PORTION '1.5' is not a portion of one GPU" },
	};
	const char *args[] = { "alloc:1M", "alloc:1M", NULL };

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *extra[] = { bad[i][0], NULL };
		struct user u;

		user_start(&u, extra, args);
		user_expect(&u, "alloc 1048576 2");
		user_expect(&u, "alloc 1048576 2");
		ck_assert_int_eq(user_wait(&u), 0);
		ck_assert_msg(stderr_lines_with(&u, bad[i][1]) == 2, "%s", bad[i][0]);
		ck_assert_int_eq(stderr_lines_with(&u, "its allocations are refused"), 1);
		ck_assert_uint_eq(used_of(0), 0);
		unlink(u.err);
	}
}
END_TEST

static Suite *preload_suite(void)
{
	Suite *s = suite_create("preload");
	TCase *tc = tcase_create("shim");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_charge_and_uncharge);
	tcase_add_test(tc, test_every_kind_by_proc_address);
	tcase_add_test(tc, test_every_kind_per_thread_stream);
	tcase_add_test(tc, test_every_kind_by_dlsym);
	tcase_add_test(tc, test_linked_program);
	tcase_add_test(tc, test_refusal_is_out_of_memory);
	tcase_add_test(tc, test_mem_get_info);
	tcase_add_test(tc, test_nvml_memory_info);
	tcase_add_test(tc, test_two_processes_one_budget);
	tcase_add_test(tc, test_dead_process_reclaimed);
	tcase_add_test(tc, test_keyed_by_uuid);
	tcase_add_test(tc, test_xdm_module_uncounted);
	tcase_add_test(tc, test_fail_closed_and_open);
	tcase_add_test(tc, test_threads_exact);
	tcase_add_test(tc, test_fork_child_own_slot);
	tcase_add_test(tc, test_pool_slack);
	tcase_add_test(tc, test_rtld_next_of_another_interposer);
	tcase_add_test(tc, test_credit_auto);
	suite_add_tcase(s, tc);

	tc = tcase_create("schedulers");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hami_whole);
	tcase_add_test(tc, test_hami_per_device);
	tcase_add_test(tc, test_kai_bytes);
	tcase_add_test(tc, test_kai_portion);
	tcase_add_test(tc, test_scheduler_precedence);
	tcase_add_test(tc, test_scheduler_bad_value);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(preload_suite());
}
