/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - small helpers shared by the check suites: temp config files,
 * an ordered log that host functions on several streams append to, gates
 * that hold a stream, and a module's ops tables read the way the loader
 * reads them.
 */
#ifndef XDM_TESTUTIL_H
#define XDM_TESTUTIL_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <xdm/module.h>
#include <xdm/xdm.h>

/*
 * The ops tables of FILE.so, a module of this build tree (DIR is its
 * folder: "backends"), dlopen'ed and read through its entry symbol as the
 * core's loader reads them; *handle is for dlclose.  *count gets how many
 * tables it has.
 */
static inline const struct xdm_ops *const *tu_module_open(const char *dir, const char *file,
							  void **handle, int *count)
{
	const char *top = getenv("XDM_TOP_BUILDDIR");
	const struct xdm_ops *const *tables;
	xdm_module_entry_fn entry;
	char path[4096];

	ck_assert_msg(top != NULL, "XDM_TOP_BUILDDIR is not set");
	snprintf(path, sizeof(path), "%s/%s/.libs/%s.so", top, dir, file);
	*handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(*handle != NULL, "dlopen %s: %s", path, dlerror());
	*(void **)&entry = dlsym(*handle, XDM_MODULE_ENTRY_SYMBOL);
	ck_assert_msg(entry != NULL, "%s has no %s", path, XDM_MODULE_ENTRY_SYMBOL);
	tables = entry();
	for (*count = 0; tables[*count]; (*count)++)
		;
	return tables;
}

static inline void tu_module_close(void **handle)
{
	if (*handle)
		dlclose(*handle);
	*handle = NULL;
}

/* The table NAME of KIND among tables; the test fails without one. */
static inline const struct xdm_ops *tu_module_table(const struct xdm_ops *const *tables,
						    enum xdm_module_kind kind,
						    const char *name)
{
	for (int i = 0; tables[i]; i++)
		if (tables[i]->kind == kind && !strcmp(tables[i]->name, name))
			return tables[i];
	ck_abort_msg("the module has no table %s", name);
	return NULL;
}

/* Write text to a fresh temp file; returns its malloc'd path. */
static inline char *tu_write_temp(const char *text)
{
	char *path = strdup("/tmp/xdm-test-XXXXXX");
	int fd = mkstemp(path);
	FILE *f;

	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/*
 * How long a bounded wait gives a correct implementation before the test
 * calls it a hang.  Only a bug runs it out, so it is generous: on a loaded
 * CI machine, under a sanitizer, a runnable thread can wait seconds for a
 * core.  It stays below check's per-test timeout (TU_TIMEOUT_S, and
 * CK_DEFAULT_TIMEOUT=300 under make check), so that such a test fails with
 * its own message.
 */
#define TU_PATIENCE_MS 120000

/*
 * check's per-test timeout for a test case that sets one: a hang catcher,
 * never a speed limit.  Under make check every other case gets
 * CK_DEFAULT_TIMEOUT (300 s, from AM_TESTS_ENVIRONMENT).  Loaded 2-core CI
 * machines and the sanitizer build have run single tests for a minute.
 */
#define TU_TIMEOUT_S 300

/*
 * A pause.  Never the way a test learns that something happened (wait on
 * a condition for that); only a window that lets a missing wait show, with
 * an assertion that holds however long the pause really was.
 */
static inline void tu_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* CLOCK_REALTIME ms from now, for pthread_cond_timedwait. */
static inline struct timespec tu_deadline_in(int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#define TU_LOG_MAX 4096

/* The order in which host functions ran, across streams. */
struct tu_log {
	pthread_mutex_t lock;
	int n;
	int ids[TU_LOG_MAX];
};

static inline void tu_log_init(struct tu_log *log)
{
	pthread_mutex_init(&log->lock, NULL);
	log->n = 0;
}

static inline void tu_log_add(struct tu_log *log, int id)
{
	pthread_mutex_lock(&log->lock);
	if (log->n < TU_LOG_MAX)
		log->ids[log->n++] = id;
	pthread_mutex_unlock(&log->lock);
}

static inline void tu_log_destroy(struct tu_log *log)
{
	pthread_mutex_destroy(&log->lock);
}

static inline int tu_log_count(struct tu_log *log)
{
	int n;

	pthread_mutex_lock(&log->lock);
	n = log->n;
	pthread_mutex_unlock(&log->lock);
	return n;
}

/* The id at position i, or -1 past the end. */
static inline int tu_log_at(struct tu_log *log, int i)
{
	int id;

	pthread_mutex_lock(&log->lock);
	id = i < log->n ? log->ids[i] : -1;
	pthread_mutex_unlock(&log->lock);
	return id;
}

/* Position of id in the log, or -1. */
static inline int tu_log_pos(struct tu_log *log, int id)
{
	int pos = -1;

	pthread_mutex_lock(&log->lock);
	for (int i = 0; i < log->n; i++)
		if (log->ids[i] == id)
			pos = i;
	pthread_mutex_unlock(&log->lock);
	return pos;
}

/* One step of work on a stream: optionally sleep, touch memory, log. */
struct tu_step {
	struct tu_log *log;
	int id;
	int sleep_ms;
	unsigned char *mem;	/* write value here, or read it into *seen */
	int value;
	int *seen;
};

static inline void tu_step_run(void *arg)
{
	struct tu_step *s = arg;

	if (s->sleep_ms)
		tu_sleep_ms(s->sleep_ms);
	if (s->mem && s->seen)
		*s->seen = s->mem[0];
	else if (s->mem)
		memset(s->mem, s->value, 64);
	tu_log_add(s->log, s->id);
}

#define TU_OK(expr)                                                                     \
	do {                                                                            \
		enum xdm_status tu_st_ = (expr);                                         \
		ck_assert_msg(tu_st_ == XDM_OK, "%s: %s (%s)", #expr, xdm_strerror(tu_st_), \
			      xdm_last_error_message());                                  \
	} while (0)

/* A layer's attribute that is one number and a newline, as a number. */
static inline uint64_t tu_attr_u64(struct xdm_runtime *rt, uint32_t layer, const char *name)
{
	char buf[64], *end;
	unsigned long long v;
	enum xdm_status st = xdm_layer_attr_show(rt, layer, name, buf, sizeof(buf));

	ck_assert_msg(st == XDM_OK, "show %u/%s: %s (%s)", layer, name, xdm_strerror(st),
		      xdm_last_error_message());
	errno = 0;
	v = strtoull(buf, &end, 10);
	ck_assert_msg(end != buf && errno == 0 && strcmp(end, "\n") == 0,
		      "%u/%s is not one number and a newline: '%s'", layer, name, buf);
	return v;
}

/* A runtime on platform around stack is refused as a config error naming needle. */
static inline void tu_expect_config_error(const char *platform, const char *stack,
					  const char *needle)
{
	struct xdm_runtime *rt = NULL;
	enum xdm_status st = xdm_runtime_create(0, platform, stack, &rt);

	ck_assert_msg(st == XDM_E_CONFIG, "'%s': %s (%s), not CONFIG", stack, xdm_strerror(st),
		      xdm_last_error_message());
	ck_assert_msg(strstr(xdm_last_error_message(), needle),
		      "'%s': the message does not say '%s': %s", stack, needle,
		      xdm_last_error_message());
	ck_assert_ptr_null(rt);
}

/* rt's capture_frees_held (xdm-fs(7)) reads "frees bytes". */
static inline void tu_expect_capture_frees_held(struct xdm_runtime *rt, unsigned int frees,
						size_t bytes, const char *when)
{
	char path[128], want[64], *text = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/capture_frees_held", xdm_runtime_name(rt));
	snprintf(want, sizeof(want), "%u %zu\n", frees, bytes);
	ck_assert_int_eq(xdm_tree_show(path, &text, &len), 0);
	ck_assert_msg(!strcmp(text, want), "%s: capture_frees_held is '%s', not '%s'", when,
		      text, want);
	free(text);
}

/*
 * The first failure of a helper thread, which cannot assert (check's
 * asserts belong to the test's thread): the step, its status and message.
 */
struct tu_first_failure {
	enum xdm_status st;
	char step[64];
	char msg[512];
};

/* True if st is XDM_OK; else the failure is remembered (the first) and false. */
static inline bool tu_step_ok(struct tu_first_failure *f, enum xdm_status st, const char *step)
{
	if (st == XDM_OK)
		return true;
	if (f->st == XDM_OK) {
		f->st = st;
		snprintf(f->step, sizeof(f->step), "%s", step);
		snprintf(f->msg, sizeof(f->msg), "%s", xdm_last_error_message());
	}
	return false;
}

/*
 * A gate a host function waits at on a stream: everything queued after it
 * there is held until the test opens it.  Every wait on it is bounded by
 * TU_PATIENCE_MS, so that a bug fails the test instead of hanging it.
 */
struct tu_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered;		/* a stream's worker has reached the gate */
	bool open;
	bool timed_out;		/* a waiter gave up: the test has failed */
};

static inline void tu_gate_init(struct tu_gate *g)
{
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->entered = g->open = g->timed_out = false;
}

/* The host function: waits until the gate is opened. */
static inline void tu_gate_run(void *arg)
{
	struct tu_gate *g = arg;
	struct timespec until = tu_deadline_in(TU_PATIENCE_MS);

	pthread_mutex_lock(&g->lock);
	g->entered = true;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT) {
			g->timed_out = true;
			break;
		}
	pthread_mutex_unlock(&g->lock);
}

/* Whether a stream's worker sits in the gate (false: it never came). */
static inline bool tu_gate_wait_entered(struct tu_gate *g)
{
	struct timespec until = tu_deadline_in(TU_PATIENCE_MS);
	bool entered;

	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT)
			break;
	entered = g->entered;
	pthread_mutex_unlock(&g->lock);
	return entered;
}

static inline bool tu_gate_timed_out(struct tu_gate *g)
{
	bool t;

	pthread_mutex_lock(&g->lock);
	t = g->timed_out;
	pthread_mutex_unlock(&g->lock);
	return t;
}

/* Queue the gate on stream s; returns once the stream stands at it. */
static inline void tu_gate_hold(struct xdm_runtime *rt, xdm_stream_id s, struct tu_gate *g)
{
	TU_OK(xdm_stream_launch_host(rt, s, tu_gate_run, g));
	ck_assert_msg(tu_gate_wait_entered(g), "stream %u never reached its gate", (unsigned)s);
}

static inline void tu_gate_destroy(struct tu_gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static inline void tu_gate_open(struct tu_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Undo /proc/self/mountinfo's octal escapes (\040 for a space) in place. */
static inline void tu_mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static inline int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* XDM_TESTUTIL_H */
