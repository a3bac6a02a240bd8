/* SPDX-License-Identifier: MIT */
/*
 * ipc_peers.h - what the IPC suites share (tests/process/check_ipc on the
 * host platform's memfd twin, tests/gpu/check_ipc_cuda on a GPU): peer
 * processes (tests/process/ipc_peer.c, one command a line, its comment
 * says which) started, asked and stopped, and the steps most cases make.
 */
#ifndef XDM_TESTS_IPC_PEERS_H
#define XDM_TESTS_IPC_PEERS_H

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>

#include "tests/lib/budget_util.h"

#define HEX_LEN (2 * XDM_IPC_HANDLE_SIZE)

struct peer {
	struct worker w;
	pid_t pid;
};

/*
 * program: the peer's path below the build tree; platform: its runtime's;
 * in_child (if not NULL) runs in the peer's process before the exec, with
 * arg (tests/process/check_ipc_users: become another user).
 */
static inline void ipc_peer_start_in(struct peer *p, const char *program, const char *ordinal,
				     const char *platform, const char *stack,
				     void (*in_child)(const void *), const void *arg)
{
	const char *top = getenv("XDM_TOP_BUILDDIR");
	const char *argv[] = { NULL, ordinal, platform, stack, NULL };
	char path[4096], line[256];
	int pid;

	snprintf(path, sizeof(path), "%s/%s", top ? top : ".", program);
	argv[0] = path;
	worker_spawn(&p->w, argv, NULL, in_child, arg);
	worker_line(&p->w, line, sizeof(line));
	ck_assert_msg(sscanf(line, "ready %d", &pid) == 1, "peer said: %s", line);
	p->pid = pid;
}

static inline void ipc_peer_start(struct peer *p, const char *program, const char *ordinal,
				  const char *platform, const char *stack)
{
	ipc_peer_start_in(p, program, ordinal, platform, stack, NULL, NULL);
}

/* Send a command; its answer, without the newline, in out. */
static inline void ask(struct peer *p, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline void ask(struct peer *p, char *out, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(p->w.to, fmt, ap);
	va_end(ap);
	fputc('\n', p->w.to);
	fflush(p->w.to);
	worker_line(&p->w, out, len);
	out[strcspn(out, "\n")] = '\0';
}

/* A command that must answer "ok", and what follows it. */
static inline const char *ask_ok(struct peer *p, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline const char *ask_ok(struct peer *p, char *out, size_t len, const char *fmt, ...)
{
	char cmd[HEX_LEN + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ask(p, out, len, "%s", cmd);
	ck_assert_msg(!strncmp(out, "ok", 2), "peer %d: '%s' answered '%s'", (int)p->pid, cmd,
		      out);
	return out[2] ? out + 3 : out + 2;
}

struct block {
	unsigned int i;
	uint64_t ptr;
	unsigned long long generation;
	size_t bytes;		/* as the stack made it: rounded up, perhaps */
};

static inline struct block peer_alloc(struct peer *p, size_t bytes)
{
	char out[256];
	struct block b;

	ck_assert_int_eq(sscanf(ask_ok(p, out, sizeof(out), "alloc %zu", bytes), "%u %" SCNx64
				" %llu %zu", &b.i, &b.ptr, &b.generation, &b.bytes), 4);
	ck_assert_uint_ge(b.bytes, bytes);
	return b;
}

static inline void peer_export(struct peer *p, unsigned int i, char *hex)
{
	char out[HEX_LEN + 64];

	snprintf(hex, HEX_LEN + 1, "%s", ask_ok(p, out, sizeof(out), "export %u", i));
	ck_assert_uint_eq(strlen(hex), HEX_LEN);
}

static inline unsigned int peer_open(struct peer *p, const char *hex, size_t want_bytes)
{
	char out[256];
	unsigned int j;
	size_t bytes;

	ck_assert_int_eq(sscanf(ask_ok(p, out, sizeof(out), "open %s", hex), "%u %zu", &j,
				&bytes), 2);
	ck_assert_uint_eq(bytes, want_bytes);
	return j;
}

static inline uint64_t peer_outstanding(struct peer *p)
{
	char out[256];

	return strtoull(ask_ok(p, out, sizeof(out), "outstanding"), NULL, 10);
}

/*
 * The exporter's backend holds exactly want bytes, waited for: a hold
 * goes back when the exporter's server has read the close or seen the
 * importer's socket end, on its own thread.
 */
static inline void wait_outstanding(struct peer *p, uint64_t want)
{
	uint64_t now = peer_outstanding(p);

	for (int ms = 0; now != want && ms < TU_PATIENCE_MS; ms += 10) {
		tu_sleep_ms(10);
		now = peer_outstanding(p);
	}
	ck_assert_uint_eq(now, want);
}

static inline void peer_stop(struct peer *p)
{
	int status = worker_wait(&p->w);

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "peer %d ended with status 0x%x", (int)p->pid, status);
}

static inline void peer_kill(struct peer *p)
{
	int status;

	ck_assert_int_eq(kill(p->pid, SIGKILL), 0);
	status = worker_wait(&p->w);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* ---- the cases both suites run, on peers started on their stack ---------- */

/* One block of the exporter, exported, and opened by the importer. */
struct ipc_share {
	struct block b;
	unsigned int j;			/* the import */
	char hex[HEX_LEN + 1];		/* the handle */
};

/* A block of bytes, filled with fill (unless fill < 0), exported, opened. */
static inline void ipc_share_block(struct peer *e, struct peer *im, size_t bytes, int fill,
				   struct ipc_share *s)
{
	char out[512];

	s->b = peer_alloc(e, bytes);
	if (fill >= 0)
		ask_ok(e, out, sizeof(out), "fill %u %d", s->b.i, fill);
	peer_export(e, s->b.i, s->hex);
	s->j = peer_open(im, s->hex, s->b.bytes);
}

/*
 * The bytes both ways; the same block gives the same handle (a consumer
 * may cache on it); opened twice, two mappings of one memory, either
 * closed first; every hold given back.
 */
static inline void ipc_case_roundtrip(struct peer *e, struct peer *im, size_t bytes)
{
	char again[HEX_LEN + 1], out[512];
	struct ipc_share s;
	unsigned int j2;

	ipc_share_block(e, im, bytes, 0x11, &s);
	peer_export(e, s.b.i, again);
	ck_assert_str_eq(s.hex, again);
	ask_ok(im, out, sizeof(out), "icheck %u 0x11", s.j);
	ask_ok(im, out, sizeof(out), "ifill %u 0x22", s.j);
	ask_ok(e, out, sizeof(out), "check %u 0x22", s.b.i);
	j2 = peer_open(im, s.hex, s.b.bytes);
	ck_assert_uint_ne(j2, s.j);
	ask_ok(im, out, sizeof(out), "icheck %u 0x22", j2);
	ask_ok(im, out, sizeof(out), "close %u", s.j);
	ask_ok(im, out, sizeof(out), "icheck %u 0x22", j2);
	ask_ok(im, out, sizeof(out), "ifill %u 0x33", j2);
	ask_ok(im, out, sizeof(out), "close %u", j2);
	ask_ok(e, out, sizeof(out), "check %u 0x33", s.b.i);
	ck_assert_str_eq(ask_ok(im, out, sizeof(out), "tree imports"), "none|");
	ask_ok(e, out, sizeof(out), "free %u", s.b.i);
	wait_outstanding(e, 0);
	peer_stop(im);
	peer_stop(e);
}

/*
 * The owner's free of a held block returns at once and the memory stays;
 * a handle of a block its owner freed opens no more; the last close hands
 * the block to the stack.
 */
static inline void ipc_case_free_waits(struct peer *e, struct peer *im, size_t bytes)
{
	char out[512];
	struct ipc_share s;

	ipc_share_block(e, im, bytes, 0x44, &s);
	ck_assert_uint_ge(peer_outstanding(e), s.b.bytes);
	ask_ok(e, out, sizeof(out), "free %u", s.b.i);
	ck_assert_uint_ge(peer_outstanding(e), s.b.bytes);
	ask_ok(im, out, sizeof(out), "icheck %u 0x44", s.j);
	ask_ok(im, out, sizeof(out), "ifill %u 0x45", s.j);
	ask_ok(im, out, sizeof(out), "icheck %u 0x45", s.j);
	ask(im, out, sizeof(out), "open %s", s.hex);
	ck_assert_msg(!strncmp(out, "err ", 4) && strstr(out, "freed since"), "%s", out);
	ask_ok(im, out, sizeof(out), "close %u", s.j);
	wait_outstanding(e, 0);
	peer_stop(im);
	peer_stop(e);
}

/*
 * A pool does not hand out a block an importer holds: unshared, a freed
 * block's address comes straight back; held, a new block of its size lands
 * elsewhere, and writing it leaves the importer's bytes as they were.
 */
static inline void ipc_case_pool_keeps_held(struct peer *e, struct peer *im)
{
	char hex[HEX_LEN + 1], out[512];
	struct block a, b, c;
	unsigned int j;

	a = peer_alloc(e, 65536);
	ask_ok(e, out, sizeof(out), "free %u", a.i);
	b = peer_alloc(e, 65536);
	ck_assert_uint_eq(b.ptr, a.ptr);
	ask_ok(e, out, sizeof(out), "fill %u 0x66", b.i);
	peer_export(e, b.i, hex);
	j = peer_open(im, hex, b.bytes);
	ask_ok(e, out, sizeof(out), "free %u", b.i);
	c = peer_alloc(e, 65536);
	ck_assert_uint_ne(c.ptr, b.ptr);
	ask_ok(e, out, sizeof(out), "fill %u 0x77", c.i);
	ask_ok(im, out, sizeof(out), "icheck %u 0x66", j);
	ask_ok(im, out, sizeof(out), "close %u", j);
	ask_ok(e, out, sizeof(out), "free %u", c.i);
	peer_stop(im);
	wait_outstanding(e, 0);
	peer_stop(e);
}

/*
 * An importer killed while its stream stands at a gate, a write of the
 * block queued behind it: the kernel closes its socket, the exporter gives
 * its hold back, and the free that waited runs.  The owner's free comes
 * before the death (free_first) or after.
 */
static inline void ipc_case_importer_killed(struct peer *e, struct peer *im, size_t bytes,
					    bool free_first)
{
	char out[512];
	struct ipc_share s;

	ipc_share_block(e, im, bytes, -1, &s);
	ask_ok(im, out, sizeof(out), "gate %u", s.j);
	if (free_first)
		ask_ok(e, out, sizeof(out), "free %u", s.b.i);
	ck_assert_uint_ge(peer_outstanding(e), s.b.bytes);
	peer_kill(im);
	if (!free_first)
		ask_ok(e, out, sizeof(out), "free %u", s.b.i);
	wait_outstanding(e, 0);
	peer_stop(e);
}

#endif /* XDM_TESTS_IPC_PEERS_H */
