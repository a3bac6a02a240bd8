/* SPDX-License-Identifier: MIT */
/*
 * check_tree.c - the introspection tree, read and written in-process through
 * xdm_tree_*() on the host platform: no FUSE, no mount.  Each file is
 * compared with the call it mirrors (xdm_runtime_stats, the block itself,
 * xdm_layer_attr_show), so a file that drifts from its source fails here
 * rather than in a shell script on a GPU machine.
 *
 * The tree is process-wide: every test runs in its own forked process and
 * destroys what it created, so the first runtime a test builds is "0".
 * Budget stacks draw on segments of their own (key=ckt<pid>-<test>), and
 * main() unlinks every one of them at the end whatever happened.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include <xdm/module.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"
#include "tests/lib/thread_churn.h"

#define PATH_LEN 512
#define MAX_NAMES 600

/* ---- showing and listing ----------------------------------------------- */

static void path_vfmt(char *path, const char *fmt, va_list ap)
{
	int n = vsnprintf(path, PATH_LEN, fmt, ap);

	ck_assert_msg(n >= 0 && n < PATH_LEN, "path too long: %s", fmt);
}

/* The text of a file, which must be a string of exactly the length told. */
static char *vshow(const char *fmt, va_list ap)
{
	char path[PATH_LEN], *text = NULL;
	size_t len = 0;
	int err;

	path_vfmt(path, fmt, ap);
	err = xdm_tree_show(path, &text, &len);
	ck_assert_msg(err == 0, "show '%s': %s", path, strerror(-err));
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strlen(text) == len, "show '%s': %zu bytes told, a string of %zu", path,
		      len, strlen(text));
	return text;
}

static char *show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *show(const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = vshow(fmt, ap);
	va_end(ap);
	return text;
}

static void expect(const char *want, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(const char *want, const char *fmt, ...)
{
	char path[PATH_LEN];
	va_list ap;
	char *text;

	va_start(ap, fmt);
	path_vfmt(path, fmt, ap);
	va_end(ap);
	text = show("%s", path);
	ck_assert_msg(strcmp(text, want) == 0, "%s shows '%s', expected '%s'", path, text, want);
	free(text);
}

/* A file holding one decimal and a newline, nothing else. */
static uint64_t show_u64(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static uint64_t show_u64(const char *fmt, ...)
{
	char path[PATH_LEN], *text, *end;
	uint64_t v;
	va_list ap;

	va_start(ap, fmt);
	path_vfmt(path, fmt, ap);
	va_end(ap);
	text = show("%s", path);
	ck_assert_msg(text[0] >= '0' && text[0] <= '9', "%s shows '%s'", path, text);
	errno = 0;
	v = strtoull(text, &end, 10);
	ck_assert_msg(errno == 0 && strcmp(end, "\n") == 0, "%s shows '%s'", path, text);
	free(text);
	return v;
}

/* What a failing show returns; the text pointer is left alone. */
static int show_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int show_err(const char *fmt, ...)
{
	char path[PATH_LEN], sentinel = 0, *text = &sentinel;
	size_t len = 12345;
	va_list ap;
	int err;

	va_start(ap, fmt);
	path_vfmt(path, fmt, ap);
	va_end(ap);
	err = xdm_tree_show(path, &text, &len);
	if (err == 0) {
		free(text);
		return 0;
	}
	ck_assert_ptr_eq(text, &sentinel);
	ck_assert_uint_eq(len, 12345);
	return err;
}

static int stat_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int stat_err(const char *fmt, ...)
{
	struct xdm_tree_node node;
	char path[PATH_LEN];
	va_list ap;

	va_start(ap, fmt);
	path_vfmt(path, fmt, ap);
	va_end(ap);
	return xdm_tree_stat(path, &node);
}

static struct xdm_tree_node stat_ok(const char *path)
{
	struct xdm_tree_node node = { .dir = false, .mode = 0 };
	int err = xdm_tree_stat(path, &node);

	ck_assert_msg(err == 0, "stat '%s': %s", path, strerror(-err));
	return node;
}

static int store(const char *path, const char *value)
{
	return xdm_tree_store(path, value, strlen(value));
}

struct listing {
	int n;
	char name[MAX_NAMES][64];
	struct xdm_tree_node node[MAX_NAMES];
};

static int collect(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct listing *l = arg;

	ck_assert_int_lt(l->n, MAX_NAMES);
	ck_assert_uint_lt(strlen(name), sizeof(l->name[0]));
	ck_assert_uint_gt(strlen(name), 0);
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	l->node[l->n] = *node;
	l->n++;
	return 0;
}

static int count_entries(const char *name, const struct xdm_tree_node *node, void *arg)
{
	(void)name;
	(void)node;
	(*(int *)arg)++;
	return 0;
}

/* The entries of a directory; the caller frees the listing. */
static struct listing *list(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static struct listing *list(const char *fmt, ...)
{
	struct listing *l = calloc(1, sizeof(*l));
	char path[PATH_LEN];
	va_list ap;
	int err;

	ck_assert_ptr_nonnull(l);
	va_start(ap, fmt);
	path_vfmt(path, fmt, ap);
	va_end(ap);
	err = xdm_tree_list(path, collect, l);
	ck_assert_msg(err == 0, "list '%s': %s", path, strerror(-err));
	return l;
}

static int find(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->name[i], name) == 0)
			return i;
	return -1;
}

/* The listing holds exactly the names given (NULL-terminated), in any order. */
static void expect_names(const struct listing *l, const char *const *names)
{
	int n = 0;

	for (; names[n]; n++)
		ck_assert_msg(find(l, names[n]) >= 0, "'%s' is not listed", names[n]);
	ck_assert_int_eq(l->n, n);
}

/* Names of runtime directories at the root, other than skip (or NULL). */
static int runtime_dirs(struct listing *roots, const char *skip, const char **out, int max)
{
	int n = 0;

	for (int i = 0; i < roots->n; i++) {
		if (!roots->node[i].dir || (skip && strcmp(roots->name[i], skip) == 0))
			continue;
		ck_assert_int_lt(n, max);
		out[n++] = roots->name[i];
	}
	return n;
}

static void assert_unmounted(void)
{
	char dir[256] = "untouched";

	ck_assert(!xdm_mount_point(dir, sizeof(dir)));
	ck_assert_str_eq(dir, "untouched");
}

/* ---- runtimes -------------------------------------------------------- */

/* "ckt<pid of main>": set once in main before any test forks. */
static char key_prefix[32];

static const char *const test_keys[] = {
	"root", "stats", "layers", "two", "two2", "limit", "refused", "readonly", "walk", NULL,
};

static struct xdm_runtime *create(const char *stack)
{
	struct xdm_runtime *rt = NULL;

	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	return rt;
}

/* "budget key=ckt<pid>-<test> <params> | <below>" */
static struct xdm_runtime *create_budget(const char *test, const char *params, const char *below)
{
	char stack[256];

	snprintf(stack, sizeof(stack), "budget key=%s-%s %s | %s", key_prefix, test, params,
		 below);
	return create(stack);
}

static void destroy(struct xdm_runtime *rt)
{
	TU_OK(xdm_runtime_destroy(rt));
}

static void sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		TU_OK(xdm_stream_synchronize(rt, s));
}

static void use(struct xdm_runtime *rt, const struct xdm_block *b, xdm_stream_id s,
		enum xdm_access access)
{
	TU_OK(xdm_prepare_block_use(rt, xdm_block_id_of(b), s, access));
	TU_OK(xdm_finish_block_use(rt, xdm_block_id_of(b), s, access));
}

/* ---- the root -------------------------------------------------------- */

START_TEST(root_lists_only_files_before_any_runtime)
{
	static const char *const names[] = { "version", "pid", "modules", "config", NULL };
	struct listing *l = list("%s", "");
	struct xdm_tree_node node = stat_ok("");

	ck_assert(node.dir);
	ck_assert_uint_eq(node.mode, 0555);
	expect_names(l, names);
	for (int i = 0; i < l->n; i++) {
		ck_assert(!l->node[i].dir);
		ck_assert_uint_eq(l->node[i].mode, 0444);
	}
	ck_assert_int_eq(stat_err("0"), -ENOENT);
	free(l);
}
END_TEST

/* Whether path's file, less ".so", begins the table name. */
static bool names_file(const char *name, const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t stem = strcspn(base, ".");

	return stem > 0 && strncmp(name, base, stem) == 0;
}

START_TEST(root_files_describe_the_process)
{
	struct xdm_runtime *rt = create_budget("root", "limit=1M", "host");
	char want[128], *text, *line, *save = NULL;
	const char *conf = getenv("XDM_CONFIG");
	bool host_platform = false, host_backend = false, budget = false;
	int rows = 0;

	snprintf(want, sizeof(want), "%s\n", xdm_version());
	expect(want, "version");
	ck_assert_uint_eq(show_u64("pid"), (uint64_t)getpid());

	/* One row per module: name kind abi path. */
	text = show("modules");
	ck_assert_uint_gt(strlen(text), 0);
	ck_assert_int_eq(text[strlen(text) - 1], '\n');
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], kind[32], path[1024], extra[8];
		unsigned int major, minor;

		ck_assert_msg(sscanf(line, "%63s %31s %u.%u %1023s %7s", name, kind, &major, &minor,
				     path, extra) == 5, "modules row '%s'", line);
		/* The file is named for the module, whose tables may add to that
		 * name: host.so carries host and host_vmm. */
		ck_assert_msg(path[0] == '/' && names_file(name, path), "modules row '%s'", line);
		if (strcmp(name, "host") == 0 && strcmp(kind, "platform") == 0)
			host_platform = true;
		else if (strcmp(name, "host") == 0 && strcmp(kind, "backend") == 0)
			host_backend = true;
		else if (strcmp(name, "budget") == 0 && strcmp(kind, "adaptor") == 0)
			budget = true;
		rows++;
	}
	ck_assert(host_platform);
	ck_assert(host_backend);
	ck_assert(budget);
	ck_assert_int_ge(rows, 3);
	free(text);

	/* "# <source>" and then the file the suite runs under. */
	text = show("config");
	ck_assert_msg(strncmp(text, "# ", 2) == 0, "config shows '%s'", text);
	ck_assert_int_eq(text[strlen(text) - 1], '\n');
	ck_assert_ptr_nonnull(conf);
	ck_assert_msg(strstr(text, conf) && strstr(text, "platform = host\n"), "config: '%s'",
		      text);
	free(text);
	destroy(rt);
}
END_TEST

/* ---- naming ---------------------------------------------------------- */

START_TEST(runtimes_are_named_by_ordinal)
{
	struct xdm_runtime *a = create("host");
	struct xdm_runtime *b = create("guard | host");
	struct xdm_runtime *c, *d;
	const char *others[4];
	char bname[64], dname[64];
	struct listing *l;

	l = list("%s", "");
	ck_assert_msg(find(l, "0") >= 0 && l->node[find(l, "0")].dir, "no directory 0");
	ck_assert_int_eq(runtime_dirs(l, "0", others, 4), 1);
	ck_assert_msg(strncmp(others[0], "0.", 2) == 0 && others[0][2] >= '1' &&
		      others[0][2] <= '9', "second runtime named '%s'", others[0]);
	snprintf(bname, sizeof(bname), "%s", others[0]);
	free(l);
	expect("host\n", "0/stack");
	expect("guard | host\n", "%s/stack", bname);
	expect("0\n", "%s/ordinal", bname);
	ck_assert_uint_eq(stat_ok(bname).mode, 0555);

	/* The first goes, and its name with it; the other keeps its own. */
	destroy(a);
	ck_assert_int_eq(stat_err("0"), -ENOENT);
	ck_assert_int_eq(show_err("0/stack"), -ENOENT);
	expect("guard | host\n", "%s/stack", bname);

	/* The next one takes the free name "0"; one more gets a new "0.K". */
	c = create("logging sink=null | host");
	expect("logging sink=null | host\n", "0/stack");
	d = create("host");
	l = list("%s", "");
	ck_assert_int_eq(runtime_dirs(l, "0", others, 4), 2);
	ck_assert_int_ge(find(l, bname), 0);
	snprintf(dname, sizeof(dname), "%s", strcmp(others[0], bname) ? others[0] : others[1]);
	ck_assert_str_ne(dname, bname);
	ck_assert_msg(strncmp(dname, "0.", 2) == 0, "fourth runtime named '%s'", dname);
	free(l);
	expect("host\n", "%s/stack", dname);

	destroy(b);
	destroy(c);
	destroy(d);
	l = list("%s", "");
	ck_assert_int_eq(runtime_dirs(l, NULL, others, 4), 0);
	free(l);
}
END_TEST

START_TEST(singleton_takes_the_next_free_name)
{
	struct xdm_runtime *mine = create("guard | host"), *single;
	const char *others[4];
	struct listing *l;

	TU_OK(xdm_runtime_get(0, &single));
	l = list("%s", "");
	ck_assert_int_eq(runtime_dirs(l, "0", others, 4), 1);
	ck_assert_msg(strncmp(others[0], "0.", 2) == 0, "singleton named '%s'", others[0]);
	expect("1\n", "%s/singleton", others[0]);
	expect("0\n", "0/singleton");
	expect("guard | host\n", "0/stack");
	free(l);
	destroy(mine);
	/* The singleton keeps the name it was given. */
	ck_assert_int_eq(stat_err("0"), -ENOENT);
	l = list("%s", "");
	ck_assert_int_eq(runtime_dirs(l, NULL, others, 4), 1);
	expect("1\n", "%s/singleton", others[0]);
	free(l);
}
END_TEST

/* ---- a runtime's files ----------------------------------------------- */

static void expect_stats(struct xdm_runtime *rt)
{
	struct xdm_stats s;

	xdm_runtime_stats(rt, &s);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), s.bytes_outstanding);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), s.blocks_outstanding);
	ck_assert_uint_eq(show_u64("0/bytes_peak"), s.bytes_peak);
	ck_assert_uint_eq(show_u64("0/allocs"), s.allocs);
	ck_assert_uint_eq(show_u64("0/frees"), s.frees);
	ck_assert_uint_eq(show_u64("0/failures"), s.failures);
	ck_assert_uint_eq(show_u64("0/waits_queued"), s.waits_queued);
	ck_assert_uint_eq(show_u64("0/events_recorded"), s.events_recorded);
	ck_assert_uint_eq(show_u64("0/bytes_allocated"), s.bytes_allocated);
	ck_assert_uint_eq(show_u64("0/bytes_freed"), s.bytes_freed);
	ck_assert_uint_eq(show_u64("0/blocks_peak"), s.blocks_peak);
}

START_TEST(runtime_files_follow_the_counters)
{
	struct xdm_runtime *rt = create_budget("stats", "limit=1M", "host");
	struct xdm_block b[3], big;

	expect_stats(rt);
	ck_assert_uint_eq(show_u64("0/allocs"), 0);
	TU_OK(xdm_allocate(rt, 64 * 1024, 0, "a", &b[0]));
	TU_OK(xdm_allocate(rt, 128 * 1024, 1, "b", &b[1]));
	TU_OK(xdm_allocate(rt, 256 * 1024, 2, "c", &b[2]));
	expect_stats(rt);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), 3);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"),
			  b[0].bytes + b[1].bytes + b[2].bytes);
	ck_assert_uint_eq(show_u64("0/allocs"), 3);

	/* Over the budget: a failure, and nothing else moves. */
	ck_assert_int_eq(xdm_allocate(rt, 2 * 1024 * 1024, 0, "big", &big), XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(show_u64("0/failures"), 1);
	ck_assert_uint_eq(show_u64("0/allocs"), 3);
	expect_stats(rt);

	TU_OK(xdm_deallocate(rt, &b[2]));
	expect_stats(rt);
	ck_assert_uint_eq(show_u64("0/frees"), 1);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), 2);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), b[0].bytes + b[1].bytes);
	/* The peaks stay where they were. */
	ck_assert_uint_eq(show_u64("0/bytes_peak"), b[0].bytes + b[1].bytes + b[2].bytes);
	ck_assert_uint_eq(show_u64("0/blocks_peak"), 3);
	ck_assert_uint_eq(show_u64("0/bytes_allocated"), b[0].bytes + b[1].bytes + b[2].bytes);
	ck_assert_uint_eq(show_u64("0/bytes_freed"), b[2].bytes);

	/* A cross-stream use shows up as an event and waits. */
	use(rt, &b[0], 3, XDM_ACCESS_WRITE);
	ck_assert_uint_gt(show_u64("0/waits_queued"), 0);
	ck_assert_uint_gt(show_u64("0/events_recorded"), 0);
	expect_stats(rt);

	TU_OK(xdm_deallocate(rt, &b[0]));
	TU_OK(xdm_deallocate(rt, &b[1]));
	sync_all(rt);
	expect_stats(rt);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), 0);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), 0);
	destroy(rt);
}
END_TEST

/* bytes_peak blocks_peak allocs frees bytes_allocated bytes_freed, as files. */
static void expect_counts_line(const char *want)
{
	static const char *const files[] = {
		"bytes_peak", "blocks_peak", "allocs", "frees", "bytes_allocated", "bytes_freed",
	};
	char line[256];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%" PRIu64, i ? " " : "",
				      show_u64("0/%s", files[i]));
	ck_assert_str_eq(line, want);
}

/* The counts the files show, against what the test knows they must be. */
static void expect_counted(const struct xdm_stats *want)
{
	ck_assert_uint_eq(show_u64("0/allocs"), want->allocs);
	ck_assert_uint_eq(show_u64("0/frees"), want->frees);
	ck_assert_uint_eq(show_u64("0/bytes_allocated"), want->bytes_allocated);
	ck_assert_uint_eq(show_u64("0/bytes_freed"), want->bytes_freed);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), want->blocks_outstanding);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), want->bytes_outstanding);
}

/*
 * The files sum the threads' counts as xdm_runtime_stats() does: exact once
 * the threads are quiet, alive or gone; and the peak of one thread's
 * allocations, spread over many blocks, is the true one.
 */
START_TEST(runtime_files_are_exact_across_threads)
{
	struct xdm_runtime *rt = create("pool | host");
	struct churn *c = calloc(1, sizeof(*c));
	struct xdm_block one, many[48];
	struct xdm_stats want;
	uint64_t peak = 0;

	ck_assert_ptr_nonnull(c);
	churn_start(c, rt);
	want = churn_expected(c);
	expect_counted(&want);
	expect_stats(rt);
	churn_finish(c);
	expect_counted(&want);
	churn_free_live(c, &want);
	expect_counted(&want);
	expect_stats(rt);
	free(c);

	/* One large block, then a higher total over many smaller ones. */
	ck_assert_uint_lt(show_u64("0/bytes_peak"), 16 << 20);
	TU_OK(xdm_allocate(rt, 16 << 20, 0, "one", &one));
	TU_OK(xdm_deallocate(rt, &one));
	for (int i = 0; i < 48; i++) {
		TU_OK(xdm_allocate(rt, 512 << 10, 0, "many", &many[i]));
		peak += many[i].bytes;
	}
	ck_assert_uint_gt(peak, one.bytes);
	for (int i = 0; i < 48; i++)
		TU_OK(xdm_deallocate(rt, &many[i]));
	ck_assert_uint_eq(show_u64("0/bytes_peak"), peak);
	expect_stats(rt);
	destroy(rt);
}
END_TEST

/*
 * reset_peak and reset_totals are actions, as logging's flush: write-only,
 * "1" (a newline after it is fine) starts the reset, anything else is
 * EINVAL and resets nothing.
 */
static void expect_refused(const char *path, const char *peaks_and_totals)
{
	static const char *const bad[] = { "0", "2", "1x", "11", "1\n\n", " 1", "yes", NULL };

	for (int i = 0; bad[i]; i++) {
		ck_assert_msg(store(path, bad[i]) == -EINVAL, "%s took '%s'", path, bad[i]);
		/* bytes_peak blocks_peak allocs frees bytes_allocated bytes_freed */
		expect_counts_line(peaks_and_totals);
	}
	ck_assert_int_eq(xdm_tree_store(path, "", 0), -EINVAL);
	ck_assert_int_eq(xdm_tree_store(path, "1\0", 2), -EINVAL);
	expect_counts_line(peaks_and_totals);
}

START_TEST(runtime_resets_are_actions)
{
	static const char *const resets[] = { "0/reset_peak", "0/reset_totals", NULL };
	struct xdm_runtime *rt = create("host");
	struct xdm_block a, b;
	char *text = NULL, line[256];
	size_t len = 0;

	for (int i = 0; resets[i]; i++) {
		ck_assert_uint_eq(stat_ok(resets[i]).mode, 0200);
		ck_assert_int_eq(xdm_tree_show(resets[i], &text, &len), -EACCES);
		ck_assert_ptr_null(text);
	}
	TU_OK(xdm_allocate(rt, 3000, 0, "a", &a));
	TU_OK(xdm_allocate(rt, 1000, 0, "b", &b));
	TU_OK(xdm_deallocate(rt, &a));
	snprintf(line, sizeof(line), "%" PRIu64 " 2 2 1 %" PRIu64 " %" PRIu64,
		 a.bytes + b.bytes, a.bytes + b.bytes, a.bytes);
	expect_counts_line(line);
	expect_refused("0/reset_peak", line);
	expect_refused("0/reset_totals", line);

	ck_assert_int_eq(store("0/reset_peak", "1\n"), 0);
	snprintf(line, sizeof(line), "%" PRIu64 " 1 2 1 %" PRIu64 " %" PRIu64, b.bytes,
		 a.bytes + b.bytes, a.bytes);
	expect_counts_line(line);
	ck_assert_int_eq(store("0/reset_totals", "1"), 0);
	snprintf(line, sizeof(line), "%" PRIu64 " 1 0 0 0 0", b.bytes);
	expect_counts_line(line);
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), b.bytes);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), 1);
	expect_stats(rt);

	TU_OK(xdm_deallocate(rt, &b));
	snprintf(line, sizeof(line), "%" PRIu64 " 1 0 1 0 %" PRIu64, b.bytes, b.bytes);
	expect_counts_line(line);
	expect_stats(rt);
	destroy(rt);
}
END_TEST

START_TEST(runtime_files_describe_device_and_stack)
{
	struct xdm_runtime *rt = create("guard | host free=stream");
	struct xdm_device_info dev;
	char spec[256], want[512];

	TU_OK(xdm_runtime_device(rt, &dev));
	TU_OK(xdm_runtime_stack_spec(rt, spec, sizeof(spec)));
	expect("0\n", "0/ordinal");
	expect("host\n", "0/platform");
	snprintf(want, sizeof(want), "%s\n", spec);
	expect(want, "0/stack");
	expect("guard | host free=stream\n", "0/stack");
	snprintf(want, sizeof(want), "%s\n", dev.uuid);
	expect(want, "0/uuid");
	snprintf(want, sizeof(want), "%s\n", dev.name);
	expect(want, "0/device");
	ck_assert_uint_eq(show_u64("0/memory_total"), dev.total_bytes);
	ck_assert_uint_gt(dev.total_bytes, 0);
	expect("0\n", "0/singleton");
	destroy(rt);
}
END_TEST

/* ---- blocks ---------------------------------------------------------- */

START_TEST(blocks_list_the_live_generations)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_block b[6];
	struct listing *l;
	char name[32];

	l = list("0/blocks");
	ck_assert_int_eq(l->n, 0);
	free(l);
	for (int i = 0; i < 6; i++)
		TU_OK(xdm_allocate(rt, 1000 * (size_t)(i + 1), (xdm_stream_id)i, "gen", &b[i]));
	l = list("0/blocks");
	ck_assert_int_eq(l->n, 6);
	for (int i = 0; i < 6; i++) {
		int at;

		snprintf(name, sizeof(name), "%" PRIu64, b[i].generation);
		at = find(l, name);
		ck_assert_msg(at >= 0, "generation %s is not listed", name);
		ck_assert(l->node[at].dir);
		ck_assert_uint_eq(l->node[at].mode, 0555);
	}
	free(l);

	TU_OK(xdm_deallocate(rt, &b[2]));
	l = list("0/blocks");
	ck_assert_int_eq(l->n, 5);
	snprintf(name, sizeof(name), "%" PRIu64, b[2].generation);
	ck_assert_int_eq(find(l, name), -1);
	free(l);
	ck_assert_int_eq(stat_err("0/blocks/%s", name), -ENOENT);
	ck_assert_int_eq(show_err("0/blocks/%s/ptr", name), -ENOENT);

	for (int i = 0; i < 6; i++)
		if (i != 2)
			TU_OK(xdm_deallocate(rt, &b[i]));
	l = list("0/blocks");
	ck_assert_int_eq(l->n, 0);
	free(l);
	destroy(rt);
}
END_TEST

#define MIB ((size_t)1024 * 1024)

struct tree_text {
	char buf[4096];
	size_t at;
};

/* The chunks file as xdm_runtime_for_each_chunk's chunks would be written in it. */
static int render_chunk(const struct xdm_chunk *c, void *arg)
{
	struct tree_text *t = arg;

	t->at += snprintf(t->buf + t->at, sizeof(t->buf) - t->at, "chunk 0x%" PRIx64 " %" PRIu64
			  " stream %u\n", c->ptr, c->bytes, c->stream);
	for (uint32_t i = 0; i < c->npieces; i++)
		t->at += snprintf(t->buf + t->at, sizeof(t->buf) - t->at, "  %s 0x%" PRIx64 " %"
				  PRIu64 "\n", c->pieces[i].state == XDM_PIECE_ACTIVE ? "active" :
				  "inactive", c->pieces[i].ptr, c->pieces[i].bytes);
	ck_assert_uint_lt(t->at, sizeof(t->buf));
	return 0;
}

/*
 * chunks: a line per chunk, then a line per piece, as the API gives them;
 * empty (a table without rows) while nothing is held; read-only.
 */
START_TEST(chunks_file_lists_what_the_stack_holds)
{
	struct xdm_runtime *rt = create("pool chunk=1M tcache=0 | host");
	struct tree_text want = { .at = 0 };
	struct xdm_block b[3];
	char line[96], *text;

	expect("", "0/chunks");
	ck_assert_uint_eq(stat_ok("0/chunks").mode, 0444);
	ck_assert_int_eq(store("0/chunks", "1"), -EACCES);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 1000 * (size_t)(i + 1), (xdm_stream_id)i, "chunk", &b[i]));
	TU_OK(xdm_deallocate(rt, &b[1]));
	TU_OK(xdm_runtime_for_each_chunk(rt, render_chunk, &want));
	text = show("0/chunks");
	ck_assert_str_eq(text, want.buf);
	/* Streams 0 and 2 each have a chunk of 1 MiB; stream 1's is all free. */
	for (int i = 0; i < 3; i++) {
		snprintf(line, sizeof(line), "chunk 0x%" PRIx64 " %zu stream %d\n  %s 0x%" PRIx64
			 " ", b[i].ptr, MIB, i, i == 1 ? "inactive" : "active", b[i].ptr);
		ck_assert_msg(strstr(text, line), "no '%s' in '%s'", line, text);
	}
	free(text);
	for (int i = 0; i < 3; i++)
		if (i != 1)
			TU_OK(xdm_deallocate(rt, &b[i]));
	destroy(rt);

	/* Without a pool: one chunk a live block, of its size, one active piece. */
	rt = create("host");
	TU_OK(xdm_allocate(rt, 1000, 3, "alone", &b[0]));
	snprintf(line, sizeof(line), "chunk 0x%" PRIx64 " %zu stream 3\n  active 0x%" PRIx64
		 " %zu\n", b[0].ptr, b[0].bytes, b[0].ptr, b[0].bytes);
	expect(line, "0/chunks");
	TU_OK(xdm_deallocate(rt, &b[0]));
	expect("", "0/chunks");
	destroy(rt);
}
END_TEST

static void expect_block(const struct xdm_block *b, size_t asked, const char *tag_shown)
{
	uint64_t g = b->generation;
	char want[64];

	snprintf(want, sizeof(want), "0x%" PRIx64 "\n", b->ptr);
	expect(want, "0/blocks/%" PRIu64 "/ptr", g);
	ck_assert_uint_eq(show_u64("0/blocks/%" PRIu64 "/bytes", g), b->bytes);
	ck_assert_uint_eq(show_u64("0/blocks/%" PRIu64 "/requested", g), asked);
	ck_assert_uint_eq(show_u64("0/blocks/%" PRIu64 "/align", g), b->align);
	ck_assert_uint_eq(show_u64("0/blocks/%" PRIu64 "/stream", g), b->stream);
	expect(tag_shown, "0/blocks/%" PRIu64 "/tag", g);
	expect("live\n", "0/blocks/%" PRIu64 "/state", g);
}

START_TEST(block_files_mirror_the_block)
{
	static const char *const files[] = {
		"ptr", "bytes", "requested", "align", "stream", "tag", "state", "last_write",
		"reads", "importers", NULL,
	};
	struct xdm_runtime *rt = create("guard | host");
	struct xdm_block plain, odd, empty, untagged;
	char longtag[300], longshown[310];
	struct xdm_block lng;
	struct listing *l;

	TU_OK(xdm_allocate(rt, 5000, 3, "weights", &plain));
	TU_OK(xdm_allocate(rt, 100, 0, "a\tb\x01" "c\x7f\xc3\xa9", &odd));
	TU_OK(xdm_allocate(rt, 10, 1, "", &empty));
	TU_OK(xdm_allocate(rt, 1, 2, NULL, &untagged));
	memset(longtag, 'x', 120);
	longtag[120] = '\0';
	TU_OK(xdm_allocate(rt, 77, 0, longtag, &lng));

	l = list("0/blocks/%" PRIu64, plain.generation);
	expect_names(l, files);
	for (int i = 0; i < l->n; i++) {
		ck_assert(!l->node[i].dir);
		ck_assert_uint_eq(l->node[i].mode, 0444);
	}
	free(l);

	expect_block(&plain, 5000, "weights\n");
	/* Anything outside printable ASCII is a '?', byte by byte. */
	expect_block(&odd, 100, "a?b?c???\n");
	expect_block(&empty, 10, "\n");
	expect_block(&untagged, 1, "untagged\n");
	snprintf(longshown, sizeof(longshown), "%s\n", longtag);
	expect_block(&lng, 77, longshown);
	expect("none\n", "0/blocks/%" PRIu64 "/last_write", plain.generation);
	expect("none\n", "0/blocks/%" PRIu64 "/reads", plain.generation);
	/* Shared with no process (check_ipc covers those that are). */
	expect("none\n", "0/blocks/%" PRIu64 "/importers", plain.generation);
	expect("none\n", "0/imports");

	TU_OK(xdm_deallocate(rt, &plain));
	TU_OK(xdm_deallocate(rt, &odd));
	TU_OK(xdm_deallocate(rt, &empty));
	TU_OK(xdm_deallocate(rt, &untagged));
	TU_OK(xdm_deallocate(rt, &lng));
	destroy(rt);
}
END_TEST

START_TEST(block_and_stream_names_are_strict)
{
	static const char *const bad[] = {
		"abc", "+1", "-1", "1x", " 1", "0", "00", "0x1",
		"18446744073709551615", "18446744073709551616", "99999999999999999999999", NULL,
	};
	struct xdm_runtime *rt = create("host");
	struct xdm_block b;

	TU_OK(xdm_allocate(rt, 4096, 0, "t", &b));
	ck_assert(stat_ok("0/blocks").dir);
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64, b.generation), 0);
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64 "/", b.generation), 0);
	ck_assert_int_eq(stat_err("0/blocks/0%" PRIu64, b.generation), -ENOENT);
	ck_assert_int_eq(stat_err("0/blocks/00%" PRIu64, b.generation), -ENOENT);
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64 "0", b.generation), -ENOENT);
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64, b.generation + 1), -ENOENT);
	for (int i = 0; bad[i]; i++) {
		ck_assert_msg(stat_err("0/blocks/%s", bad[i]) == -ENOENT, "blocks/%s", bad[i]);
		ck_assert_msg(stat_err("0/streams/%s", bad[i]) == -ENOENT || strcmp(bad[i], "0") == 0,
			      "streams/%s", bad[i]);
	}
	/* Streams are 0 .. count-1, named the same strict way. */
	ck_assert_int_eq(stat_err("0/streams/0"), 0);
	ck_assert_int_eq(stat_err("0/streams/15"), 0);
	ck_assert_int_eq(stat_err("0/streams/16"), -ENOENT);
	ck_assert_int_eq(stat_err("0/streams/015"), -ENOENT);
	ck_assert_int_eq(stat_err("0/streams/4294967296"), -ENOENT);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64, b.generation), -ENOENT);
	destroy(rt);
}
END_TEST

/* ---- tracking -------------------------------------------------------- */

static uint64_t events_on(xdm_stream_id s)
{
	return show_u64("0/streams/%u/events_outstanding", s);
}

START_TEST(tracking_views_follow_the_uses)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_block b, c;
	uint64_t g;

	TU_OK(xdm_allocate(rt, 4096, 0, "tracked", &b));
	TU_OK(xdm_allocate(rt, 4096, 0, "read first", &c));
	g = b.generation;
	expect("none\n", "0/blocks/%" PRIu64 "/last_write", g);
	expect("none\n", "0/blocks/%" PRIu64 "/reads", g);
	for (xdm_stream_id s = 0; s < 4; s++)
		ck_assert_uint_eq(events_on(s), 0);

	/* A write on 1: the owner's stream is no longer named, 1 is. */
	use(rt, &b, 1, XDM_ACCESS_WRITE);
	expect("1\n", "0/blocks/%" PRIu64 "/last_write", g);
	expect("none\n", "0/blocks/%" PRIu64 "/reads", g);
	ck_assert_uint_eq(events_on(0), 0);
	ck_assert_uint_eq(events_on(1), 1);

	/* Reads on 2 and 3 add to the write; a second read on 2 replaces its first. */
	use(rt, &b, 2, XDM_ACCESS_READ);
	expect("1\n", "0/blocks/%" PRIu64 "/last_write", g);
	expect("2\n", "0/blocks/%" PRIu64 "/reads", g);
	use(rt, &b, 3, XDM_ACCESS_READ);
	use(rt, &b, 2, XDM_ACCESS_READ);
	expect("1\n", "0/blocks/%" PRIu64 "/last_write", g);
	expect("2 3\n", "0/blocks/%" PRIu64 "/reads", g);
	ck_assert_uint_eq(events_on(1), 1);
	ck_assert_uint_eq(events_on(2), 1);
	ck_assert_uint_eq(events_on(3), 1);

	/* A first use from another stream that only reads: the owner's queued
	 * work becomes the block's first write. */
	use(rt, &c, 5, XDM_ACCESS_READ);
	expect("0\n", "0/blocks/%" PRIu64 "/last_write", c.generation);
	expect("5\n", "0/blocks/%" PRIu64 "/reads", c.generation);
	ck_assert_uint_eq(events_on(0), 1);
	ck_assert_uint_eq(events_on(5), 1);

	/* A write on the owner's stream supersedes every earlier use. */
	use(rt, &b, 0, XDM_ACCESS_WRITE);
	expect("0\n", "0/blocks/%" PRIu64 "/last_write", g);
	expect("none\n", "0/blocks/%" PRIu64 "/reads", g);
	ck_assert_uint_eq(events_on(0), 2);
	ck_assert_uint_eq(events_on(1), 0);
	ck_assert_uint_eq(events_on(2), 0);
	ck_assert_uint_eq(events_on(3), 0);

	/* Freed, the block takes its events with it. */
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(rt, &c));
	sync_all(rt);
	for (xdm_stream_id s = 0; s < 6; s++)
		ck_assert_uint_eq(events_on(s), 0);
	destroy(rt);
}
END_TEST

START_TEST(pending_frees_counts_frees_stuck_behind_another_stream)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_block b, c;
	struct tu_gate g;

	tu_gate_init(&g);
	TU_OK(xdm_allocate(rt, 4096, 0, "stuck", &b));
	TU_OK(xdm_allocate(rt, 4096, 0, "second", &c));
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 0);

	/* Stream 1 is held; a write there records an event it cannot reach. */
	tu_gate_hold(rt, 1, &g);
	use(rt, &b, 1, XDM_ACCESS_WRITE);
	use(rt, &c, 1, XDM_ACCESS_READ);
	ck_assert_uint_eq(events_on(1), 2);

	/* The frees on stream 0 wait for that event. */
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 1);
	TU_OK(xdm_deallocate(rt, &c));
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 2);
	ck_assert_uint_eq(show_u64("0/layers/0-host/pending_frees"), 2);
	/* Gone from the registry, though their memory is still held. */
	ck_assert_int_eq(stat_err("0/blocks/%" PRIu64, b.generation), -ENOENT);
	ck_assert_uint_eq(show_u64("0/blocks_outstanding"), 0);
	ck_assert_uint_eq(events_on(1), 0);
	ck_assert_uint_eq(show_u64("0/streams/1/pending_frees"), 0);
	/* Reading the count twice does not lose what is still stuck. */
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 2);

	tu_gate_open(&g);
	TU_OK(xdm_stream_synchronize(rt, 1));
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 0);
	ck_assert_uint_eq(show_u64("0/layers/0-host/pending_frees"), 0);
	ck_assert_uint_eq(show_u64("0/layers/0-host/bytes_outstanding"), 0);
	destroy(rt);
}
END_TEST

/*
 * streams/<id>/pending_frees counts only frees that waited on another
 * stream's use (stream_frees.c); a free merely queued behind its own busy
 * stream is counted by the host layer's pending_frees alone.
 */
START_TEST(pending_frees_skips_frees_without_cross_stream_uses)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_block b;
	struct tu_gate g;

	tu_gate_init(&g);
	TU_OK(xdm_allocate(rt, 4096, 0, "own", &b));
	tu_gate_hold(rt, 0, &g);
	TU_OK(xdm_deallocate(rt, &b));
	ck_assert_uint_eq(show_u64("0/layers/0-host/pending_frees"), 1);
	ck_assert_uint_eq(show_u64("0/streams/0/pending_frees"), 0);
	tu_gate_open(&g);
	TU_OK(xdm_stream_synchronize(rt, 0));
	ck_assert_uint_eq(show_u64("0/layers/0-host/pending_frees"), 0);
	destroy(rt);
}
END_TEST

static void bump(void *arg)
{
	atomic_fetch_add((_Atomic int *)arg, 1);
}

START_TEST(streams_show_handles_and_imports)
{
	struct xdm_runtime *rt = create("host"), *other = create("host");
	void *h, *foreign;
	xdm_stream_id id;
	char want[64];
	struct listing *l;
	_Atomic int ran = 0;

	l = list("0/streams");
	ck_assert_int_eq(l->n, 16);
	for (int i = 0; i < 16; i++) {
		snprintf(want, sizeof(want), "%d", i);
		ck_assert_int_ge(find(l, want), 0);
	}
	free(l);
	TU_OK(xdm_stream_handle(rt, 4, &h));
	snprintf(want, sizeof(want), "%p\n", h);
	expect(want, "0/streams/4/handle");
	expect("0\n", "0/streams/4/imported");

	TU_OK(xdm_stream_handle(other, 2, &foreign));
	TU_OK(xdm_stream_import(rt, foreign, &id));
	ck_assert_uint_eq(id, 16);
	l = list("0/streams");
	ck_assert_int_eq(l->n, 17);
	ck_assert_int_ge(find(l, "16"), 0);
	free(l);
	expect("1\n", "0/streams/16/imported");
	snprintf(want, sizeof(want), "%p\n", foreign);
	expect(want, "0/streams/16/handle");
	ck_assert_uint_eq(show_u64("0/streams/16/pending_frees"), 0);
	TU_OK(xdm_stream_launch_host(rt, id, bump, (void *)&ran));
	TU_OK(xdm_stream_synchronize(rt, id));
	ck_assert_int_eq(atomic_load(&ran), 1);
	destroy(rt);
	destroy(other);
}
END_TEST

/* ---- layers ---------------------------------------------------------- */

static const char *const budget_files[] = {
	"limit", "configured_limit", "used", "credit", "credit_held", "remaining", "peak",
	"refusals", "processes", "reset_stale", "unsettled", "segment", "dir", "group",
	"group_limit", "group_used", "group_remaining", "group_peak", "group_refusals", NULL,
};
static const char *const host_files[] = {
	"bytes_outstanding", "pending_frees", "allocs", "frees", NULL,
};
static const char *const guard_files[] = {
	"check", "live_blocks", "quarantined_blocks", "quarantined_bytes", "violations",
	"last_violation", NULL,
};
/* "flush" is an action: write-only (0200), nothing to show. */
static const char *const logging_files[] = {
	"rows", "bytes_written", "write_errors", "dropped", "waits", "path", "sink", "buffer",
	"full", "writers", "contents", "flush", NULL,
};

static unsigned int writable_mode(const char *name)
{
	if (strcmp(name, "flush") == 0)
		return 0200;
	return strcmp(name, "limit") == 0 || strcmp(name, "group_limit") == 0 ||
			       strcmp(name, "check") == 0
		       ? 0644
		       : 0444;
}

/* Each file of dir equals xdm_layer_attr_show of layer index. */
static void expect_layer_dir(struct xdm_runtime *rt, uint32_t index, const char *dir,
			     const char *const *names)
{
	struct listing *l = list("%s", dir);
	char buf[8192];

	expect_names(l, names);
	for (int i = 0; i < l->n; i++) {
		char *text;

		ck_assert(!l->node[i].dir);
		ck_assert_msg(l->node[i].mode == writable_mode(l->name[i]), "%s/%s mode %o", dir,
			      l->name[i], l->node[i].mode);
		ck_assert_uint_eq(stat_ok(dir).mode, 0555);
		if (l->node[i].mode == 0200) {
			char *none = NULL;
			size_t len = 0;

			/* An action shows nothing, in the tree or through the API. */
			char path[PATH_LEN];

			snprintf(path, sizeof(path), "%s/%s", dir, l->name[i]);
			ck_assert_int_eq(xdm_tree_show(path, &none, &len), -EACCES);
			ck_assert(none == NULL);
			continue;
		}
		TU_OK(xdm_layer_attr_show(rt, index, l->name[i], buf, sizeof(buf)));
		text = show("%s/%s", dir, l->name[i]);
		ck_assert_msg(strcmp(text, buf) == 0, "%s/%s shows '%s', the layer '%s'", dir,
			      l->name[i], text, buf);
		free(text);
	}
	free(l);
}

START_TEST(layers_list_the_stack)
{
	static const char *const budget_stack[] = { "0-budget", "1-host", NULL };
	static const char *const full_stack[] = {
		"0-logging", "1-guard", "2-budget", "3-host", NULL,
	};
	static const char *const core_dirs[] = { "blocks", "streams", "layers", NULL };
	struct xdm_runtime *rt = create_budget("layers", "limit=1M credit=0", "host");
	struct xdm_block b;
	struct listing *l;
	char key[128], *seg;
	int dirs;

	TU_OK(xdm_allocate(rt, 1000, 0, "t", &b));
	l = list("0/layers");
	expect_names(l, budget_stack);
	free(l);
	expect_layer_dir(rt, 0, "0/layers/0-budget", budget_files);
	expect_layer_dir(rt, 1, "0/layers/1-host", host_files);
	/* The budget's group shows the same files. */
	expect_layer_dir(rt, 0, "0/budget", budget_files);
	ck_assert_uint_eq(show_u64("0/budget/used"), b.bytes);
	ck_assert_uint_eq(show_u64("0/budget/limit"), 1024 * 1024);
	ck_assert_uint_eq(show_u64("0/layers/1-host/allocs"), 1);
	snprintf(key, sizeof(key), "%s-layers", key_prefix);
	seg = show("0/budget/segment");
	ck_assert_msg(strstr(seg, key), "segment '%s'", seg);
	free(seg);
	/* A layer's directory is named by its index and its module both. */
	ck_assert_int_eq(stat_err("0/layers/0-host"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/1-budget"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/2-host"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/00-budget"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/0budget"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/0-"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/-budget"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/0-budget/nonesuch"), -ENOENT);
	TU_OK(xdm_deallocate(rt, &b));
	destroy(rt);

	/* No budget layer, no budget directory. */
	rt = create("guard | host");
	l = list("0");
	ck_assert_int_eq(find(l, "budget"), -1);
	dirs = 0;
	for (int i = 0; i < l->n; i++)
		dirs += l->node[i].dir;
	ck_assert_int_eq(dirs, 3);
	for (int i = 0; core_dirs[i]; i++) {
		int at = find(l, core_dirs[i]);

		ck_assert_msg(at >= 0 && l->node[at].dir, "no directory %s", core_dirs[i]);
	}
	free(l);
	ck_assert_int_eq(stat_err("0/budget"), -ENOENT);
	ck_assert_int_eq(show_err("0/budget/limit"), -ENOENT);
	expect_layer_dir(rt, 0, "0/layers/0-guard", guard_files);
	destroy(rt);

	snprintf(key, sizeof(key), "logging sink=memory | guard | budget key=%s-layers | host",
		 key_prefix);
	rt = create(key);
	l = list("0/layers");
	expect_names(l, full_stack);
	free(l);
	expect_layer_dir(rt, 0, "0/layers/0-logging", logging_files);
	expect_layer_dir(rt, 1, "0/layers/1-guard", guard_files);
	expect_layer_dir(rt, 2, "0/layers/2-budget", budget_files);
	expect_layer_dir(rt, 2, "0/budget", budget_files);
	expect_layer_dir(rt, 3, "0/layers/3-host", host_files);
	expect("memory\n", "0/layers/0-logging/sink");
	destroy(rt);
}
END_TEST

/* Two budget layers: the group directory is the topmost one's. */
START_TEST(group_directory_is_the_topmost_layer)
{
	struct xdm_runtime *rt;
	struct listing *l;
	char stack[256];
	int groups = 0;

	snprintf(stack, sizeof(stack), "budget key=%s-two limit=3M | budget key=%s-two2 limit=5M "
		 "| host", key_prefix, key_prefix);
	rt = create(stack);
	ck_assert_uint_eq(show_u64("0/budget/limit"), 3 * 1024 * 1024);
	ck_assert_uint_eq(show_u64("0/layers/0-budget/limit"), 3 * 1024 * 1024);
	ck_assert_uint_eq(show_u64("0/layers/1-budget/limit"), 5 * 1024 * 1024);
	ck_assert_int_eq(store("0/budget/limit", "4M\n"), 0);
	ck_assert_uint_eq(show_u64("0/layers/0-budget/limit"), 4 * 1024 * 1024);
	ck_assert_uint_eq(show_u64("0/layers/1-budget/limit"), 5 * 1024 * 1024);
	l = list("0");
	for (int i = 0; i < l->n; i++)
		groups += strcmp(l->name[i], "budget") == 0;
	ck_assert_int_eq(groups, 1);
	free(l);
	destroy(rt);
}
END_TEST

static void layer_show(struct xdm_runtime *rt, uint32_t index, const char *attr, char *buf,
		       size_t len)
{
	TU_OK(xdm_layer_attr_show(rt, index, attr, buf, len));
}

START_TEST(budget_limit_is_writable)
{
	struct xdm_runtime *rt = create_budget("limit", "limit=1M credit=0", "host");
	struct xdm_block b;
	char buf[64], want[64];
	uint64_t total = show_u64("0/memory_total");

	ck_assert_uint_eq(stat_ok("0/budget/limit").mode, 0644);
	ck_assert(!stat_ok("0/budget/limit").dir);
	ck_assert_int_eq(store("0/budget/limit", "2M\n"), 0);
	expect("2097152\n", "0/budget/limit");
	expect("2097152\n", "0/layers/0-budget/limit");
	layer_show(rt, 0, "limit", buf, sizeof(buf));
	ck_assert_str_eq(buf, "2097152\n");
	ck_assert_uint_eq(show_u64("0/budget/configured_limit"), 1024 * 1024);

	/* The new limit is the one allocations meet. */
	TU_OK(xdm_allocate(rt, 1536 * 1024, 0, "fits now", &b));
	ck_assert_uint_eq(show_u64("0/budget/remaining"), 2097152 - b.bytes);

	/* Without the newline, through the layer's directory. */
	ck_assert_int_eq(store("0/layers/0-budget/limit", "3145728"), 0);
	expect("3145728\n", "0/budget/limit");
	ck_assert_int_eq(store("/0//budget/limit/", "max"), 0);
	snprintf(want, sizeof(want), "%" PRIu64 "\n", UINT64_MAX);
	expect(want, "0/budget/limit");
	layer_show(rt, 0, "limit", buf, sizeof(buf));
	ck_assert_str_eq(buf, want);
	/* A percentage is of the device's memory_total. */
	ck_assert_int_eq(store("0/budget/limit", "50%\n"), 0);
	ck_assert_uint_eq(show_u64("0/budget/limit"), total / 2);
	TU_OK(xdm_deallocate(rt, &b));
	destroy(rt);
}
END_TEST

START_TEST(refused_values_change_nothing)
{
	static const char *const refused[] = {
		"garbage", "-1", "\n", "4Kx", "99999999999999999999999", "2M\n\n", "\n2M",
		"1 M x", "0x", "%", NULL,
	};
	struct xdm_runtime *rt = create_budget("refused", "limit=1M", "host");
	char buf[64];

	for (int i = 0; refused[i]; i++) {
		ck_assert_msg(store("0/budget/limit", refused[i]) == -EINVAL, "'%s' accepted",
			      refused[i]);
		expect("1048576\n", "0/budget/limit");
	}
	/* Nothing at all, and a NUL inside what was written. */
	ck_assert_int_eq(xdm_tree_store("0/budget/limit", "", 0), -EINVAL);
	ck_assert_int_eq(xdm_tree_store("0/budget/limit", "2M\0x", 4), -EINVAL);
	ck_assert_int_eq(xdm_tree_store("0/budget/limit", "2M\0", 3), -EINVAL);
	/* A length shorter than the string: only those bytes are the value. */
	ck_assert_int_eq(xdm_tree_store("0/budget/limit", "2M garbage", 2), 0);
	expect("2097152\n", "0/budget/limit");
	ck_assert_int_eq(xdm_tree_store("0/budget/limit", "1M", 2), 0);
	layer_show(rt, 0, "limit", buf, sizeof(buf));
	ck_assert_str_eq(buf, "1048576\n");

	/* The guard's check takes 1 and nothing else. */
	destroy(rt);
	rt = create("guard | host");
	ck_assert_int_eq(store("0/layers/0-guard/check", "2\n"), -EINVAL);
	ck_assert_int_eq(store("0/layers/0-guard/check", "1\n"), 0);
	expect("ok\n", "0/layers/0-guard/check");
	destroy(rt);
}
END_TEST

START_TEST(read_only_files_refuse_stores)
{
	static const char *const ro[] = {
		"version", "pid", "modules", "config", "0/bytes_outstanding", "0/ordinal",
		"0/stack", "0/budget/used", "0/budget/configured_limit", "0/layers/0-budget/peak",
		"0/layers/1-host/allocs", "0/streams/0/pending_frees", NULL,
	};
	struct xdm_runtime *rt = create_budget("readonly", "limit=1M", "host");
	struct xdm_block b;
	char path[64];

	TU_OK(xdm_allocate(rt, 100, 0, "t", &b));
	for (int i = 0; ro[i]; i++) {
		ck_assert_uint_eq(stat_ok(ro[i]).mode, 0444);
		ck_assert_msg(store(ro[i], "1\n") == -EACCES, "store to %s", ro[i]);
	}
	snprintf(path, sizeof(path), "0/blocks/%" PRIu64 "/bytes", b.generation);
	ck_assert_int_eq(store(path, "1"), -EACCES);
	/* The value did not move. */
	ck_assert_uint_eq(show_u64("0/bytes_outstanding"), b.bytes);
	/* Directories and missing files. */
	ck_assert_int_eq(store("0", "1"), -EISDIR);
	ck_assert_int_eq(store("", "1"), -EISDIR);
	ck_assert_int_eq(store("0/budget", "1"), -EISDIR);
	ck_assert_int_eq(store("0/nonesuch", "1"), -ENOENT);
	ck_assert_int_eq(store("0/budget/limit/x", "1"), -ENOTDIR);
	TU_OK(xdm_deallocate(rt, &b));
	destroy(rt);
}
END_TEST

/* ---- walking --------------------------------------------------------- */

START_TEST(walk_errors_are_errnos)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_tree_node node;
	struct listing *l;
	char *text = NULL;
	size_t len = 0;

	ck_assert_int_eq(show_err("%s", ""), -EISDIR);
	ck_assert_int_eq(show_err("0"), -EISDIR);
	ck_assert_int_eq(show_err("0/blocks"), -EISDIR);
	ck_assert_int_eq(show_err("0/streams/0"), -EISDIR);
	ck_assert_int_eq(show_err("0/layers/0-host"), -EISDIR);
	l = calloc(1, sizeof(*l));
	ck_assert_int_eq(xdm_tree_list("version", collect, l), -ENOTDIR);
	ck_assert_int_eq(xdm_tree_list("0/bytes_outstanding", collect, l), -ENOTDIR);
	ck_assert_int_eq(xdm_tree_list("0/layers/0-host/allocs", collect, l), -ENOTDIR);
	ck_assert_int_eq(l->n, 0);
	ck_assert_int_eq(stat_err("0/bytes_outstanding/x"), -ENOTDIR);
	ck_assert_int_eq(show_err("0/bytes_outstanding/x"), -ENOTDIR);
	ck_assert_int_eq(show_err("version/x/y"), -ENOTDIR);
	ck_assert_int_eq(xdm_tree_list("nonesuch", collect, l), -ENOENT);
	ck_assert_int_eq(l->n, 0);
	free(l);
	ck_assert_int_eq(stat_err("nonesuch"), -ENOENT);
	ck_assert_int_eq(stat_err("1"), -ENOENT);
	ck_assert_int_eq(stat_err("0.1"), -ENOENT);
	ck_assert_int_eq(stat_err("0/nonesuch"), -ENOENT);
	ck_assert_int_eq(stat_err("0/nonesuch/x"), -ENOENT);
	ck_assert_int_eq(stat_err("0/Blocks"), -ENOENT);
	ck_assert_int_eq(stat_err("0/layers/nonesuch"), -ENOENT);
	ck_assert_int_eq(stat_err("0/streams/0/nonesuch"), -ENOENT);
	ck_assert_int_eq(stat_err("0/budget"), -ENOENT);
	ck_assert_int_eq(show_err("0/layers/0-host/nonesuch"), -ENOENT);
	/* "." and ".." are names like any other: not in the tree. */
	ck_assert_int_eq(stat_err("0/."), -ENOENT);
	ck_assert_int_eq(stat_err("0/blocks/.."), -ENOENT);

	/* Slashes anywhere, any number of them. */
	ck_assert_uint_eq(show_u64("/0//bytes_outstanding/"), 0);
	ck_assert_uint_eq(show_u64("///0///streams//3//pending_frees"), 0);
	ck_assert(stat_ok("/").dir);
	ck_assert(stat_ok("//").dir);
	ck_assert(stat_ok("/0/").dir);
	ck_assert(!stat_ok("0//ordinal").dir);
	ck_assert_uint_eq(stat_ok("0//ordinal").mode, 0444);
	ck_assert_int_eq(xdm_tree_show("//version//", &text, &len), 0);
	ck_assert_uint_eq(len, strlen(xdm_version()) + 1);
	free(text);
	ck_assert_int_eq(stat_err("0/layers/0-host/allocs"), 0);
	ck_assert_int_eq(xdm_tree_stat("0", &node), 0);
	ck_assert(node.dir);
	destroy(rt);
}
END_TEST

START_TEST(null_arguments_are_invalid)
{
	struct xdm_runtime *rt = create("host");
	struct xdm_tree_node node;
	char *text = NULL;
	size_t len = 0;
	int dummy = 0;

	ck_assert_int_eq(xdm_tree_stat(NULL, &node), -EINVAL);
	ck_assert_int_eq(xdm_tree_stat("0", NULL), -EINVAL);
	ck_assert_int_eq(xdm_tree_list(NULL, collect, &dummy), -EINVAL);
	ck_assert_int_eq(xdm_tree_list("0", NULL, &dummy), -EINVAL);
	ck_assert_int_eq(xdm_tree_show(NULL, &text, &len), -EINVAL);
	ck_assert_int_eq(xdm_tree_show("version", NULL, &len), -EINVAL);
	ck_assert_int_eq(xdm_tree_show("version", &text, NULL), -EINVAL);
	ck_assert_ptr_null(text);
	ck_assert_int_eq(xdm_tree_store(NULL, "1", 1), -EINVAL);
	ck_assert_int_eq(xdm_tree_store("0/layers/0-host/allocs", NULL, 1), -EINVAL);
	destroy(rt);
}
END_TEST

struct stopper {
	int calls;
	int stop_at;
};

static int stop_early(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct stopper *s = arg;

	(void)name;
	(void)node;
	return ++s->calls == s->stop_at ? 7 : 0;
}

START_TEST(list_stops_where_the_callback_says)
{
	struct xdm_runtime *rt = create("host");
	struct stopper s = { 0, 1 };
	struct listing *all = list("0");

	/* Files and directories alike: stop at the first, and at the last. */
	ck_assert_int_eq(xdm_tree_list("0", stop_early, &s), 7);
	ck_assert_int_eq(s.calls, 1);
	s = (struct stopper){ 0, all->n };
	ck_assert_int_eq(xdm_tree_list("0", stop_early, &s), 7);
	ck_assert_int_eq(s.calls, all->n);
	s = (struct stopper){ 0, 0 };
	ck_assert_int_eq(xdm_tree_list("0", stop_early, &s), 0);
	ck_assert_int_eq(s.calls, all->n);
	s = (struct stopper){ 0, 3 };
	ck_assert_int_eq(xdm_tree_list("0/streams", stop_early, &s), 7);
	ck_assert_int_eq(s.calls, 3);
	free(all);
	destroy(rt);
}
END_TEST

/* Tables whose values are rows; every other file holds one line. */
static bool is_table(const char *path)
{
	static const char *const tables[] = { "modules", "config", "contents", "processes", "chunks",
					      NULL };
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (int i = 0; tables[i]; i++)
		if (strcmp(base, tables[i]) == 0)
			return true;
	return false;
}

struct walk_tally {
	int dirs, files, writable;
};

static void walk(const char *path, struct walk_tally *t)
{
	struct listing *l = list("%s", path);
	struct xdm_tree_node self = stat_ok(path);

	ck_assert(self.dir);
	ck_assert_msg(self.mode == 0555, "%s mode %o", path, self.mode);
	t->dirs++;
	/* Files first, then directories (xdm_tree_list(3)). */
	for (int i = 1; i < l->n; i++)
		ck_assert_msg(l->node[i].dir || !l->node[i - 1].dir, "%s: file %s after a directory",
			      path, l->name[i]);
	for (int i = 0; i < l->n; i++) {
		char child[PATH_LEN];
		struct xdm_tree_node node;
		int entries;

		/* No name twice in one directory. */
		ck_assert_msg(find(l, l->name[i]) == i, "%s/%s listed twice", path, l->name[i]);
		snprintf(child, sizeof(child), "%s%s%s", path, *path ? "/" : "", l->name[i]);
		node = stat_ok(child);
		ck_assert_msg(node.dir == l->node[i].dir && node.mode == l->node[i].mode,
			      "%s: listed as %d %o, stat says %d %o", child, l->node[i].dir,
			      l->node[i].mode, node.dir, node.mode);
		ck_assert_msg((node.mode & 0022) == 0, "%s mode %o", child, node.mode);
		if (node.dir) {
			walk(child, t);
			continue;
		}
		ck_assert_msg(node.mode == 0444 || node.mode == 0644 || node.mode == 0200,
			      "%s mode %o", child, node.mode);
		if (node.mode == 0200) {
			char *none = NULL;
			size_t len = 0;

			ck_assert_int_eq(xdm_tree_show(child, &none, &len), -EACCES);
			t->files++;
			continue;
		}
		t->files++;
		t->writable += node.mode == 0644;
		entries = 0;
		ck_assert_int_eq(xdm_tree_list(child, count_entries, &entries), -ENOTDIR);
		ck_assert_int_eq(entries, 0);
		{
			char *text = show("%s", child);
			size_t len = strlen(text);
			char *nl = strchr(text, '\n');

			ck_assert_msg(len > 0 && text[len - 1] == '\n', "%s shows '%s'", child, text);
			ck_assert_msg(is_table(child) || nl == text + len - 1,
				      "%s shows more than one line: '%s'", child, text);
			free(text);
		}
	}
	free(l);
}

START_TEST(every_node_has_a_sane_mode_and_value)
{
	struct xdm_runtime *rt, *plain;
	struct xdm_block b, c;
	struct walk_tally t = { 0, 0, 0 };
	char stack[256];

	snprintf(stack, sizeof(stack), "logging sink=memory | guard | budget key=%s-walk "
		 "limit=64M | host", key_prefix);
	rt = create(stack);
	plain = create("host");
	TU_OK(xdm_allocate(rt, 4096, 0, "walked\ttag", &b));
	TU_OK(xdm_allocate(plain, 100, 2, NULL, &c));
	use(rt, &b, 1, XDM_ACCESS_WRITE);
	use(rt, &b, 2, XDM_ACCESS_READ);
	use(plain, &c, 3, XDM_ACCESS_READ);
	walk("", &t);
	/* root, 2 runtimes x (runtime, blocks, 1 block, streams, 16 streams,
	 * layers), 4 + 1 layer dirs and budget/. */
	ck_assert_int_eq(t.dirs, 1 + 2 * (1 + 1 + 1 + 1 + 16 + 1) + 5 + 1);
	/* limit and group_limit twice (layer and budget/) and the guard's check. */
	ck_assert_int_eq(t.writable, 5);
	ck_assert_int_gt(t.files, 100);
	TU_OK(xdm_deallocate(rt, &b));
	TU_OK(xdm_deallocate(plain, &c));
	destroy(plain);
	destroy(rt);
}
END_TEST

START_TEST(large_values_are_shown_whole)
{
	struct xdm_runtime *rt = create("logging sink=memory | host");
	size_t big = 1 << 20, len = 0;
	char *buf = malloc(big), *text = NULL, small[4096];
	struct xdm_block b;

	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < 200; i++) {
		TU_OK(xdm_allocate(rt, 1000 + (size_t)i, (xdm_stream_id)(i % 16), "row", &b));
		TU_OK(xdm_deallocate(rt, &b));
	}
	ck_assert_int_eq(xdm_tree_show("0/layers/0-logging/contents", &text, &len), 0);
	ck_assert_uint_gt(len, 4096);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_uint_eq(show_u64("0/layers/0-logging/bytes_written"), len);
	ck_assert_uint_eq(show_u64("0/layers/0-logging/rows"), 400);
	/* Too big for a page: the fixed-buffer call cannot hold it. */
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "contents", small, sizeof(small)),
			 XDM_E_INVALID);
	TU_OK(xdm_layer_attr_show(rt, 0, "contents", buf, big));
	ck_assert_uint_eq(strlen(buf), len);
	ck_assert(memcmp(buf, text, len) == 0);
	ck_assert_int_eq(text[len - 1], '\n');
	free(text);
	free(buf);
	sync_all(rt);
	destroy(rt);
}
END_TEST

/* ---- readers against runtimes going away ----------------------------- */

/*
 * A reader walks every runtime it finds while the main thread builds and
 * destroys others: a vanished runtime or block may only say ENOENT, and
 * the runtime that stays ("0") must always answer.  No ck_assert off the
 * main thread: the reader records what it saw and the test judges.
 */
struct reader {
	atomic_bool stop;
	atomic_int passes;
	int bad;		/* first unexpected errno, negated */
	char bad_path[PATH_LEN];
	int missing_zero;	/* root listings without the runtime that stays */
};

struct names16 {
	int n;
	char name[16][32];
};

static int keep_name(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct names16 *l = arg;

	if (node->dir && l->n < 16 && strlen(name) < sizeof(l->name[0]))
		snprintf(l->name[l->n++], sizeof(l->name[0]), "%s", name);
	return 0;
}

static void read_one(struct reader *r, const char *rt, const char *file)
{
	char path[PATH_LEN], *text = NULL;
	size_t len = 0;
	int err;

	snprintf(path, sizeof(path), "%s/%s", rt, file);
	err = xdm_tree_show(path, &text, &len);
	if (!err && (len == 0 || text[len - 1] != '\n'))
		err = -EPROTO;
	/* Only a runtime or block that went away may be missing. */
	if (err && (err != -ENOENT || strcmp(rt, "0") == 0) && !r->bad) {
		r->bad = err;
		snprintf(r->bad_path, sizeof(r->bad_path), "%s", path);
	}
	free(text);
}

static void *read_loop(void *arg)
{
	static const char *const files[] = {
		"stack", "bytes_outstanding", "blocks_outstanding", "layers/0-host/allocs",
		"streams/0/pending_frees", "streams/1/events_outstanding",
	};
	struct reader *r = arg;

	while (!atomic_load(&r->stop)) {
		struct names16 rts = { 0 };
		bool zero = false;

		xdm_tree_list("", keep_name, &rts);
		for (int i = 0; i < rts.n; i++) {
			struct names16 blocks = { 0 };
			char path[PATH_LEN];

			zero |= strcmp(rts.name[i], "0") == 0;
			for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
				read_one(r, rts.name[i], files[f]);
			snprintf(path, sizeof(path), "%s/blocks", rts.name[i]);
			xdm_tree_list(path, keep_name, &blocks);
			for (int b = 0; b < blocks.n; b++) {
				snprintf(path, sizeof(path), "blocks/%s/reads", blocks.name[b]);
				read_one(r, rts.name[i], path);
			}
		}
		r->missing_zero += !zero;
		atomic_fetch_add(&r->passes, 1);
	}
	return NULL;
}

START_TEST(readers_survive_runtimes_going_away)
{
	struct xdm_runtime *stays = create("host");
	struct reader r = { .bad = 0 };
	struct xdm_block kept;
	pthread_t th;
	int cycles = 0;

	TU_OK(xdm_allocate(stays, 512, 0, "kept", &kept));
	atomic_init(&r.stop, false);
	atomic_init(&r.passes, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, read_loop, &r), 0);
	/* Enough cycles, and enough reads during them, whatever the speeds. */
	while (cycles < 30 || atomic_load(&r.passes) < 30) {
		struct xdm_runtime *rt = create("host");
		struct xdm_block b[4];

		for (int i = 0; i < 4; i++)
			TU_OK(xdm_allocate(rt, 512, (xdm_stream_id)i, "race", &b[i]));
		use(rt, &b[0], 1, XDM_ACCESS_WRITE);
		for (int i = 0; i < 4; i++)
			TU_OK(xdm_deallocate(rt, &b[i]));
		destroy(rt);
		cycles++;
	}
	atomic_store(&r.stop, true);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(r.bad == 0, "%s: %s", r.bad_path, strerror(-r.bad));
	ck_assert_int_eq(r.missing_zero, 0);
	TU_OK(xdm_deallocate(stays, &kept));
	destroy(stays);
	ck_assert_int_eq(stat_err("0"), -ENOENT);
}
END_TEST

static Suite *tree_suite(void)
{
	Suite *s = suite_create("tree");
	TCase *root = tcase_create("root");
	TCase *rts = tcase_create("runtimes");
	TCase *blocks = tcase_create("blocks");
	TCase *layers = tcase_create("layers");
	TCase *walks = tcase_create("walk");
	TCase *single = tcase_create("singleton");

	/* Nothing here mounts: the tree is the library's, FUSE is a front end. */
	tcase_add_checked_fixture(root, assert_unmounted, assert_unmounted);
	tcase_add_checked_fixture(rts, assert_unmounted, assert_unmounted);
	tcase_add_checked_fixture(blocks, assert_unmounted, assert_unmounted);
	tcase_add_checked_fixture(layers, assert_unmounted, assert_unmounted);
	tcase_add_checked_fixture(walks, assert_unmounted, assert_unmounted);
	tcase_add_checked_fixture(single, assert_unmounted, assert_unmounted);

	tcase_add_test(root, root_lists_only_files_before_any_runtime);
	tcase_add_test(root, root_files_describe_the_process);
	suite_add_tcase(s, root);

	tcase_add_test(rts, runtimes_are_named_by_ordinal);
	tcase_add_test(rts, runtime_files_follow_the_counters);
	tcase_add_test(rts, runtime_files_are_exact_across_threads);
	tcase_add_test(rts, runtime_resets_are_actions);
	tcase_add_test(rts, runtime_files_describe_device_and_stack);
	tcase_add_test(rts, readers_survive_runtimes_going_away);
	suite_add_tcase(s, rts);

	tcase_add_test(blocks, blocks_list_the_live_generations);
	tcase_add_test(blocks, block_files_mirror_the_block);
	tcase_add_test(blocks, block_and_stream_names_are_strict);
	tcase_add_test(blocks, tracking_views_follow_the_uses);
	tcase_add_test(blocks, pending_frees_counts_frees_stuck_behind_another_stream);
	tcase_add_test(blocks, pending_frees_skips_frees_without_cross_stream_uses);
	tcase_add_test(blocks, streams_show_handles_and_imports);
	tcase_add_test(blocks, chunks_file_lists_what_the_stack_holds);
	suite_add_tcase(s, blocks);

	tcase_add_test(layers, layers_list_the_stack);
	tcase_add_test(layers, group_directory_is_the_topmost_layer);
	tcase_add_test(layers, budget_limit_is_writable);
	tcase_add_test(layers, refused_values_change_nothing);
	tcase_add_test(layers, read_only_files_refuse_stores);
	tcase_add_test(layers, large_values_are_shown_whole);
	suite_add_tcase(s, layers);

	tcase_add_test(walks, walk_errors_are_errnos);
	tcase_add_test(walks, null_arguments_are_invalid);
	tcase_add_test(walks, list_stops_where_the_callback_says);
	tcase_add_test(walks, every_node_has_a_sane_mode_and_value);
	suite_add_tcase(s, walks);

	/* Last: a singleton is never destroyed, so under CK_FORK=no it would
	 * stay in the tree for every later test. */
	tcase_add_test(single, singleton_takes_the_next_free_name);
	suite_add_tcase(s, single);
	return s;
}

int main(void)
{
	char name[128];
	int rc;

	/* An empty XDM_MOUNT turns the configured mount off, whatever the caller's
	 * environment says: this suite must never need FUSE. */
	setenv("XDM_MOUNT", "", 1);
	snprintf(key_prefix, sizeof(key_prefix), "ckt%d", (int)getpid());
	rc = tu_run_suite(tree_suite());
	for (int i = 0; test_keys[i]; i++) {
		snprintf(name, sizeof(name), "%s%s-%s", BUDGET_NAME_PREFIX, key_prefix,
			 test_keys[i]);
		shm_unlink(name);
	}
	return rc;
}
