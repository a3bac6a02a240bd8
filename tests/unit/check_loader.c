/* SPDX-License-Identifier: MIT */
/*
 * check_loader.c - the module loader, driven through the public API.
 *
 * Every way a module can be wrong has a module of its own under
 * tests/modules/ (or is made here, for a file that is not ELF at all), and
 * each test asserts the status and the words of the sentence the loader
 * reports: a person reads these messages, so their content is the contract.
 * After each failure a good runtime must still build in the same process:
 * nothing is left half-registered.
 *
 * Each test runs in its own process (check's default CK_FORK), so the
 * process-wide module table starts empty in every test.  The module path
 * comes from AM_TESTS_ENVIRONMENT: this build tree's modules only.
 */
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/module.h>

#define MSG_MAX 1024
#define PATH_MAX_TEXT 4096

/* ---- helpers -------------------------------------------------------------- */

static const char *top_builddir(void)
{
	const char *dir = getenv("XDM_TOP_BUILDDIR");

	ck_assert_msg(dir && dir[0], "XDM_TOP_BUILDDIR is not set: run this through make check");
	return dir;
}

/* Where the loader finds NAME.so of this build: SUBDIR/.libs/NAME.so. */
static void module_file(char *out, size_t len, const char *subdir, const char *name)
{
	snprintf(out, len, "%s/%s/.libs/%s.so", top_builddir(), subdir, name);
}

static void expect_has(const char *msg, const char *needle)
{
	ck_assert_msg(strstr(msg, needle) != NULL, "the message lacks \"%s\": %s", needle, msg);
}

/* Check each needle of a NULL-terminated list against msg. */
static void expect_all(const char *msg, va_list ap)
{
	const char *needle;

	while ((needle = va_arg(ap, const char *)) != NULL)
		expect_has(msg, needle);
}

/* A runtime of stack builds, allocates, frees and goes away cleanly. */
static void use_runtime(const char *platform, const char *stack)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;
	enum xdm_status st;

	st = xdm_runtime_create(0, platform, stack, &rt);
	ck_assert_msg(st == XDM_OK, "\"%s\": %s: %s", stack ? stack : "(config)",
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_ptr_nonnull(rt);
	st = xdm_allocate(rt, 4096, 0, "check_loader", &b);
	ck_assert_msg(st == XDM_OK, "allocate on \"%s\": %s: %s", stack ? stack : "(config)",
		      xdm_strerror(st), xdm_last_error_message());
	ck_assert_uint_ge(b.bytes, 4096);
	st = xdm_deallocate(rt, &b);
	ck_assert_msg(st == XDM_OK, "deallocate: %s: %s", xdm_strerror(st),
		      xdm_last_error_message());
	st = xdm_runtime_destroy(rt);
	ck_assert_msg(st == XDM_OK, "destroy: %s: %s", xdm_strerror(st), xdm_last_error_message());
}

/* The next good runtime after a failure: everything must be whole. */
static void still_works(void)
{
	use_runtime("host", "example | host");
}

/*
 * xdm_runtime_create(0, "host", stack) must fail with want; the message is
 * copied into msg (later calls overwrite the thread's detail) and must hold
 * every needle of the NULL-terminated list.  Then a good runtime must build.
 */
static void expect_failure_msg(char *msg, size_t len, const char *stack, enum xdm_status want,
			       ...)
{
	struct xdm_runtime *rt = NULL;
	enum xdm_status st;
	va_list ap;

	st = xdm_runtime_create(0, "host", stack, &rt);
	snprintf(msg, len, "%s", xdm_last_error_message());
	ck_assert_msg(st == want, "\"%s\": %s, expected %s: %s", stack, xdm_strerror(st),
		      xdm_strerror(want), msg);
	ck_assert_msg(xdm_last_error()->code == want, "\"%s\": the error detail says %s", stack,
		      xdm_strerror(xdm_last_error()->code));
	ck_assert_msg(rt == NULL, "\"%s\": a failed create handed out a runtime", stack);
	va_start(ap, want);
	expect_all(msg, ap);
	va_end(ap);
	still_works();
}

#define expect_failure(stack, want, ...)                                          \
	do {                                                                      \
		char msg_[MSG_MAX];                                               \
		expect_failure_msg(msg_, sizeof(msg_), (stack), (want), __VA_ARGS__); \
	} while (0)

static void make_tmpdir(char *out, size_t len)
{
	const char *base = getenv("TMPDIR");

	snprintf(out, len, "%s/xdm-check-loader-XXXXXX", base && base[0] ? base : "/tmp");
	ck_assert_msg(mkdtemp(out) != NULL, "mkdtemp %s failed", out);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "cannot write %s", path);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

static void path_prepend(const char *dir)
{
	const char *old = getenv("XDM_MODULE_PATH");
	char buf[PATH_MAX_TEXT];

	snprintf(buf, sizeof(buf), "%s%s%s", dir, old && old[0] ? ":" : "", old ? old : "");
	ck_assert_int_eq(setenv("XDM_MODULE_PATH", buf, 1), 0);
}

/* Drop the directories ending in suffix from XDM_MODULE_PATH. */
static void path_remove(const char *suffix)
{
	const char *old = getenv("XDM_MODULE_PATH");
	char buf[PATH_MAX_TEXT] = "";
	size_t slen = strlen(suffix);

	ck_assert_ptr_nonnull(old);
	while (*old) {
		size_t n = strcspn(old, ":");

		if (n > 0 && !(n >= slen && strncmp(old + n - slen, suffix, slen) == 0)) {
			size_t used = strlen(buf);

			snprintf(buf + used, sizeof(buf) - used, "%s%.*s", used ? ":" : "", (int)n,
				 old);
		}
		old += n;
		if (*old == ':')
			old++;
	}
	ck_assert_int_eq(setenv("XDM_MODULE_PATH", buf, 1), 0);
}

/* dlerror()'s reason for path, without the "path: " it starts with. */
static void dlopen_reason(const char *path, char *out, size_t len)
{
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const char *err, *colon;

	ck_assert_msg(handle == NULL, "%s unexpectedly loads", path);
	err = dlerror();
	ck_assert_ptr_nonnull(err);
	colon = strrchr(err, ':');
	snprintf(out, len, "%s", colon ? colon + 2 : err);
}

/* Layer index of the runtime's top layer is 0. */
static void expect_attr(struct xdm_runtime *rt, uint32_t layer, const char *attr,
			const char *want)
{
	char buf[256];
	enum xdm_status st;

	st = xdm_layer_attr_show(rt, layer, attr, buf, sizeof(buf));
	ck_assert_msg(st == XDM_OK, "show %s: %s: %s", attr, xdm_strerror(st),
		      xdm_last_error_message());
	ck_assert_str_eq(buf, want);
}

/* ---- finding and opening the file ----------------------------------------- */

START_TEST(test_unknown_module)
{
	/* Column 11: where "nosuch" starts, after a module that does load. */
	expect_failure("example | nosuch | host", XDM_E_CONFIG, "<stack>:1:11:", "nosuch",
		       "no nosuch.so in the module path", NULL);
}
END_TEST

START_TEST(test_dlopen_failure)
{
	char dir[PATH_MAX_TEXT], file[PATH_MAX_TEXT + 32], reason[MSG_MAX];

	make_tmpdir(dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/garbage.so", dir);
	write_file(file, "not an ELF");
	path_prepend(dir);
	/* Whatever this libc calls it: "file too short", "invalid ELF header". */
	dlopen_reason(file, reason, sizeof(reason));

	expect_failure("garbage | host", XDM_E_MODULE, "garbage", file, "dlopen", reason, "ldd",
		       NULL);

	unlink(file);
	rmdir(dir);
}
END_TEST

START_TEST(test_no_entry_symbol)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "tests/modules", "no_entry");
	expect_failure("no_entry | host", XDM_E_MODULE, "no_entry", file,
		       XDM_MODULE_ENTRY_SYMBOL, NULL);
}
END_TEST

/* ---- checks of the ops table ---------------------------------------------- */

START_TEST(test_abi_major)
{
	char file[PATH_MAX_TEXT], theirs[64], ours[64];

	module_file(file, sizeof(file), "tests/modules", "bad_abi");
	snprintf(theirs, sizeof(theirs), "ABI major version %d", XDM_ABI_MAJOR + 1);
	snprintf(ours, sizeof(ours), "speaks %d", XDM_ABI_MAJOR);
	expect_failure("bad_abi | host", XDM_E_MODULE, "bad_abi", file, theirs, ours, NULL);
}
END_TEST

START_TEST(test_abi_minor_newer)
{
	char file[PATH_MAX_TEXT], theirs[64], ours[64];

	module_file(file, sizeof(file), "tests/modules", "newer_minor");
	snprintf(theirs, sizeof(theirs), "ABI version %d.%d", XDM_ABI_MAJOR, XDM_ABI_MINOR + 1);
	snprintf(ours, sizeof(ours), "speaks %d.%d", XDM_ABI_MAJOR, XDM_ABI_MINOR);
	expect_failure("newer_minor | host", XDM_E_MODULE, "newer_minor", file, theirs, ours,
		       NULL);
}
END_TEST

START_TEST(test_ops_too_small)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "tests/modules", "small_ops");
	expect_failure("small_ops | host", XDM_E_MODULE, "small_ops", file, "ops table",
		       "16 bytes", NULL);
}
END_TEST

START_TEST(test_unknown_kind)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "tests/modules", "bad_kind");
	expect_failure("bad_kind | host", XDM_E_MODULE, file, "unknown kind 7", NULL);
}
END_TEST

START_TEST(test_duplicate_name)
{
	char example[PATH_MAX_TEXT], dup[PATH_MAX_TEXT], first[MSG_MAX], again[MSG_MAX];

	module_file(example, sizeof(example), "examples", "example");
	module_file(dup, sizeof(dup), "tests/modules", "dup");
	/* example.so first; then dup.so's second table clashes with it. */
	use_runtime("host", "example | host");
	expect_failure_msg(first, sizeof(first), "dup | host", XDM_E_MODULE, "already registered",
			   example, dup, NULL);
	/* All or nothing: "dup" was taken back with the file, so it fails alike. */
	expect_failure_msg(again, sizeof(again), "dup | host", XDM_E_MODULE, NULL);
	ck_assert_str_eq(again, first);
}
END_TEST

START_TEST(test_registers_no_such_name)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "tests/modules", "wrongname");
	expect_failure("wrongname", XDM_E_MODULE, "wrongname", file, "registers no", NULL);
}
END_TEST

/* No example_extra.so: the family file example.so is tried, and found not
 * to register the name. */
START_TEST(test_family_file_is_tried)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "examples", "example");
	expect_failure("example_extra | host", XDM_E_MODULE, "example_extra", file,
		       "registers no", NULL);
}
END_TEST

START_TEST(test_backend_lacks_allocate)
{
	char file[PATH_MAX_TEXT];

	module_file(file, sizeof(file), "tests/modules", "no_alloc");
	expect_failure("example | no_alloc", XDM_E_MODULE, "no_alloc", file, "lacks allocate",
		       NULL);
}
END_TEST

START_TEST(test_failure_is_repeatable)
{
	char first[MSG_MAX], again[MSG_MAX];

	/* A refused file is not remembered as half-loaded. */
	expect_failure_msg(first, sizeof(first), "bad_abi | host", XDM_E_MODULE, NULL);
	expect_failure_msg(again, sizeof(again), "bad_abi | host", XDM_E_MODULE, NULL);
	ck_assert_str_eq(again, first);
}
END_TEST

/* ---- the shape of a stack -------------------------------------------------- */

START_TEST(test_adaptor_at_bottom)
{
	/* An adaptor has nothing to forward to. */
	expect_failure("example", XDM_E_CONFIG, "<stack>:1:1:", "example", NULL);
	/* Upside down: a backend on top, an adaptor below it. */
	expect_failure("host | example", XDM_E_CONFIG, "<stack>:1:1:", "host", NULL);
}
END_TEST

START_TEST(test_backend_above_layer)
{
	/* The second host, at column 11, has a layer below it. */
	expect_failure("example | host | host", XDM_E_CONFIG, "<stack>:1:11:", "host", NULL);
}
END_TEST

START_TEST(test_unknown_parameter)
{
	expect_failure("example nosuch=1 | host", XDM_E_CONFIG, "<stack>:1:9:", "nosuch", NULL);
}
END_TEST

START_TEST(test_bad_parameter_value)
{
	expect_failure("example fail_over=banana | host", XDM_E_CONFIG, "<stack>:1:9:",
		       "fail_over", NULL);
}
END_TEST

/* ---- the example module ---------------------------------------------------- */

START_TEST(test_init_failure_unwinds)
{
	char stack[256], label[80];

	/* The example's init refuses a label longer than 63 characters; the
	 * core names the layer's position, and the layers below that had
	 * already been initialized are taken down again. */
	memset(label, 'x', 64);
	label[64] = '\0';
	snprintf(stack, sizeof(stack), "example | example label=%s | host", label);
	expect_failure(stack, XDM_E_CONFIG, "<stack>:1:11:", "example", "label", NULL);
}
END_TEST

START_TEST(test_example_by_config)
{
	char dir[PATH_MAX_TEXT], conf[PATH_MAX_TEXT + 32], buf[256], longer[128];
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;
	enum xdm_status st;

	make_tmpdir(dir, sizeof(dir));
	snprintf(conf, sizeof(conf), "%s/xdm.conf", dir);
	write_file(conf, "platform = host\n[device 0]\nstack = example label=hi | host\n");
	ck_assert_int_eq(setenv("XDM_CONFIG", conf, 1), 0);

	st = xdm_runtime_create(0, NULL, NULL, &rt);
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());
	ck_assert_uint_eq(xdm_runtime_layer_count(rt), 2);
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "example");
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 1), "host");

	expect_attr(rt, 0, "allocs", "0\n");
	st = xdm_allocate(rt, 1000, 0, "by-config", &b);
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);
	ck_assert_int_eq(xdm_stream_synchronize(rt, 0), XDM_OK);
	expect_attr(rt, 0, "allocs", "1\n");
	expect_attr(rt, 0, "frees", "1\n");
	expect_attr(rt, 0, "label", "hi\n");

	/* `echo there > label`: the trailing newline is not part of it. */
	st = xdm_layer_attr_store(rt, 0, "label", "there\n");
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());
	expect_attr(rt, 0, "label", "there\n");

	/* Bad values are refused and change nothing. */
	ck_assert_int_ne(xdm_layer_attr_store(rt, 0, "label", ""), XDM_OK);
	expect_attr(rt, 0, "label", "there\n");
	ck_assert_int_ne(xdm_layer_attr_store(rt, 0, "label", "\n"), XDM_OK);
	expect_attr(rt, 0, "label", "there\n");
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	ck_assert_int_ne(xdm_layer_attr_store(rt, 0, "label", longer), XDM_OK);
	expect_attr(rt, 0, "label", "there\n");
	/* A 0444 attribute takes no store at all. */
	ck_assert_int_ne(xdm_layer_attr_store(rt, 0, "allocs", "5"), XDM_OK);
	expect_attr(rt, 0, "allocs", "1\n");
	ck_assert_int_ne(xdm_layer_attr_show(rt, 0, "nosuch", buf, sizeof(buf)), XDM_OK);

	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
	unlink(conf);
	rmdir(dir);
}
END_TEST

START_TEST(test_example_fail_over)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;
	enum xdm_status st;

	st = xdm_runtime_create(0, "host", "example label=tight fail_over=4K | host", &rt);
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());

	st = xdm_allocate(rt, 4097, 0, "too-big", &b);
	ck_assert_int_eq(st, XDM_E_INVALID);
	expect_has(xdm_last_error_message(), "tight");
	expect_has(xdm_last_error_message(), "fail_over");
	expect_attr(rt, 0, "allocs", "0\n");

	st = xdm_allocate(rt, 4096, 0, "fits", &b);
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());
	expect_attr(rt, 0, "allocs", "1\n");
	expect_attr(rt, 0, "label", "tight\n");
	ck_assert_int_eq(xdm_deallocate(rt, &b), XDM_OK);
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
}
END_TEST

/* Methods run on many threads at once, attributes on yet another. */
#define HAMMER_THREADS 4
#define HAMMER_ROUNDS 2000

struct hammer {
	struct xdm_runtime *rt;
	xdm_stream_id stream;
	enum xdm_status st;
};

static void *hammer_allocs(void *arg)
{
	struct hammer *h = arg;

	for (int i = 0; i < HAMMER_ROUNDS && h->st == XDM_OK; i++) {
		struct xdm_block b;

		h->st = xdm_allocate(h->rt, 64 + (size_t)i % 4096, h->stream, "hammer", &b);
		if (h->st == XDM_OK)
			h->st = xdm_deallocate(h->rt, &b);
	}
	return NULL;
}

static void *hammer_label(void *arg)
{
	struct hammer *h = arg;
	static const char *const labels[] = { "one\n", "two-two\n", "three-three-three" };
	char buf[256];

	for (int i = 0; i < HAMMER_ROUNDS && h->st == XDM_OK; i++) {
		h->st = xdm_layer_attr_store(h->rt, 0, "label", labels[i % 3]);
		if (h->st == XDM_OK)
			h->st = xdm_layer_attr_show(h->rt, 0, "label", buf, sizeof(buf));
		/* Whole values only: a torn read would mix two labels. */
		if (h->st == XDM_OK && strcmp(buf, "one\n") && strcmp(buf, "two-two\n") &&
		    strcmp(buf, "three-three-three\n"))
			h->st = XDM_E_INVALID;
		if (h->st == XDM_OK)
			h->st = xdm_layer_attr_show(h->rt, 0, "allocs", buf, sizeof(buf));
	}
	return NULL;
}

START_TEST(test_example_concurrent)
{
	struct hammer h[HAMMER_THREADS + 1];
	pthread_t tid[HAMMER_THREADS + 1];
	struct xdm_runtime *rt = NULL;
	char want[32];
	enum xdm_status st;

	st = xdm_runtime_create(0, "host", "example | host", &rt);
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), xdm_last_error_message());
	for (int i = 0; i <= HAMMER_THREADS; i++) {
		h[i] = (struct hammer){ .rt = rt, .stream = (xdm_stream_id)i, .st = XDM_OK };
		ck_assert_int_eq(pthread_create(&tid[i], NULL,
						i < HAMMER_THREADS ? hammer_allocs : hammer_label,
						&h[i]), 0);
	}
	for (int i = 0; i <= HAMMER_THREADS; i++) {
		ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
		ck_assert_msg(h[i].st == XDM_OK, "thread %d: %s", i, xdm_strerror(h[i].st));
	}
	/* Atomic counters lose nothing. */
	snprintf(want, sizeof(want), "%d\n", HAMMER_THREADS * HAMMER_ROUNDS);
	expect_attr(rt, 0, "allocs", want);
	expect_attr(rt, 0, "frees", want);
	ck_assert_int_eq(xdm_runtime_destroy(rt), XDM_OK);
}
END_TEST

START_TEST(test_example_exports_only_its_entry)
{
	char file[PATH_MAX_TEXT];
	const struct xdm_ops *const *tables;
	xdm_module_entry_fn entry;
	void *handle;

	module_file(file, sizeof(file), "examples", "example");
	handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(handle != NULL, "%s", dlerror());
	*(void **)&entry = dlsym(handle, XDM_MODULE_ENTRY_SYMBOL);
	ck_assert_msg(entry != NULL, "%s does not export %s", file, XDM_MODULE_ENTRY_SYMBOL);
	/* -fvisibility=hidden: the module's own functions stay its own. */
	ck_assert_ptr_null(dlsym(handle, "example_allocate"));
	ck_assert_ptr_null(dlsym(handle, "example_ops"));

	tables = entry();
	ck_assert_ptr_nonnull(tables);
	ck_assert_ptr_nonnull(tables[0]);
	ck_assert_ptr_null(tables[1]);
	ck_assert_uint_eq(tables[0]->abi_major, XDM_ABI_MAJOR);
	ck_assert_uint_eq(tables[0]->size, sizeof(struct xdm_ops));
	ck_assert_int_eq(tables[0]->kind, XDM_KIND_ADAPTOR);
	ck_assert_str_eq(tables[0]->name, "example");
	dlclose(handle);
}
END_TEST

/* ---- where modules are found ---------------------------------------------- */

START_TEST(test_module_dir_from_config)
{
	char dir[PATH_MAX_TEXT], conf[PATH_MAX_TEXT + 32], text[2 * PATH_MAX_TEXT];

	/* Not in XDM_MODULE_PATH any more: only the config can lead to it. */
	path_remove("/examples/.libs");
	make_tmpdir(dir, sizeof(dir));
	snprintf(conf, sizeof(conf), "%s/xdm.conf", dir);
	snprintf(text, sizeof(text),
		 "platform = host\nmodule_dir = %s/examples/.libs\n"
		 "[device 0]\nstack = example label=md | host\n", top_builddir());
	write_file(conf, text);
	ck_assert_int_eq(setenv("XDM_CONFIG", conf, 1), 0);

	use_runtime(NULL, NULL);

	unlink(conf);
	rmdir(dir);
}
END_TEST

START_TEST(test_module_path_before_module_dir)
{
	char dir[PATH_MAX_TEXT], conf[PATH_MAX_TEXT + 32], text[2 * PATH_MAX_TEXT];
	char decoy[PATH_MAX_TEXT + 32];
	struct xdm_runtime *rt = NULL;
	enum xdm_status st;

	/* A broken example.so early in XDM_MODULE_PATH shadows the good one
	 * that the config's module_dir names. */
	path_remove("/examples/.libs");
	make_tmpdir(dir, sizeof(dir));
	snprintf(decoy, sizeof(decoy), "%s/example.so", dir);
	write_file(decoy, "not an ELF either");
	path_prepend(dir);
	snprintf(conf, sizeof(conf), "%s/xdm.conf", dir);
	snprintf(text, sizeof(text),
		 "platform = host\nmodule_dir = %s/examples/.libs\n"
		 "[device 0]\nstack = example | host\n", top_builddir());
	write_file(conf, text);
	ck_assert_int_eq(setenv("XDM_CONFIG", conf, 1), 0);

	st = xdm_runtime_create(0, NULL, NULL, &rt);
	ck_assert_int_eq(st, XDM_E_MODULE);
	expect_has(xdm_last_error_message(), decoy);
	ck_assert_ptr_null(rt);

	unlink(decoy);
	unlink(conf);
	rmdir(dir);
}
END_TEST

/* ---- in-process modules --------------------------------------------------- */

/* Counts its calls, to show that the stack really goes through it. */
static atomic_uint inproc_calls;

static enum xdm_status inproc_allocate(struct xdm_layer *self, size_t bytes,
				       xdm_stream_id stream, const char *tag,
				       struct xdm_block *out)
{
	atomic_fetch_add(&inproc_calls, 1);
	return xdm_up_allocate(xdm_layer_upstream(self), bytes, stream, tag, out);
}

/* Never called: the table that uses it is refused at registration. */
static enum xdm_status inproc_deallocate_unused(struct xdm_layer *self, struct xdm_block *b)
{
	return XDM_E_NOT_SUPPORTED;
}

static const struct xdm_ops inproc_ops = {
	XDM_OPS_HEADER("inproc", XDM_KIND_ADAPTOR),
	.description = "an adaptor that lives in the test program",
	.allocate = inproc_allocate,
};

START_TEST(test_inproc_register)
{
	ck_assert_int_eq(xdm_module_register(&inproc_ops), XDM_OK);
	use_runtime("host", "inproc | host");
	ck_assert_uint_eq(atomic_load(&inproc_calls), 1);
	/* Mixed with modules from files, anywhere above the backend. */
	use_runtime("host", "example | inproc | example | host");
	ck_assert_uint_eq(atomic_load(&inproc_calls), 2);
}
END_TEST

START_TEST(test_inproc_register_twice)
{
	char example[PATH_MAX_TEXT];
	static const struct xdm_ops fake_example = {
		XDM_OPS_HEADER("example", XDM_KIND_ADAPTOR),
		.description = "an in-process adaptor named like a file's",
	};

	ck_assert_int_eq(xdm_module_register(&inproc_ops), XDM_OK);
	ck_assert_int_eq(xdm_module_register(&inproc_ops), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "already registered");
	expect_has(xdm_last_error_message(), "inproc");

	/* Against a name a file registered: the message names that file. */
	module_file(example, sizeof(example), "examples", "example");
	still_works();
	ck_assert_int_eq(xdm_module_register(&fake_example), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "already registered");
	expect_has(xdm_last_error_message(), example);

	use_runtime("host", "inproc | host");
}
END_TEST

/* A backend and an adaptor may not share a name: a stack position takes
 * either kind, so the name alone must say which one is meant. */
START_TEST(test_inproc_backend_adaptor_clash)
{
	static const struct xdm_ops clash = {
		XDM_OPS_HEADER("inproc", XDM_KIND_BACKEND),
		.allocate = inproc_allocate,
		.deallocate = inproc_deallocate_unused,
	};

	ck_assert_int_eq(xdm_module_register(&inproc_ops), XDM_OK);
	ck_assert_int_eq(xdm_module_register(&clash), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "already registered");
	expect_has(xdm_last_error_message(), "as adaptor");
	/* The platform and the backend named host coexist. */
	use_runtime("host", "inproc | host");
}
END_TEST

START_TEST(test_inproc_refused)
{
	char want[64];
	static const struct xdm_ops future = {
		.abi_major = XDM_ABI_MAJOR + 1,
		.size = sizeof(struct xdm_ops),
		.name = "inproc_future",
		.kind = XDM_KIND_ADAPTOR,
	};
	static const struct xdm_ops tiny = {
		.abi_major = XDM_ABI_MAJOR,
		.size = 16,
		.name = "inproc_tiny",
		.kind = XDM_KIND_ADAPTOR,
	};
	static const struct xdm_ops strange = {
		XDM_OPS_HEADER("inproc_strange", (enum xdm_module_kind)7),
	};
	static const struct xdm_ops no_alloc = {
		XDM_OPS_HEADER("inproc_no_alloc", XDM_KIND_BACKEND),
	};

	/* The same checks as for a file, the same words. */
	ck_assert_int_eq(xdm_module_register(&future), XDM_E_MODULE);
	snprintf(want, sizeof(want), "ABI major version %d", XDM_ABI_MAJOR + 1);
	expect_has(xdm_last_error_message(), want);
	snprintf(want, sizeof(want), "speaks %d", XDM_ABI_MAJOR);
	expect_has(xdm_last_error_message(), want);

	ck_assert_int_eq(xdm_module_register(&tiny), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "ops table");
	expect_has(xdm_last_error_message(), "bytes");

	ck_assert_int_eq(xdm_module_register(&strange), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "unknown kind 7");

	ck_assert_int_eq(xdm_module_register(&no_alloc), XDM_E_MODULE);
	expect_has(xdm_last_error_message(), "lacks allocate");

	ck_assert_int_eq(xdm_module_register(NULL), XDM_E_INVALID);

	/* Refused means absent: the name is looked for as a file, and not found. */
	expect_failure("inproc_future | host", XDM_E_CONFIG, "no inproc_future.so", NULL);
}
END_TEST

/* ---- the suite ------------------------------------------------------------- */

static Suite *loader_suite(void)
{
	Suite *s = suite_create("loader");
	TCase *files = tcase_create("files");
	TCase *tables = tcase_create("tables");
	TCase *stacks = tcase_create("stacks");
	TCase *example = tcase_create("example");
	TCase *path = tcase_create("path");
	TCase *inproc = tcase_create("in-process");

	tcase_add_test(files, test_unknown_module);
	tcase_add_test(files, test_dlopen_failure);
	tcase_add_test(files, test_no_entry_symbol);
	suite_add_tcase(s, files);

	tcase_add_test(tables, test_abi_major);
	tcase_add_test(tables, test_abi_minor_newer);
	tcase_add_test(tables, test_ops_too_small);
	tcase_add_test(tables, test_unknown_kind);
	tcase_add_test(tables, test_duplicate_name);
	tcase_add_test(tables, test_registers_no_such_name);
	tcase_add_test(tables, test_backend_lacks_allocate);
	tcase_add_test(tables, test_failure_is_repeatable);
	suite_add_tcase(s, tables);

	tcase_add_test(stacks, test_adaptor_at_bottom);
	tcase_add_test(stacks, test_backend_above_layer);
	tcase_add_test(stacks, test_unknown_parameter);
	tcase_add_test(stacks, test_bad_parameter_value);
	suite_add_tcase(s, stacks);

	tcase_add_test(example, test_init_failure_unwinds);
	tcase_add_test(example, test_example_by_config);
	tcase_add_test(example, test_example_fail_over);
	tcase_add_test(example, test_example_concurrent);
	tcase_add_test(example, test_example_exports_only_its_entry);
	suite_add_tcase(s, example);

	tcase_add_test(path, test_module_dir_from_config);
	tcase_add_test(path, test_module_path_before_module_dir);
	suite_add_tcase(s, path);

	tcase_add_test(inproc, test_inproc_register);
	tcase_add_test(inproc, test_inproc_register_twice);
	tcase_add_test(inproc, test_inproc_refused);
	tcase_add_test(inproc, test_family_file_is_tried);
	tcase_add_test(inproc, test_inproc_backend_adaptor_clash);
	suite_add_tcase(s, inproc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	/* Outside make check the module path would be the machine's: skip. */
	if (!getenv("XDM_TOP_BUILDDIR") || !getenv("XDM_MODULE_PATH")) {
		fprintf(stderr, "check_loader: run through make check (XDM_TOP_BUILDDIR unset)\n");
		return 77;
	}
	sr = srunner_create(loader_suite());
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
