/* SPDX-License-Identifier: MIT */
/*
 * top.c - xdmctl top: the xdm processes of the machine, live.
 *
 * Each frame reads the segments and the trees afresh (segments.c,
 * mounts.c) and is written to the terminal in one write, so a frame
 * never shows half of two.  Rates are the difference of two frames'
 * counters over the time between them.
 *
 * On a terminal it takes the alternate screen and reads keys one at a time
 * without echo; everything it changed is put back on every way out: q,
 * Ctrl-C (SIGINT), SIGTERM, SIGHUP, and an error.  The signals are taken
 * by a signalfd beside standard input, so no handler runs at an arbitrary
 * moment and no global state is needed.  Without a terminal, or with
 * --iterations, it prints plain frames one after another (a batch mode
 * for logs and scripts).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "args.h"
#include "segments.h"

#define TOP_TREE_TIMEOUT_MS 500

/*
 * What one row counted in the previous frame, for its rates: a process
 * and the budget it is shown under (a process on two devices' budgets has
 * a row, and counts, under each).
 */
struct sample {
	pid_t pid;
	uint64_t key;		/* a hash of the budget's key; 0 under "no budget" */
	uint64_t allocs;
};

struct top {
	double delay_s;
	long iterations;	/* frames to show; 0: until q */
	bool batch;		/* plain frames, no terminal control */
	int rows;		/* of the terminal; 0: unlimited */
	struct sample *prev, *next;
	size_t nprev, nnext, cap;
	double prev_time, now;
	/* the terminal as it was */
	bool raw;
	struct termios saved;
};

static void usage(FILE *f)
{
	fputs("Usage: xdmctl [--dir DIR] top [--delay SECONDS] [--iterations N]\n"
	      "\n"
	      "A live view of the xdm processes of this machine: per budget, each\n"
	      "process's bytes held; from its tree, its live bytes and blocks, its\n"
	      "allocations per second and its refused allocations.  q or Ctrl-C quits.\n"
	      "\n"
	      "  -d, --delay SECONDS     between frames (default 1, at least 0.1)\n"
	      "  -n, --iterations N      show N frames and exit (plain, no screen control)\n"
	      "      --dir DIR           the directory of the budgets' segments\n",
	      f);
}

static double now_s(void)
{
	return (double)budget_now_ns() / 1e9;
}

/* The runtimes of a tree that belong to a budget: those of its device, if
 * the key is a runtime's UUID, else every runtime of the process. */
static void tree_totals(const struct xdmctl_mount *m, const char *key, uint64_t *bytes,
			uint64_t *blocks, uint64_t *allocs, uint64_t *failures)
{
	bool by_uuid = false;

	*bytes = *blocks = *allocs = *failures = 0;
	for (size_t i = 0; key && i < m->nruntimes; i++)
		by_uuid |= strcmp(m->rt[i].uuid, key) == 0;
	for (size_t i = 0; i < m->nruntimes; i++) {
		const struct xdmctl_runtime_view *rt = &m->rt[i];

		if (by_uuid && strcmp(rt->uuid, key) != 0)
			continue;
		*bytes += rt->bytes;
		*blocks += rt->blocks;
		*allocs += rt->allocs;
		*failures += rt->failures;
	}
}

/* FNV-1a of a budget's key, never 0: 0 is "no budget". */
static uint64_t key_hash(const char *key)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	if (!key)
		return 0;
	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * UINT64_C(0x100000001b3);
	return h ? h : 1;
}

static void remember(struct top *t, pid_t pid, uint64_t key, uint64_t allocs)
{
	if (t->nnext == t->cap)
		return;		/* more rows than slots: no rate for the rest */
	t->next[t->nnext++] = (struct sample){ pid, key, allocs };
}

/* Allocations per second since the previous frame, or -1 if unknown. */
static double rate(const struct top *t, pid_t pid, uint64_t key, uint64_t allocs)
{
	for (size_t i = 0; i < t->nprev; i++) {
		if (t->prev[i].pid == pid && t->prev[i].key == key &&
		    allocs >= t->prev[i].allocs && t->now > t->prev_time)
			return (double)(allocs - t->prev[i].allocs) / (t->now - t->prev_time);
	}
	return -1;
}

static void row(FILE *f, struct top *t, pid_t pid, const char *comm, const char *state,
		const char *held, const struct xdmctl_mount *m, const char *key)
{
	uint64_t bytes, blocks, allocs, failures;
	char live[32], per_s[32];
	double r;

	if (!m) {
		fprintf(f, "%8d %-16.16s %-7s %10s %10s %8s %9s %8s  %s\n", (int)pid, comm, state,
			held, "-", "-", "-", "-", "(no tree)");
		return;
	}
	tree_totals(m, key, &bytes, &blocks, &allocs, &failures);
	remember(t, pid, key_hash(key), allocs);
	r = rate(t, pid, key_hash(key), allocs);
	if (r < 0)
		snprintf(per_s, sizeof(per_s), "-");
	else
		snprintf(per_s, sizeof(per_s), "%.0f", r);
	fprintf(f, "%8d %-16.16s %-7s %10s %10s %8" PRIu64 " %9s %8" PRIu64 "  %s\n", (int)pid,
		comm, state, held, xdmctl_human(bytes, live, sizeof(live)), blocks, per_s, failures,
		m->path);
}

static const char *header = "     PID COMMAND          STATE         HELD       LIVE   BLOCKS   ALLOC/S  REFUSED  TREE\n";

/* One frame into f; 0, or an exit code with the reason said. */
static int frame(struct xdmctl_ctx *ctx, struct top *t, FILE *f)
{
	struct xdmctl_segment *segs = NULL;
	struct xdmctl_mount *mounts = NULL;
	size_t nsegs = 0, nmounts = 0, others = 0;
	time_t wall = time(NULL);
	char clock[16], held[32];
	struct tm tm;
	int rc;

	rc = xdmctl_segments_read(ctx, "top", &segs, &nsegs);
	if (rc)
		return rc;
	xdmctl_segments_find_pids(segs, nsegs);
	if (xdmctl_mounts_read(ctx, true, TOP_TREE_TIMEOUT_MS, &mounts, &nmounts) != 0)
		nmounts = 0;
	xdmctl_segments_link_mounts(segs, nsegs, mounts, nmounts);
	t->now = now_s();
	t->nnext = 0;
	localtime_r(&wall, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	fprintf(f, "xdmctl top - %s - every %.1f s - %zu budget%s, %zu tree%s%s\n", clock,
		t->delay_s, nsegs, nsegs == 1 ? "" : "s", nmounts, nmounts == 1 ? "" : "s",
		t->batch ? "" : " - q quits");
	for (size_t i = 0; i < nsegs; i++) {
		const struct xdmctl_segment *seg = &segs[i];

		fputc('\n', f);
		xdmctl_segment_text(f, seg);
		if (seg->unreadable[0])
			continue;
		fputs(header, f);
		for (size_t k = 0; k < seg->nprocs; k++) {
			const struct xdmctl_proc *p = &seg->procs[k];

			row(f, t, p->pid, p->comm, xdmctl_proc_state_name(p->state),
			    xdmctl_human(p->used, held, sizeof(held)), p->mount, seg->key);
		}
	}
	for (size_t i = 0; i < nmounts; i++) {
		if (mounts[i].err || xdmctl_tree_has_budget(&mounts[i], segs, nsegs))
			continue;
		if (others++ == 0) {
			fputs("\nno budget:\n", f);
			fputs(header, f);
		}
		row(f, t, mounts[i].pid, "", "live", "-", &mounts[i], NULL);
	}
	if (nsegs == 0 && others == 0)
		fputs("\nno xdm process on this machine\n", f);
	/* This frame's counters are the next frame's base. */
	{
		struct sample *swap = t->prev;

		t->prev = t->next;
		t->next = swap;
		t->nprev = t->nnext;
		t->prev_time = t->now;
	}
	free(mounts);
	free(segs);
	return 0;
}

/* Writes a frame to the terminal, cut to its height, in one write. */
static int show(struct xdmctl_ctx *ctx, struct top *t)
{
	char *text = NULL;
	size_t len = 0, keep;
	FILE *f = open_memstream(&text, &len);
	int rc;

	if (!f)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "out of memory");
	if (!t->batch)
		fputs("\033[H\033[2J", f);	/* home, clear */
	rc = frame(ctx, t, f);
	if (t->batch)
		fputs("\n", f);
	fclose(f);
	if (rc) {
		free(text);
		return rc;
	}
	keep = len;
	if (t->rows > 0) {
		int lines = 0;

		for (keep = 0; keep < len && lines < t->rows - 1; keep++)
			lines += text[keep] == '\n';
	}
	fwrite(text, 1, keep, stdout);
	fflush(stdout);
	free(text);
	return 0;
}

static void terminal_size(struct top *t)
{
	struct winsize ws;

	t->rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row ? ws.ws_row : 0;
}

static int terminal_enter(struct top *t)
{
	struct termios raw;

	if (tcgetattr(STDIN_FILENO, &t->saved) != 0)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "cannot read the terminal's settings: %s",
				   strerror(errno));
	raw = t->saved;
	/* Keys one at a time, unechoed; Ctrl-C still sends SIGINT. */
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
		return xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "cannot set the terminal: %s",
				   strerror(errno));
	t->raw = true;
	fputs("\033[?1049h\033[?25l", stdout);	/* alternate screen, no cursor */
	fflush(stdout);
	return 0;
}

static void terminal_leave(struct top *t)
{
	if (!t->raw)
		return;
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	t->raw = false;
}

/* Waits out the delay; 1 to quit, 0 to draw again. */
static int wait_key(struct top *t, int sigfd)
{
	double until = now_s() + t->delay_s;

	for (;;) {
		struct pollfd pf[2] = { { .fd = sigfd, .events = POLLIN },
					{ .fd = STDIN_FILENO, .events = POLLIN } };
		double left = until - now_s();
		int n;

		if (left <= 0)
			return 0;
		n = poll(pf, t->batch ? 1 : 2, (int)ceil(left * 1000));
		if (n < 0 && errno != EINTR)
			return 1;
		if (n <= 0)
			continue;
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
				return 1;
			if (si.ssi_signo == SIGWINCH) {
				terminal_size(t);
				return 0;	/* redraw at the new size */
			}
			if (si.ssi_signo == SIGTSTP) {
				/* Ctrl-Z: the shell gets its terminal back while we are stopped. */
				terminal_leave(t);
				raise(SIGSTOP);
				return terminal_enter(t) ? 1 : 0;
			}
			return 1;	/* SIGINT, SIGTERM, SIGHUP, SIGQUIT */
		}
		if (pf[1].revents & (POLLHUP | POLLERR))
			return 1;
		if (pf[1].revents & POLLIN) {
			char key;

			if (read(STDIN_FILENO, &key, 1) != 1)
				return 1;
			if (key == 'q' || key == 'Q')
				return 1;
			if (key == ' ')
				return 0;	/* redraw now */
		}
	}
}

/* XDMCTL_OPT_NEXT to run, or the exit code to return now. */
static int parse_args(struct xdmctl_ctx *ctx, struct top *t, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long n;
	char *end;
	int c, rc;

	optind = 1;
	while ((c = xdmctl_next_option(ctx, argc, argv, "d:n:h", longopts, usage, &rc)) != -1) {
		if (c == 'n') {
			if (xdmctl_arg_uint("top", "--iterations", optarg, 1, LONG_MAX, &n))
				return XDMCTL_EXIT_USAGE;
			t->iterations = (long)n;
			continue;
		}
		errno = 0;
		t->delay_s = strtod(optarg, &end);
		if (errno || end == optarg || *end || !(t->delay_s >= 0.1 && t->delay_s <= 3600))
			return xdmctl_fail(XDMCTL_EXIT_USAGE, "top",
					   "--delay '%s' is not a number of seconds from 0.1 to 3600",
					   optarg);
	}
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (optind < argc)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "top", "takes no argument ('%s')", argv[optind]);
	return XDMCTL_OPT_NEXT;
}

int xdmctl_top(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	struct top t = { .delay_s = 1.0 };
	sigset_t set, old;
	int rc, sigfd = -1;

	rc = parse_args(ctx, &t, argc, argv);
	if (rc != XDMCTL_OPT_NEXT)
		return rc;
	if (ctx->json)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, "top", "has no --json: use ps --json in a loop");
	t.batch = t.iterations > 0 || !isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO);
	t.cap = 4 * BUDGET_SLOTS;
	t.prev = calloc(t.cap, sizeof(*t.prev));
	t.next = calloc(t.cap, sizeof(*t.next));
	if (!t.prev || !t.next) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "out of memory");
		goto out_free;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	if (!t.batch)
		sigaddset(&set, SIGTSTP);
	sigprocmask(SIG_BLOCK, &set, &old);
	sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sigfd < 0) {
		rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "top", "cannot take signals: %s", strerror(errno));
		goto out_mask;
	}
	if (!t.batch) {
		/*
		 * One look before the screen is taken: what stops the first
		 * frame is said where the user can read it, not on a screen
		 * that leaving wipes.
		 */
		struct xdmctl_segment *segs = NULL;
		size_t nsegs = 0;

		rc = xdmctl_segments_read(ctx, "top", &segs, &nsegs);
		free(segs);
		if (rc)
			goto out_sigfd;
		terminal_size(&t);
		rc = terminal_enter(&t);
		if (rc)
			goto out_sigfd;
	}
	for (long i = 0; t.iterations == 0 || i < t.iterations; i++) {
		rc = show(ctx, &t);
		if (rc)
			break;
		if (t.iterations && i + 1 == t.iterations)
			break;
		if (wait_key(&t, sigfd))
			break;
	}
	if (rc && t.raw) {
		terminal_leave(&t);
		xdmctl_fail(rc, "top", "stopped: a frame could not be read (xdmctl ps says why)");
	}
	terminal_leave(&t);
out_sigfd:
	close(sigfd);
out_mask:
	sigprocmask(SIG_SETMASK, &old, NULL);
out_free:
	free(t.prev);
	free(t.next);
	return rc;
}
