/* SPDX-License-Identifier: MIT */
/*
 * check_conformance.c - the allocator contract of xdm(3), stated once and
 * run over every stack this machine can build.
 *
 * The stacks are the two tables below: bases (a backend, or the pool over
 * one, on a platform) and adaptors (a layer put on top of a base).  Every
 * base is a stack; every adaptor over every base marked `adapt` is another.
 * A new backend or adaptor gets the whole contract by adding its line.
 * Each line also says what the man pages promise where stacks differ: the
 * error of a request far beyond the device, whether cross-stream uses are
 * tracked, what the adaptor keeps after a free.
 *
 * Every case below is one check loop test over the list of stacks built at
 * start-up (tcase_add_loop_test): a failure names the case, the loop index
 * (the list is printed first) and, in its message, the stack.
 *
 *   alignment    blocks of 1 B to 8 MiB: aligned as they say, at least
 *                XDM_DEFAULT_ALIGN, as large as asked, disjoint, writable
 *   zero_bytes   xdm_allocate(0) is INVALID and counted as a failure only;
 *                xdm_native_allocate(0) is NULL and frees as a no-op
 *   huge         a request far past the device or the limit: the stack's
 *                documented error, nothing counted, the runtime usable
 *   bad_frees    double free, stale and forged ids, another runtime's
 *                block, another device's: typed errors, nothing changed
 *   ordering     the free on the block's stream waits for a use recorded
 *                on another stream (held at a gate); a stack that does not
 *                track uses says STREAM_MISUSE
 *   counters     a known sequence on one thread: every counter exact
 *   tree         the introspection tree shows the live blocks and the
 *                counters the API gives
 *   reap_trim    after the frees, a reap leaves nothing pending; the pool
 *                gives its memory back as documented
 *   threads      16 threads, each on its own stream: counters exact after
 *
 * The cuda stacks join the list where a GPU answers.  check forks every
 * case, and CUDA state does not survive fork(), so the parent never touches
 * the driver: a child process builds the probe's runtime, and each case
 * builds its own in its own forked child.  Where there is no GPU (or the
 * build has no cuda module) they are not registered and the host stacks
 * still run.
 *
 * Assertions are made on the main thread only (a failed check longjmps);
 * worker threads report.  Nothing waits on time: a gate holds a stream
 * until the test opens it, and a pause (WINDOW_MS) only gives a missing
 * wait the chance to show, before an assertion that holds however long it
 * really was.  Budget stacks draw on segments of their own (key=conf<pid
 * of main>-<stack>), which main unlinks at the end whatever happened.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "lib/budget_segment/segment.h"
#include "tests/lib/testutil.h"
#ifdef XDM_CONFORMANCE_CUDA
#include "tests/lib/cudatest.h"
#endif

/* ---- the stacks ------------------------------------------------------- */

/*
 * What a stack's backend documents of its own, checked as its page says
 * (with a NOTE in the log):
 *
 * KNOWN_REAP_NO_WAIT: xdm_reap_pending() waits for queued frees only where
 * the backend can (xdm(3)).  host_vmm's reap does nothing ("synchronize
 * the stream to wait for its releases", xdm-host(7)); cuda_vmm's releases
 * what has completed and never waits (xdm-cuda(7)).  The pool over either reaps its
 * upstream from its trimmer thread, which a waiting reap would block on
 * the program's streams, and that trimmer may give granules back at any
 * moment.  So after a reap their releases may still be queued (and
 * host_vmm's xdm_bytes_outstanding() still counts them) until the streams
 * reach them: the cases synchronize the streams first on these stacks.
 */
#define KNOWN_REAP_NO_WAIT 1u

/*
 * KNOWN_FREE_WAITS: the backend's free waits for the device before it
 * returns.  rmm resource=cuda frees with cudaFree, which synchronizes the
 * device (xdm-rmm(7)).  The ordering case then frees on a thread of its
 * own, checks that the free has not returned while the other stream's use
 * is held, and has nothing pending to count once it returns.
 */
#define KNOWN_FREE_WAITS 2u

struct base {
	const char *platform;	/* the platform argument of xdm_runtime_create */
	uint32_t ordinal;	/* the device the runtime serves */
	const char *spec;	/* the stack */
	enum xdm_status huge;	/* what a request far past the device answers */
	bool tracks;		/* tracks cross-stream uses (else STREAM_MISUSE) */
	bool adapt;		/* every adaptor is also run over this base */
	const char *pending;	/* the backend's attribute of frees not yet run */
	unsigned int known;	/* KNOWN_* */
};

struct fx;

struct adaptor {
	const char *spec;	/* the top layer; @KEY@ becomes a budget key */
	enum xdm_status huge;	/* its own answer to a huge request; 0: the base's */
	const char *held;	/* attribute: bytes it keeps after the frees */
	/* Its own counters against the runtime's, at quiescence. */
	void (*check)(struct fx *f, const struct xdm_stats *st);
};

static void check_budget(struct fx *f, const struct xdm_stats *st);
static void check_logging(struct fx *f, const struct xdm_stats *st);
static void check_guard(struct fx *f, const struct xdm_stats *st);

#define OOM XDM_E_OUT_OF_MEMORY
#define DRIVER XDM_E_DRIVER

static const struct base bases[] = {
	/* platform, ordinal, stack, huge, tracks, adapt, pending, known */
	{ "host", 0, "host", OOM, true, true, "pending_frees", 0 },
	{ "host", 0, "host_vmm", OOM, true, true, "releasing", KNOWN_REAP_NO_WAIT },
	{ "host", 0, "pool | host", OOM, true, true, "pending_frees", 0 },
	{ "host", 0, "pool | host_vmm", OOM, true, true, "releasing", KNOWN_REAP_NO_WAIT },
	{ "host devices=2", 1, "host", OOM, true, false, "pending_frees", 0 },
	{ "cuda", 0, "cuda_direct", DRIVER, false, false, NULL, 0 },
	{ "cuda", 0, "cuda_async", DRIVER, true, false, "bytes_pending_free", 0 },
	{ "cuda", 0, "cuda_vmm", OOM, true, false, "releasing", KNOWN_REAP_NO_WAIT },
	{ "cuda", 0, "pool | cuda_async", DRIVER, true, true, "bytes_pending_free", 0 },
	{ "cuda", 0, "pool | cuda_vmm", OOM, true, false, "releasing", KNOWN_REAP_NO_WAIT },
	{ "cuda", 0, "pool | cuda_direct", DRIVER, true, false, NULL, 0 },
#ifdef XDM_CONFORMANCE_RMM
	/* The rmm backend (--with-rmm): RMM's resources, the same contract. */
	{ "cuda", 0, "rmm", OOM, true, false, NULL, 0 },
	{ "cuda", 0, "rmm resource=cuda", OOM, true, false, NULL, KNOWN_FREE_WAITS },
	{ "cuda", 0, "rmm resource=pool", OOM, true, true, NULL, 0 },
	{ "cuda", 0, "rmm resource=arena", OOM, true, false, NULL, 0 },
	{ "cuda", 0, "rmm resource=binning", OOM, true, false, NULL, 0 },
#endif
};

static const struct adaptor adaptors[] = {
	/* top layer, huge, held, check */
	{ "budget key=@KEY@ limit=1G", XDM_E_OUT_OF_BUDGET, NULL, check_budget },
	{ "logging sink=memory", 0, NULL, check_logging },
	{ "guard", 0, "quarantined_bytes", check_guard },
};

#define NBASES (sizeof(bases) / sizeof(bases[0]))
#define NADAPTORS (sizeof(adaptors) / sizeof(adaptors[0]))
#define MAX_STACKS (NBASES * (1 + NADAPTORS))

/* ---- what the cases use ----------------------------------------------- */

/*
 * The huge case asks the host backend's aligned_alloc(3) for 2^49 bytes,
 * which glibc refuses with NULL and the backend turns into OUT_OF_MEMORY.
 * The sanitizers' allocators abort on such a size instead, unless told to
 * return NULL as glibc does; these hooks tell them (the environment's
 * options still come after, and leaks and overflows are still reported).
 */
const char *__asan_default_options(void);
const char *__tsan_default_options(void);
__attribute__((used, visibility("default"))) const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

__attribute__((used, visibility("default"))) const char *__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}

/* Far past any device's memory and past 47 bits of address space, so no
 * host allocator can map it; below the pool's 2^50, which is INVALID. */
#define HUGE_REQUEST ((size_t)1 << 49)
#define MIB ((size_t)1 << 20)
#define WINDOW_MS 10
#define NTHREADS 16
#define ITERATIONS 64

/* One stack as the cases see it. */
struct stack {
	const struct base *base;
	const struct adaptor *adaptor;	/* NULL: the base alone */
	char spec[256];
	char label[320];		/* "platform: spec", in every message */
	enum xdm_status huge;
};

static struct stack stacks[MAX_STACKS];
static int nstacks;
static char key_prefix[32];	/* "conf<pid of main>", set before any fork */

/* The stack of the running case; every message names it. */
static const struct stack *cur;

#define CF_CHECK(expr, ...) ck_assert_msg((expr), "[%s] " __VA_ARGS__)
#define CF_LABEL (cur ? cur->label : "?")

#define CF_OK(expr)                                                                       \
	do {                                                                              \
		enum xdm_status cf_st_ = (expr);                                          \
		ck_assert_msg(cf_st_ == XDM_OK, "[%s] %s: %s (%s)", CF_LABEL, #expr,      \
			      xdm_strerror(cf_st_), xdm_last_error_message());            \
	} while (0)

#define CF_STATUS(expr, want)                                                             \
	do {                                                                              \
		enum xdm_status cf_st_ = (expr), cf_want_ = (want);                       \
		ck_assert_msg(cf_st_ == cf_want_, "[%s] %s: %s (%s), expected %s", CF_LABEL, \
			      #expr, xdm_strerror(cf_st_), xdm_last_error_message(),      \
			      xdm_strerror(cf_want_));                                    \
	} while (0)

#define CF_EQ(a, b)                                                                       \
	do {                                                                              \
		uintmax_t cf_a_ = (uintmax_t)(a), cf_b_ = (uintmax_t)(b);                 \
		ck_assert_msg(cf_a_ == cf_b_, "[%s] %s == %s: %ju != %ju", CF_LABEL, #a,  \
			      #b, cf_a_, cf_b_);                                          \
	} while (0)

#define CF_LE(a, b)                                                                       \
	do {                                                                              \
		uintmax_t cf_a_ = (uintmax_t)(a), cf_b_ = (uintmax_t)(b);                 \
		ck_assert_msg(cf_a_ <= cf_b_, "[%s] %s <= %s: %ju > %ju", CF_LABEL, #a,   \
			      #b, cf_a_, cf_b_);                                          \
	} while (0)

/* A runtime of the stack under test, and what the case counts of it. */
struct fx {
	const struct stack *s;
	struct xdm_runtime *rt;
	bool host_memory;	/* blocks are host addresses: the test may touch them */
	uint64_t core_failures;	/* failed allocations the core refused (never
				 * reached the stack) */
};

static void fx_open(struct fx *f, int i)
{
	struct xdm_device_info dev;

	ck_assert_int_lt(i, nstacks);
	cur = &stacks[i];
	memset(f, 0, sizeof(*f));
	f->s = cur;
	CF_OK(xdm_runtime_create(cur->base->ordinal, cur->base->platform, cur->spec, &f->rt));
	CF_EQ(xdm_runtime_ordinal(f->rt), cur->base->ordinal);
	CF_OK(xdm_runtime_device(f->rt, &dev));
	f->host_memory = strcmp(dev.platform, "host") == 0;
	CF_CHECK(xdm_supports_block_use_tracking(f->rt) == cur->base->tracks,
		 "tracking is %s, the table says %s", CF_LABEL,
		 xdm_supports_block_use_tracking(f->rt) ? "supported" : "not supported",
		 cur->base->tracks ? "tracked" : "untracked");
	/* The cases use streams 0 .. NTHREADS-1. */
	CF_LE(NTHREADS, xdm_stream_count(f->rt));
}

static void fx_close(struct fx *f)
{
	CF_OK(xdm_runtime_destroy(f->rt));
	f->rt = NULL;
}

static void sync_all(struct xdm_runtime *rt)
{
	for (xdm_stream_id s = 0; s < xdm_stream_count(rt); s++)
		CF_OK(xdm_stream_synchronize(rt, s));
}

static struct xdm_stats stats(struct fx *f)
{
	struct xdm_stats st;

	xdm_runtime_stats(f->rt, &st);
	return st;
}

/* The index of the first layer named name, or -1. */
static int layer_of(struct xdm_runtime *rt, const char *name)
{
	for (uint32_t i = 0; i < xdm_runtime_layer_count(rt); i++)
		if (strcmp(xdm_runtime_layer_name(rt, i), name) == 0)
			return (int)i;
	return -1;
}

static uint32_t backend_layer(struct xdm_runtime *rt)
{
	return xdm_runtime_layer_count(rt) - 1;
}

/* Bytes the adaptor documents keeping after the frees (a quarantine). */
static uint64_t held(struct fx *f)
{
	if (!f->s->adaptor || !f->s->adaptor->held)
		return 0;
	return tu_attr_u64(f->rt, 0, f->s->adaptor->held);
}

/* Every count of want but bytes_peak, failures, waits and events. */
static void expect_live(struct fx *f, uint64_t allocs, uint64_t frees, uint64_t bytes)
{
	struct xdm_stats st = stats(f);

	CF_EQ(st.allocs, allocs);
	CF_EQ(st.frees, frees);
	CF_EQ(st.blocks_outstanding, allocs - frees);
	CF_EQ(st.bytes_outstanding, bytes);
}

/*
 * At quiescence: the stack holds at least the live blocks, the pool (when
 * nothing above it changes the sizes) exactly them, and the adaptor's own
 * counters agree with the runtime's.
 */
static void quiescent(struct fx *f)
{
	struct xdm_stats st = stats(f);
	int pool = layer_of(f->rt, "pool");

	CF_LE(st.bytes_outstanding, xdm_bytes_outstanding(f->rt));
	if (pool >= 0 && !(f->s->adaptor && f->s->adaptor->held))
		CF_EQ(tu_attr_u64(f->rt, (uint32_t)pool, "in_use"), st.bytes_outstanding);
	if (f->s->adaptor && f->s->adaptor->check)
		f->s->adaptor->check(f, &st);
}

/*
 * budget (its own key, the default credit=auto): the segment holds exactly
 * the blocks and the credit its threads hold, which is at most twice the
 * ceiling of auto credit a thread.
 */
static void check_budget(struct fx *f, const struct xdm_stats *st)
{
	uint64_t limit = tu_attr_u64(f->rt, 0, "limit");
	uint64_t used = tu_attr_u64(f->rt, 0, "used");
	uint64_t held = tu_attr_u64(f->rt, 0, "credit_held");

	CF_EQ(used, st->bytes_outstanding + held);
	CF_EQ(tu_attr_u64(f->rt, 0, "remaining"), limit - used);
}

/* logging: a row for every allocation, free and refused allocation. */
static void check_logging(struct fx *f, const struct xdm_stats *st)
{
	CF_EQ(tu_attr_u64(f->rt, 0, "rows"),
	      st->allocs + st->frees + (st->failures - f->core_failures));
	CF_EQ(tu_attr_u64(f->rt, 0, "dropped"), 0);
}

/* guard: a record of every live block. */
static void check_guard(struct fx *f, const struct xdm_stats *st)
{
	CF_EQ(tu_attr_u64(f->rt, 0, "live_blocks"), st->blocks_outstanding);
	CF_EQ(tu_attr_u64(f->rt, 0, "violations"), 0);
}

/* The block as xdm_allocate(3) promises it. */
static void expect_block(struct fx *f, const struct xdm_block *b, size_t bytes,
			 xdm_stream_id stream, const char *tag)
{
	CF_CHECK(b->ptr != 0, "a block of %zu bytes at 0", CF_LABEL, bytes);
	CF_CHECK(b->align >= XDM_DEFAULT_ALIGN && (b->align & (b->align - 1)) == 0,
		 "%zu bytes: align %zu is not a power of two of at least %d", CF_LABEL, bytes,
		 b->align, XDM_DEFAULT_ALIGN);
	CF_CHECK(b->ptr % b->align == 0, "%zu bytes at 0x%" PRIx64 ": not aligned to %zu",
		 CF_LABEL, bytes, b->ptr, b->align);
	CF_CHECK(b->bytes >= bytes, "%zu bytes asked, %zu given", CF_LABEL, bytes, b->bytes);
	CF_EQ(b->ordinal, xdm_runtime_ordinal(f->rt));
	CF_EQ(b->stream, stream);
	CF_CHECK(b->tag && strcmp(b->tag, tag) == 0, "tag '%s', expected '%s'", CF_LABEL,
		 b->tag ? b->tag : "(null)", tag);
	CF_CHECK(b->generation != 0, "generation 0", CF_LABEL);
	CF_EQ(b->state, XDM_BLOCK_LIVE);
}

/* A consumed block is no longer LIVE (RETIRED, QUARANTINED or FREED). */
static void expect_consumed(const struct xdm_block *b)
{
	CF_CHECK(b->state == XDM_BLOCK_RETIRED || b->state == XDM_BLOCK_QUARANTINED ||
		 b->state == XDM_BLOCK_FREED, "state %d after the free", CF_LABEL,
		 (int)b->state);
}

/* ---- the introspection tree ------------------------------------------ */

#define PATH_LEN 512
#define MAX_NAMES 64

static char *tree_show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tree_show(const char *fmt, ...)
{
	char path[PATH_LEN], *text = NULL;
	size_t len = 0;
	va_list ap;
	int err;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	err = xdm_tree_show(path, &text, &len);
	CF_CHECK(err == 0, "show '%s': %s", CF_LABEL, path, strerror(-err));
	CF_CHECK(text && strlen(text) == len, "show '%s': a string of another length",
		 CF_LABEL, path);
	return text;
}

static uint64_t tree_u64(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static uint64_t tree_u64(const char *fmt, ...)
{
	char path[PATH_LEN], *text, *end;
	unsigned long long v;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	text = tree_show("%s", path);
	errno = 0;
	v = strtoull(text, &end, 10);
	CF_CHECK(end != text && errno == 0 && strcmp(end, "\n") == 0,
		 "%s is not one number and a newline: '%s'", CF_LABEL, path, text);
	free(text);
	return v;
}

/* The text of a file must be exactly want. */
static void tree_expect(const char *want, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void tree_expect(const char *want, const char *fmt, ...)
{
	char path[PATH_LEN], *text;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	text = tree_show("%s", path);
	CF_CHECK(strcmp(text, want) == 0, "%s shows '%s', expected '%s'", CF_LABEL, path, text,
		 want);
	free(text);
}

struct names {
	int n;
	bool overflow;
	char name[MAX_NAMES][64];
	struct xdm_tree_node node[MAX_NAMES];
};

static int collect(const char *name, const struct xdm_tree_node *node, void *arg)
{
	struct names *l = arg;

	if (l->n == MAX_NAMES || strlen(name) >= sizeof(l->name[0])) {
		l->overflow = true;
		return 0;
	}
	strcpy(l->name[l->n], name);
	l->node[l->n++] = *node;
	return 0;
}

static void tree_list(struct names *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tree_list(struct names *l, const char *fmt, ...)
{
	char path[PATH_LEN];
	va_list ap;
	int err;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	memset(l, 0, sizeof(*l));
	err = xdm_tree_list(path, collect, l);
	CF_CHECK(err == 0, "list '%s': %s", CF_LABEL, path, strerror(-err));
	CF_CHECK(!l->overflow, "list '%s': more than %d entries", CF_LABEL, path, MAX_NAMES);
}

static int find_name(const struct names *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->name[i], name) == 0)
			return i;
	return -1;
}

/* The runtime's directory lists exactly the live blocks, each as it is. */
static void tree_expect_blocks(struct fx *f, const struct xdm_block *live, int nlive)
{
	const char *rt = xdm_runtime_name(f->rt);
	struct names *l = malloc(sizeof(*l));
	char gen[32], want[256];

	ck_assert_ptr_nonnull(l);
	tree_list(l, "%s/blocks", rt);
	CF_EQ(l->n, nlive);
	for (int i = 0; i < nlive; i++) {
		const struct xdm_block *b = &live[i];

		snprintf(gen, sizeof(gen), "%" PRIu64, b->generation);
		CF_CHECK(find_name(l, gen) >= 0, "block %s is not listed", CF_LABEL, gen);
		snprintf(want, sizeof(want), "0x%" PRIx64 "\n", b->ptr);
		tree_expect(want, "%s/blocks/%s/ptr", rt, gen);
		CF_EQ(tree_u64("%s/blocks/%s/bytes", rt, gen), b->bytes);
		CF_EQ(tree_u64("%s/blocks/%s/align", rt, gen), b->align);
		CF_EQ(tree_u64("%s/blocks/%s/stream", rt, gen), b->stream);
		snprintf(want, sizeof(want), "%s\n", b->tag);
		tree_expect(want, "%s/blocks/%s/tag", rt, gen);
		tree_expect("live\n", "%s/blocks/%s/state", rt, gen);
	}
	free(l);
}

/* The runtime's counter files say what xdm_runtime_stats says. */
static void tree_expect_counters(struct fx *f)
{
	const char *rt = xdm_runtime_name(f->rt);
	struct xdm_stats st = stats(f);

	CF_EQ(tree_u64("%s/allocs", rt), st.allocs);
	CF_EQ(tree_u64("%s/frees", rt), st.frees);
	CF_EQ(tree_u64("%s/failures", rt), st.failures);
	CF_EQ(tree_u64("%s/blocks_outstanding", rt), st.blocks_outstanding);
	CF_EQ(tree_u64("%s/bytes_outstanding", rt), st.bytes_outstanding);
	CF_EQ(tree_u64("%s/bytes_peak", rt), st.bytes_peak);
	CF_EQ(tree_u64("%s/waits_queued", rt), st.waits_queued);
	CF_EQ(tree_u64("%s/events_recorded", rt), st.events_recorded);
}

/* ---- alignment -------------------------------------------------------- */

static const size_t align_sizes[] = {
	1, 2, 3, 255, 256, 257, 1000, 4095, 4096, 4097, 65535, 65536, 65537,
	MIB - 1, MIB + 1, 3 * MIB + 5, 8 * MIB,
};
#define NALIGN (sizeof(align_sizes) / sizeof(align_sizes[0]))

START_TEST(alignment)
{
	struct fx f;
	struct xdm_block b[NALIGN];
	uint64_t bytes = 0;

	fx_open(&f, _i);
	for (size_t i = 0; i < NALIGN; i++) {
		xdm_stream_id s = (xdm_stream_id)(i % 4);

		CF_OK(xdm_allocate(f.rt, align_sizes[i], s, "align", &b[i]));
		expect_block(&f, &b[i], align_sizes[i], s, "align");
		bytes += b[i].bytes;
		for (size_t j = 0; j < i; j++) {
			CF_CHECK(b[i].generation != b[j].generation, "generation %" PRIu64
				 " twice", CF_LABEL, b[i].generation);
			CF_CHECK(b[i].ptr + b[i].bytes <= b[j].ptr ||
				 b[j].ptr + b[j].bytes <= b[i].ptr,
				 "live blocks overlap: [0x%" PRIx64 ", +%zu) and [0x%" PRIx64
				 ", +%zu)", CF_LABEL, b[i].ptr, b[i].bytes, b[j].ptr, b[j].bytes);
		}
	}
	if (f.host_memory) {
		/* Every usable byte is there: the first and the last.  (A guard
		 * fills its canaries on the stream; xdm-guard(7) asks a host
		 * writer to synchronize first.) */
		sync_all(f.rt);
		for (size_t i = 0; i < NALIGN; i++) {
			volatile unsigned char *p = (unsigned char *)(uintptr_t)b[i].ptr;

			p[0] = 0x5a;
			CF_EQ(p[0], 0x5a);
			p[b[i].bytes - 1] = 0xa5;
			CF_EQ(p[b[i].bytes - 1], 0xa5);
		}
	}
	expect_live(&f, NALIGN, 0, bytes);
	quiescent(&f);
	for (size_t i = 0; i < NALIGN; i++) {
		CF_OK(xdm_deallocate(f.rt, &b[i]));
		expect_consumed(&b[i]);
	}
	expect_live(&f, NALIGN, NALIGN, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- zero bytes ------------------------------------------------------- */

START_TEST(zero_bytes)
{
	struct fx f;
	struct xdm_block b, none;
	struct xdm_stats before, after;
	size_t held_before;
	void *p = (void *)&b;

	fx_open(&f, _i);
	held_before = xdm_bytes_outstanding(f.rt);
	before = stats(&f);
	/* xdm(3): "Zero bytes is an invalid argument." */
	CF_STATUS(xdm_allocate(f.rt, 0, 0, "zero", &b), XDM_E_INVALID);
	CF_EQ(xdm_last_error()->code, XDM_E_INVALID);
	CF_CHECK(strstr(xdm_last_error_message(), "zero bytes") != NULL, "message: %s", CF_LABEL,
		 xdm_last_error_message());
	f.core_failures++;
	after = stats(&f);
	CF_EQ(after.failures, before.failures + 1);
	CF_EQ(after.allocs, before.allocs);
	CF_EQ(after.bytes_outstanding, before.bytes_outstanding);
	CF_EQ(xdm_bytes_outstanding(f.rt), held_before);

	/* What a caller may do with the block it got no value for: freeing a
	 * zeroed block is refused, not a crash. */
	memset(&none, 0, sizeof(none));
	none.ordinal = xdm_runtime_ordinal(f.rt);
	CF_STATUS(xdm_deallocate(f.rt, &none), XDM_E_USE_AFTER_FREE);
	CF_EQ(stats(&f).frees, before.frees);

	/* xdm(3): frameworks' empty tensors: NULL and OK, and the free of NULL
	 * is a no-op.  Nothing is counted at all. */
	CF_OK(xdm_native_allocate(f.rt, 0, NULL, "zero", &p));
	CF_CHECK(p == NULL, "a zero-byte native allocation gave %p", CF_LABEL, p);
	CF_OK(xdm_native_free(f.rt, NULL, NULL));
	after = stats(&f);
	CF_EQ(after.failures, before.failures + 1);
	CF_EQ(after.allocs, before.allocs);
	CF_EQ(after.frees, before.frees);
	CF_EQ(after.blocks_outstanding, 0);

	/* The smallest real request next to it is an ordinary block. */
	CF_OK(xdm_allocate(f.rt, 1, 0, "one", &b));
	expect_block(&f, &b, 1, 0, "one");
	CF_OK(xdm_deallocate(f.rt, &b));
	expect_live(&f, 1, 1, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- huge requests ---------------------------------------------------- */

START_TEST(huge)
{
	struct fx f;
	struct xdm_block small, b;
	struct xdm_stats before, after;
	struct xdm_error err;
	uint64_t refusals = 0, limit = 0;
	size_t held_before;
	enum xdm_status st;
	bool budget;

	fx_open(&f, _i);
	budget = f.s->huge == XDM_E_OUT_OF_BUDGET;
	/* A block live beside it: the refusal must leave it as it was. */
	CF_OK(xdm_allocate(f.rt, 4096, 0, "small", &small));
	if (budget) {
		refusals = tu_attr_u64(f.rt, 0, "refusals");
		limit = tu_attr_u64(f.rt, 0, "limit");
	}
	held_before = xdm_bytes_outstanding(f.rt);
	before = stats(&f);
	memset(&b, 0, sizeof(b));
	st = xdm_allocate(f.rt, HUGE_REQUEST, 1, "huge", &b);
	err = *xdm_last_error();
	CF_CHECK(st == f.s->huge, "%zu bytes: %s (%s), expected %s", CF_LABEL, HUGE_REQUEST,
		 xdm_strerror(st), err.message, xdm_strerror(f.s->huge));
	CF_EQ(err.code, st);
	CF_CHECK(err.message[0] != '\0', "no sentence with the error", CF_LABEL);
	if (st == XDM_E_OUT_OF_BUDGET) {
		/* xdm-budget(7): requested is the request, remaining what the
		 * limit had left: here, all but the small block. */
		CF_EQ(err.requested, HUGE_REQUEST);
		CF_EQ(err.remaining, limit - small.bytes);
		CF_EQ(tu_attr_u64(f.rt, 0, "refusals"), refusals + 1);
	}
	if (st == XDM_E_DRIVER)
		CF_CHECK(err.driver_code != 0, "a driver error without its code", CF_LABEL);

	/* Nothing counted but the failure; the stack holds what it held. */
	after = stats(&f);
	CF_EQ(after.failures, before.failures + 1);
	CF_EQ(after.allocs, before.allocs);
	CF_EQ(after.frees, before.frees);
	CF_EQ(after.blocks_outstanding, before.blocks_outstanding);
	CF_EQ(after.bytes_outstanding, before.bytes_outstanding);
	CF_EQ(xdm_bytes_outstanding(f.rt), held_before);
	tree_expect_blocks(&f, &small, 1);
	quiescent(&f);

	/* Still usable: the live block and a new one free cleanly. */
	CF_OK(xdm_block_lookup(f.rt, xdm_block_id_of(&small), &b));
	CF_EQ(b.ptr, small.ptr);
	CF_OK(xdm_allocate(f.rt, 64 * 1024, 1, "after", &b));
	expect_block(&f, &b, 64 * 1024, 1, "after");
	CF_OK(xdm_deallocate(f.rt, &b));
	CF_OK(xdm_deallocate(f.rt, &small));
	expect_live(&f, 2, 2, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- double, stale, forged and foreign frees --------------------------- */

/* Nothing a refused call could have changed did change. */
static void expect_unchanged(struct fx *f, const struct xdm_stats *was)
{
	struct xdm_stats now = stats(f);

	CF_EQ(now.allocs, was->allocs);
	CF_EQ(now.frees, was->frees);
	CF_EQ(now.failures, was->failures);
	CF_EQ(now.blocks_outstanding, was->blocks_outstanding);
	CF_EQ(now.bytes_outstanding, was->bytes_outstanding);
}

/* A call given id answers USE_AFTER_FREE with id's generation. */
#define CF_UAF(expr, gen)                                                          \
	do {                                                                       \
		CF_STATUS((expr), XDM_E_USE_AFTER_FREE);                           \
		CF_EQ(xdm_last_error()->generation, (gen));                        \
	} while (0)

START_TEST(bad_frees)
{
	struct fx f;
	struct xdm_runtime *other;
	struct xdm_block live, gone, copy, theirs, out;
	struct xdm_block_id id;
	struct xdm_stats was, other_was;
	void *own_stream;

	fx_open(&f, _i);
	CF_OK(xdm_allocate(f.rt, 4096, 0, "live", &live));
	CF_OK(xdm_allocate(f.rt, 8192, 1, "gone", &gone));
	copy = gone;
	CF_OK(xdm_deallocate(f.rt, &gone));
	CF_OK(xdm_reap_pending(f.rt));
	was = stats(&f);

	/* Double free: the same handle, and a copy made before the free. */
	CF_UAF(xdm_deallocate(f.rt, &gone), copy.generation);
	CF_UAF(xdm_deallocate(f.rt, &copy), copy.generation);
	CF_EQ(copy.state, XDM_BLOCK_LIVE);	/* refused: keeps the state it had */
	/* The stale id, in every call that takes one. */
	id = xdm_block_id_of(&copy);
	CF_UAF(xdm_block_lookup(f.rt, id, &out), copy.generation);
	if (f.s->base->tracks) {
		CF_UAF(xdm_prepare_block_use(f.rt, id, 2, XDM_ACCESS_READ), copy.generation);
		CF_UAF(xdm_finish_block_use(f.rt, id, 2, XDM_ACCESS_READ), copy.generation);
		CF_UAF(xdm_record_block_use(f.rt, &copy, 2), copy.generation);
	} else {
		CF_STATUS(xdm_prepare_block_use(f.rt, id, 2, XDM_ACCESS_READ),
			  XDM_E_STREAM_MISUSE);
	}
	expect_unchanged(&f, &was);

	/* Forged ids: a live address with another generation, an address
	 * inside a live block, one never handed out, generation 0. */
	copy = live;
	copy.generation = live.generation + 1000;
	CF_UAF(xdm_deallocate(f.rt, &copy), live.generation + 1000);
	CF_CHECK(strstr(xdm_last_error_message(), "reissued") != NULL,
		 "the message does not name the live generation: %s", CF_LABEL,
		 xdm_last_error_message());
	copy = live;
	copy.ptr += 256;
	CF_UAF(xdm_deallocate(f.rt, &copy), live.generation);
	copy = live;
	copy.ptr = 0x1000;
	CF_UAF(xdm_deallocate(f.rt, &copy), live.generation);
	copy = live;
	copy.generation = 0;
	CF_UAF(xdm_deallocate(f.rt, &copy), 0);
	id = xdm_block_id_of(&live);
	id.generation += 1;
	CF_UAF(xdm_block_lookup(f.rt, id, &out), live.generation + 1);
	/* A pointer that is no live block's address, to the native free. */
	CF_OK(xdm_stream_handle(f.rt, 0, &own_stream));
	CF_STATUS(xdm_native_free(f.rt, (void *)(uintptr_t)(live.ptr + 256), own_stream),
		  XDM_E_INVALID);
	CF_STATUS(xdm_native_free(f.rt, (void *)(uintptr_t)gone.ptr, own_stream),
		  XDM_E_INVALID);
	expect_unchanged(&f, &was);

	/* Another device's block: INVALID from every call, and it stays. */
	copy = live;
	copy.ordinal = live.ordinal + 1;
	CF_STATUS(xdm_deallocate(f.rt, &copy), XDM_E_INVALID);
	CF_EQ(copy.state, XDM_BLOCK_LIVE);
	id = xdm_block_id_of(&copy);
	CF_STATUS(xdm_block_lookup(f.rt, id, &out), XDM_E_INVALID);
	CF_STATUS(xdm_prepare_block_use(f.rt, id, 2, XDM_ACCESS_WRITE), XDM_E_INVALID);
	expect_unchanged(&f, &was);

	/* Another runtime's block, of the same stack and device: it is no
	 * live block of this runtime, and stays live in its own. */
	CF_OK(xdm_runtime_create(f.s->base->ordinal, f.s->base->platform, f.s->spec, &other));
	CF_OK(xdm_allocate(other, 4096, 0, "theirs", &theirs));
	xdm_runtime_stats(other, &other_was);
	copy = theirs;
	CF_UAF(xdm_deallocate(f.rt, &copy), theirs.generation);
	CF_EQ(copy.state, XDM_BLOCK_LIVE);
	CF_UAF(xdm_block_lookup(f.rt, xdm_block_id_of(&theirs), &out), theirs.generation);
	CF_STATUS(xdm_native_free(f.rt, (void *)(uintptr_t)theirs.ptr, own_stream),
		  XDM_E_INVALID);
	CF_STATUS(xdm_native_lookup(f.rt, (void *)(uintptr_t)theirs.ptr, &out), XDM_E_INVALID);
	expect_unchanged(&f, &was);
	{
		struct xdm_stats o;

		xdm_runtime_stats(other, &o);
		CF_EQ(o.frees, other_was.frees);
		CF_EQ(o.blocks_outstanding, 1);
	}
	CF_OK(xdm_block_lookup(other, xdm_block_id_of(&theirs), &out));
	CF_OK(xdm_deallocate(other, &theirs));
	CF_OK(xdm_runtime_destroy(other));

	/* The live block was never touched by any of it. */
	CF_OK(xdm_block_lookup(f.rt, xdm_block_id_of(&live), &out));
	CF_EQ(out.bytes, live.bytes);
	CF_EQ(out.state, XDM_BLOCK_LIVE);
	quiescent(&f);
	CF_OK(xdm_deallocate(f.rt, &live));
	CF_UAF(xdm_deallocate(f.rt, &live), live.generation);
	expect_live(&f, 2, 2, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- cross-stream ordering -------------------------------------------- */

enum { A = 1, B = 2 };	/* the block's stream, and the stream that uses it */

struct freer {
	struct xdm_runtime *rt;
	struct xdm_block *block;
	struct tu_step *after;	/* queued on the block's stream after the free */
	enum xdm_status st, st_after;
	bool returned;		/* free_then_queue() came back */
};

static void free_then_queue(struct freer *fr)
{
	fr->st = xdm_deallocate(fr->rt, fr->block);
	fr->st_after = xdm_stream_launch_host(fr->rt, fr->block->stream, tu_step_run, fr->after);
	__atomic_store_n(&fr->returned, true, __ATOMIC_RELEASE);
}

static void *free_then_queue_thread(void *arg)
{
	free_then_queue(arg);
	return NULL;
}

/* Step id of log has not run (yet). */
static void expect_not_run(struct tu_log *log, int id)
{
	int pos = tu_log_pos(log, id);

	CF_CHECK(pos == -1, "step %d already ran (at %d)", CF_LABEL, id, pos);
}

/*
 * A write on B (held at a gate) between prepare and finish, then the free
 * on A: the free, and so everything queued on A after it, waits for B's
 * write.  No layer's deallocate waits for the stream (the guard reads its
 * blocks back later, on its own thread), so the free returns at once.
 */
static void ordering_tracked(struct fx *f)
{
	struct tu_log log;
	struct tu_gate gate;
	struct tu_step use = { .log = &log, .id = 1, .value = 0x33 };
	struct tu_step after = { .log = &log, .id = 2 };
	struct freer fr = { .rt = f->rt, .after = &after };
	struct xdm_block b;
	struct xdm_block_id id;
	struct xdm_stats st0, st;
	const char *rt = xdm_runtime_name(f->rt);

	tu_log_init(&log);
	tu_gate_init(&gate);
	CF_OK(xdm_allocate(f->rt, 4096, A, "ordered", &b));
	id = xdm_block_id_of(&b);
	if (f->host_memory)
		use.mem = (unsigned char *)(uintptr_t)b.ptr;
	st0 = stats(f);
	tu_gate_hold(f->rt, B, &gate);
	CF_OK(xdm_prepare_block_use(f->rt, id, B, XDM_ACCESS_WRITE));
	CF_OK(xdm_stream_launch_host(f->rt, B, tu_step_run, &use));
	CF_OK(xdm_finish_block_use(f->rt, id, B, XDM_ACCESS_WRITE));
	tree_expect("2\n", "%s/blocks/%" PRIu64 "/last_write", rt, b.generation);
	fr.block = &b;
	if (f->s->base->known & KNOWN_FREE_WAITS) {
		pthread_t th;

		/* The free itself waits for B's write (KNOWN_FREE_WAITS). */
		CF_CHECK(pthread_create(&th, NULL, free_then_queue_thread, &fr) == 0,
			 "pthread_create", CF_LABEL);
		tu_sleep_ms(WINDOW_MS);
		expect_not_run(&log, 1);
		CF_CHECK(!__atomic_load_n(&fr.returned, __ATOMIC_ACQUIRE),
			 "the free returned while the use it waits for was held", CF_LABEL);
		tu_gate_open(&gate);
		CF_CHECK(pthread_join(th, NULL) == 0, "pthread_join", CF_LABEL);
		printf("NOTE [%s]: the free waited for the device (KNOWN_FREE_WAITS)\n",
		       CF_LABEL);
	} else {
		free_then_queue(&fr);
		/* A's free stands behind B's write, which stands at the gate. */
		CF_EQ(tree_u64("%s/streams/%d/pending_frees", rt, A), 1);
		tu_sleep_ms(WINDOW_MS);
		expect_not_run(&log, 1);
		expect_not_run(&log, 2);
		CF_EQ(tree_u64("%s/streams/%d/pending_frees", rt, A), 1);
		tu_gate_open(&gate);
	}
	CF_OK(fr.st);
	CF_OK(fr.st_after);
	expect_consumed(&b);
	/* The use followed the owner's stream (1 wait, on B, after an event
	 * on A), the free followed the use (1 wait, on A, after B's event). */
	st = stats(f);
	CF_EQ(st.waits_queued - st0.waits_queued, 2);
	CF_EQ(st.events_recorded - st0.events_recorded, 2);
	sync_all(f->rt);
	/* B's write ran, and before anything queued on A after the free. */
	CF_CHECK(tu_log_pos(&log, 1) == 0 && tu_log_pos(&log, 2) == 1,
		 "order: B's write at %d, A's work after the free at %d", CF_LABEL,
		 tu_log_pos(&log, 1), tu_log_pos(&log, 2));
	CF_EQ(tree_u64("%s/streams/%d/pending_frees", rt, A), 0);
	CF_UAF(xdm_prepare_block_use(f->rt, id, B, XDM_ACCESS_READ), id.generation);
	tu_gate_destroy(&gate);
}

/* xdm(3): a stack that does not track uses answers STREAM_MISUSE, never a
 * silent success, and records nothing. */
static void ordering_untracked(struct fx *f)
{
	struct xdm_block b;
	struct xdm_block_id id;
	struct xdm_stats st0, st;

	CF_OK(xdm_allocate(f->rt, 4096, A, "untracked", &b));
	id = xdm_block_id_of(&b);
	st0 = stats(f);
	CF_STATUS(xdm_prepare_block_use(f->rt, id, B, XDM_ACCESS_WRITE), XDM_E_STREAM_MISUSE);
	CF_STATUS(xdm_finish_block_use(f->rt, id, B, XDM_ACCESS_WRITE), XDM_E_STREAM_MISUSE);
	CF_STATUS(xdm_record_block_use(f->rt, &b, B), XDM_E_STREAM_MISUSE);
	st = stats(f);
	CF_EQ(st.waits_queued, st0.waits_queued);
	CF_EQ(st.events_recorded, st0.events_recorded);
	tree_expect("none\n", "%s/blocks/%" PRIu64 "/last_write", xdm_runtime_name(f->rt),
		    b.generation);
	CF_OK(xdm_deallocate(f->rt, &b));
	expect_consumed(&b);
}

START_TEST(ordering)
{
	struct fx f;

	fx_open(&f, _i);
	if (f.s->base->tracks)
		ordering_tracked(&f);
	else
		ordering_untracked(&f);
	CF_OK(xdm_reap_pending(f.rt));
	expect_live(&f, 1, 1, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- exact counters ------------------------------------------------------ */

static const size_t count_sizes[] = {
	1000, 3000, 256, 70000, MIB, 5, 4096, 3 * MIB, 100, 65536,
};
#define NCOUNT (sizeof(count_sizes) / sizeof(count_sizes[0]))

START_TEST(counters)
{
	struct fx f;
	struct xdm_block b[NCOUNT + 3];
	uint64_t now = 0, peak = 0, allocs = 0, frees = 0;
	struct xdm_stats st;

	fx_open(&f, _i);
	st = stats(&f);
	CF_EQ(st.allocs + st.frees + st.failures + st.bytes_peak, 0);
	for (size_t i = 0; i < NCOUNT; i++) {
		CF_OK(xdm_allocate(f.rt, count_sizes[i], (xdm_stream_id)(i % 4), "count", &b[i]));
		allocs++;
		now += b[i].bytes;
		peak = now > peak ? now : peak;
	}
	expect_live(&f, allocs, frees, now);
	CF_EQ(stats(&f).bytes_peak, peak);
	quiescent(&f);
	/* Free the odd ones: streams 1 and 3 are left with none. */
	for (size_t i = 1; i < NCOUNT; i += 2) {
		CF_OK(xdm_deallocate(f.rt, &b[i]));
		frees++;
		now -= b[i].bytes;
	}
	expect_live(&f, allocs, frees, now);
	CF_EQ(stats(&f).bytes_peak, peak);
	quiescent(&f);
	/* Three more, the last a new peak; a refused request in between. */
	CF_OK(xdm_allocate(f.rt, 2000, 1, "count", &b[NCOUNT]));
	CF_STATUS(xdm_allocate(f.rt, 0, 1, "count", &b[NCOUNT + 1]), XDM_E_INVALID);
	f.core_failures++;
	CF_OK(xdm_allocate(f.rt, 128, 3, "count", &b[NCOUNT + 1]));
	CF_OK(xdm_allocate(f.rt, 32 * MIB, 2, "count", &b[NCOUNT + 2]));
	for (size_t i = NCOUNT; i < NCOUNT + 3; i++) {
		allocs++;
		now += b[i].bytes;
		peak = now > peak ? now : peak;
	}
	CF_EQ(peak, now);
	expect_live(&f, allocs, frees, now);
	st = stats(&f);
	CF_EQ(st.bytes_peak, peak);
	CF_EQ(st.failures, 1);
	/* No use on another stream was recorded: no event, and no wait but
	 * one for each idle chunk a pool moved to another stream. */
	CF_EQ(st.events_recorded, 0);
	if (layer_of(f.rt, "pool") >= 0)
		/* (steals also counts a move between one stream's two arenas,
		 * small and large, over a virtual-memory upstream: no wait.) */
		CF_LE(st.waits_queued, tu_attr_u64(f.rt, (uint32_t)layer_of(f.rt, "pool"),
						   "steals"));
	else
		CF_EQ(st.waits_queued, 0);
	quiescent(&f);
	/* Everything, in reverse. */
	for (size_t i = NCOUNT + 3; i-- > 0;) {
		if (i < NCOUNT && i % 2)
			continue;
		CF_OK(xdm_deallocate(f.rt, &b[i]));
		frees++;
		now -= b[i].bytes;
	}
	CF_EQ(now, 0);
	CF_EQ(allocs, frees);
	expect_live(&f, allocs, frees, 0);
	CF_EQ(stats(&f).bytes_peak, peak);
	CF_OK(xdm_reap_pending(f.rt));
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- the introspection tree --------------------------------------------- */

START_TEST(tree)
{
	static const char *const tags[] = { "weights", "activations", "kv-cache", "scratch",
					    "grads", "optimizer" };
	struct fx f;
	struct xdm_block b[6], live[4];
	struct names *l = malloc(sizeof(*l));
	char spec[256], want[320];
	const char *rt;
	uint32_t nlayers;

	ck_assert_ptr_nonnull(l);
	fx_open(&f, _i);
	rt = xdm_runtime_name(f.rt);
	CF_CHECK(rt[0] != '\0', "the runtime has no directory", CF_LABEL);
	/* The runtime's own files. */
	CF_EQ(tree_u64("%s/ordinal", rt), xdm_runtime_ordinal(f.rt));
	tree_expect("0\n", "%s/singleton", rt);
	CF_OK(xdm_runtime_stack_spec(f.rt, spec, sizeof(spec)));
	snprintf(want, sizeof(want), "%s\n", spec);
	tree_expect(want, "%s/stack", rt);
	tree_expect_blocks(&f, NULL, 0);
	tree_expect_counters(&f);

	for (int i = 0; i < 6; i++)
		CF_OK(xdm_allocate(f.rt, 1000 * (size_t)(i + 1) * (size_t)(i + 1),
				   (xdm_stream_id)(i % 3), tags[i], &b[i]));
	CF_OK(xdm_deallocate(f.rt, &b[1]));
	CF_OK(xdm_deallocate(f.rt, &b[4]));
	live[0] = b[0];
	live[1] = b[2];
	live[2] = b[3];
	live[3] = b[5];
	/* The live blocks and nothing else; the freed ones are gone. */
	tree_expect_blocks(&f, live, 4);
	tree_list(l, "%s", "");
	CF_CHECK(find_name(l, rt) >= 0 && l->node[find_name(l, rt)].dir,
		 "the root does not list %s", CF_LABEL, rt);
	for (int i = 1; i < 6; i += 3) {
		char path[PATH_LEN];
		struct xdm_tree_node node;

		snprintf(path, sizeof(path), "%s/blocks/%" PRIu64, rt, b[i].generation);
		CF_EQ(xdm_tree_stat(path, &node), -ENOENT);
	}
	tree_expect_counters(&f);
	quiescent(&f);

	/* One directory per layer, top first, named as the API names them;
	 * every readable file of each shows. */
	nlayers = xdm_runtime_layer_count(f.rt);
	tree_list(l, "%s/layers", rt);
	CF_EQ(l->n, nlayers);
	for (uint32_t i = 0; i < nlayers; i++) {
		struct names *files = malloc(sizeof(*files));
		char dir[128];

		ck_assert_ptr_nonnull(files);
		snprintf(dir, sizeof(dir), "%u-%s", i, xdm_runtime_layer_name(f.rt, i));
		CF_CHECK(find_name(l, dir) >= 0, "no layers/%s", CF_LABEL, dir);
		tree_list(files, "%s/layers/%s", rt, dir);
		for (int j = 0; j < files->n; j++) {
			char path[PATH_LEN], *text = NULL;
			size_t len;
			int err;

			if (files->node[j].dir || !(files->node[j].mode & 0444))
				continue;
			snprintf(path, sizeof(path), "%s/layers/%s/%s", rt, dir, files->name[j]);
			err = xdm_tree_show(path, &text, &len);
			CF_CHECK(err == 0 || err == -EOPNOTSUPP, "show %s: %s", CF_LABEL, path,
				 strerror(-err));
			free(text);
		}
		free(files);
	}
	/* A group directory is its layer's files again (xdm-fs(7)). */
	if (layer_of(f.rt, "pool") >= 0)
		CF_EQ(tree_u64("%s/pool/in_use", rt),
		      tu_attr_u64(f.rt, (uint32_t)layer_of(f.rt, "pool"), "in_use"));
	if (layer_of(f.rt, "budget") >= 0)
		CF_EQ(tree_u64("%s/budget/used", rt),
		      tu_attr_u64(f.rt, (uint32_t)layer_of(f.rt, "budget"), "used"));
	/* One directory per stream of the pool. */
	tree_list(l, "%s/streams", rt);
	CF_EQ(l->n, xdm_stream_count(f.rt));

	for (int i = 0; i < 4; i++)
		CF_OK(xdm_deallocate(f.rt, &live[i]));
	tree_expect_blocks(&f, NULL, 0);
	tree_expect_counters(&f);
	CF_EQ(tree_u64("%s/blocks_outstanding", rt), 0);
	CF_EQ(tree_u64("%s/allocs", rt), 6);
	CF_EQ(tree_u64("%s/frees", rt), 6);
	quiescent(&f);
	fx_close(&f);
	free(l);
}
END_TEST

/* ---- reap and trim ------------------------------------------------------ */

static const size_t reap_sizes[] = { 1000, 100000, 3 * MIB, 256, 70000, 512 * 1024 };
#define NREAP (sizeof(reap_sizes) / sizeof(reap_sizes[0]))

struct reaper {
	struct xdm_runtime *rt;
	struct xdm_block *blocks;
	enum xdm_status st_free, st_reap;
	size_t after_reap;	/* xdm_bytes_outstanding() once the reap returned */
};

static void *free_then_reap(void *arg)
{
	struct reaper *r = arg;

	r->st_free = XDM_OK;
	for (size_t i = 0; i < NREAP; i++) {
		enum xdm_status st = xdm_deallocate(r->rt, &r->blocks[i]);

		if (st && !r->st_free)
			r->st_free = st;
	}
	r->st_reap = xdm_reap_pending(r->rt);
	r->after_reap = xdm_bytes_outstanding(r->rt);
	return NULL;
}

START_TEST(reap_trim)
{
	struct fx f;
	struct xdm_block b[NREAP];
	struct tu_gate gate;
	struct reaper r = { .blocks = b };
	const char *pending = NULL;
	uint64_t keep;
	int pool;
	pthread_t th;

	fx_open(&f, _i);
	r.rt = f.rt;
	pending = f.s->base->pending;
	for (size_t i = 0; i < NREAP; i++)
		CF_OK(xdm_allocate(f.rt, reap_sizes[i], A, "reap", &b[i]));
	/*
	 * Stream A stands at a gate, so the frees queued there cannot run
	 * until it opens: the reap (on a thread of its own) must wait for
	 * them.  The pause gives a reap that does not wait the time to
	 * return first; with one that does, the outcome is the same however
	 * long the pause.
	 */
	tu_gate_init(&gate);
	tu_gate_hold(f.rt, A, &gate);
	CF_CHECK(pthread_create(&th, NULL, free_then_reap, &r) == 0, "pthread_create", CF_LABEL);
	tu_sleep_ms(WINDOW_MS);
	tu_gate_open(&gate);
	CF_CHECK(pthread_join(th, NULL) == 0, "pthread_join", CF_LABEL);
	/* The gate's function may still be leaving it (if nothing waited). */
	CF_OK(xdm_stream_synchronize(f.rt, A));
	tu_gate_destroy(&gate);
	CF_OK(r.st_free);
	CF_OK(r.st_reap);
	for (size_t i = 0; i < NREAP; i++)
		expect_consumed(&b[i]);
	expect_live(&f, NREAP, NREAP, 0);

	/* What is left is what the adaptor keeps on purpose (a quarantine). */
	keep = held(&f);
	if (f.s->base->known & KNOWN_REAP_NO_WAIT) {
		/* The reap did not wait (see KNOWN_REAP_NO_WAIT): the frees run
		 * when the stream reaches them, and a reap then finishes them. */
		if (r.after_reap != keep)
			printf("NOTE [%s]: after the reap the stack still held %zu bytes, %"
			       PRIu64 " expected (KNOWN_REAP_NO_WAIT)\n", CF_LABEL,
			       r.after_reap, keep);
		sync_all(f.rt);
		CF_OK(xdm_reap_pending(f.rt));
		CF_EQ(xdm_bytes_outstanding(f.rt), keep);
	} else {
		CF_EQ(r.after_reap, keep);
	}
	if (pending)
		CF_EQ(tu_attr_u64(f.rt, backend_layer(f.rt), pending), 0);
	quiescent(&f);

	pool = layer_of(f.rt, "pool");
	if (pool >= 0) {
		uint32_t p = (uint32_t)pool;
		bool vm = tu_attr_u64(f.rt, p, "granule") != 0;
		uint64_t in_use = tu_attr_u64(f.rt, p, "in_use");

		/*
		 * xdm-pool(7): a reap trims (every idle chunk back) over plain
		 * memory; over a virtual-memory upstream it does not, and a
		 * write to trim gives back every whole free granule.  Either
		 * way no idle chunk is left, and with nothing live (no
		 * quarantine above) nothing stays reserved.
		 */
		CF_EQ(in_use, keep);
		if (vm)
			CF_OK(xdm_layer_attr_store(f.rt, p, "trim", "1"));
		CF_EQ(tu_attr_u64(f.rt, p, "idle_chunks"), 0);
		if (keep == 0) {
			CF_EQ(tu_attr_u64(f.rt, p, "reserved"), 0);
			CF_EQ(tu_attr_u64(f.rt, p, "chunks"), 0);
			CF_CHECK(tu_attr_u64(f.rt, p, vm ? "given_back" : "trimmed") > 0,
				 "the pool gave nothing back", CF_LABEL);
		}
		/* What the pool gave back is released upstream in stream order. */
		sync_all(f.rt);
		CF_OK(xdm_reap_pending(f.rt));
		CF_EQ(xdm_bytes_outstanding(f.rt), keep);
		if (pending)
			CF_EQ(tu_attr_u64(f.rt, backend_layer(f.rt), pending), 0);
	}

	/* Still usable afterwards. */
	CF_OK(xdm_allocate(f.rt, 3 * MIB, A, "again", &b[0]));
	CF_OK(xdm_deallocate(f.rt, &b[0]));
	expect_live(&f, NREAP + 1, NREAP + 1, 0);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- 16 threads ---------------------------------------------------------- */

#define RING 4

struct worker {
	struct xdm_runtime *rt;
	pthread_barrier_t *start;
	int t;
	xdm_stream_id stream;
	uint64_t allocs, frees;
	uint64_t high;		/* the most bytes this thread held at once */
	int errors;
	char first[256];	/* the first thing that went wrong */
};

static size_t worker_size(int t, int i)
{
	if (i % 32 == 31)
		return 256 * 1024 + 1;	/* a large block now and then */
	return 256u * (1u + (unsigned int)(t * 131 + i * 17) % 128u);	/* to 32 KiB */
}

static void worker_error(struct worker *w, const char *what, enum xdm_status st)
{
	if (!w->errors++)
		snprintf(w->first, sizeof(w->first), "thread %d: %s: %s (%s)", w->t, what,
			 xdm_strerror(st), xdm_last_error_message());
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct xdm_block ring[RING];
	bool used[RING] = { false };
	uint64_t now = 0;
	enum xdm_status st;

	pthread_barrier_wait(w->start);
	for (int i = 0; i < ITERATIONS; i++) {
		int k = i % RING;
		size_t size = worker_size(w->t, i);

		if (used[k]) {
			now -= ring[k].bytes;
			st = xdm_deallocate(w->rt, &ring[k]);
			used[k] = false;
			if (st)
				worker_error(w, "deallocate", st);
			else
				w->frees++;
		}
		st = xdm_allocate(w->rt, size, w->stream, "thread", &ring[k]);
		if (st) {
			worker_error(w, "allocate", st);
			continue;
		}
		if (ring[k].ptr % ring[k].align || ring[k].bytes < size ||
		    ring[k].stream != w->stream)
			worker_error(w, "a block not as asked", XDM_OK);
		used[k] = true;
		w->allocs++;
		now += ring[k].bytes;
		w->high = now > w->high ? now : w->high;
	}
	for (int k = 0; k < RING; k++) {
		if (!used[k])
			continue;
		st = xdm_deallocate(w->rt, &ring[k]);
		if (st)
			worker_error(w, "deallocate", st);
		else
			w->frees++;
	}
	return NULL;
}

START_TEST(threads)
{
	struct fx f;
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t start;
	struct xdm_stats st;
	uint64_t high_max = 0, high_sum = 0;

	fx_open(&f, _i);
	ck_assert_int_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);
	for (int t = 0; t < NTHREADS; t++) {
		w[t] = (struct worker){ .rt = f.rt, .start = &start, .t = t,
					.stream = (xdm_stream_id)t };
		CF_CHECK(pthread_create(&th[t], NULL, work, &w[t]) == 0, "pthread_create %d",
			 CF_LABEL, t);
	}
	for (int t = 0; t < NTHREADS; t++)
		CF_CHECK(pthread_join(th[t], NULL) == 0, "pthread_join %d", CF_LABEL, t);
	pthread_barrier_destroy(&start);
	for (int t = 0; t < NTHREADS; t++) {
		CF_CHECK(w[t].errors == 0, "%d errors, the first: %s", CF_LABEL, w[t].errors,
			 w[t].first);
		CF_EQ(w[t].allocs, ITERATIONS);
		CF_EQ(w[t].frees, ITERATIONS);
		high_max = w[t].high > high_max ? w[t].high : high_max;
		high_sum += w[t].high;
	}
	/* Every thread joined: the runtime is quiescent and exact. */
	st = stats(&f);
	CF_EQ(st.allocs, NTHREADS * ITERATIONS);
	CF_EQ(st.frees, NTHREADS * ITERATIONS);
	CF_EQ(st.failures, 0);
	CF_EQ(st.blocks_outstanding, 0);
	CF_EQ(st.bytes_outstanding, 0);
	/*
	 * bytes_peak is a sample (xdm(3)), but within bounds that hold for
	 * any schedule: each thread sampled the sum when it passed its own
	 * high, its own bytes exact in it; and no sum can hold more than
	 * every thread's high at once.
	 */
	CF_LE(high_max, st.bytes_peak);
	CF_LE(st.bytes_peak, high_sum);
	CF_OK(xdm_reap_pending(f.rt));
	if (f.s->base->known & KNOWN_REAP_NO_WAIT)
		sync_all(f.rt);
	CF_OK(xdm_reap_pending(f.rt));
	CF_EQ(xdm_bytes_outstanding(f.rt), held(&f));
	tree_expect_blocks(&f, NULL, 0);
	tree_expect_counters(&f);
	quiescent(&f);
	fx_close(&f);
}
END_TEST

/* ---- the list of stacks, and main --------------------------------------- */

/* The adaptor's spec with @KEY@ replaced by this stack's budget key. */
static void expand(char *out, size_t len, const char *spec, int index)
{
	const char *at = strstr(spec, "@KEY@");

	if (!at) {
		snprintf(out, len, "%s", spec);
		return;
	}
	snprintf(out, len, "%.*s%s-%d%s", (int)(at - spec), spec, key_prefix, index, at + 5);
}

static void add_stack(const struct base *b, const struct adaptor *a)
{
	struct stack *s = &stacks[nstacks];
	char top[128], spec[sizeof(s->spec)];

	s->base = b;
	s->adaptor = a;
	s->huge = a && a->huge ? a->huge : b->huge;
	if (a) {
		expand(top, sizeof(top), a->spec, nstacks);
		snprintf(spec, sizeof(spec), "%s | %s", top, b->spec);
	} else {
		snprintf(spec, sizeof(spec), "%s", b->spec);
	}
	memcpy(s->spec, spec, sizeof(spec));
	if (b->ordinal)
		snprintf(s->label, sizeof(s->label), "%s, device %u: %s", b->platform, b->ordinal,
			 spec);
	else
		snprintf(s->label, sizeof(s->label), "%s: %s", b->platform, spec);
	nstacks++;
}

static void add_platform(bool cuda)
{
	for (size_t i = 0; i < NBASES; i++)
		if ((strncmp(bases[i].platform, "cuda", 4) == 0) == cuda)
			add_stack(&bases[i], NULL);
	for (size_t j = 0; j < NADAPTORS; j++)
		for (size_t i = 0; i < NBASES; i++)
			if ((strncmp(bases[i].platform, "cuda", 4) == 0) == cuda && bases[i].adapt)
				add_stack(&bases[i], &adaptors[j]);
}

/*
 * Whether the cuda stacks can run here, asked in a child process: the
 * parent forks every case, and must hold no CUDA state when it does.
 * 0: yes; 77: no GPU (or no driver); anything else: a broken setup.
 */
static int probe_gpu(void)
{
#ifdef XDM_CONFORMANCE_CUDA
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 99;
	if (pid == 0) {
		struct xdm_runtime *rt;
		enum xdm_status st = xdm_runtime_create(0, "cuda", "cuda_direct", &rt);

		if (st == XDM_E_NO_DEVICE) {
			printf("conformance: no GPU here (%s): the cuda stacks are not run\n",
			       xdm_last_error_message());
			fflush(stdout);
			_exit(77);
		}
		if (st) {
			printf("conformance: ERROR: the cuda platform fails: %s (%s)\n",
			       xdm_strerror(st), xdm_last_error_message());
			fflush(stdout);
			_exit(99);
		}
		_exit(xdm_runtime_destroy(rt) == XDM_OK ? 0 : 99);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 99;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
#else
	printf("conformance: built without the cuda module: the cuda stacks are not run\n");
	return 77;
#endif
}

static Suite *conformance_suite(void)
{
	/* (START_TEST makes each name a pointer variable: no static table.) */
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{ "alignment", alignment }, { "zero_bytes", zero_bytes }, { "huge", huge },
		{ "bad_frees", bad_frees }, { "ordering", ordering }, { "counters", counters },
		{ "tree", tree }, { "reap_trim", reap_trim }, { "threads", threads },
	};
	Suite *s = suite_create("conformance");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_set_timeout(tc, TU_TIMEOUT_S);
		tcase_add_loop_test(tc, cases[i].test, 0, nstacks);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	char name[BUDGET_NAME_MAX + 32];
	int rc, gpu;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* An empty XDM_MOUNT turns the configured mount off: no FUSE here. */
	setenv("XDM_MOUNT", "", 1);
	snprintf(key_prefix, sizeof(key_prefix), "conf%d", (int)getpid());
	add_platform(false);
#ifdef XDM_CONFORMANCE_CUDA
	/*
	 * Before the probe: its context comes and goes, which another GPU
	 * suite measuring the device's free memory must not see.
	 */
	ct_take_gpu_lock();
#endif
	gpu = probe_gpu();
	if (gpu == 0 || (gpu != 77)) {
		/* A GPU, or one whose platform fails: the cuda cases run (and
		 * say why they fail). */
		add_platform(true);
	}
	for (int i = 0; i < nstacks; i++)
		printf("conformance: stack %d: %s\n", i, stacks[i].label);
	rc = tu_run_suite(conformance_suite());
	for (int i = 0; i < nstacks; i++) {
		snprintf(name, sizeof(name), "%s%s-%d", BUDGET_NAME_PREFIX, key_prefix, i);
		shm_unlink(name);
	}
	return rc;
}
