/* SPDX-License-Identifier: MIT */
/*
 * check_fusefs.c - the introspection tree through a real FUSE mount.
 *
 * Every test makes its runtime ("budget key=... limit=... | <platform>"),
 * mounts it at a fresh directory under /tmp and unmounts at the end, all in
 * the test itself: check runs each test in a child of its own.  The tree is
 * read with plain system calls, as any program would read it, both from
 * another process (tests/process/fuse_walk) and from threads of the process that
 * serves it, while other threads allocate and free.
 *
 * Each test runs on the host platform, then again on "cuda_async" where a
 * CUDA runtime can be made (a GPU machine); elsewhere that pass is left out
 * without a word.
 *
 * Names: budget keys are cfz<pid of main>-<test>-<variant>, mount
 * directories /tmp/xdm-cfz<pid of main>-<test>-<variant>-XXXXXX, so that
 * main() can take away whatever a failed or killed test left: it unlinks
 * every segment, detaches every mount and removes the (empty) directories.
 *
 * Exit 77 (skip) without /dev/fuse, or when xdm_mount says NOT_SUPPORTED.
 */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"

extern char **environ;

/*
 * Built with AddressSanitizer, by GCC or by clang (CI's sanitizer build is
 * clang's fuzzing build, which defines no __SANITIZE_ADDRESS__ before clang
 * 16: __has_feature says it).  The test that forks 20 times while the
 * server allocates hard hangs children in that build: a hung child was
 * seen waiting in the ASan allocator's refill (GetFromAllocator), for a
 * lock another thread of the parent held at the fork; neither GCC 12's
 * libasan nor clang 14's makes its allocator safe around fork as glibc's
 * malloc is.  That build leaves this one test out.
 */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/*
 * Built with ThreadSanitizer (--enable-tsan).  GCC 12's runtime cannot run
 * a child that starts threads after a multi-threaded fork: by default it
 * dies there ("starting new threads after multi-threaded fork is not
 * supported"), and with die_after_fork=0 it fails a check on a "dup thread"
 * id, since it still counts the parent's threads, whose stacks glibc hands
 * to the child's new ones.  It would check nothing in such a child anyway
 * (it turns its own checks off after such a fork).  Both fork tests have
 * their children start threads (stream workers, a FUSE server of their
 * own), so that build leaves them out; the plain and ASan builds run them.
 */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* ---- names, and what main() cleans up ---------------------------------- */

/* "cfz<pid of main>": set once in main before any test forks. */
static char key_prefix[32];

static const char *const test_names[] = {
	"churn", "knob", "bad", "ro", "self", "fork", "forks", "unmount", "open", "chunks", NULL,
};

struct variant {
	const char *name;
	const char *platform;
	const char *below;	/* the stack under the budget */
	bool optional;		/* left out where it cannot be built */
};

static const struct variant variants[] = {
	{ "host", "host", "host", false },
	{ "cuda", "cuda", "cuda_async", true },
	{ NULL, NULL, NULL, false },
};

static void key_of(const char *test, const struct variant *v, char *key, size_t len)
{
	snprintf(key, len, "%s-%s-%s", key_prefix, test, v->name);
}

/* ---- reading and writing files of the mount ---------------------------- */

/* Read path whole into buf (NUL-terminated); 0 or an errno. */
static int read_text(const char *path, char *buf, size_t len)
{
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	for (;;) {
		ssize_t n = read(fd, buf + got, len - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			close(fd);
			return err;
		}
		if (n == 0 || got + (size_t)n >= len - 1) {
			got += (size_t)n;
			break;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return 0;
}

static void expect_text(const char *path, const char *want)
{
	char buf[4096];
	int err = read_text(path, buf, sizeof(buf));

	ck_assert_msg(err == 0, "read %s: %s", path, strerror(err));
	ck_assert_msg(strcmp(buf, want) == 0, "%s reads '%s', not '%s'", path, buf, want);
}

/* A file that holds one decimal and a newline. */
static uint64_t read_u64(const char *path)
{
	char buf[64], *end;
	uint64_t v;
	int err = read_text(path, buf, sizeof(buf));

	ck_assert_msg(err == 0, "read %s: %s", path, strerror(err));
	errno = 0;
	v = strtoull(buf, &end, 10);
	ck_assert_msg(errno == 0 && end != buf && strcmp(end, "\n") == 0,
		      "%s reads '%s', not a number and a newline", path, buf);
	return v;
}

/* What `echo value > path` does: open truncating, one write, close. */
static int echo_to(const char *path, const char *value)
{
	size_t len = strlen(value);
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ssize_t n;
	int err = 0;

	if (fd < 0)
		return errno;
	n = write(fd, value, len);
	if (n < 0)
		err = errno;
	else if ((size_t)n != len)
		err = EIO;	/* a short write: never what a store answers */
	if (close(fd) != 0 && !err)
		err = errno;
	return err;
}

static void join_path(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	ck_assert_msg(n > 0 && (size_t)n < len, "path %s/%s is too long", a, b);
}

/* The entries of a directory of the mount, "." and ".." left out. */
struct names {
	char (*name)[64];
	size_t n, cap;
};

static int list_names(const char *path, struct names *out)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int err = 0;

	out->n = 0;
	if (!d)
		return errno;
	for (;;) {
		errno = 0;
		e = readdir(d);
		if (!e) {
			err = errno;
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (out->n == out->cap) {
			out->cap = out->cap ? out->cap * 2 : 64;
			out->name = realloc(out->name, out->cap * sizeof(*out->name));
			ck_assert_ptr_nonnull(out->name);
		}
		ck_assert_uint_lt(strlen(e->d_name), sizeof(*out->name));
		strcpy(out->name[out->n++], e->d_name);
	}
	closedir(d);
	return err;
}

/* ---- mounts ----------------------------------------------------------- */

/*
 * Call fn for each mount of this process's namespace: its mount point and
 * its type.  fn returns true to stop.
 */
static bool each_mount(bool (*fn)(const char *point, const char *type, void *arg), void *arg)
{
	char line[8192], point[PATH_MAX], type[128];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool stopped = false;

	if (!f)
		return false;
	while (!stopped && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root POINT options... - TYPE source ... */
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(dash + 3, "%127s", type) != 1)
			continue;
		tu_mountinfo_unescape(point);
		stopped = fn(point, type, arg);
	}
	fclose(f);
	return stopped;
}

struct mount_query {
	const char *dir;
	char type[128];
};

static bool match_point(const char *point, const char *type, void *arg)
{
	struct mount_query *q = arg;

	if (strcmp(point, q->dir) != 0)
		return false;
	snprintf(q->type, sizeof(q->type), "%s", type);
	return true;
}

/* Is something mounted at dir?  Its type goes to type (may be NULL). */
static bool mounted_at(const char *dir, char *type, size_t len)
{
	struct mount_query q = { .dir = dir };
	bool found = each_mount(match_point, &q);

	if (found && type)
		snprintf(type, len, "%s", q.type);
	return found;
}

static void assert_xdm_mount_at(const char *dir)
{
	char type[128];

	ck_assert_msg(mounted_at(dir, type, sizeof(type)), "nothing is mounted at %s", dir);
	ck_assert_msg(strcmp(type, "fuse.xdm") == 0, "%s is a %s mount, not fuse.xdm", dir, type);
}

static void assert_no_mount_at(const char *dir)
{
	ck_assert_msg(!mounted_at(dir, NULL, 0), "%s is still a mount point", dir);
}

/* ---- the runtime and its mount, one per test and variant --------------- */

struct fx {
	const struct variant *v;
	struct xdm_runtime *rt;
	char stack[256];
	char dir[256];		/* the mount point */
	char rtdir[320];	/* <dir>/<rt>: the runtime's directory */
	char rtname[16];	/* <rt>, the runtime's name in the tree */
};

/*
 * The runtime of variant v with a budget of limit on top, mid (layers and
 * their "|", or "") under it, mounted at a fresh directory.  false when an
 * optional variant cannot be built here.
 */
static bool fx_open(struct fx *fx, const char *test, const struct variant *v, const char *limit,
		    const char *mid)
{
	char key[96], spec[1024], path[PATH_MAX], mp[PATH_MAX];
	struct xdm_device_info info;
	struct stat st;
	enum xdm_status s;

	memset(fx, 0, sizeof(*fx));
	fx->v = v;
	/* credit=0: the tests hold used to their blocks, to the byte. */
	key_of(test, v, key, sizeof(key));
	snprintf(fx->stack, sizeof(fx->stack), "budget key=%s limit=%s credit=0 | %s%s", key,
		 limit, mid, v->below);
	s = xdm_runtime_create(0, v->platform, fx->stack, &fx->rt);
	if (s != XDM_OK && v->optional)
		return false;
	ck_assert_msg(s == XDM_OK, "xdm_runtime_create(%s, %s): %s (%s)", v->platform,
		      fx->stack, xdm_strerror(s), xdm_last_error_message());

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/xdm-%s-%s-%s-XXXXXX", key_prefix, test,
		 v->name);
	ck_assert_msg(mkdtemp(fx->dir), "mkdtemp %s: %s", fx->dir, strerror(errno));
	TU_OK(xdm_mount(fx->dir));
	ck_assert(xdm_mount_point(mp, sizeof(mp)));
	ck_assert_str_eq(mp, fx->dir);
	assert_xdm_mount_at(fx->dir);

	/* The only runtime of ordinal 0 in the process is "0". */
	snprintf(fx->rtname, sizeof(fx->rtname), "0");
	join_path(fx->rtdir, sizeof(fx->rtdir), fx->dir, fx->rtname);
	ck_assert_msg(stat(fx->rtdir, &st) == 0, "stat %s: %s", fx->rtdir, strerror(errno));
	ck_assert(S_ISDIR(st.st_mode));
	/* ... and it is this runtime: its ordinal, platform and stack. */
	join_path(path, sizeof(path), fx->rtdir, "ordinal");
	expect_text(path, "0\n");
	TU_OK(xdm_runtime_device(fx->rt, &info));
	snprintf(spec, sizeof(spec), "%s\n", info.platform);
	join_path(path, sizeof(path), fx->rtdir, "platform");
	expect_text(path, spec);
	TU_OK(xdm_runtime_stack_spec(fx->rt, spec, sizeof(spec) - 1));
	strcat(spec, "\n");
	join_path(path, sizeof(path), fx->rtdir, "stack");
	expect_text(path, spec);
	return true;
}

static void fx_close(struct fx *fx)
{
	TU_OK(xdm_unmount());
	assert_no_mount_at(fx->dir);
	TU_OK(xdm_runtime_destroy(fx->rt));
	ck_assert_msg(rmdir(fx->dir) == 0, "rmdir %s: %s", fx->dir, strerror(errno));
}

/* <rtdir>/<rel> */
static const char *rt_path(const struct fx *fx, const char *rel)
{
	static char path[PATH_MAX];

	join_path(path, sizeof(path), fx->rtdir, rel);
	return path;
}

/*
 * The body once per variant that can be built here: the host one always
 * (fx_open fails the test otherwise), cuda where there is a GPU.
 */
#define FOR_EACH_VARIANT(fx, test, limit, mid)                               \
	for (const struct variant *v_ = variants; v_->name; v_++)             \
		if (!fx_open((fx), (test), v_, (limit), (mid))) {             \
		} else

/* ---- watchdog ----------------------------------------------------------- */

/*
 * A watchdog turns a deadlock into a message that names the wait, and
 * nothing else: a loaded CI machine under ASan has taken half a minute
 * over a churn that takes a second when idle.  Forked children get half,
 * so that the parent's watchdog outlives theirs; all stay below the test
 * case's timeout.
 */
#define WATCHDOG_S 240

static const char *watchdog_what = "the test";

static void watchdog_fired(int sig)
{
	static const char pre[] = "check_fusefs: watchdog: ";
	static const char post[] = " never finished (a deadlock?)\n";

	ssize_t n;

	(void)sig;
	/* What write() says is of no use here: the process ends either way. */
	n = write(2, pre, sizeof(pre) - 1);
	n = write(2, watchdog_what, strlen(watchdog_what));
	n = write(2, post, sizeof(post) - 1);
	(void)n;
	_exit(3);
}

/* End this process with a message unless watchdog_stop() comes first. */
static void watchdog_start(const char *what, unsigned int seconds)
{
	watchdog_what = what;
	signal(SIGALRM, watchdog_fired);
	alarm(seconds);
}

static void watchdog_stop(void)
{
	alarm(0);
	signal(SIGALRM, SIG_DFL);
}

/* ---- churn: threads that allocate and free ----------------------------- */

#define CHURNERS 4
#define CHURN_LIVE 50
#define CHURN_MAX_BYTES 65536

static const char *const churn_tags[CHURNERS] = {
	"churn-0", "churn-1", "churn-2", "churn-3",
};

struct churner {
	pthread_t thread;
	struct xdm_runtime *rt;
	int index;
	atomic_bool *stop;
	struct xdm_block live[CHURN_LIVE];
	int nlive;
	unsigned long ops;
	atomic_bool working;	/* it has done an operation, or failed */
	enum xdm_status failed;	/* the first failure, XDM_OK if none */
	char why[512];
};

static void *churn(void *arg)
{
	struct churner *c = arg;
	unsigned int seed = 0x9e3779b9u * (unsigned int)(c->index + 1);
	xdm_stream_id stream = (xdm_stream_id)c->index % xdm_stream_count(c->rt);

	while (!atomic_load(c->stop)) {
		unsigned int r = (unsigned int)rand_r(&seed);
		enum xdm_status s;

		if (c->nlive < CHURN_LIVE && (c->nlive == 0 || r % 2)) {
			size_t bytes = 1 + (size_t)rand_r(&seed) % CHURN_MAX_BYTES;

			s = xdm_allocate(c->rt, bytes, stream, churn_tags[c->index],
					 &c->live[c->nlive]);
			if (s == XDM_OK)
				c->nlive++;
		} else {
			int i = (int)(r / 2 % (unsigned int)c->nlive);

			s = xdm_deallocate(c->rt, &c->live[i]);
			c->live[i] = c->live[--c->nlive];
		}
		if (s != XDM_OK) {
			c->failed = s;
			snprintf(c->why, sizeof(c->why), "%s", xdm_last_error_message());
			break;
		}
		if (!c->ops++)
			atomic_store(&c->working, true);
	}
	/* A churner that failed at once must not keep churn_start waiting. */
	atomic_store(&c->working, true);
	return NULL;
}

/*
 * Poll flag until it is set; false if TU_PATIENCE_MS pass first.  Only a
 * hang runs the patience out: a loaded machine delays, it does not stop.
 */
static bool wait_flag(atomic_bool *flag)
{
	for (int waited = 0; waited < TU_PATIENCE_MS; waited++) {
		if (atomic_load(flag))
			return true;
		tu_sleep_ms(1);
	}
	return atomic_load(flag);
}

static void churn_start(struct churner *c, struct xdm_runtime *rt, atomic_bool *stop)
{
	atomic_store(stop, false);
	for (int i = 0; i < CHURNERS; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].rt = rt;
		c[i].index = i;
		c[i].stop = stop;
		atomic_init(&c[i].working, false);
		ck_assert_int_eq(pthread_create(&c[i].thread, NULL, churn, &c[i]), 0);
	}
	/*
	 * What the caller does next must overlap the churn: on a loaded
	 * machine a new thread may not run for a long while, and a churner
	 * that first looks at stop after the caller set it never churns.
	 */
	for (int i = 0; i < CHURNERS; i++)
		ck_assert_msg(wait_flag(&c[i].working), "churner %d never ran", i);
}

/* Stop and join; no churner may have failed. */
static void churn_stop(struct churner *c, atomic_bool *stop)
{
	atomic_store(stop, true);
	for (int i = 0; i < CHURNERS; i++)
		ck_assert_int_eq(pthread_join(c[i].thread, NULL), 0);
	for (int i = 0; i < CHURNERS; i++)
		ck_assert_msg(c[i].failed == XDM_OK, "churner %d: %s (%s)", i,
			      xdm_strerror(c[i].failed), c[i].why);
}

static void churn_free_all(struct churner *c)
{
	for (int i = 0; i < CHURNERS; i++)
		while (c[i].nlive)
			TU_OK(xdm_deallocate(c[i].rt, &c[i].live[--c[i].nlive]));
}

/* ---- fuse_walk, another process reading the mount ---------------------- */

struct walk_result {
	unsigned long long walks, dirs, files, bytes, vanished, errors, writeonly;
	int status;	/* from waitpid */
};

static const char *walker_path(void)
{
	static char path[PATH_MAX];
	const char *top = getenv("XDM_TOP_BUILDDIR");

	snprintf(path, sizeof(path), "%s/tests/process/fuse_walk", top ? top : ".");
	return path;
}

/* Run fuse_walk with args (NULL-terminated, DIR last) and read its line. */
static void walker_run(char *const args[], struct walk_result *out)
{
	char *argv[16] = { (char *)walker_path() };
	posix_spawn_file_actions_t fa;
	char line[512];
	size_t got = 0;
	int pipefd[2], err;
	pid_t pid;

	for (int i = 0; args[i]; i++) {
		ck_assert_int_lt(i + 2, 16);
		argv[i + 1] = args[i];
	}
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
	ck_assert_int_eq(posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1), 0);
	ck_assert_int_eq(posix_spawn_file_actions_addclose(&fa, pipefd[0]), 0);
	err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	ck_assert_msg(err == 0, "posix_spawn %s: %s", argv[0], strerror(err));
	for (;;) {
		ssize_t n = read(pipefd[0], line + got, sizeof(line) - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (got += (size_t)n) == sizeof(line) - 1)
			break;
	}
	line[got] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &out->status, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	ck_assert_msg(sscanf(line, "walks=%llu dirs=%llu files=%llu bytes=%llu vanished=%llu "
			     "errors=%llu writeonly=%llu", &out->walks, &out->dirs, &out->files,
			     &out->bytes, &out->vanished, &out->errors, &out->writeonly) == 7,
		      "fuse_walk printed '%s'", line);
}

/*
 * Files of the tree, counted through the library, blocks/ left out.  The
 * subdirectories of a directory are listed first and entered after its
 * listing is over: a callback does not call back into the tree.
 */
struct tree_count {
	unsigned long files;
	struct names subdirs;
};

static int count_entry(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct tree_count *c = arg;
	struct names *d = &c->subdirs;

	if (!node->dir) {
		c->files++;
		return 0;
	}
	if (strcmp(name, "blocks") == 0)
		return 0;
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->name = realloc(d->name, d->cap * sizeof(*d->name));
		ck_assert_ptr_nonnull(d->name);
	}
	ck_assert_uint_lt(strlen(name), sizeof(*d->name));
	strcpy(d->name[d->n++], name);
	return 0;
}

static unsigned long tree_files_but_blocks(const char *path)
{
	struct tree_count c = { 0 };
	char sub[512];

	ck_assert_int_eq(xdm_tree_list(path, count_entry, &c), 0);
	for (size_t i = 0; i < c.subdirs.n; i++) {
		snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "/" : "", c.subdirs.name[i]);
		c.files += tree_files_but_blocks(sub);
	}
	free(c.subdirs.name);
	return c.files;
}

/* ---- churn and walk ------------------------------------------------------ */

#define KNOWN_BLOCKS 37

/* A live block the test knows, and whether the mount showed it. */
struct known {
	struct xdm_block b;
	bool seen;
};

static void check_block_dir(const struct fx *fx, const char *gen, struct known *k, size_t nk)
{
	char rel[128], want[256];
	struct known *m = NULL;
	uint64_t g;

	ck_assert_int_eq(sscanf(gen, "%" SCNu64, &g), 1);
	for (size_t i = 0; i < nk && !m; i++)
		if (k[i].b.generation == g)
			m = &k[i];
	ck_assert_msg(m, "blocks/%s is not a live block of the test", gen);
	ck_assert_msg(!m->seen, "blocks/%s is listed twice", gen);
	m->seen = true;

	snprintf(rel, sizeof(rel), "blocks/%s/ptr", gen);
	snprintf(want, sizeof(want), "0x%" PRIx64 "\n", m->b.ptr);
	expect_text(rt_path(fx, rel), want);
	snprintf(rel, sizeof(rel), "blocks/%s/bytes", gen);
	ck_assert_uint_eq(read_u64(rt_path(fx, rel)), m->b.bytes);
	snprintf(rel, sizeof(rel), "blocks/%s/align", gen);
	ck_assert_uint_eq(read_u64(rt_path(fx, rel)), m->b.align);
	snprintf(rel, sizeof(rel), "blocks/%s/stream", gen);
	ck_assert_uint_eq(read_u64(rt_path(fx, rel)), m->b.stream);
	snprintf(rel, sizeof(rel), "blocks/%s/tag", gen);
	snprintf(want, sizeof(want), "%s\n", m->b.tag);
	expect_text(rt_path(fx, rel), want);
	snprintf(rel, sizeof(rel), "blocks/%s/state", gen);
	expect_text(rt_path(fx, rel), "live\n");
	/* No use was recorded on any block. */
	snprintf(rel, sizeof(rel), "blocks/%s/last_write", gen);
	expect_text(rt_path(fx, rel), "none\n");
	snprintf(rel, sizeof(rel), "blocks/%s/reads", gen);
	expect_text(rt_path(fx, rel), "none\n");
}

static void churn_and_walk(struct fx *fx)
{
	static char tags[KNOWN_BLOCKS][24];	/* outlive the blocks */
	struct churner c[CHURNERS];
	struct known k[CHURNERS * CHURN_LIVE + KNOWN_BLOCKS];
	struct names blocks = { 0 };
	struct walk_result w;
	struct xdm_stats stats;
	atomic_bool stop;
	uint64_t sum = 0, sum_files = 0;
	unsigned long fixed;
	size_t nk = 0;
	char *args[] = { "--repeat", "4", "--interval-ms", "20", fx->dir, NULL };

	/* Every walk must read at least the tree without blocks/. */
	fixed = tree_files_but_blocks("");
	ck_assert_uint_gt(fixed, 0);

	churn_start(c, fx->rt, &stop);
	walker_run(args, &w);
	churn_stop(c, &stop);
	ck_assert_msg(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0,
		      "fuse_walk exited with status 0x%x (errors=%llu; its stderr is above)",
		      w.status, w.errors);
	ck_assert_uint_eq(w.walks, 4);
	ck_assert_uint_eq(w.errors, 0);
	ck_assert_uint_gt(w.files, 0);
	/* The walker counts write-only files (actions) apart from the files it
	 * reads; the library's count has both.  Blocks only add to the walks. */
	ck_assert_uint_ge(w.files + w.writeonly, 4 * fixed);
	ck_assert_uint_gt(w.bytes, 0);

	/* What is live now: the churners' leftovers and 37 blocks of known sizes. */
	for (int i = 0; i < CHURNERS; i++)
		for (int j = 0; j < c[i].nlive; j++)
			k[nk++] = (struct known){ c[i].live[j], false };
	for (int i = 0; i < KNOWN_BLOCKS; i++) {
		snprintf(tags[i], sizeof(tags[i]), "known-%d", i);
		TU_OK(xdm_allocate(fx->rt, 1000 + 977 * (size_t)i,
				   (xdm_stream_id)i % xdm_stream_count(fx->rt), tags[i], &k[nk].b));
		ck_assert_uint_ge(k[nk].b.bytes, 1000 + 977 * (size_t)i);
		k[nk++].seen = false;
	}
	for (size_t i = 0; i < nk; i++)
		sum += k[i].b.bytes;
	xdm_runtime_stats(fx->rt, &stats);
	ck_assert_uint_eq(stats.blocks_outstanding, nk);
	ck_assert_uint_eq(stats.bytes_outstanding, sum);

	/* The mount agrees with itself and with the blocks the test holds. */
	ck_assert_int_eq(list_names(rt_path(fx, "blocks"), &blocks), 0);
	ck_assert_uint_eq(blocks.n, nk);
	ck_assert_uint_eq(read_u64(rt_path(fx, "blocks_outstanding")), blocks.n);
	for (size_t i = 0; i < blocks.n; i++) {
		char rel[96];

		snprintf(rel, sizeof(rel), "blocks/%s/bytes", blocks.name[i]);
		sum_files += read_u64(rt_path(fx, rel));
		check_block_dir(fx, blocks.name[i], k, nk);
	}
	ck_assert_uint_eq(read_u64(rt_path(fx, "bytes_outstanding")), sum_files);
	ck_assert_uint_eq(sum_files, sum);
	for (size_t i = 0; i < nk; i++)
		ck_assert_msg(k[i].seen, "block %" PRIu64 " is not in blocks/", k[i].b.generation);
	ck_assert_uint_eq(read_u64(rt_path(fx, "budget/used")), sum);

	/* Freed, they leave the tree. */
	churn_free_all(c);
	for (size_t i = nk - KNOWN_BLOCKS; i < nk; i++)
		TU_OK(xdm_deallocate(fx->rt, &k[i].b));
	TU_OK(xdm_reap_pending(fx->rt));
	ck_assert_int_eq(list_names(rt_path(fx, "blocks"), &blocks), 0);
	ck_assert_uint_eq(blocks.n, 0);
	expect_text(rt_path(fx, "blocks_outstanding"), "0\n");
	expect_text(rt_path(fx, "bytes_outstanding"), "0\n");
	free(blocks.name);
}

START_TEST(walk_while_churning)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "churn", "1G", "") {
		churn_and_walk(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- the budget's limit, written through the mount ---------------------- */

static void knob(struct fx *fx)
{
	const char *limit = rt_path(fx, "budget/limit");
	char path[PATH_MAX], layer_limit[PATH_MAX];
	struct xdm_block b;
	const struct xdm_error *e;

	snprintf(path, sizeof(path), "%s", limit);
	join_path(layer_limit, sizeof(layer_limit), fx->rtdir, "layers/0-budget/limit");
	expect_text(path, "1048576\n");
	expect_text(rt_path(fx, "budget/configured_limit"), "1048576\n");

	ck_assert_int_eq(echo_to(path, "4K\n"), 0);
	expect_text(path, "4096\n");
	/* One knob, two names; the configured limit stays what it was. */
	expect_text(layer_limit, "4096\n");
	expect_text(rt_path(fx, "budget/configured_limit"), "1048576\n");
	expect_text(rt_path(fx, "budget/remaining"), "4096\n");
	expect_text(rt_path(fx, "budget/refusals"), "0\n");

	/* Over what remains: refused, with the payload of the new limit. */
	ck_assert_int_eq(xdm_allocate(fx->rt, 8192, 0, "over", &b), XDM_E_OUT_OF_BUDGET);
	e = xdm_last_error();
	ck_assert_uint_eq(e->requested, 8192);
	ck_assert_uint_eq(e->remaining, 4096);
	expect_text(rt_path(fx, "budget/refusals"), "1\n");
	expect_text(rt_path(fx, "failures"), "1\n");

	/* Under it: served, and the mount shows it. */
	TU_OK(xdm_allocate(fx->rt, 2048, 0, "under", &b));
	expect_text(rt_path(fx, "blocks_outstanding"), "1\n");
	ck_assert_uint_eq(read_u64(rt_path(fx, "budget/used")), b.bytes);
	TU_OK(xdm_deallocate(fx->rt, &b));
	TU_OK(xdm_reap_pending(fx->rt));

	/* Raised again, through the layer's name of the same file. */
	ck_assert_int_eq(echo_to(layer_limit, "16K\n"), 0);
	expect_text(path, "16384\n");
	TU_OK(xdm_allocate(fx->rt, 8192, 0, "over-no-more", &b));
	TU_OK(xdm_deallocate(fx->rt, &b));
	TU_OK(xdm_reap_pending(fx->rt));
}

START_TEST(limit_written_through_mount)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "knob", "1M", "") {
		knob(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- values the knob refuses ------------------------------------------- */

static const char *const bad_values[] = {
	"garbage\n", "-1\n", "99999999999999999999999\n", "\n", "4Kx\n", "4K 5\n", "12abc",
	NULL,
};

static void bad_writes(struct fx *fx)
{
	char path[PATH_MAX], tree[64];
	int fd;

	snprintf(path, sizeof(path), "%s", rt_path(fx, "budget/limit"));
	snprintf(tree, sizeof(tree), "%s/budget/limit", fx->rtname);
	expect_text(path, "1048576\n");
	for (int i = 0; bad_values[i]; i++) {
		const char *v = bad_values[i];
		ssize_t n;

		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		ck_assert_msg(fd >= 0, "open %s for writing: %s", path, strerror(errno));
		errno = 0;
		n = write(fd, v, strlen(v));
		ck_assert_msg(n == -1 && errno == EINVAL,
			      "writing '%s' returned %zd (%s), not EINVAL", v, n, strerror(errno));
		ck_assert_int_eq(close(fd), 0);
		expect_text(path, "1048576\n");
		/* The library refuses it the same way. */
		ck_assert_int_eq(xdm_tree_store(tree, v, strlen(v)), -EINVAL);
		expect_text(path, "1048576\n");
	}

	/* A value is written whole, at offset 0: not a piece further on. */
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	errno = 0;
	ck_assert_int_eq(pwrite(fd, "2M\n", 3, 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(close(fd), 0);
	expect_text(path, "1048576\n");

	/* A good value still goes through after all that. */
	ck_assert_int_eq(echo_to(path, "2M\n"), 0);
	expect_text(path, "2097152\n");
}

/* Layers with a peers attribute (cuda_async, cuda_vmm): it is writable. */
static unsigned int layers_with_peers(struct xdm_runtime *rt)
{
	unsigned int n = 0;
	char text[256];

	for (uint32_t i = 0; i < xdm_runtime_layer_count(rt); i++)
		n += xdm_layer_attr_show(rt, i, "peers", text, sizeof(text)) == XDM_OK;
	return n;
}

START_TEST(bad_writes_change_nothing)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "bad", "1M", "") {
		bad_writes(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- read-only files, and the modes of everything ---------------------- */

static void open_refused(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	ck_assert_msg(fd < 0 && errno == EACCES, "open %s with flags 0%o: %s, not EACCES", path,
		      flags, fd >= 0 ? "it opened" : strerror(errno));
}

struct mode_walk {
	const char *root;
	size_t rootlen;
	unsigned long dirs, files, writable, actions;
};

/* stat every node under path; compare with what the library says. */
static void check_modes(struct mode_walk *mw, const char *path)
{
	struct xdm_tree_node node;
	struct names ents = { 0 };
	const char *rel = path + mw->rootlen + (path[mw->rootlen] == '/');
	struct stat st;
	unsigned int mode;

	ck_assert_msg(lstat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
	mode = st.st_mode & 07777;
	ck_assert_msg(!(mode & 022), "%s is group- or world-writable (0%o)", path, mode);
	ck_assert_uint_eq(st.st_uid, getuid());
	ck_assert_int_eq(xdm_tree_stat(rel, &node), 0);
	ck_assert_uint_eq(node.mode, mode);
	if (S_ISDIR(st.st_mode)) {
		ck_assert_msg(mode == 0555, "directory %s has mode 0%o", path, mode);
		ck_assert(node.dir);
		mw->dirs++;
		ck_assert_int_eq(list_names(path, &ents), 0);
		for (size_t i = 0; i < ents.n; i++) {
			char sub[PATH_MAX];

			join_path(sub, sizeof(sub), path, ents.name[i]);
			check_modes(mw, sub);
		}
		free(ents.name);
		return;
	}
	ck_assert_msg(S_ISREG(st.st_mode), "%s is neither a directory nor a file", path);
	ck_assert_msg(mode == 0444 || mode == 0644 || mode == 0200, "file %s has mode 0%o", path,
		      mode);
	ck_assert(!node.dir);
	ck_assert_int_eq(st.st_size, 4096);
	mw->files++;
	if (mode == 0644)
		mw->writable++;
	if (mode == 0200)
		mw->actions++;
}

/* The stack is budget | logging | platform: logging's flush is an action,
 * as are the runtime's reset_peak and reset_totals. */
static void read_only(struct fx *fx)
{
	struct mode_walk mw = { .root = fx->dir, .rootlen = strlen(fx->dir) };
	char version[PATH_MAX], flush[PATH_MAX];
	char *args[] = { fx->dir, NULL };
	struct walk_result w;
	struct xdm_block b[3];

	join_path(version, sizeof(version), fx->dir, "version");
	open_refused(rt_path(fx, "bytes_outstanding"), O_WRONLY);
	open_refused(rt_path(fx, "bytes_outstanding"), O_RDWR);
	open_refused(version, O_WRONLY);
	open_refused(version, O_WRONLY | O_TRUNC);
	open_refused(rt_path(fx, "budget/used"), O_WRONLY);
	open_refused(rt_path(fx, "layers/0-budget/used"), O_WRONLY);
	/* truncate(), which `echo > file` also does, is refused as well. */
	errno = 0;
	ck_assert_int_eq(truncate(rt_path(fx, "budget/used"), 0), -1);
	ck_assert_int_eq(errno, EACCES);
	/* Nothing can be made in the tree. */
	ck_assert_int_eq(mkdir(rt_path(fx, "newdir"), 0700), -1);
	ck_assert_int_eq(open(rt_path(fx, "newfile"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600), -1);
	ck_assert_int_eq(access(rt_path(fx, "newfile"), F_OK), -1);

	/* An action is written, never read. */
	snprintf(flush, sizeof(flush), "%s", rt_path(fx, "layers/1-logging/flush"));
	open_refused(flush, O_RDONLY);
	open_refused(flush, O_RDWR);
	ck_assert_int_eq(echo_to(flush, "1\n"), 0);
	ck_assert_int_eq(echo_to(flush, "2\n"), EINVAL);

	/* Walk everything, a few blocks' directories included. */
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(fx->rt, 4096 * (size_t)(i + 1), 0, "ro", &b[i]));
	/* The runtime's resets are actions too; the blocks stay counted. */
	open_refused(rt_path(fx, "reset_totals"), O_RDONLY);
	open_refused(rt_path(fx, "reset_peak"), O_RDWR);
	ck_assert_uint_ge(read_u64(rt_path(fx, "allocs")), 3);
	ck_assert_int_eq(echo_to(rt_path(fx, "reset_totals"), "0\n"), EINVAL);
	ck_assert_uint_ge(read_u64(rt_path(fx, "allocs")), 3);
	ck_assert_int_eq(echo_to(rt_path(fx, "reset_totals"), "1\n"), 0);
	expect_text(rt_path(fx, "allocs"), "0\n");
	expect_text(rt_path(fx, "bytes_allocated"), "0\n");
	ck_assert_uint_eq(read_u64(rt_path(fx, "blocks_outstanding")), 3);
	ck_assert_int_eq(echo_to(rt_path(fx, "reset_peak"), "1\n"), 0);
	ck_assert_uint_eq(read_u64(rt_path(fx, "blocks_peak")), 3);
	check_modes(&mw, fx->dir);
	/* root, <rt>, blocks, 3 blocks, streams and one per stream, layers, ... */
	ck_assert_uint_ge(mw.dirs, 8 + xdm_stream_count(fx->rt));
	ck_assert_uint_gt(mw.files, 20);
	/*
	 * limit and group_limit, in budget/ and layers/0-budget/, and where
	 * the platform is CUDA the base's peers (a grant at run time): the
	 * only writable files.
	 */
	ck_assert_uint_eq(mw.writable, 4 + layers_with_peers(fx->rt));
	/* logging's flush, the runtime's reset_peak and reset_totals. */
	ck_assert_uint_eq(mw.actions, 3);

	/* fuse_walk reads all the rest, and counts the action apart. */
	walker_run(args, &w);
	ck_assert_msg(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0,
		      "fuse_walk exited with status 0x%x (its stderr is above)", w.status);
	ck_assert_uint_eq(w.walks, 1);
	ck_assert_uint_eq(w.errors, 0);
	ck_assert_uint_eq(w.vanished, 0);
	ck_assert_uint_eq(w.writeonly, 3);
	ck_assert_uint_eq(w.dirs, mw.dirs);
	ck_assert_uint_eq(w.files, mw.files - mw.actions);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_deallocate(fx->rt, &b[i]));
	TU_OK(xdm_reap_pending(fx->rt));
}

START_TEST(read_only_files_and_modes)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "ro", "1G", "logging sink=memory | ") {
		read_only(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- what the pool holds, read as a file -------------------------------- */

/*
 * <rt>/chunks through the mount: read-only, the same text xdm_tree_show
 * renders in the process, a "chunk" line per chunk of the pool (layer 1,
 * under the budget) and an "active" line at each live block (no thread
 * caches: a block is its piece).
 */
static void chunks_file(struct fx *fx)
{
	size_t cap = 1 << 16, len = 0, chunks = 0;
	char *buf = malloc(cap), *text = NULL, line[128], attr[64];
	struct xdm_block b[4];
	struct stat st;
	char *at;
	int err;

	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_allocate(fx->rt, (size_t)(i + 1) * 100000, (xdm_stream_id)(i % 2), "chunks",
				   &b[i]));
	TU_OK(xdm_deallocate(fx->rt, &b[1]));
	ck_assert_int_eq(stat(rt_path(fx, "chunks"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0444);
	open_refused(rt_path(fx, "chunks"), O_WRONLY);
	err = read_text(rt_path(fx, "chunks"), buf, cap);
	ck_assert_msg(err == 0, "read %s: %s", rt_path(fx, "chunks"), strerror(err));
	ck_assert_int_eq(xdm_tree_show("0/chunks", &text, &len), 0);
	ck_assert_msg(strcmp(buf, text) == 0, "the mount's chunks:\n%s\nthe library's:\n%s", buf,
		      text);
	for (at = buf; (at = strstr(at, "chunk 0x")); at++)
		chunks += at == buf || at[-1] == '\n';
	TU_OK(xdm_layer_attr_show(fx->rt, 1, "chunks", attr, sizeof(attr)));
	ck_assert_uint_eq(chunks, strtoull(attr, NULL, 10));
	for (int i = 0; i < 4; i++) {
		if (i == 1) {
			/* Freed: merged into a free piece, wherever that starts. */
			snprintf(line, sizeof(line), "  active 0x%" PRIx64 " ", b[i].ptr);
			ck_assert_msg(!strstr(buf, line), "'%s' in\n%s", line, buf);
			continue;
		}
		snprintf(line, sizeof(line), "\n  active 0x%" PRIx64 " %zu\n", b[i].ptr,
			 b[i].bytes);
		ck_assert_msg(strstr(buf, line), "no '%s' in\n%s", line + 1, buf);
		TU_OK(xdm_deallocate(fx->rt, &b[i]));
	}
	free(text);
	free(buf);
	TU_OK(xdm_reap_pending(fx->rt));
}

START_TEST(chunks_read_through_the_mount)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "chunks", "1G", "pool chunk=1M tcache=0 | ") {
		chunks_file(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- the process reads its own mount ------------------------------------ */

#define SELF_PASSES 150

struct self_reader {
	const struct fx *fx;
	unsigned long reads, vanished;
	int passes;
	char err[PATH_MAX + 256];	/* the first unexpected failure, "" if none */
};

static void self_fail(struct self_reader *r, const char *path, const char *what)
{
	if (!r->err[0])
		snprintf(r->err, sizeof(r->err), "%s: %s", path, what);
}

/* Read one file; ENOENT is allowed under blocks/ only. */
static void self_read_one(struct self_reader *r, const char *path, bool may_vanish)
{
	char buf[4096];
	int err = read_text(path, buf, sizeof(buf));

	if (err == ENOENT && may_vanish) {
		r->vanished++;
		return;
	}
	if (err) {
		self_fail(r, path, strerror(err));
		return;
	}
	if (!buf[0] || buf[strlen(buf) - 1] != '\n')
		self_fail(r, path, "a value without its newline");
	r->reads++;
}

static void *self_read(void *arg)
{
	static const char *const block_files[] = { "ptr", "bytes", "tag", "state" };
	static const char *const rt_files[] = {
		"bytes_outstanding", "blocks_outstanding", "allocs", "frees", "budget/used",
		"budget/processes", "streams/0/pending_frees", "streams/0/events_outstanding",
		"layers/1-host/bytes_outstanding",
	};
	struct self_reader *r = arg;
	const struct fx *fx = r->fx;
	struct names blocks = { 0 };
	char path[PATH_MAX], pid[32], buf[64];

	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	for (r->passes = 0; r->passes < SELF_PASSES && !r->err[0]; r->passes++) {
		int err;

		join_path(path, sizeof(path), fx->dir, "pid");
		err = read_text(path, buf, sizeof(buf));
		if (err)
			self_fail(r, path, strerror(err));
		else if (strcmp(buf, pid) != 0)
			self_fail(r, path, "not this process's pid");
		join_path(path, sizeof(path), fx->dir, "version");
		self_read_one(r, path, false);
		for (size_t i = 0; i < sizeof(rt_files) / sizeof(rt_files[0]); i++) {
			/* The host layer exists in the host variant only. */
			if (strncmp(rt_files[i], "layers/1-host", 13) == 0 &&
			    strcmp(fx->v->below, "host") != 0)
				continue;
			join_path(path, sizeof(path), fx->rtdir, rt_files[i]);
			self_read_one(r, path, false);
		}
		join_path(path, sizeof(path), fx->rtdir, "blocks");
		err = list_names(path, &blocks);
		if (err) {
			self_fail(r, path, strerror(err));
			break;
		}
		/* A few blocks' files; blocks freed meanwhile are ENOENT. */
		for (size_t i = 0; i < blocks.n && i < 6; i++) {
			size_t pick = (i * 7 + (size_t)r->passes) % blocks.n;

			for (size_t f = 0; f < 4; f++) {
				char rel[128];

				snprintf(rel, sizeof(rel), "blocks/%s/%s", blocks.name[pick],
					 block_files[f]);
				join_path(path, sizeof(path), fx->rtdir, rel);
				self_read_one(r, path, true);
			}
		}
	}
	free(blocks.name);
	return NULL;
}

static void self_read_while_churning(struct fx *fx)
{
	struct self_reader r = { .fx = fx };
	struct churner c[CHURNERS];
	pthread_t reader;
	atomic_bool stop;

	watchdog_start("reading the tree from its own process while threads churn", WATCHDOG_S);
	churn_start(c, fx->rt, &stop);
	ck_assert_int_eq(pthread_create(&reader, NULL, self_read, &r), 0);
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	churn_stop(c, &stop);
	watchdog_stop();
	ck_assert_msg(!r.err[0], "after %d passes: %s", r.passes, r.err);
	ck_assert_int_eq(r.passes, SELF_PASSES);
	ck_assert_uint_gt(r.reads, (unsigned long)SELF_PASSES * 10);

	churn_free_all(c);
	TU_OK(xdm_reap_pending(fx->rt));
	expect_text(rt_path(fx, "blocks_outstanding"), "0\n");
}

START_TEST(self_read_while_churning_test)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "self", "1G", "") {
		self_read_while_churning(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- fork ---------------------------------------------------------------- */

/*
 * Under AddressSanitizer a forked child's exit status is LeakSanitizer's
 * whenever it finds a leak, and the child does leak by design: the parent's
 * server, which it forgets rather than tears down (the thread that owned
 * its buffers stayed in the parent).  So the child sends what it found
 * through a pipe, and its status is asserted in plain builds only.
 */
/* What the child found: bits of the word it sends. */
enum {
	CHILD_PARENT_PID = 1,	/* the parent's mount did not show the parent's pid */
	CHILD_STILL_MOUNTED = 2,	/* xdm_mount_point() was true in the child */
	CHILD_OWN_MOUNT = 4,	/* the child could not mount its own tree */
	CHILD_OWN_PID = 8,	/* its own tree did not show its pid */
	CHILD_DONE = 16,	/* it got to the end */
};

/* Where the forked child is, for the line its watchdog writes. */
static const char *volatile child_step = "starting";

/*
 * A hang ends the child, saying at which step (async-signal-safe: write
 * and _exit only), so that a failure seen once in CI can be placed.
 */
static void child_watchdog(int sig)
{
	static const char head[] = "check_fusefs: the forked child hung while ";
	const char *step = child_step;

	(void)sig;
	if (write(STDERR_FILENO, head, sizeof(head) - 1) < 0 ||
	    write(STDERR_FILENO, step, strlen(step)) < 0 || write(STDERR_FILENO, "\n", 1) < 0)
		_exit(3);
	_exit(3);
}

static int forked_child(const struct fx *fx, pid_t parent, const char *own_dir)
{
	char path[PATH_MAX], buf[64], want[32];
	struct xdm_block b;
	enum xdm_status s;
	int result = 0;

	/* Our handler, not check's, which would kill the whole test's process group. */
	signal(SIGALRM, child_watchdog);
	alarm(WATCHDOG_S / 2);
	child_step = "reading the parent's pid through the parent's mount";
	snprintf(path, sizeof(path), "%s/pid", fx->dir);
	snprintf(want, sizeof(want), "%ld\n", (long)parent);
	if (read_text(path, buf, sizeof(buf)) != 0 || strcmp(buf, want) != 0)
		result |= CHILD_PARENT_PID;
	if (xdm_mount_point(NULL, 0))
		result |= CHILD_STILL_MOUNTED;

	/* Its own copy of the runtime: may or may not serve (a GPU's won't). */
	child_step = "allocating and freeing on its copy of the runtime";
	s = xdm_allocate(fx->rt, 4096, 0, "child", &b);
	if (s == XDM_OK)
		s = xdm_deallocate(fx->rt, &b);
	fprintf(stderr, "check_fusefs: %s: in the forked child, an allocate and free: %s\n",
		fx->v->name, xdm_strerror(s));

	/* A tree of its own, which exit takes away. */
	child_step = "mounting a tree of its own";
	if (xdm_mount(own_dir) != XDM_OK) {
		fprintf(stderr, "check_fusefs: the child's mount: %s\n", xdm_last_error_message());
		result |= CHILD_OWN_MOUNT | CHILD_OWN_PID;
	} else {
		child_step = "reading its own pid through its own mount";
		snprintf(path, sizeof(path), "%s/pid", own_dir);
		snprintf(want, sizeof(want), "%ld\n", (long)getpid());
		if (read_text(path, buf, sizeof(buf)) != 0 || strcmp(buf, want) != 0)
			result |= CHILD_OWN_PID;
	}
	child_step = "sending its result";
	return result | CHILD_DONE;
}

static void fork_and_exit(struct fx *fx)
{
	char own_dir[sizeof(fx->dir) + 8], path[PATH_MAX], text[64];
	struct xdm_block b;
	struct stat st;
	int status, result = 0, pipefd[2];
	ssize_t n;
	pid_t pid, parent = getpid();

	snprintf(own_dir, sizeof(own_dir), "%s.child", fx->dir);
	TU_OK(xdm_allocate(fx->rt, 4096, 0, "parent", &b));
	ck_assert_int_eq(pipe(pipefd), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pipefd[0]);
		result = forked_child(fx, parent, own_dir);
		if (write(pipefd[1], &result, sizeof(result)) != sizeof(result))
			_exit(2);
		close(pipefd[1]);
		child_step = "exiting (its atexit handler unmounts its tree)";
		exit(0);	/* exit, not _exit: the atexit handlers run */
	}

	close(pipefd[1]);
	watchdog_start("waiting for the forked child", WATCHDOG_S);
	do
		n = read(pipefd[0], &result, sizeof(result));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	watchdog_stop();
	ck_assert_msg(n == sizeof(result) && (result & CHILD_DONE),
		      "the child never finished (status 0x%x)", status);
	ck_assert_msg(!(result & CHILD_PARENT_PID),
		      "the child did not read the parent's pid at %s/pid", fx->dir);
	ck_assert_msg(!(result & CHILD_STILL_MOUNTED),
		      "the child still thinks it has the parent's mount");
	ck_assert_msg(!(result & CHILD_OWN_MOUNT), "the child could not mount");
	ck_assert_msg(!(result & CHILD_OWN_PID), "the child's own tree did not show its pid");
	ck_assert_msg(WIFEXITED(status), "the child ended with status 0x%x", status);
	/* Under LeakSanitizer too: forgetting the parent's server leaks nothing. */
	ck_assert_msg(WEXITSTATUS(status) == 0, "the child exited %d", WEXITSTATUS(status));

	/* The child's exit took its own mount and directory away ... */
	assert_no_mount_at(own_dir);
	ck_assert_int_eq(stat(own_dir, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* ... and left the parent's alone. */
	assert_xdm_mount_at(fx->dir);
	ck_assert(xdm_mount_point(path, sizeof(path)));
	ck_assert_str_eq(path, fx->dir);
	join_path(path, sizeof(path), fx->dir, "pid");
	snprintf(text, sizeof(text), "%ld\n", (long)parent);
	expect_text(path, text);
	expect_text(rt_path(fx, "blocks_outstanding"), "1\n");
	snprintf(text, sizeof(text), "blocks/%" PRIu64 "/tag", b.generation);
	expect_text(rt_path(fx, text), "parent\n");
	TU_OK(xdm_deallocate(fx->rt, &b));
	TU_OK(xdm_reap_pending(fx->rt));
	expect_text(rt_path(fx, "blocks_outstanding"), "0\n");
}

START_TEST(fork_child_leaves_parent_mount)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "fork", "1G", "") {
		fork_and_exit(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- many forks while the tree is being read ----------------------------- */

struct lister {
	const char *blocks;
	atomic_bool stop;
	atomic_bool listed;	/* a whole listing is done */
};

/* List blocks/ again and again: the server is inside a tree call most of
 * the time, holding the tree lock and, in turns, every shard's lock. */
static void *list_blocks(void *arg)
{
	struct lister *l = arg;

	while (!atomic_load(&l->stop)) {
		DIR *d = opendir(l->blocks);

		if (!d)
			continue;
		while (readdir(d))
			;
		closedir(d);
		atomic_store(&l->listed, true);
	}
	return NULL;
}

static int count_one(const char *name, const struct xdm_tree_node *node, void *arg)
{
	(void)name;
	(void)node;
	++*(int *)arg;
	return 0;
}

/*
 * A child forked while the server runs must not inherit a lock it holds:
 * it builds and destroys a runtime of its own (which takes the tree lock
 * exclusive) and lists the parent's blocks (every shard lock of the
 * parent's registry).  Before the atfork handlers, such a child hung on
 * the tree lock in about half of the tries.  (The shard locks are held
 * too briefly for 20 forks to catch one reliably; this test guards the
 * tree lock.)
 */
static void forks_while_read(struct fx *fx)
{
	enum { LIVE = 20000 };	/* a long listing: the server is mostly inside it */
	char blocks[PATH_MAX], blocks_rel[64];
	struct xdm_block *live = calloc(LIVE, sizeof(*live));
	struct lister l = { .blocks = blocks };
	pthread_t thread;
	int hung = 0;

	ck_assert(live);
	join_path(blocks, sizeof(blocks), fx->rtdir, "blocks");
	snprintf(blocks_rel, sizeof(blocks_rel), "%s/blocks", fx->rtname);
	for (int i = 0; i < LIVE; i++)
		TU_OK(xdm_allocate(fx->rt, 256, 0, "forks", &live[i]));
	atomic_init(&l.listed, false);
	ck_assert_int_eq(pthread_create(&thread, NULL, list_blocks, &l), 0);
	/*
	 * The forks must find the lister at work: one whole listing first
	 * shows that it reads the mount (a lister still waiting for a core
	 * when the last fork is done would test nothing).
	 */
	ck_assert_msg(wait_flag(&l.listed), "the lister never listed %s", blocks);
	for (int i = 0; i < 20; i++) {
		struct xdm_runtime *child_rt;
		struct xdm_block b;
		int status, listed = 0;
		pid_t pid;

		fflush(NULL);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			/*
			 * A hang ends the child by SIGALRM, whose action must be the
			 * default: the one inherited from check's runner kills the
			 * whole test's process group.
			 */
			signal(SIGALRM, SIG_DFL);
			alarm(WATCHDOG_S / 2);
			if (xdm_runtime_create(0, "host", "host", &child_rt) != XDM_OK)
				_exit(2);
			/* Every shard lock of the parent's runtime, through the tree. */
			if (xdm_tree_list(blocks_rel, count_one, &listed) || listed != LIVE)
				_exit(3);
			/*
			 * Only the child's own runtime serves memory: the parent's
			 * stream workers are not in the child (xdm.h: fork).
			 */
			for (int k = 0; k < 256; k++) {
				if (xdm_allocate(child_rt, 256, 0, "child", &b) != XDM_OK ||
				    xdm_deallocate(child_rt, &b) != XDM_OK)
					_exit(4);
			}
			xdm_runtime_destroy(child_rt);
			_exit(0);
		}
		while (waitpid(pid, &status, 0) < 0)
			ck_assert_int_eq(errno, EINTR);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "check_fusefs: forked child %d: %s %d\n", i,
				WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			hung++;
		}
	}
	atomic_store(&l.stop, true);
	pthread_join(thread, NULL);
	for (int i = 0; i < LIVE; i++)
		TU_OK(xdm_deallocate(fx->rt, &live[i]));
	free(live);
	ck_assert_msg(hung == 0, "%d of 20 children forked while %s was listed hung or failed",
		      hung, blocks);
}

START_TEST(forks_while_the_tree_is_read)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "forks", "1G", "") {
		if (strcmp(fx.v->name, "host") == 0)
			forks_while_read(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- unmount and mount again ------------------------------------------- */

static void unmount_and_again(struct fx *fx)
{
	char path[PATH_MAX], sub[sizeof(fx->dir) + 32], want[64];
	struct stat st;

	join_path(path, sizeof(path), fx->dir, "version");
	snprintf(want, sizeof(want), "%s\n", xdm_version());
	expect_text(path, want);

	/* Mounted once per process. */
	ck_assert_int_eq(xdm_mount("/tmp"), XDM_E_INVALID);
	assert_xdm_mount_at(fx->dir);

	TU_OK(xdm_unmount());
	assert_no_mount_at(fx->dir);
	ck_assert(!xdm_mount_point(path, sizeof(path)));
	/* The directory was there before, so it stays, empty. */
	ck_assert_int_eq(stat(fx->dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	join_path(path, sizeof(path), fx->dir, "version");
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(xdm_unmount(), XDM_E_INVALID);

	/* Again at the same place. */
	TU_OK(xdm_mount(fx->dir));
	assert_xdm_mount_at(fx->dir);
	ck_assert(xdm_mount_point(path, sizeof(path)));
	ck_assert_str_eq(path, fx->dir);
	join_path(path, sizeof(path), fx->dir, "version");
	expect_text(path, want);
	expect_text(rt_path(fx, "ordinal"), "0\n");
	TU_OK(xdm_unmount());
	assert_no_mount_at(fx->dir);

	/* A missing directory is made, %p is the pid, and unmount removes it. */
	join_path(sub, sizeof(sub), fx->dir, "m-%p");
	TU_OK(xdm_mount(sub));
	snprintf(sub, sizeof(sub), "%s/m-%ld", fx->dir, (long)getpid());
	ck_assert(xdm_mount_point(path, sizeof(path)));
	ck_assert_str_eq(path, sub);
	assert_xdm_mount_at(sub);
	join_path(path, sizeof(path), sub, "pid");
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	expect_text(path, want);
	TU_OK(xdm_unmount());
	assert_no_mount_at(sub);
	ck_assert_int_eq(stat(sub, &st), -1);
	ck_assert_int_eq(errno, ENOENT);

	/* And back where fx_close expects it. */
	TU_OK(xdm_mount(fx->dir));
	assert_xdm_mount_at(fx->dir);
}

START_TEST(unmount_then_mount_again)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "unmount", "1G", "") {
		unmount_and_again(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- unmount with files open ------------------------------------------- */

/*
 * A reader that keeps a file and a directory open does not hold up
 * xdm_unmount(): the mount goes, and the descriptors answer ENOTCONN.
 */
static void unmount_with_open_files(struct fx *fx)
{
	char path[PATH_MAX], buf[64];
	int fd, dfd;

	join_path(path, sizeof(path), fx->dir, "version");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	dfd = open(fx->rtdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_msg(dfd >= 0, "open %s: %s", fx->rtdir, strerror(errno));

	watchdog_start("xdm_unmount() with files open", WATCHDOG_S);
	TU_OK(xdm_unmount());
	watchdog_stop();
	assert_no_mount_at(fx->dir);
	ck_assert(!xdm_mount_point(NULL, 0));
	errno = 0;
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, ENOTCONN);
	close(fd);	/* its flush fails the same way: nothing to assert */
	close(dfd);

	/* Nothing stale is left: the same directory mounts again. */
	TU_OK(xdm_mount(fx->dir));
	assert_xdm_mount_at(fx->dir);
	expect_text(rt_path(fx, "ordinal"), "0\n");
}

START_TEST(unmount_with_files_open)
{
	struct fx fx;

	FOR_EACH_VARIANT(&fx, "open", "1G", "") {
		unmount_with_open_files(&fx);
		fx_close(&fx);
	}
}
END_TEST

/* ---- main ----------------------------------------------------------------- */

/* 0 when a mount works here, 77 when it is not supported; in a child. */
static int probe(void)
{
	char dir[96];
	struct xdm_runtime *rt;
	enum xdm_status s;
	int status;
	pid_t pid;

	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		printf("SKIP: /dev/fuse: %s\n", strerror(errno));
		return 77;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 99;
	if (pid == 0) {
		snprintf(dir, sizeof(dir), "/tmp/xdm-%s-probe-XXXXXX", key_prefix);
		if (!mkdtemp(dir))
			_exit(99);
		s = xdm_runtime_create(0, "host", "host", &rt);
		if (s == XDM_OK)
			s = xdm_mount(dir);
		if (s == XDM_OK)
			xdm_unmount();
		rmdir(dir);
		if (s == XDM_E_NOT_SUPPORTED)
			printf("SKIP: %s\n", xdm_last_error_message());
		else if (s != XDM_OK)
			printf("the probe's mount failed: %s\n", xdm_last_error_message());
		fflush(stdout);
		_exit(s == XDM_E_NOT_SUPPORTED ? 77 : 0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 99;
	/* Anything else but a skip: the tests themselves say what is wrong. */
	return WIFEXITED(status) && WEXITSTATUS(status) == 77 ? 77 : 0;
}

static bool detach_ours(const char *point, const char *type, void *arg)
{
	const char *prefix = arg;

	if (strncmp(point, prefix, strlen(prefix)) == 0 && strncmp(type, "fuse", 4) == 0) {
		fprintf(stderr, "check_fusefs: detaching a mount left at %s\n", point);
		umount2(point, MNT_DETACH);
	}
	return false;
}

/* Whatever a failed or killed test left behind: mounts, directories. */
static void clean_up(void)
{
	char prefix[64], path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "/tmp/xdm-%s-", key_prefix);
	each_mount(detach_ours, prefix);
	d = opendir("/tmp");
	if (!d)
		return;
	while ((e = readdir(d))) {
		DIR *sub;
		struct dirent *se;

		if (strncmp(e->d_name, prefix + 5, strlen(prefix + 5)) != 0)
			continue;
		snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
		/* Only empty directories are ever made: rmdir, never more. */
		sub = opendir(path);
		while (sub && (se = readdir(sub))) {
			char inner[PATH_MAX * 2];

			if (strcmp(se->d_name, ".") == 0 || strcmp(se->d_name, "..") == 0)
				continue;
			snprintf(inner, sizeof(inner), "%s/%s", path, se->d_name);
			rmdir(inner);
		}
		if (sub)
			closedir(sub);
		rmdir(path);
	}
	closedir(d);
}

static Suite *fusefs_suite(void)
{
	Suite *s = suite_create("fusefs");
	TCase *tc = tcase_create("mount");

	tcase_add_test(tc, walk_while_churning);
	tcase_add_test(tc, limit_written_through_mount);
	tcase_add_test(tc, bad_writes_change_nothing);
	tcase_add_test(tc, read_only_files_and_modes);
	tcase_add_test(tc, chunks_read_through_the_mount);
	tcase_add_test(tc, self_read_while_churning_test);
	if (!UNDER_TSAN)
		tcase_add_test(tc, fork_child_leaves_parent_mount);
	if (!UNDER_ASAN && !UNDER_TSAN)
		tcase_add_test(tc, forks_while_the_tree_is_read);
	if (UNDER_TSAN)
		fprintf(stderr, "check_fusefs: ThreadSanitizer build: the two fork tests are "
			"left out (its runtime cannot start threads in a multi-threaded "
			"process's forked child)\n");
	else if (UNDER_ASAN)
		fprintf(stderr, "check_fusefs: AddressSanitizer build: forks_while_the_tree_is_read "
			"is left out (its allocator is not safe across a fork)\n");
	tcase_add_test(tc, unmount_then_mount_again);
	/* Under LeakSanitizer too: fusefs frees the snapshots left open. */
	tcase_add_test(tc, unmount_with_files_open);
	tcase_set_timeout(tc, 2 * TU_TIMEOUT_S);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	char key[128], name[BUDGET_NAME_MAX + 64];
	int rc;

	snprintf(key_prefix, sizeof(key_prefix), "cfz%d", (int)getpid());
	rc = probe();
	if (rc)
		return rc;
	rc = tu_run_suite(fusefs_suite());
	clean_up();
	for (int t = 0; test_names[t]; t++) {
		for (const struct variant *v = variants; v->name; v++) {
			key_of(test_names[t], v, key, sizeof(key));
			snprintf(name, sizeof(name), "%s%s", BUDGET_NAME_PREFIX, key);
			shm_unlink(name);
		}
	}
	return rc;
}
