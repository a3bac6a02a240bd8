/* SPDX-License-Identifier: MIT */
/*
 * check_logging.c - the logging adaptor on the host platform: the header,
 * the replay of a multi-threaded workload into exactly the live set the
 * runtime reports (file and memory sinks), failure rows, CSV quoting, path
 * expansion, the null sink, a full disk, flush on demand and thread exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"
#include "tools/common/logcsv.h"

#define LOG_HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"

static char tmpdir[64];

/*
 * The log read back by the reader of xdm-bench and xdmctl
 * (tools/common/logcsv.c): what the adaptor writes, the programs must
 * take.  A refusal is said on standard error, in the test's log.
 */
static void parse_log(const char *text, struct logcsv *log)
{
	ck_assert_msg(logcsv_parse(log, "check_logging", "the log", text, strlen(text), stderr) ==
		      LOGCSV_OK, "the log was refused (the reader says why above)");
}

/*
 * The log replayed in the order of xdm-logging(7) into the set of blocks
 * it leaves live; each block's value is its allocate's row in log->rows.
 */
static void replay_log(const struct logcsv *log, struct logcsv_live *live)
{
	ck_assert_int_eq(logcsv_live_init(log, live), LOGCSV_OK);
	for (size_t k = 0; k < log->nrows; k++) {
		struct logcsv_block gone;

		ck_assert_msg(logcsv_live_step(log, live, logcsv_at(log, k), (uint32_t)log->order[k],
					       &gone) == LOGCSV_OK,
			      "the replay failed at row %zu (the reader says why above)", k);
	}
}

/* The live block at ptr, or NULL. */
static const struct logcsv_block *live_block(const struct logcsv_live *live, uint64_t ptr)
{
	for (size_t i = 0; i <= live->mask; i++)
		if (live->e[i].ptr == ptr)
			return &live->e[i];
	return NULL;
}

static const char *row_tag(const struct logcsv *log, const struct logcsv_row *r)
{
	return logcsv_tag(log, r->tag);
}

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/xdm-logging-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char path[512];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

static struct xdm_runtime *logging_runtime(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static struct xdm_runtime *logging_runtime(const char *fmt, ...)
{
	struct xdm_runtime *rt = NULL;
	char stack[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(stack, sizeof(stack), fmt, ap);
	va_end(ap);
	TU_OK(xdm_runtime_create(0, "host", stack, &rt));
	ck_assert_str_eq(xdm_runtime_layer_name(rt, 0), "logging");
	return rt;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	text[n] = '\0';
	fclose(f);
	return text;
}

static uint64_t attr_u64(struct xdm_runtime *rt, const char *name)
{
	char buf[64];

	TU_OK(xdm_layer_attr_show(rt, 0, name, buf, sizeof(buf)));
	return strtoull(buf, NULL, 10);
}

/* The memory sink's whole CSV. */
static char *memory_contents(struct xdm_runtime *rt)
{
	size_t len;
	char *buf;

	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1"));
	len = attr_u64(rt, "bytes_written") + 1;
	buf = malloc(len);
	TU_OK(xdm_layer_attr_show(rt, 0, "contents", buf, len));
	ck_assert_uint_eq(strlen(buf), len - 1);
	return buf;
}

static size_t count_lines(const char *text)
{
	size_t n = 0;

	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- the header --------------------------------------------------------- */

START_TEST(header_is_exact)
{
	struct xdm_runtime *rt = logging_runtime("logging sink=memory | host");
	char path[128], *text;

	text = memory_contents(rt);
	ck_assert_str_eq(text, LOG_HEADER);
	free(text);
	TU_OK(xdm_runtime_destroy(rt));

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/h.csv", tmpdir);
	rt = logging_runtime("logging path=%s | host", path);
	TU_OK(xdm_runtime_destroy(rt));
	text = read_file(path);
	ck_assert_str_eq(text, LOG_HEADER);
	free(text);

	/* A second log of the same name appends without a second header. */
	rt = logging_runtime("logging path=%s | host", path);
	TU_OK(xdm_runtime_destroy(rt));
	text = read_file(path);
	ck_assert_str_eq(text, LOG_HEADER);
	free(text);
	remove_tmpdir();
}
END_TEST

/* ---- the replay --------------------------------------------------------- */

#define WL_THREADS 4
#define WL_OPS 3000
#define WL_MAX_LIVE 64

struct wl_thread {
	struct xdm_runtime *rt;
	int index;
	uint64_t query_id;
	char tag[64];
	unsigned int seed;
	int live_left;
};

/* Allocations and frees interleaved; about half the blocks stay live. */
static void *wl_run(void *arg)
{
	struct wl_thread *t = arg;
	struct xdm_block live[WL_MAX_LIVE];
	int n = 0;

	xdm_set_query_id(t->query_id);
	for (int i = 0; i < WL_OPS; i++) {
		bool alloc = n == 0 || (n < WL_MAX_LIVE && rand_r(&t->seed) % 100 < 52);

		if (alloc) {
			size_t bytes = 1 + (size_t)(rand_r(&t->seed) % 70000);

			TU_OK(xdm_allocate(t->rt, bytes, (xdm_stream_id)(1 + t->index), t->tag,
					   &live[n]));
			n++;
		} else {
			int k = (int)(rand_r(&t->seed) % (unsigned int)n);

			TU_OK(xdm_deallocate(t->rt, &live[k]));
			live[k] = live[--n];
		}
	}
	/* Leave some live for the replay to find, free the rest. */
	while (n > WL_MAX_LIVE / 4)
		TU_OK(xdm_deallocate(t->rt, &live[--n]));
	t->live_left = n;
	return NULL;
}

struct snapshot {
	struct xdm_block blocks[WL_THREADS * WL_MAX_LIVE + 16];
	size_t n;
};

static void snap_block(const struct xdm_block *b, void *arg)
{
	struct snapshot *s = arg;

	ck_assert_uint_lt(s->n, sizeof(s->blocks) / sizeof(s->blocks[0]));
	s->blocks[s->n++] = *b;
}

static void free_all(struct xdm_runtime *rt, struct snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		TU_OK(xdm_deallocate(rt, &s->blocks[i]));
}

/* Runs the workload, then checks the log against the runtime's live set. */
static void replay_check(struct xdm_runtime *rt, char *(*get_log)(struct xdm_runtime *, void *),
			 void *arg)
{
	struct wl_thread t[WL_THREADS];
	pthread_t th[WL_THREADS];
	struct snapshot *snap = calloc(1, sizeof(*snap));
	struct xdm_block mine[3];
	struct logcsv_live live;
	struct logcsv log;
	size_t expect_live = 0;
	char *text;

	for (int i = 0; i < WL_THREADS; i++) {
		t[i] = (struct wl_thread){ .rt = rt, .index = i, .query_id = 1000 + 7 * (uint64_t)i,
					   .seed = 42u + (unsigned int)i };
		/* Tags with a comma and a quote must round-trip through CSV. */
		snprintf(t[i].tag, sizeof(t[i].tag), "worker %d, \"q%" PRIu64 "\"", i,
			 t[i].query_id);
		ck_assert_int_eq(pthread_create(&th[i], NULL, wl_run, &t[i]), 0);
	}
	/* The main thread's rows stay in its buffer until the flush. */
	xdm_set_query_id(77);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 100 + (size_t)i, 0, "main", &mine[i]));
	TU_OK(xdm_deallocate(rt, &mine[1]));
	xdm_set_query_id(0);
	for (int i = 0; i < WL_THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		expect_live += (size_t)t[i].live_left;
	}
	expect_live += 2;

	text = get_log(rt, arg);
	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, attr_u64(rt, "rows"));
	for (size_t i = 0; i < log.nrows; i++) {
		const struct logcsv_row *r = &log.rows[i];
		const char *tag = row_tag(&log, r);
		int w;

		ck_assert_uint_eq(r->device, 0);
		ck_assert_uint_ne(r->thread, 0);
		if (!strcmp(tag, "main")) {
			ck_assert_uint_eq(r->query_id, 77);
			ck_assert_uint_eq(r->thread, (uint64_t)my_tid());
			continue;
		}
		ck_assert_int_eq(sscanf(tag, "worker %d,", &w), 1);
		ck_assert_int_lt(w, WL_THREADS);
		ck_assert_str_eq(tag, t[w].tag);
		ck_assert_uint_eq(r->query_id, t[w].query_id);
		ck_assert_uint_eq(r->stream, 1 + (uint64_t)w);
	}
	replay_log(&log, &live);

	TU_OK(xdm_runtime_for_each_block(rt, snap_block, snap));
	ck_assert_uint_eq(snap->n, expect_live);
	ck_assert_uint_eq(live.n, snap->n);
	for (size_t i = 0; i < snap->n; i++) {
		const struct xdm_block *b = &snap->blocks[i];
		const struct logcsv_block *e = live_block(&live, b->ptr);

		ck_assert_msg(e != NULL, "live block 0x%" PRIx64 " missing from the replay", b->ptr);
		ck_assert_uint_eq(e->bytes, b->bytes);
		ck_assert_str_eq(row_tag(&log, &log.rows[e->value]), b->tag);
	}
	logcsv_live_fini(&live);
	logcsv_free(&log);
	free(text);
	free_all(rt, snap);
	free(snap);
}

static char *file_log(struct xdm_runtime *rt, void *arg)
{
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1\n"));
	return read_file(arg);
}

static char *memory_log(struct xdm_runtime *rt, void *arg)
{
	return memory_contents(rt);
}

START_TEST(replay_file_matches_live_set)
{
	struct xdm_runtime *rt;
	char path[128];

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/replay.csv", tmpdir);
	/* A small buffer makes the workers write many times, concurrently. */
	rt = logging_runtime("logging path=%s buffer=4K | host", path);
	replay_check(rt, file_log, path);
	ck_assert_uint_eq(attr_u64(rt, "write_errors"), 0);
	ck_assert_uint_eq(attr_u64(rt, "dropped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	remove_tmpdir();
}
END_TEST

START_TEST(replay_memory_matches_live_set)
{
	struct xdm_runtime *rt = logging_runtime("logging sink=memory | host");

	replay_check(rt, memory_log, NULL);
	ck_assert_uint_eq(attr_u64(rt, "dropped"), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- single rules ------------------------------------------------------- */

START_TEST(allocate_failure_row)
{
	struct xdm_runtime *rt = logging_runtime("logging sink=memory | host");
	const size_t huge = SIZE_MAX - 10;
	struct xdm_block b;
	struct logcsv log;
	char *text;

	xdm_set_query_id(5);
	ck_assert_int_eq(xdm_allocate(rt, huge, 2, "huge", &b), XDM_E_OUT_OF_MEMORY);
	text = memory_contents(rt);
	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, 1);
	ck_assert_int_eq(log.rows[0].action, LOGCSV_ALLOCATE_FAILURE);
	ck_assert_uint_eq(log.rows[0].ptr, 0);
	ck_assert_uint_eq(log.rows[0].bytes, huge);
	ck_assert_uint_eq(log.rows[0].stream, 2);
	ck_assert_uint_eq(log.rows[0].query_id, 5);
	ck_assert_str_eq(row_tag(&log, &log.rows[0]), "huge");
	ck_assert_ptr_nonnull(strstr(text, ",allocate_failure,0x0,18446744073709551605,2,0,huge,5\n"));
	logcsv_free(&log);
	free(text);
	xdm_set_query_id(0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(tag_quoting_round_trips)
{
	struct xdm_runtime *rt = logging_runtime("logging sink=memory | host");
	static const char *const tags[] = { "a,b\"c", "\"", "line\nbreak", "plain" };
	struct xdm_block b[4];
	struct logcsv log;
	char *text;

	for (int i = 0; i < 4; i++)
		TU_OK(xdm_allocate(rt, 64, 0, tags[i], &b[i]));
	text = memory_contents(rt);
	ck_assert_ptr_nonnull(strstr(text, ",\"a,b\"\"c\","));
	ck_assert_ptr_nonnull(strstr(text, ",\"\"\"\","));
	ck_assert_ptr_nonnull(strstr(text, ",plain,"));
	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, 4);
	/* One thread: its rows are in file order. */
	for (int i = 0; i < 4; i++)
		ck_assert_str_eq(row_tag(&log, &log.rows[i]), tags[i]);
	logcsv_free(&log);
	free(text);
	for (int i = 0; i < 4; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/*
 * The reader takes numbers only as the adaptor writes them: a sign, white
 * space or a second "0x" that strtoull() would skip is refused (found by
 * fuzzing; tests/fuzz/corpus/fuzz_logcsv keeps these rows too).
 */
START_TEST(reader_refuses_numbers_the_adaptor_never_writes)
{
#define HEADER "thread,time,action,ptr,bytes,stream,device,tag,query_id\n"
	static const char *const refused[] = {
		HEADER "+1,2,allocate,0x10,16,0,0,t,0\n",
		HEADER "1,2,allocate,0x0x10,16,0,0,t,0\n",
		HEADER "1,2,allocate,0x+10,16,0,0,t,0\n",
		HEADER "1,\"\n2\",allocate,0x10,16,0,0,t,0\n",
		HEADER "1,2,allocate,0x10,\t16,0,0,t,0\n",
	};
	FILE *quiet = fopen("/dev/null", "w");
	struct logcsv log;

	ck_assert_ptr_nonnull(quiet);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		ck_assert_msg(logcsv_parse(&log, "check_logging", "refused", refused[i],
					   strlen(refused[i]), quiet) == LOGCSV_BAD,
			      "row %zu taken", i);
	fclose(quiet);
	parse_log(HEADER "1,2,allocate,0x10,16,0,0,t,0\n", &log);
	ck_assert_uint_eq(log.nrows, 1);
	ck_assert_uint_eq(log.rows[0].ptr, 16);
	logcsv_free(&log);
#undef HEADER
}
END_TEST

START_TEST(path_expands_pid_and_device)
{
	struct xdm_runtime *rt = NULL;
	char expect[256], shown[256];
	struct stat st;

	make_tmpdir();
	rt = logging_runtime("logging path=%s/log-%%p-%%d-%%%%.csv | host", tmpdir);
	snprintf(expect, sizeof(expect), "%s/log-%ld-0-%%.csv", tmpdir, (long)getpid());
	TU_OK(xdm_layer_attr_show(rt, 0, "path", shown, sizeof(shown)));
	ck_assert_int_eq(stat(expect, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	strcat(expect, "\n");
	ck_assert_str_eq(shown, expect);
	TU_OK(xdm_runtime_destroy(rt));

	ck_assert_int_eq(xdm_runtime_create(0, "host", "logging path=/tmp/x-%q.csv | host", &rt),
			 XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "%q"));
	ck_assert_int_eq(xdm_runtime_create(0, "host", "logging sink=disk | host", &rt),
			 XDM_E_CONFIG);
	ck_assert_int_eq(xdm_runtime_create(0, "host", "logging path=/nonexistent/dir/x.csv | host",
					    &rt), XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(xdm_last_error_message(), "/nonexistent/dir/x.csv"));
	remove_tmpdir();
}
END_TEST

START_TEST(null_sink_counts_and_writes_nothing)
{
	struct xdm_runtime *rt;
	struct xdm_block b[10];
	char buf[64], cwd[512];
	DIR *d;
	struct dirent *e;
	int files = 0;

	make_tmpdir();
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(tmpdir), 0);	/* where the default path would go */
	rt = logging_runtime("logging sink=null | host");
	for (int i = 0; i < 10; i++)
		TU_OK(xdm_allocate(rt, 128, 0, "n", &b[i]));
	for (int i = 0; i < 7; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	ck_assert_int_eq(xdm_allocate(rt, SIZE_MAX - 10, 0, "n", &b[0]), XDM_E_OUT_OF_MEMORY);
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1"));
	ck_assert_uint_eq(attr_u64(rt, "rows"), 18);
	ck_assert_uint_eq(attr_u64(rt, "bytes_written"), 0);
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "contents", buf, sizeof(buf)), XDM_E_INVALID);
	TU_OK(xdm_layer_attr_show(rt, 0, "sink", buf, sizeof(buf)));
	ck_assert_str_eq(buf, "null\n");
	for (int i = 7; i < 10; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
	d = opendir(".");
	while ((e = readdir(d)))
		files += e->d_name[0] != '.';
	closedir(d);
	ck_assert_int_eq(files, 0);
	ck_assert_int_eq(chdir(cwd), 0);
	remove_tmpdir();
}
END_TEST

START_TEST(full_disk_is_told_once_and_harmless)
{
	struct xdm_runtime *rt;
	struct xdm_block b;
	int pipefd[2], saved;
	char said[4096];
	ssize_t n;
	const char *p;
	int lines = 0;

	ck_assert_int_eq(pipe(pipefd), 0);
	saved = dup(2);
	ck_assert_int_eq(dup2(pipefd[1], 2), 2);

	/* The header already fails: that is the first error. */
	rt = logging_runtime("logging path=/dev/full buffer=4K | host");
	for (int i = 0; i < 5000; i++) {
		TU_OK(xdm_allocate(rt, 512, 0, "full", &b));
		TU_OK(xdm_deallocate(rt, &b));
	}
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1"));
	ck_assert_uint_gt(attr_u64(rt, "write_errors"), 10);
	ck_assert_uint_eq(attr_u64(rt, "dropped"), 10000);
	ck_assert_uint_eq(attr_u64(rt, "rows"), 10000);
	ck_assert_uint_eq(attr_u64(rt, "bytes_written"), 0);
	TU_OK(xdm_runtime_destroy(rt));

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(pipefd[1]);
	n = read(pipefd[0], said, sizeof(said) - 1);
	close(pipefd[0]);
	ck_assert_int_gt(n, 0);
	said[n] = '\0';
	for (p = said; *p; p++)
		lines += *p == '\n';
	ck_assert_msg(lines == 1, "stderr said %d lines: %s", lines, said);
	ck_assert_ptr_nonnull(strstr(said, "/dev/full"));
	ck_assert_ptr_nonnull(strstr(said, strerror(ENOSPC)));
}
END_TEST

START_TEST(flush_on_demand)
{
	struct xdm_runtime *rt;
	struct xdm_block b[3];
	char path[128], *text;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/f.csv", tmpdir);
	rt = logging_runtime("logging path=%s | host", path);
	for (int i = 0; i < 3; i++)
		TU_OK(xdm_allocate(rt, 1000, 0, "f", &b[i]));
	text = read_file(path);
	ck_assert_str_eq(text, LOG_HEADER);	/* still buffered */
	free(text);
	ck_assert_int_eq(xdm_layer_attr_store(rt, 0, "flush", "2"), XDM_E_INVALID);
	ck_assert_int_eq(xdm_layer_attr_show(rt, 0, "flush", path, 1), XDM_E_INVALID);
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1\n"));
	text = read_file(path);
	ck_assert_uint_eq(count_lines(text), 4);
	free(text);

	/* Reaping flushes too (rows queued for the writer are pending work). */
	TU_OK(xdm_deallocate(rt, &b[0]));
	text = read_file(path);
	ck_assert_uint_eq(count_lines(text), 4);	/* still buffered */
	free(text);
	TU_OK(xdm_reap_pending(rt));
	text = read_file(path);
	ck_assert_uint_eq(count_lines(text), 5);
	free(text);

	/* fini writes what is left. */
	for (int i = 1; i < 3; i++)
		TU_OK(xdm_deallocate(rt, &b[i]));
	TU_OK(xdm_runtime_destroy(rt));
	text = read_file(path);
	ck_assert_uint_eq(count_lines(text), 7);
	ck_assert_ptr_nonnull(strstr(text, ",free,"));
	free(text);
	remove_tmpdir();
}
END_TEST

struct exiting {
	struct xdm_runtime *rt;
	pid_t tid;
};

static void *exiting_run(void *arg)
{
	struct exiting *x = arg;
	struct xdm_block b[2];

	x->tid = my_tid();
	TU_OK(xdm_allocate(x->rt, 300, 3, "exiting", &b[0]));
	TU_OK(xdm_allocate(x->rt, 400, 3, "exiting", &b[1]));
	TU_OK(xdm_deallocate(x->rt, &b[0]));
	TU_OK(xdm_deallocate(x->rt, &b[1]));
	return NULL;
}

START_TEST(thread_exit_hands_rows_over)
{
	struct exiting x;
	pthread_t th;
	char path[128], prefix[32], *text, *p;
	int rows = 0;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/t.csv", tmpdir);
	x.rt = logging_runtime("logging path=%s | host", path);
	ck_assert_int_eq(pthread_create(&th, NULL, exiting_run, &x), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	/* No flush: the thread's exit wrote them. */
	text = read_file(path);
	snprintf(prefix, sizeof(prefix), "\n%ld,", (long)x.tid);
	for (p = text; (p = strstr(p, prefix)); p++)
		rows++;
	ck_assert_int_eq(rows, 4);
	ck_assert_uint_eq(attr_u64(x.rt, "rows"), 4);
	free(text);
	TU_OK(xdm_runtime_destroy(x.rt));
	remove_tmpdir();
}
END_TEST

/* A singleton is never destroyed: its rows reach the file at exit(). */
START_TEST(exit_flushes_the_file)
{
	char path[128], *text;
	int status;
	pid_t pid;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/exit.csv", tmpdir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct xdm_runtime *rt = NULL;
		struct xdm_block b;
		char stack[256];

		/* A destroyed layer leaves a detached hook behind: harmless. */
		if (xdm_runtime_create(0, "host", "logging path=/dev/null | host", &rt) ||
		    xdm_runtime_destroy(rt))
			_exit(2);
		snprintf(stack, sizeof(stack), "logging path=%s | host", path);
		if (xdm_runtime_create(0, "host", stack, &rt))
			_exit(2);
		if (xdm_allocate(rt, 4096, 0, "at-exit", &b) || xdm_deallocate(rt, &b))
			_exit(3);
		exit(0);	/* no destroy: the exit hook must write the rows */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	text = read_file(path);
	ck_assert_uint_eq(count_lines(text), 3);
	ck_assert_ptr_nonnull(strstr(text, ",allocate,"));
	ck_assert_ptr_nonnull(strstr(text, ",at-exit,"));
	free(text);
	remove_tmpdir();
}
END_TEST

START_TEST(memory_limit_drops_whole_buffers)
{
	struct xdm_runtime *rt = logging_runtime("logging sink=memory memory_limit=8K "
						 "buffer=4K | host");
	struct xdm_block b;
	char *text;

	for (int i = 0; i < 1000; i++) {
		TU_OK(xdm_allocate(rt, 64, 0, "m", &b));
		TU_OK(xdm_deallocate(rt, &b));
	}
	text = memory_contents(rt);
	ck_assert_uint_le(strlen(text), 8192);
	ck_assert_uint_eq(count_lines(text) - 1 + attr_u64(rt, "dropped"), 2000);
	ck_assert_uint_gt(attr_u64(rt, "dropped"), 0);
	free(text);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* ---- the rings: many threads, a held sink, full=wait and full=drop ------ */

/* Waits (without timing anything) until done says so; a hang fails the test. */
struct flag {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool set;
};

static void flag_init(struct flag *f)
{
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->set = false;
}

static void flag_set(struct flag *f)
{
	pthread_mutex_lock(&f->lock);
	f->set = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void flag_wait(struct flag *f)
{
	pthread_mutex_lock(&f->lock);
	while (!f->set)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

/* Polls what no condition variable tells: a counter of the layer, the pipe. */
#define POLL_UNTIL(cond, what)                                                          \
	do {                                                                            \
		int polled_ms_ = 0;                                                     \
		while (!(cond)) {                                                       \
			ck_assert_msg(polled_ms_ < TU_PATIENCE_MS, "never happened: %s", \
				      what);                                            \
			tu_sleep_ms(1);                                                 \
			polled_ms_++;                                                   \
		}                                                                       \
	} while (0)

/*
 * n pairs, each row's query id its index among the thread's rows: the
 * thread's order can be read back from the file.
 */
static void log_pairs(struct xdm_runtime *rt, int n, xdm_stream_id stream, const char *tag)
{
	struct xdm_block b;

	for (int i = 0; i < n; i++) {
		xdm_set_query_id(2 * (uint64_t)i);
		TU_OK(xdm_allocate(rt, 64 + (size_t)i % 512, stream, tag, &b));
		xdm_set_query_id(2 * (uint64_t)i + 1);
		TU_OK(xdm_deallocate(rt, &b));
	}
	xdm_set_query_id(0);
}

/*
 * The rows of thread tid, in file order, are its rows 0, 1, 2, ... (query
 * ids), but where a "dropped" row stands for the ones lost there; all of
 * them are accounted for up to want.  Returns the rows dropped.
 */
static uint64_t check_thread_rows(const struct logcsv *log, uint64_t tid, uint64_t want,
				  const char *tag)
{
	uint64_t next = 0, dropped = 0;
	size_t d = 0;

	/* A thread's rows are in file order; its "dropped" rows are merged in
	 * by their place in the file. */
	for (size_t i = 0; i <= log->nrows; i++) {
		const struct logcsv_row *r = i < log->nrows ? &log->rows[i] : NULL;

		if (r && r->thread != tid)
			continue;
		for (; d < log->ndrops && (!r || log->drops[d].seq <= r->seq); d++) {
			if (log->drops[d].thread != tid)
				continue;
			next += log->drops[d].rows;
			dropped += log->drops[d].rows;
		}
		if (!r)
			break;
		ck_assert_msg(r->query_id == next, "thread %" PRIu64 ": row %" PRIu64 " where %"
			      PRIu64 " was due", tid, r->query_id, next);
		ck_assert_int_eq(r->action, next % 2 ? LOGCSV_FREE : LOGCSV_ALLOCATE);
		if (tag)
			ck_assert_str_eq(row_tag(log, r), tag);
		next++;
	}
	ck_assert_uint_eq(next, want);
	return dropped;
}

#define MT_THREADS 6
#define MT_PAIRS 1500

struct mt_thread {
	struct xdm_runtime *rt;
	int index;
	pid_t tid;
	char tag[200];
	const char *giant;
};

static void *mt_run(void *arg)
{
	struct mt_thread *t = arg;

	t->tid = my_tid();
	log_pairs(t->rt, MT_PAIRS / 2, (xdm_stream_id)(1 + t->index % 4), t->tag);
	/* A tag too long for a ring: the thread writes that row itself, in its place. */
	if (t->giant) {
		struct xdm_block b;

		xdm_set_query_id(MT_PAIRS);
		TU_OK(xdm_allocate(t->rt, 64, 1, t->giant, &b));
		xdm_set_query_id(MT_PAIRS + 1);
		TU_OK(xdm_deallocate(t->rt, &b));
		xdm_set_query_id(0);
	}
	return NULL;
}

/*
 * Every row of every thread arrives once, each thread's in its order:
 * small rings (buffer=4K: 64 records) that wrap and wait often, two
 * writers, tags of one to five slots (quoted ones among them) that wrap
 * around the ring's end, and one tag longer than a ring takes.
 */
START_TEST(many_threads_all_rows_in_order)
{
	struct mt_thread t[MT_THREADS];
	pthread_t th[MT_THREADS];
	struct xdm_runtime *rt;
	char path[128], *text, *giant;
	struct logcsv log;
	uint64_t total = 0;

	giant = malloc(3001);
	memset(giant, 'g', 3000);
	giant[3000] = '\0';
	giant[100] = '"';
	giant[200] = ',';
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/mt.csv", tmpdir);
	rt = logging_runtime("logging path=%s buffer=4K writers=2 | host", path);
	for (int i = 0; i < MT_THREADS; i++) {
		t[i] = (struct mt_thread){ .rt = rt, .index = i, .giant = i == 1 ? giant : NULL };
		/* 5 to 180 bytes: one record slot to four. */
		snprintf(t[i].tag, sizeof(t[i].tag), "t%d %.*s", i, 2 + 35 * i,
			 "a,\"b\"-cdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ");
		ck_assert_int_eq(pthread_create(&th[i], NULL, mt_run, &t[i]), 0);
	}
	for (int i = 0; i < MT_THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		total += MT_PAIRS + (t[i].giant ? 2 : 0);
	}
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1"));
	text = read_file(path);
	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, total);
	ck_assert_uint_eq(attr_u64(rt, "rows"), total);
	ck_assert_uint_eq(attr_u64(rt, "dropped"), 0);
	ck_assert_uint_eq(attr_u64(rt, "writers"), 2);
	for (int i = 0; i < MT_THREADS; i++) {
		if (!t[i].giant) {
			check_thread_rows(&log, (uint64_t)t[i].tid, MT_PAIRS, t[i].tag);
			continue;
		}
		check_thread_rows(&log, (uint64_t)t[i].tid, MT_PAIRS + 2, NULL);
		for (size_t k = 0; k < log.nrows; k++) {
			if (log.rows[k].thread == (uint64_t)t[i].tid)
				ck_assert_str_eq(row_tag(&log, &log.rows[k]),
						 log.rows[k].query_id >= MT_PAIRS ? giant : t[i].tag);
		}
	}
	logcsv_free(&log);
	free(text);
	TU_OK(xdm_runtime_destroy(rt));
	free(giant);
	remove_tmpdir();
}
END_TEST

/*
 * A sink the test holds: a FIFO whose reading end is the test's.  The
 * writers block in write() once the pipe is full, until the test reads.
 */
struct held {
	char path[160];
	int rfd;
	int cap;
	pthread_t reader;
	char *text;
	size_t len;
};

static void held_open(struct held *h, int pipe_size)
{
	make_tmpdir();
	snprintf(h->path, sizeof(h->path), "%s/held.csv", tmpdir);
	ck_assert_int_eq(mkfifo(h->path, 0600), 0);
	/* Non-blocking: there is no writer yet; the logging layer opens one. */
	h->rfd = open(h->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(h->rfd, 0);
	h->cap = fcntl(h->rfd, F_SETPIPE_SZ, pipe_size);
	ck_assert_int_ge(h->cap, pipe_size);
	h->text = NULL;
	h->len = 0;
}

static int held_pending(const struct held *h)
{
	int n = 0;

	ck_assert_int_eq(ioctl(h->rfd, FIONREAD, &n), 0);
	return n;
}

/* Reads to the end: when the runtime is destroyed and its file closed. */
static void *held_read(void *arg)
{
	struct held *h = arg;
	size_t cap = 1 << 16;
	ssize_t n;

	h->text = malloc(cap);
	for (;;) {
		if (cap - h->len < 4096) {
			cap *= 2;
			h->text = realloc(h->text, cap);
		}
		n = read(h->rfd, h->text + h->len, cap - h->len - 1);
		if (n == 0)
			break;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		h->len += (size_t)n;
	}
	h->text[h->len] = '\0';
	return NULL;
}

static void held_release(struct held *h)
{
	int fl = fcntl(h->rfd, F_GETFL);

	ck_assert_int_eq(fcntl(h->rfd, F_SETFL, fl & ~O_NONBLOCK), 0);
	ck_assert_int_eq(pthread_create(&h->reader, NULL, held_read, h), 0);
}

/* After the runtime is destroyed: the whole text, the junk after the header cut out. */
static char *held_text(struct held *h)
{
	char *p;
	size_t junk;

	ck_assert_int_eq(pthread_join(h->reader, NULL), 0);
	close(h->rfd);
	ck_assert_uint_ge(h->len, strlen(LOG_HEADER));
	ck_assert(strncmp(h->text, LOG_HEADER, strlen(LOG_HEADER)) == 0);
	p = h->text + strlen(LOG_HEADER);
	junk = strspn(p, "Z");
	memmove(p, p + junk, strlen(p + junk) + 1);
	unlink(h->path);
	remove_tmpdir();
	return h->text;
}

struct filler {
	struct xdm_runtime *rt;
	int pairs;
	const char *tag;
	pid_t tid;
	struct flag logged;
};

/* Logs its pairs, says so, and exits: its exit hands over what is left. */
static void *filler_run(void *arg)
{
	struct filler *f = arg;

	f->tid = my_tid();
	log_pairs(f->rt, f->pairs, 0, f->tag);
	flag_set(&f->logged);
	return NULL;
}

/*
 * A writer stuck in write(): the pipe holds two pages; junk fills the
 * first, so the writer's first write (more than a page of this thread's
 * rows) fills the second and blocks.  Seen to block, the writer is inside
 * a pass that began before the filler existed, so it never touches the
 * filler's ring, whose 128 records (buffer=8K) the filler then logs.
 * Returns the runtime; the caller reads it back with held_text().
 */
static struct xdm_runtime *stuck_writer(struct held *h)
{
	/* 88 bytes: two slots a record, so 32 rows make half the ring. */
	static const char tag88[] = "0123456789012345678901234567890123456789"
				    "0123456789012345678901234567890123456789-tag-88-";
	struct xdm_runtime *rt;
	char junk[4096];
	int jfd, pending;

	ck_assert_uint_eq(strlen(tag88), 88);
	held_open(h, 8192);
	ck_assert_int_eq(h->cap, 8192);
	rt = logging_runtime("logging path=%s buffer=8K writers=1 | host", h->path);
	pending = held_pending(h);
	ck_assert_int_eq(pending, (int)strlen(LOG_HEADER));
	jfd = open(h->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(jfd, 0);
	memset(junk, 'Z', sizeof(junk));
	ck_assert_int_eq(write(jfd, junk, 4096 - (size_t)pending), 4096 - pending);
	close(jfd);
	ck_assert_int_eq(held_pending(h), 4096);

	/* This thread's 32 rows (~4.8K of text) cross half its ring: a pass. */
	log_pairs(rt, 16, 0, tag88);
	POLL_UNTIL(held_pending(h) > 4096, "the writer's write filling the pipe");
	return rt;
}

static void check_stuck_writer_log(struct held *h, pid_t filler, int filler_rows)
{
	struct logcsv log;
	char *text = held_text(h);

	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, 32 + (size_t)filler_rows);
	check_thread_rows(&log, (uint64_t)my_tid(), 32, NULL);
	check_thread_rows(&log, (uint64_t)filler, (uint64_t)filler_rows, "filler");
	logcsv_free(&log);
	free(text);
}

/*
 * A thread exits with its ring exactly full (128 records, no wait) and its
 * writer stuck: its exit writes every row.
 */
START_TEST(exit_with_a_full_ring_loses_nothing)
{
	struct held h;
	struct filler f = { .pairs = 64, .tag = "filler" };
	pthread_t th;

	f.rt = stuck_writer(&h);
	flag_init(&f.logged);
	ck_assert_int_eq(pthread_create(&th, NULL, filler_run, &f), 0);
	flag_wait(&f.logged);
	ck_assert_uint_eq(attr_u64(f.rt, "waits"), 0);
	ck_assert_uint_eq(attr_u64(f.rt, "rows"), 32 + 128);

	held_release(&h);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	TU_OK(xdm_runtime_destroy(f.rt));
	check_stuck_writer_log(&h, f.tid, 128);
}
END_TEST

/*
 * One row more: the ring is full, its writer stuck on another ring, so the
 * thread drains its ring itself (and blocks writing to the held sink, as
 * its writer does, until the test reads).  Nothing is lost or reordered.
 */
START_TEST(full_ring_drained_by_its_own_thread)
{
	struct held h;
	struct filler f = { .pairs = 65, .tag = "filler" };
	pthread_t th;

	f.rt = stuck_writer(&h);
	flag_init(&f.logged);
	ck_assert_int_eq(pthread_create(&th, NULL, filler_run, &f), 0);
	POLL_UNTIL(attr_u64(f.rt, "waits") > 0, "the filler finding its ring full");
	held_release(&h);
	flag_wait(&f.logged);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(attr_u64(f.rt, "waits"), 1);
	ck_assert_uint_eq(attr_u64(f.rt, "dropped"), 0);
	TU_OK(xdm_runtime_destroy(f.rt));
	check_stuck_writer_log(&h, f.tid, 130);
}
END_TEST

/*
 * full=wait: a thread logs far more than the pipe, its ring and the
 * writer's text hold, with nobody reading: it must wait (seen in waits),
 * and once the test reads, every row arrives in order.
 */
START_TEST(wait_policy_never_drops)
{
	struct held h;
	struct filler f = { .pairs = 2000, .tag = "waiter" };
	struct logcsv log;
	pthread_t th;
	char *text;

	held_open(&h, 4096);
	f.rt = logging_runtime("logging path=%s buffer=4K writers=1 full=wait | host", h.path);
	flag_init(&f.logged);
	ck_assert_int_eq(pthread_create(&th, NULL, filler_run, &f), 0);
	POLL_UNTIL(attr_u64(f.rt, "waits") > 0, "the thread waiting for room");
	held_release(&h);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_gt(attr_u64(f.rt, "waits"), 0);
	ck_assert_uint_eq(attr_u64(f.rt, "dropped"), 0);
	ck_assert_uint_eq(attr_u64(f.rt, "rows"), 4000);
	TU_OK(xdm_runtime_destroy(f.rt));
	text = held_text(&h);
	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, 4000);
	ck_assert_uint_eq(check_thread_rows(&log, (uint64_t)f.tid, 4000, "waiter"), 0);
	logcsv_free(&log);
	free(text);
}
END_TEST

/*
 * full=drop: the same thread never waits; what its ring cannot take is
 * counted in dropped, and "dropped" rows in the file say how many rows
 * were lost exactly where (the rows around them number the thread's calls
 * without a gap the markers do not fill).  At most a pipe, a text buffer
 * and a ring of rows get through, so most are dropped.
 */
START_TEST(drop_policy_counts_and_says_every_loss)
{
	struct held h;
	struct filler f = { .pairs = 2000, .tag = "dropper" };
	struct logcsv log;
	uint64_t dropped, marked;
	pthread_t th;
	char buf[16], *text;

	held_open(&h, 4096);
	f.rt = logging_runtime("logging path=%s buffer=4K writers=1 full=drop | host", h.path);
	TU_OK(xdm_layer_attr_show(f.rt, 0, "full", buf, sizeof(buf)));
	ck_assert_str_eq(buf, "drop\n");
	flag_init(&f.logged);
	ck_assert_int_eq(pthread_create(&th, NULL, filler_run, &f), 0);
	flag_wait(&f.logged);
	dropped = attr_u64(f.rt, "dropped");
	ck_assert_uint_gt(dropped, 4000 - 4096 / 40 - 4096 / 40 - 64);
	ck_assert_uint_lt(dropped, 4000);
	ck_assert_uint_eq(attr_u64(f.rt, "waits"), 0);
	ck_assert_uint_eq(attr_u64(f.rt, "rows"), 4000);

	held_release(&h);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	TU_OK(xdm_layer_attr_store(f.rt, 0, "flush", "1"));
	ck_assert_uint_eq(attr_u64(f.rt, "dropped"), dropped);
	TU_OK(xdm_runtime_destroy(f.rt));
	text = held_text(&h);
	parse_log(text, &log);
	marked = check_thread_rows(&log, (uint64_t)f.tid, 4000, "dropper");
	ck_assert_uint_eq(marked, dropped);
	ck_assert_uint_eq(log.dropped, dropped);
	ck_assert_uint_eq(log.nrows + dropped, 4000);
	logcsv_free(&log);
	free(text);
}
END_TEST

/*
 * A forked child writes nothing of its own or of the parent's copied
 * rows (they are counted in its dropped), and the parent's rows reach the
 * file once.  The child logs failed allocations only: a free on the host
 * platform queues work for a stream thread the child does not have.
 */
START_TEST(forked_child_writes_nothing)
{
	struct xdm_runtime *rt;
	char path[128], *text, *p, prefix[32];
	int status, rows = 0;
	pid_t pid;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/fork.csv", tmpdir);
	rt = logging_runtime("logging path=%s | host", path);
	log_pairs(rt, 3, 0, "parent");
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct xdm_block b;
		char buf[64];

		for (int i = 0; i < 4; i++) {
			if (xdm_allocate(rt, SIZE_MAX - 10, 0, "child", &b) != XDM_E_OUT_OF_MEMORY)
				_exit(2);
		}
		if (xdm_layer_attr_store(rt, 0, "flush", "1") ||
		    xdm_layer_attr_show(rt, 0, "dropped", buf, sizeof(buf)))
			_exit(3);
		/*
		 * The parent's 6 copied rows and the child's 4.  _exit: a
		 * stream thread of the parent may have been inside free() at
		 * the fork, and LeakSanitizer's check at exit() would wait for
		 * its allocator lock forever.
		 */
		_exit(strcmp(buf, "10\n") == 0 ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x",
		      status);
	log_pairs(rt, 1, 0, "parent");
	TU_OK(xdm_layer_attr_store(rt, 0, "flush", "1"));
	text = read_file(path);
	ck_assert_ptr_null(strstr(text, "child"));
	snprintf(prefix, sizeof(prefix), "\n%ld,", (long)my_tid());
	for (p = text; (p = strstr(p, prefix)); p++)
		rows++;
	ck_assert_int_eq(rows, 8);
	ck_assert_uint_eq(count_lines(text), 9);
	ck_assert_uint_eq(attr_u64(rt, "dropped"), 0);
	free(text);
	TU_OK(xdm_runtime_destroy(rt));
	remove_tmpdir();
}
END_TEST

START_TEST(ring_parameters_are_checked)
{
	struct xdm_runtime *rt;
	char buf[16];

	tu_expect_config_error("host", "logging sink=null full=maybe | host", "full");
	tu_expect_config_error("host", "logging sink=null writers=17 | host", "writers");
	tu_expect_config_error("host", "logging sink=null buffer=2K | host", "buffer");
	rt = logging_runtime("logging sink=memory writers=3 | host");
	ck_assert_uint_eq(attr_u64(rt, "writers"), 3);
	TU_OK(xdm_layer_attr_show(rt, 0, "full", buf, sizeof(buf)));
	ck_assert_str_eq(buf, "wait\n");
	ck_assert_uint_eq(attr_u64(rt, "waits"), 0);
	TU_OK(xdm_runtime_destroy(rt));
	/* writers=0: as many as the machine suits, at least one. */
	rt = logging_runtime("logging sink=memory | host");
	ck_assert_uint_ge(attr_u64(rt, "writers"), 1);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

/* The reader takes a "dropped" row, says where it stood, and replays around it. */
START_TEST(reader_takes_a_dropped_row)
{
	static const char text[] = LOG_HEADER
		"7,10,allocate,0x1000,64,0,0,t,0\n"
		"7,11,dropped,0x0,5,0,0,,0\n"
		"7,12,free,0x1000,64,0,0,t,6\n";
	struct logcsv_live live;
	struct logcsv log;

	parse_log(text, &log);
	ck_assert_uint_eq(log.nrows, 2);
	ck_assert_uint_eq(log.ndrops, 1);
	ck_assert_uint_eq(log.drops[0].thread, 7);
	ck_assert_uint_eq(log.drops[0].rows, 5);
	ck_assert_uint_eq(log.drops[0].line, 3);
	ck_assert_uint_eq(log.drops[0].seq, 1);
	ck_assert_uint_eq(log.dropped, 5);
	replay_log(&log, &live);
	ck_assert_uint_eq(live.n, 0);
	logcsv_live_fini(&live);
	logcsv_free(&log);
}
END_TEST

static Suite *logging_suite(void)
{
	Suite *s = suite_create("logging");
	TCase *tc = tcase_create("host");

	tcase_set_timeout(tc, TU_TIMEOUT_S);
	tcase_add_test(tc, header_is_exact);
	tcase_add_test(tc, replay_file_matches_live_set);
	tcase_add_test(tc, replay_memory_matches_live_set);
	tcase_add_test(tc, allocate_failure_row);
	tcase_add_test(tc, tag_quoting_round_trips);
	tcase_add_test(tc, reader_refuses_numbers_the_adaptor_never_writes);
	tcase_add_test(tc, path_expands_pid_and_device);
	tcase_add_test(tc, null_sink_counts_and_writes_nothing);
	tcase_add_test(tc, full_disk_is_told_once_and_harmless);
	tcase_add_test(tc, flush_on_demand);
	tcase_add_test(tc, thread_exit_hands_rows_over);
	tcase_add_test(tc, exit_flushes_the_file);
	tcase_add_test(tc, memory_limit_drops_whole_buffers);
	tcase_add_test(tc, many_threads_all_rows_in_order);
	tcase_add_test(tc, exit_with_a_full_ring_loses_nothing);
	tcase_add_test(tc, full_ring_drained_by_its_own_thread);
	tcase_add_test(tc, wait_policy_never_drops);
	tcase_add_test(tc, drop_policy_counts_and_says_every_loss);
	tcase_add_test(tc, forked_child_writes_nothing);
	tcase_add_test(tc, ring_parameters_are_checked);
	tcase_add_test(tc, reader_takes_a_dropped_row);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(logging_suite());
}
