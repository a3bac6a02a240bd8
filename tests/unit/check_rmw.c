/* SPDX-License-Identifier: MIT */
/*
 * check_rmw.c - counts, instruction by instruction, the atomic
 * read-modify-writes one allocate+free pair makes on each stack, and holds
 * them to the numbers doc/hot-path.md gives.
 *
 * A child process warms a stack up (so the pair is the steady state, served
 * by the pool's thread cache), then runs one pair between two calls of a
 * marker function.  The parent single-steps it with ptrace and decodes each
 * instruction the child executes between the markers: a LOCK prefix, or an
 * XCHG with a memory operand (locked without one), is one atomic
 * read-modify-write; a SYSCALL is counted apart (a pair must make none).
 * Nothing is timed.  x86-64 only; the test skips (77) elsewhere, under
 * ThreadSanitizer (whose runtime adds atomics of its own) and where ptrace
 * is not allowed.
 *
 * Instructions run inside the vDSO (the logging adaptor's clock reads) are
 * counted apart: what a clock read costs depends on the machine's clock
 * source (kvm-clock runs ~160 instructions, and retries at random while
 * single-stepped), not on xdm.  The count outside it is deterministic for
 * one compiler, so the plain build (gcc or clang at -O2, no sanitizer)
 * also holds each stack to an instruction ceiling, doc/hot-path.md's
 * count with a little room for another compiler's choices.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testutil.h"

#if defined(__SANITIZE_THREAD__)
#define RMW_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RMW_UNDER_TSAN 1
#endif
#endif

/* What the parent found between the two marks. */
struct rmw_count {
	long insns, rmws, syscalls;
	long vdso;		/* instructions inside the vDSO, not in insns */
	long endbr;		/* ENDBR64 landing pads, not in insns */
};

#if defined(__SANITIZE_ADDRESS__)
#define RMW_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RMW_UNDER_ASAN 1
#endif
#endif

/* The child calls it before (1) and after (2) the pair; the parent watches for its address. */
__attribute__((noinline)) void rmw_mark(int phase);
__attribute__((noinline)) void rmw_mark(int phase)
{
	__asm__ volatile("" : : "r"(phase) : "memory");
}

/* ---- decoding ------------------------------------------------------------------ */

static bool is_legacy_prefix(uint8_t b)
{
	return b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 || b == 0x3e ||
	       b == 0x26 || b == 0x64 || b == 0x65 || b == 0x66 || b == 0x67;
}

/*
 * ENDBR64 (F3 0F 1E FA): the landing pad a compiler with control-flow
 * protection on (-fcf-protection, Ubuntu's gcc default, not Debian's) puts
 * at every function entry.  A no-op that depends on the distribution's
 * compiler defaults, not on xdm: counted apart, as the vDSO is.
 */
static bool is_endbr64(const uint8_t *code)
{
	return code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa;
}

/* Whether the instruction at code is an atomic read-modify-write, or a syscall. */
static void classify(const uint8_t *code, bool *rmw, bool *syscall)
{
	bool lock = false;
	size_t i = 0;

	while (i < 14 && is_legacy_prefix(code[i]))
		lock |= code[i++] == 0xf0;
	if (code[i] >= 0x40 && code[i] <= 0x4f)
		i++;			/* REX */
	*syscall = code[i] == 0x0f && code[i + 1] == 0x05;
	/* XCHG r/m, r with a memory operand is locked without the prefix. */
	*rmw = lock || ((code[i] == 0x86 || code[i] == 0x87) && (code[i + 1] >> 6) != 3);
}

/* ---- the child ---------------------------------------------------------------- */

static void child_run(const char *stack, size_t bytes)
{
	struct xdm_runtime *rt = NULL;
	struct xdm_block b;

	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(77);
	if (xdm_runtime_create(0, "host", stack, &rt)) {
		fprintf(stderr, "'%s': %s\n", stack, xdm_last_error_message());
		_exit(2);
	}
	for (int i = 0; i < 1000; i++)
		if (xdm_allocate(rt, bytes, 0, "warm", &b) || xdm_deallocate(rt, &b))
			_exit(3);
	raise(SIGSTOP);
	rmw_mark(1);
	if (xdm_allocate(rt, bytes, 0, "pair", &b) || xdm_deallocate(rt, &b))
		_exit(4);
	rmw_mark(2);
	_exit(0);
}

/* ---- the parent ----------------------------------------------------------------- */

static bool step(pid_t pid, struct user_regs_struct *regs)
{
	int status;

	if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL))
		return false;
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
		return false;
	return ptrace(PTRACE_GETREGS, pid, NULL, regs) == 0;
}

static bool peek(pid_t pid, uint64_t addr, uint8_t *code)
{
	for (int k = 0; k < 2; k++) {
		long w;

		errno = 0;
		w = ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)(addr + 8 * k), NULL);
		if (errno)
			return false;
		memcpy(code + 8 * k, &w, 8);
	}
	return true;
}

/* Where the child's vDSO is mapped ([vdso] in its maps); 0, 0 if none. */
static void vdso_range(pid_t pid, uint64_t *lo, uint64_t *hi)
{
	char path[64], line[512];
	FILE *f;

	*lo = *hi = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;

		if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &a, &b) == 2) {
			*lo = a;
			*hi = b;
			break;
		}
	}
	fclose(f);
}

/* Count what one pair of size bytes on stack executes; exits 77 if it cannot watch. */
static struct rmw_count count_pair(const char *stack, size_t bytes)
{
	uint64_t mark = (uint64_t)(uintptr_t)&rmw_mark, vdso_lo, vdso_hi;
	struct rmw_count c = { 0, 0, 0, 0, 0 };
	struct user_regs_struct regs;
	int status, marks = 0;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child_run(stack, bytes);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("ptrace is not allowed here: nothing to count\n");
		exit(77);
	}
	ck_assert_msg(WIFSTOPPED(status), "'%s': the child did not reach its stop (status %#x)",
		      stack, status);
	vdso_range(pid, &vdso_lo, &vdso_hi);
	while (marks < 2) {
		uint8_t code[16];
		bool rmw, sys;

		ck_assert_msg(step(pid, &regs), "'%s': single step failed", stack);
		if (regs.rip == mark) {
			marks++;
			continue;
		}
		if (!marks)
			continue;
		if (regs.rip >= vdso_lo && regs.rip < vdso_hi) {
			c.vdso++;
			continue;
		}
		ck_assert(peek(pid, regs.rip, code));
		if (is_endbr64(code)) {
			c.endbr++;
			continue;
		}
		classify(code, &rmw, &sys);
		c.insns++;
		c.rmws += rmw;
		c.syscalls += sys;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	printf("%-60s %7zu B: %5ld instructions (+%ld in the vDSO, +%ld ENDBR64), %ld atomic RMW, "
	       "%ld syscalls\n", stack, bytes, c.insns, c.vdso, c.endbr, c.rmws, c.syscalls);
	return c;
}

/*
 * The ceiling of a count doc/hot-path.md gives: 10% over it, room for
 * another compiler or version's register choices, none for a new lookup
 * or call on the path.
 */
#define RMW_CEILING(count) ((count) + (count) / 10)

/*
 * rmws atomic read-modify-writes exactly, and at most max_insns
 * instructions outside the vDSO where the build is the plain one (a
 * sanitizer's instrumentation multiplies them).
 */
static void expect_pair(const char *stack, size_t bytes, long rmws, long max_insns)
{
	struct rmw_count c = count_pair(stack, bytes);

	ck_assert_msg(c.insns > 50, "'%s': %ld instructions between the marks: the pair was "
		      "not watched", stack, c.insns);
	ck_assert_msg(c.rmws == rmws, "'%s', %zu bytes: %ld atomic read-modify-writes per pair, "
		      "doc/hot-path.md says %ld", stack, bytes, c.rmws, rmws);
	ck_assert_msg(c.syscalls == 0, "'%s': a pair made %ld system calls", stack, c.syscalls);
#ifndef RMW_UNDER_ASAN
	ck_assert_msg(c.insns <= max_insns, "'%s', %zu bytes: %ld instructions per pair, over the "
		      "ceiling of %ld (doc/hot-path.md)", stack, bytes, c.insns, max_insns);
#else
	(void)max_insns;
#endif
}

/* The decoder itself, on instructions whose answer is known. */
START_TEST(the_decoder_knows_a_locked_instruction)
{
	static const uint8_t lock_add[16] = { 0xf0, 0x48, 0x83, 0x07, 0x01 };
	static const uint8_t xchg_mem[16] = { 0x87, 0x07 };
	static const uint8_t xchg_reg[16] = { 0x48, 0x87, 0xc3 };
	static const uint8_t mov[16] = { 0x48, 0x89, 0x07 };
	static const uint8_t sys[16] = { 0x0f, 0x05 };
	static const uint8_t endbr[16] = { 0xf3, 0x0f, 0x1e, 0xfa };
	bool rmw, syscall;

	classify(lock_add, &rmw, &syscall);
	ck_assert(rmw && !syscall);
	classify(xchg_mem, &rmw, &syscall);
	ck_assert(rmw);
	classify(xchg_reg, &rmw, &syscall);
	ck_assert(!rmw);
	classify(mov, &rmw, &syscall);
	ck_assert(!rmw && !syscall);
	classify(sys, &rmw, &syscall);
	ck_assert(!rmw && syscall);
	ck_assert(is_endbr64(endbr));
	ck_assert(!is_endbr64(sys) && !is_endbr64(lock_add));
}
END_TEST

/* The control: a pair without the pool's cache takes the arena's lock twice more. */
START_TEST(the_arena_lock_is_seen)
{
	expect_pair("pool tcache=0 | host", 4096, 4, RMW_CEILING(648));
}
END_TEST

START_TEST(a_pool_pair_makes_two)
{
	expect_pair("pool | host", 256, 2, RMW_CEILING(480));
	expect_pair("pool | host", 4096, 2, RMW_CEILING(480));
	expect_pair("pool | host", 65536, 2, RMW_CEILING(480));
	expect_pair("pool | host", 1 << 20, 2, RMW_CEILING(590));
}
END_TEST

/*
 * The full stack of the benchmarks: budget credit is the thread's own, so
 * the budget adds none.  The segment is this test's own, removed after.
 */
/* A budget stack with a segment of its own (params after limit=1G), removed after. */
static void expect_budget_pair(const char *key, const char *params, size_t bytes, long max_insns)
{
	char stack[160], name[64];

	snprintf(name, sizeof(name), "%s-%d", key, (int)getpid());
	snprintf(stack, sizeof(stack), "budget key=%s limit=1G%s | pool | host", name, params);
	expect_pair(stack, bytes, 2, max_insns);
	snprintf(stack, sizeof(stack), "/xdm-budget-%s", name);
	shm_unlink(stack);
}

START_TEST(a_full_stack_pair_makes_two)
{
	expect_budget_pair("rmw", " credit=1M", 4096, RMW_CEILING(591));
	expect_budget_pair("rmw", " credit=1M", 1 << 20, RMW_CEILING(701));
}
END_TEST

/*
 * The budget with its default parameters: credit=auto is the thread's own
 * record too, so the warmed-up pair adds none.
 */
START_TEST(a_default_budget_pair_makes_two)
{
	expect_budget_pair("rmw-auto", "", 4096, RMW_CEILING(591));
}
END_TEST

/*
 * The logging adaptor: a row is a record in the thread's own ring,
 * published with a release store.  The ring is far from half full after
 * the warm-up (whose rows the writer may or may not have taken yet), so
 * the measured pair never wakes the writer.
 */
START_TEST(a_logged_pair_adds_none)
{
	char stack[128];

	snprintf(stack, sizeof(stack), "logging path=/tmp/check_rmw-%d.csv buffer=1M | pool | host",
		 (int)getpid());
	expect_pair(stack, 4096, 2, RMW_CEILING(775));
	snprintf(stack, sizeof(stack), "/tmp/check_rmw-%d.csv", (int)getpid());
	unlink(stack);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rmw");
	TCase *tc = tcase_create("pair");

	tcase_add_test(tc, the_decoder_knows_a_locked_instruction);
	tcase_add_test(tc, the_arena_lock_is_seen);
	tcase_add_test(tc, a_pool_pair_makes_two);
	tcase_add_test(tc, a_full_stack_pair_makes_two);
	tcase_add_test(tc, a_default_budget_pair_makes_two);
	tcase_add_test(tc, a_logged_pair_adds_none);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

#if !defined(__x86_64__) || defined(RMW_UNDER_TSAN)
	printf("check_rmw decodes x86-64 and needs no sanitizer runtime of its own: skipped\n");
	return 77;
#endif
	sr = srunner_create(suite());
	/* Each count forks a child of its own; the runner need not fork too. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
