/* SPDX-License-Identifier: MIT */
/*
 * budget_util.h - what the budget's suites share: each test's own segment
 * (key=<prefix>-<test>), a look at it from outside, runtimes over it, and
 * worker processes (tests/process/budget_worker, budget_test.h's protocol).  Each
 * suite includes it once and sets key_prefix in main.
 */
#ifndef XDM_BUDGET_UTIL_H
#define XDM_BUDGET_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <xdm/module.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/budget_test.h"
#include "tests/lib/testutil.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

/* ---- keys and segments -------------------------------------------------- */

/* "<suite><pid of main>": set once in main before any test forks. */
static char key_prefix[32];


static inline void key_of(const char *test, char *key, size_t len)
{
	snprintf(key, len, "%s-%s", key_prefix, test);
}

static inline void shm_name_of(const char *test, char *name, size_t len)
{
	snprintf(name, len, "%s%s-%s", BUDGET_NAME_PREFIX, key_prefix, test);
}

static inline bool segment_exists(const char *test)
{
	char name[128];
	int fd;

	shm_name_of(test, name, sizeof(name));
	fd = shm_open(name, O_RDONLY, 0);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	ck_assert_int_eq(errno, ENOENT);
	return false;
}

/*
 * Map a test's segment, read-only unless writable; waits (TU_PATIENCE_MS at
 * most: a loaded machine can take seconds to start a worker) for it to
 * exist and be ready, as an outside observer must.
 */
static inline struct budget_shm *segment_map(const char *test, bool writable)
{
	struct budget_shm *s;
	char name[128];
	struct stat sb;
	int fd = -1;

	shm_name_of(test, name, sizeof(name));
	for (int i = 0; i < TU_PATIENCE_MS; i++) {
		fd = shm_open(name, writable ? O_RDWR : O_RDONLY, 0);
		if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == sizeof(*s))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		tu_sleep_ms(1);
	}
	ck_assert_msg(fd >= 0, "segment %s never appeared", name);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	s = mmap(NULL, sizeof(*s), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
		 0);
	close(fd);
	ck_assert_ptr_ne(s, MAP_FAILED);
	for (int i = 0; i < TU_PATIENCE_MS && atomic_load(&s->magic) != BUDGET_MAGIC; i++)
		tu_sleep_ms(1);
	ck_assert_msg(atomic_load(&s->magic) == BUDGET_MAGIC, "segment %s never got ready",
		      name);
	return s;
}

/*
 * The segment's lock held, as a stopped process would hold it, for a
 * change planted by hand: an OFD write lock on the header's lock field
 * (lib/budget_segment/lock.c), through a file description of the test's
 * own.  The descriptor, which lets go when closed.
 */
static inline int hold_segment_lock(const char *test)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			   .l_start = (off_t)offsetof(struct budget_shm, lock), .l_len = 1 };
	char name[128];
	int fd;

	shm_name_of(test, name, sizeof(name));
	fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(fcntl(fd, F_OFD_SETLK, &l) == 0, "F_OFD_SETLK: %s", strerror(errno));
	return fd;
}

/* ---- runtimes and attributes ------------------------------------------- */

static inline struct xdm_runtime *budget_rt(const char *test, const char *params,
					      const char *below)
{
	struct xdm_runtime *rt;
	char key[64], stack[256];

	key_of(test, key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s %s | %s", key, params, below);
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "budget");
	return rt;
}

static inline uint64_t attr(struct xdm_runtime *rt, const char *name)
{
	char buf[64], *end;
	uint64_t v;

	TU_OK(xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)));
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && strcmp(end, "\n") == 0, "%s shows '%s'", name, buf);
	return v;
}

static inline enum xdm_status store(struct xdm_runtime *rt, const char *name,
				    const char *value)
{
	return xdm_layer_attr_store(rt, 0, name, value);
}

/* Rows of the processes table, and the bytes of pid's row (or -1). */
static inline int process_rows(struct xdm_runtime *rt, pid_t pid, long long *bytes)
{
	char buf[16384];
	int rows = 0;
	char *line, *save = NULL;

	TU_OK(xdm_layer_attr_show(rt, 0, "processes", buf, sizeof(buf)));
	*bytes = -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long p, b;

		ck_assert_int_eq(sscanf(line, "%lld %lld", &p, &b), 2);
		if (p == pid)
			*bytes = b;
		rows++;
	}
	return rows;
}

static inline void alloc_ok(struct xdm_runtime *rt, size_t bytes, struct xdm_block *b)
{
	TU_OK(xdm_allocate(rt, bytes, 0, "check_budget", b));
	ck_assert_uint_eq(b->bytes, bytes);
}

/* The refusal and its payload. */
static inline void alloc_refused(struct xdm_runtime *rt, size_t bytes, size_t remaining)
{
	struct xdm_block b;
	const struct xdm_error *e;

	ck_assert_int_eq(xdm_allocate(rt, bytes, 0, "check_budget", &b), XDM_E_OUT_OF_BUDGET);
	e = xdm_last_error();
	ck_assert_int_eq(e->code, XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(e->requested, bytes);
	ck_assert_uint_eq(e->remaining, remaining);
}

/* ---- a watcher of the segment ------------------------------------------- */

struct monitor {
	const struct budget_shm *s;
	atomic_bool stop;
	unsigned long long samples;
	unsigned long long over;	/* samples with used > limit */
	uint64_t worst;
};

/*
 * Samples the shared usage as fast as it can, from outside the threads and
 * processes that allocate: a witness of the limit, never a timing.
 */
static inline void *monitor_run(void *arg)
{
	struct monitor *m = arg;

	while (!atomic_load(&m->stop)) {
		for (int i = 0; i < 256; i++) {
			uint64_t limit = atomic_load(&m->s->limit);
			uint64_t used = atomic_load(&m->s->used);

			m->samples++;
			if (used > limit) {
				m->over++;
				if (used > m->worst)
					m->worst = used;
			}
		}
		/* Leave the workers the CPUs: 2 cores must run this suite. */
		usleep(50);
	}
	return NULL;
}

/* ---- worker processes --------------------------------------------------- */

struct worker {
	pid_t pid;
	FILE *to;	/* its stdin */
	FILE *from;	/* its stdout */
};

static inline const char *worker_path(void)
{
	static char path[4096];
	const char *top = getenv("XDM_TOP_BUILDDIR");

	snprintf(path, sizeof(path), "%s/tests/process/budget_worker", top ? top : ".");
	return path;
}

static inline bool env_names(const char *entry, const char *name)
{
	size_t len = strlen(name);

	return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/*
 * environ, with the worker's module path and fault step in place of any it
 * had: the array and its last two entries are the caller's to free (the
 * others are environ's own).
 */
static inline char **fault_env(const char *module_path, const char *fault)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	ck_assert_ptr_nonnull(env);
	for (size_t i = 0; i < n; i++)
		if (!env_names(environ[i], "XDM_MODULE_PATH") &&
		    !env_names(environ[i], "XDM_BUDGET_FAULT"))
			env[k++] = environ[i];
	ck_assert_int_gt(asprintf(&env[k], "XDM_MODULE_PATH=%s", module_path), 0);
	ck_assert_int_gt(asprintf(&env[k + 1], "XDM_BUDGET_FAULT=%s", fault), 0);
	return env;
}

static inline void fault_env_free(char **env)
{
	size_t k = 0;

	if (!env)
		return;
	while (env[k])
		k++;
	free(env[k - 2]);
	free(env[k - 1]);
	free(env);
}

/*
 * argv[0] is filled in (budget_worker) unless the caller names another
 * program there; the list ends with NULL.  With fault, the worker
 * loads the test build of the budget (tests/faults) and stops itself at
 * the step fault names (adaptors/budget/faults.c).
 *
 * Everything the child needs is made before the fork: between fork and
 * exec, a child of this threaded process calls only async-signal-safe
 * functions.  A malloc there (check's assertions, setenv) could wait
 * forever on an allocator lock that another thread held at the fork, as
 * AddressSanitizer's allocator does when a runtime's stream threads are
 * still starting.
 */
/*
 * Exec argv with stdin and stdout on pipes to w, in env (NULL: environ);
 * in_child (if not NULL) runs in the child first, with arg (to become
 * another user, to set its environment).
 */
static inline void worker_spawn(struct worker *w, const char **argv, char **env,
				void (*in_child)(const void *), const void *arg)
{
	int in[2], out[2];

	/* Close-on-exec: a worker started later must not keep this one's stdin
	 * open (its EOF is how the test tells it to free and leave); the
	 * dup2 below gives the child its own copies without the flag. */
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	fflush(NULL);
	w->pid = fork();
	if (w->pid == 0) {
		static const char msg[] = "budget test: cannot exec ";

		if (in_child)
			in_child(arg);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execve(argv[0], (char *const *)argv, env ? env : environ);
		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) > 0 &&
		    write(STDERR_FILENO, argv[0], strlen(argv[0])) > 0)
			(void)!write(STDERR_FILENO, "\n", 1);
		_exit(127);
	}
	ck_assert_int_ge(w->pid, 0);
	close(in[0]);
	close(out[1]);
	w->to = fdopen(in[1], "w");
	w->from = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(w->to);
	ck_assert_ptr_nonnull(w->from);
}

static inline void worker_start_fault(struct worker *w, const char **argv, const char *fault)
{
	char **env = NULL;

	if (!argv[0])
		argv[0] = worker_path();
	if (fault) {
		const char *top = getenv("XDM_TOP_BUILDDIR");
		const char *path = getenv("XDM_MODULE_PATH");
		char faults[8192];

		snprintf(faults, sizeof(faults), "%s/tests/faults/.libs%s%s", top ? top : ".",
			 path ? ":" : "", path ? path : "");
		env = fault_env(faults, fault);
	}
	worker_spawn(w, argv, env, NULL, NULL);
	fault_env_free(env);
}

static inline void worker_start(struct worker *w, const char **argv)
{
	worker_start_fault(w, argv, NULL);
}

static inline void worker_line(struct worker *w, char *line, size_t len)
{
	ck_assert_msg(fgets(line, (int)len, w->from) != NULL,
		      "worker %d said nothing (see its stderr above)", (int)w->pid);
}

static inline int worker_wait(struct worker *w)
{
	int status;

	if (w->to)	/* a test may have closed it already, to make it free */
		fclose(w->to);
	fclose(w->from);
	ck_assert_int_eq(waitpid(w->pid, &status, 0), w->pid);
	return status;
}

/*
 * A worker that holds bytes of the test's budget until killed (or until
 * its stdin closes: then it frees them and destroys its runtime), its
 * budget layer built with params ("limit=1M credit=64K"); with fault, it
 * stops itself at that step (worker_start_fault).  The caller reads its
 * BT_READY line.
 */
static inline void holder_start_fault(struct worker *w, const char *test, const char *params,
				      size_t bytes, const char *fault)
{
	char key[64], stack[256], count[32];
	const char *argv[] = { NULL, "hold", "host", stack, count, NULL };

	key_of(test, key, sizeof(key));
	snprintf(stack, sizeof(stack), "budget key=%s %s | host", key, params);
	snprintf(count, sizeof(count), "%zu", bytes);
	worker_start_fault(w, argv, fault);
}

static inline void holder_start_params(struct worker *w, const char *test, const char *params,
				       size_t bytes)
{
	char line[32];

	holder_start_fault(w, test, params, bytes, NULL);
	worker_line(w, line, sizeof(line));
	ck_assert_str_eq(line, BT_READY);
}

static inline void holder_start(struct worker *w, const char *test, const char *limit,
				size_t bytes)
{
	char params[64];

	snprintf(params, sizeof(params), "limit=%s credit=0", limit);
	holder_start_params(w, test, params, bytes);
}

static inline void holder_kill(struct worker *w)
{
	int status;

	ck_assert_int_eq(kill(w->pid, SIGKILL), 0);
	status = worker_wait(w);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/*
 * A suite's main: its segments are named <prefix><pid>-<test>, and
 * whatever failed, none of keys is left behind.
 */
static inline int budget_suite_run(Suite *suite, const char *prefix,
				   const char *const *keys)
{
	char name[128];
	int rc;

	snprintf(key_prefix, sizeof(key_prefix), "%s%d", prefix, (int)getpid());
	rc = tu_run_suite(suite);
	for (int i = 0; keys[i]; i++) {
		shm_name_of(keys[i], name, sizeof(name));
		shm_unlink(name);
	}
	return rc;
}

#endif /* XDM_BUDGET_UTIL_H */
