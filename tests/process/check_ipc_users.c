/* SPDX-License-Identifier: MIT */
/*
 * check_ipc_users.c - blocks shared between processes, tried by another
 * local user (issue 40): who gets in, what a hostile client can and cannot
 * get, and that no client can freeze an exporter.
 *
 * main() makes two throwaway users: own, whose processes export, and att,
 * who attacks: with xdm_ipc_open (tests/process/ipc_peer, exec'd as att),
 * and with a raw client of the wire (tests/lib/ipc_raw.h, forked as att)
 * that forges handles, replays them, never reads, holds connections and
 * floods.  Each refusal has its control, in which the exporter admits att
 * (XDM_IPC_ALLOW) or the request is the genuine one, and the same client
 * succeeds; so a refusal is the exporter's doing, not a broken client.
 *
 * Each hostile case also shows the exporter serving its own user's
 * importer meanwhile, within a stated time (a bound ten times above what
 * it takes on a loaded machine: a hang, not a speed, is what it catches),
 * and shutting down with nothing held.  Exporters run with
 * XDM_IPC_TIMEOUT_MS=3000, so that a connection that does not drain is
 * dropped within seconds.
 *
 * Exit 77 (skip) when not root, without useradd, or where the users cannot
 * run the build tree.
 */
#include "config.h"

#include <sys/mman.h>
#include <time.h>

#include "tests/lib/ipc_peers.h"
#include "tests/lib/ipc_raw.h"
#include "tests/lib/users.h"

#define PEER "tests/process/ipc_peer"
#define SHARED "host ipc=true"
#define POOLED "pool | host ipc=true"
/* An odd size: the block is not the whole of its pages. */
#define BYTES ((size_t)(1 << 20) + 4099)
/* The stated time within which the exporter's own importer is served. */
#define SERVED_WITHIN_MS 10000
/*
 * The exporters' deadline for a connection that does not drain (or holds
 * and asks nothing): a hostile one is dropped this soon.  Importers wait
 * far longer than it takes on a loaded machine.
 */
#define EXPORTER_TIMEOUT_MS "3000"
#define IMPORTER_TIMEOUT_MS "30000"

static struct tu_user own, att;
/* A group of att's besides its own (admission by a supplementary group). */
static struct tu_group crew;

/* ---- peers (ipc_peer) as a user ------------------------------------------ */

struct as {
	const struct tu_user *u;
	pid_t parent;
	const char *allow;		/* XDM_IPC_ALLOW, or NULL */
	const char *timeout_ms;		/* XDM_IPC_TIMEOUT_MS */
};

static void become_peer(const void *arg)
{
	const struct as *a = arg;

	if (a->allow)
		setenv("XDM_IPC_ALLOW", a->allow, 1);
	else
		unsetenv("XDM_IPC_ALLOW");
	setenv("XDM_IPC_TIMEOUT_MS", a->timeout_ms, 1);
	tu_become(a->u, a->parent);
}

/* An exporter on stack that admits allow besides its own user, with a deadline. */
static void start_deadline(struct peer *p, const struct tu_user *u, const char *stack,
			   const char *allow, const char *timeout_ms)
{
	struct as a = { u, getpid(), allow, timeout_ms };

	ipc_peer_start_in(p, PEER, "0", "host", stack, become_peer, &a);
}

static void start(struct peer *p, const struct tu_user *u, const char *stack,
		  const char *allow)
{
	start_deadline(p, u, stack, allow, EXPORTER_TIMEOUT_MS);
}

/* An importer that waits timeout_ms for an answer. */
static void start_timeout(struct peer *p, const struct tu_user *u, const char *timeout_ms)
{
	struct as a = { u, getpid(), NULL, timeout_ms };

	ipc_peer_start_in(p, PEER, "0", "host", "host", become_peer, &a);
}

static void start_importer(struct peer *p, const struct tu_user *u)
{
	start_timeout(p, u, IMPORTER_TIMEOUT_MS);
}

/* A block of BYTES filled with fill and exported: its handle as hex and bytes. */
static struct block share(struct peer *e, int fill, char *hex, struct xdm_ipc_handle *h)
{
	struct block b = peer_alloc(e, BYTES);
	char out[256];

	ask_ok(e, out, sizeof(out), "fill %u %d", b.i, fill);
	peer_export(e, b.i, hex);
	ck_assert(raw_from_hex(hex, h));
	return b;
}

/* An open that must fail with a sentence that says want. */
static void open_refused(struct peer *im, const char *hex, const char *want)
{
	char out[1024];

	ask(im, out, sizeof(out), "open %s", hex);
	ck_assert_msg(!strncmp(out, "err ", 4), "peer %d opened what it must not: %s",
		      (int)im->pid, out);
	ck_assert_msg(strstr(out, want), "the refusal does not say '%s': %s", want, out);
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000ll + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The exporter's own user opens, reads and closes the block, within the stated time. */
static void own_importer_served(const char *hex, size_t bytes, int fill)
{
	struct timespec t0;
	struct peer l;
	char out[256];
	unsigned int j;

	start_importer(&l, &own);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	j = peer_open(&l, hex, bytes);
	ask_ok(&l, out, sizeof(out), "icheck %u %d", j, fill);
	ask_ok(&l, out, sizeof(out), "close %u", j);
	ck_assert_msg(ms_since(&t0) < SERVED_WITHIN_MS, "the exporter's own importer waited %lld "
		      "ms", ms_since(&t0));
	peer_stop(&l);
}

/*
 * The block freed by its owner, and nothing left held: the backend has it
 * back, and holds only the others (others: their bytes, as the stack made
 * them).
 */
static void free_all_but(struct peer *e, const struct block *b, uint64_t others)
{
	char out[256];

	ask_ok(e, out, sizeof(out), "free %u", b->i);
	wait_outstanding(e, others);
}

static void free_and_nothing_held(struct peer *e, const struct block *b)
{
	free_all_but(e, b, 0);
}

/* ---- raw clients (ipc_raw.h) forked as a user ----------------------------- */

struct report {
	long long v[16];
	char text[1024];
};

struct agent {
	pid_t pid;
	int stop;			/* its end closed: the agent finishes */
	int ready;			/* a byte: its attack is in place */
	struct report *rep;
};

typedef void (*agent_fn)(struct report *rep, const void *arg);

/* The agent says it is ready, then waits for the test to let it finish. */
static int agent_ready_fd = -1, agent_stop_fd = -1;

static void agent_say_ready(void)
{
	(void)!write(agent_ready_fd, "r", 1);
}

/* Ready, and held there until the test lets it finish. */
static void agent_is_ready(void)
{
	char c;

	agent_say_ready();
	while (read(agent_stop_fd, &c, 1) > 0)
		;
}

static void agent_start(struct agent *a, const struct tu_user *u, agent_fn fn,
			const void *arg)
{
	int stop[2], ready[2];
	pid_t parent = getpid();

	a->rep = mmap(NULL, sizeof(*a->rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	ck_assert(a->rep != MAP_FAILED);
	memset(a->rep, 0, sizeof(*a->rep));
	ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	fflush(NULL);
	a->pid = fork();
	ck_assert_int_ge(a->pid, 0);
	if (a->pid == 0) {
		close(stop[1]);
		close(ready[0]);
		agent_stop_fd = stop[0];
		agent_ready_fd = ready[1];
		tu_become(u, parent);
		fn(a->rep, arg);
		_exit(0);
	}
	close(stop[0]);
	close(ready[1]);
	a->stop = stop[1];
	a->ready = ready[0];
}

/* Until the agent is ready (or has ended: its report is then whole). */
static void agent_wait_ready(struct agent *a)
{
	struct pollfd pfd = { .fd = a->ready, .events = POLLIN };

	ck_assert_msg(poll(&pfd, 1, TU_PATIENCE_MS) == 1, "agent %d never got ready",
		      (int)a->pid);
}

static void agent_finish(struct agent *a)
{
	int status;

	close(a->stop);
	close(a->ready);
	ck_assert_int_eq(waitpid(a->pid, &status, 0), a->pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "agent %d ended with status 0x%x (%s)", (int)a->pid, status, a->rep->text);
}

static void agent_run(const struct tu_user *u, agent_fn fn, const void *arg,
		      struct report *out)
{
	struct agent a;

	agent_start(&a, u, fn, arg);
	agent_finish(&a);
	*out = *a.rep;
	munmap(a.rep, sizeof(*a.rep));
}

static void note(struct report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct report *rep, const char *fmt, ...)
{
	size_t n = strlen(rep->text);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rep->text + n, sizeof(rep->text) - n, fmt, ap);
	va_end(ap);
}

/* What one OPEN on a fresh connection brought back. */
struct outcome {
	int status;			/* the reply's, or -1 for none */
	bool fd;			/* a descriptor came */
	bool ended;			/* the server closed the connection after */
	uint64_t object_size;		/* the descriptor's object */
	long long judged;		/* raw_judge_object: 0 only the block */
	char message[256];
};

static struct outcome open_once(const struct xdm_ipc_handle *h, unsigned char fill)
{
	struct outcome o = { .status = -1 };
	struct xdm_ipc_reply rep;
	int fd = raw_connect(raw_get(h->bytes + RAW_AT_TOKEN, 8), false), passed;

	if (fd < 0)
		return o;
	/* Sent or not (a server that turned us away may have closed first),
	 * what it said is read. */
	(void)raw_send_open(fd, h);
	if (raw_reply(fd, &rep, &passed, 10000) == 1) {
		o.status = rep.status;
		snprintf(o.message, sizeof(o.message), "%s", rep.message);
		if (passed >= 0) {
			uint64_t offset = raw_get(h->bytes + RAW_AT_OFFSET, 8);
			uint64_t bytes = raw_get(h->bytes + RAW_AT_BYTES, 8);

			o.fd = true;
			o.judged = raw_judge_object(passed, offset, bytes, fill, &o.object_size);
			close(passed);
		}
		/* A refusal of the request itself ends the connection; a
		 * block freed since (a guess that missed) does not. */
		if (rep.status == XDM_E_INVALID)
			o.ended = raw_ended_by(fd, 10000, NULL);
	}
	close(fd);
	return o;
}

/* ---- who gets in ---------------------------------------------------------- */

struct replay_arg {
	struct xdm_ipc_handle h;
};

/* att steals the token from /proc/net/unix and replays a handle it was given. */
static void agent_replay(struct report *rep, const void *arg)
{
	const struct replay_arg *a = arg;
	struct outcome o;

	rep->v[0] = raw_token_listed(raw_get(a->h.bytes + RAW_AT_TOKEN, 8));
	o = open_once(&a->h, 0x11);
	rep->v[1] = o.status;
	rep->v[2] = o.fd;
	rep->v[3] = o.ended;
	rep->v[4] = o.judged;
	note(rep, "%s", o.message);
}

/*
 * A handle of own's, in att's hands: neither xdm_ipc_open nor a raw
 * request gets anything, and att's connection is closed; once the
 * exporter admits att, both get the block.
 */
START_TEST(test_other_user_not_admitted)
{
	struct peer e, im;
	struct replay_arg ra;
	struct report rep;
	char hex[HEX_LEN + 1], want[64], out[256];
	struct block b;
	unsigned int j;

	start(&e, &own, SHARED, NULL);
	start_importer(&im, &att);
	b = share(&e, 0x11, hex, &ra.h);
	snprintf(want, sizeof(want), "does not admit uid %u", (unsigned)att.uid);
	open_refused(&im, hex, want);
	agent_run(&att, agent_replay, &ra, &rep);
	ck_assert_msg(rep.v[0], "the exporter's socket is not in /proc/net/unix");
	ck_assert_msg(rep.v[1] == XDM_E_INVALID && !rep.v[2] && rep.v[3],
		      "a replayed handle: status %lld, descriptor %lld, ended %lld: %s", rep.v[1],
		      rep.v[2], rep.v[3], rep.text);
	ck_assert_msg(strstr(rep.text, want), "the refusal says: %s", rep.text);
	ask_ok(&e, out, sizeof(out), "check %u 0x11", b.i);
	free_and_nothing_held(&e, &b);
	peer_stop(&e);

	/* Control: admitted by name, the same clients get the block. */
	start(&e, &own, SHARED, att.name);
	b = share(&e, 0x11, hex, &ra.h);
	j = peer_open(&im, hex, BYTES);
	ask_ok(&im, out, sizeof(out), "icheck %u 0x11", j);
	ask_ok(&im, out, sizeof(out), "ifill %u 0x22", j);
	ask_ok(&e, out, sizeof(out), "check %u 0x22", b.i);
	ask_ok(&im, out, sizeof(out), "close %u", j);
	ask_ok(&e, out, sizeof(out), "fill %u 0x11", b.i);
	agent_run(&att, agent_replay, &ra, &rep);
	ck_assert_msg(rep.v[1] == XDM_OK && rep.v[2] && rep.v[4] == 0,
		      "admitted: status %lld, descriptor %lld, judged %lld: %s", rep.v[1],
		      rep.v[2], rep.v[4], rep.text);
	free_and_nothing_held(&e, &b);
	peer_stop(&e);
	peer_stop(&im);
}
END_TEST

/*
 * Admitted by a group of att's instead of by name: its own group (the
 * peer's gid), or a group it is a member of (SO_PEERGROUPS).
 */
START_TEST(test_admitted_by_group)
{
	struct peer e, im;
	struct xdm_ipc_handle h;
	char hex[HEX_LEN + 1], allow[2][48], out[256];
	struct block b;
	unsigned int j;

	snprintf(allow[0], sizeof(allow[0]), "@%u", (unsigned)att.gid);
	snprintf(allow[1], sizeof(allow[1]), "@%s", crew.name);
	start_importer(&im, &att);
	for (int i = 0; i < 2; i++) {
		start(&e, &own, SHARED, allow[i]);
		b = share(&e, 0x11, hex, &h);
		j = peer_open(&im, hex, BYTES);
		ask_ok(&im, out, sizeof(out), "icheck %u 0x11", j);
		ask_ok(&im, out, sizeof(out), "close %u", j);
		free_and_nothing_held(&e, &b);
		peer_stop(&e);
	}
	/* Control: another group admits nobody of att's. */
	start(&e, &own, SHARED, "@0");
	b = share(&e, 0x11, hex, &h);
	open_refused(&im, hex, "does not admit");
	free_and_nothing_held(&e, &b);
	peer_stop(&e);
	peer_stop(&im);
}
END_TEST

/* ---- what an admitted user can get ------------------------------------------ */

struct forge_arg {
	struct xdm_ipc_handle h;	/* a genuine handle, to forge from */
};

/*
 * Forged from a genuine handle of another block (a stolen token, guessed
 * generations, a secret of its own), a secret one bit off, the block's
 * place moved: never a descriptor, every one answered and ended.  Last,
 * the genuine handle: the descriptor (the control).
 */
static void agent_forge(struct report *rep, const void *arg)
{
	const struct forge_arg *a = arg;
	long long fds = 0, ended = 0, tried = 0, ok = 0, hits = 0;
	struct xdm_ipc_handle h;
	struct outcome o;

	/*
	 * Every generation of the first two blocks of each registry shard (a
	 * generation is a shard's count of blocks and the shard's number):
	 * the five exported blocks of the exporter are among them.
	 */
	for (uint64_t g = 1u << 8; g < 3u << 8; g++) {
		h = a->h;
		for (int i = 0; i < XDM_IPC_SECRET_BYTES; i++)
			h.bytes[RAW_AT_SECRET + i] = (unsigned char)(0xc3 ^ (g * 31 + i));
		raw_put(h.bytes + RAW_AT_GENERATION, g, 8);
		raw_reseal(&h);
		o = open_once(&h, 0x11);
		tried++;
		fds += o.fd;
		ok += o.status == XDM_OK;
		ended += o.ended || o.status == XDM_E_USE_AFTER_FREE;
		hits += o.status == XDM_E_INVALID;
	}
	h = a->h;
	h.bytes[RAW_AT_SECRET + 7] ^= 0x10;
	raw_reseal(&h);
	o = open_once(&h, 0x11);
	tried++;
	fds += o.fd;
	ok += o.status == XDM_OK;
	ended += o.ended;
	note(rep, "one bit off: %s; ", o.message);
	h = a->h;
	raw_put(h.bytes + RAW_AT_PTR, raw_get(h.bytes + RAW_AT_PTR, 8) + 4096, 8);
	raw_put(h.bytes + RAW_AT_OFFSET, raw_get(h.bytes + RAW_AT_OFFSET, 8) + 4096, 8);
	raw_reseal(&h);
	o = open_once(&h, 0x11);
	tried++;
	fds += o.fd;
	ok += o.status == XDM_OK;
	ended += o.ended;
	note(rep, "moved: %s", o.message);
	rep->v[0] = tried;
	rep->v[1] = fds;
	rep->v[2] = ok;
	rep->v[3] = ended;
	o = open_once(&a->h, 0x11);
	rep->v[4] = o.status;
	rep->v[5] = o.fd;
	rep->v[6] = o.judged;
	rep->v[7] = hits;
}

START_TEST(test_forged_handles)
{
	struct forge_arg fa;
	struct report rep;
	char hex[HEX_LEN + 1];
	uint64_t others = 0;
	struct block b;
	struct peer e;

	start(&e, &own, SHARED, att.name);
	/* Other blocks, exported: generations a guess may hit. */
	for (int i = 0; i < 4; i++) {
		struct xdm_ipc_handle other;

		others += share(&e, 0x40 + i, hex, &other).bytes;
	}
	b = share(&e, 0x11, hex, &fa.h);
	agent_run(&att, agent_forge, &fa, &rep);
	ck_assert_msg(rep.v[1] == 0 && rep.v[2] == 0,
		      "forged handles got %lld descriptors, %lld OK answers of %lld", rep.v[1],
		      rep.v[2], rep.v[0]);
	ck_assert_msg(rep.v[3] == rep.v[0], "%lld of %lld forgers' connections ended: %s",
		      rep.v[3], rep.v[0], rep.text);
	ck_assert_msg(strstr(rep.text, "secret or its fields differ"), "%s", rep.text);
	/* The guesses hit the five exported blocks, each refused for its secret. */
	ck_assert_msg(rep.v[7] == 5, "%lld guesses hit an exported block", rep.v[7]);
	ck_assert_msg(rep.v[4] == XDM_OK && rep.v[5] && rep.v[6] == 0,
		      "the genuine handle: status %lld, descriptor %lld, judged %lld", rep.v[4],
		      rep.v[5], rep.v[6]);
	own_importer_served(hex, b.bytes, 0x11);
	free_all_but(&e, &b, others);
	peer_stop(&e);
}
END_TEST

struct judge_arg {
	struct xdm_ipc_handle h;
};

static void agent_judge(struct report *rep, const void *arg)
{
	const struct judge_arg *a = arg;
	struct outcome o = open_once(&a->h, 0x11);

	rep->v[0] = o.status;
	rep->v[1] = o.fd;
	rep->v[2] = o.judged;
	rep->v[3] = (long long)o.object_size;
	note(rep, "%s", o.message);
}

/*
 * Every byte an admitted importer of another user can see: the memfd of a
 * block of its own holds the block and zeros, never the neighbour's 0x77.
 * Over the pool, the chunk would show the neighbour: refused, while the
 * exporter's own user still gets it.
 */
START_TEST(test_nothing_beyond_the_block)
{
	struct judge_arg ja;
	struct report rep;
	char hex[HEX_LEN + 1], out[256];
	struct peer e, im;
	struct block n, b;

	start(&e, &own, SHARED, att.name);
	n = peer_alloc(&e, 65536);
	ask_ok(&e, out, sizeof(out), "fill %u 0x77", n.i);
	b = share(&e, 0x11, hex, &ja.h);
	agent_run(&att, agent_judge, &ja, &rep);
	ck_assert_msg(rep.v[0] == XDM_OK && rep.v[1], "status %lld, descriptor %lld: %s",
		      rep.v[0], rep.v[1], rep.text);
	ck_assert_msg(rep.v[2] == 0, "byte %lld of the object is not the block's or zero",
		      rep.v[2] - 1);
	ck_assert_uint_ge((uint64_t)rep.v[3], BYTES);
	ck_assert_uint_lt((uint64_t)rep.v[3], BYTES + 65536);
	free_all_but(&e, &b, n.bytes);
	peer_stop(&e);

	start(&e, &own, POOLED, att.name);
	start_importer(&im, &att);
	n = peer_alloc(&e, 65536);
	ask_ok(&e, out, sizeof(out), "fill %u 0x77", n.i);
	b = share(&e, 0x11, hex, &ja.h);
	agent_run(&att, agent_judge, &ja, &rep);
	ck_assert_msg(rep.v[0] == XDM_E_NOT_SUPPORTED && !rep.v[1],
		      "a pool's block to another user: status %lld, descriptor %lld", rep.v[0],
		      rep.v[1]);
	ck_assert_msg(strstr(rep.text, "holds more than the block"), "%s", rep.text);
	open_refused(&im, hex, "holds more than the block");
	/* Control: the exporter's own user gets the pool's block. */
	own_importer_served(hex, b.bytes, 0x11);
	free_all_but(&e, &b, n.bytes);
	peer_stop(&e);
	peer_stop(&im);
}
END_TEST

/* ---- clients that would freeze the exporter --------------------------------- */

struct hostile_arg {
	struct xdm_ipc_handle h;
	int conns;
};

/* OPEN after OPEN, never a reply read, until the socket takes no more. */
static void agent_never_reads(struct report *rep, const void *arg)
{
	const struct hostile_arg *a = arg;
	int fd = raw_connect(raw_get(a->h.bytes + RAW_AT_TOKEN, 8), false);
	long long sent = 0;

	while (fd >= 0 && sent < 5000 && raw_send_open(fd, &a->h) == 0)
		sent++;
	rep->v[0] = sent;
	agent_is_ready();
	/* Told to finish: the server dropped it meanwhile. */
	rep->v[1] = fd >= 0 && raw_ended_by(fd, 0, NULL);
	if (fd >= 0)
		close(fd);
}

START_TEST(test_client_never_reads)
{
	struct hostile_arg ha;
	struct agent a;
	char hex[HEX_LEN + 1];
	struct block b;
	struct peer e;

	start(&e, &own, SHARED, att.name);
	b = share(&e, 0x11, hex, &ha.h);
	agent_start(&a, &att, agent_never_reads, &ha);
	agent_wait_ready(&a);
	ck_assert_msg(a.rep->v[0] > 100, "the client sent %lld requests", a.rep->v[0]);
	own_importer_served(hex, b.bytes, 0x11);
	/* The client's opens hold the block until the server drops it. */
	free_and_nothing_held(&e, &b);
	agent_finish(&a);
	ck_assert_msg(a.rep->v[1], "the server never ended the client's connection");
	peer_stop(&e);
}
END_TEST

/*
 * Connections, as many as the listener takes, kept open and silent until
 * the test has been served; then each is judged by what came on it: a
 * reply and the end (turned away at once), or the end alone (taken, and
 * dropped by its deadline, holding nothing and asking nothing).
 */
static void agent_hold_conns(struct report *rep, const void *arg)
{
	const struct hostile_arg *a = arg;
	uint64_t token = raw_get(a->h.bytes + RAW_AT_TOKEN, 8);
	long long turned = 0, kept = 0, ended = 0;
	static int fds[512];
	int n = 0;

	for (int i = 0; i < a->conns && n < 512; i++) {
		int fd = raw_connect(token, true);

		if (fd >= 0)
			fds[n++] = fd;
	}
	rep->v[0] = n;
	agent_is_ready();
	for (int i = 0; i < n; i++) {
		struct xdm_ipc_reply first;
		int r = raw_reply(fds[i], &first, NULL, 30000);

		if (r == 1) {
			turned++;
			if (!rep->text[0])
				note(rep, "%s", first.message);
			ended += raw_ended_by(fds[i], 30000, NULL);
		} else if (r == 0) {
			kept++;
			ended++;
		}
		close(fds[i]);
	}
	rep->v[1] = turned;
	rep->v[2] = kept;
	rep->v[3] = ended;
}

START_TEST(test_connections_held)
{
	struct hostile_arg ha;
	struct agent a;
	char hex[HEX_LEN + 1];
	struct block b;
	struct peer e;

	/* Not admitted: every connection is turned away at once. */
	start(&e, &own, SHARED, NULL);
	b = share(&e, 0x11, hex, &ha.h);
	ha.conns = 300;
	agent_start(&a, &att, agent_hold_conns, &ha);
	agent_wait_ready(&a);
	own_importer_served(hex, b.bytes, 0x11);
	agent_finish(&a);
	ck_assert_msg(a.rep->v[0] > 0 && a.rep->v[2] == 0 && a.rep->v[1] == a.rep->v[0],
		      "made %lld, turned %lld, kept %lld: %s", a.rep->v[0], a.rep->v[1],
		      a.rep->v[2], a.rep->text);
	ck_assert_msg(strstr(a.rep->text, "does not admit"), "%s", a.rep->text);
	free_and_nothing_held(&e, &b);
	peer_stop(&e);

	/*
	 * Admitted: its share of the table, the rest turned away with a
	 * sentence.  The deadline that drops the idle ones is twice the
	 * others', so that all 300 are taken or turned away (microseconds
	 * each) long before any place frees up.
	 */
	start_deadline(&e, &own, SHARED, att.name, "6000");
	b = share(&e, 0x11, hex, &ha.h);
	agent_start(&a, &att, agent_hold_conns, &ha);
	agent_wait_ready(&a);
	own_importer_served(hex, b.bytes, 0x11);
	agent_finish(&a);
	ck_assert_msg(a.rep->v[2] > 0 && a.rep->v[2] <= XDM_IPC_MAX_PEERS_PER_UID,
		      "made %lld, kept %lld", a.rep->v[0], a.rep->v[2]);
	ck_assert_msg(a.rep->v[1] > 0 && strstr(a.rep->text, "share is full"), "turned %lld: %s",
		      a.rep->v[1], a.rep->text);
	ck_assert_msg(a.rep->v[3] == a.rep->v[0], "%lld of %lld connections ended", a.rep->v[3],
		      a.rep->v[0]);
	free_and_nothing_held(&e, &b);
	peer_stop(&e);
}
END_TEST

/* Bad requests, each on a connection of its own: every one is ended. */
static void agent_flood(struct report *rep, const void *arg)
{
	const struct hostile_arg *a = arg;
	uint64_t token = raw_get(a->h.bytes + RAW_AT_TOKEN, 8);
	long long tried = 0, ended = 0;
	unsigned int fds = 0;
	unsigned char junk[600];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < a->conns; i++) {
		struct xdm_ipc_request req;
		int fd = raw_connect(token, false);
		size_t len;

		if (fd < 0)
			continue;
		for (size_t k = 0; k < sizeof(junk); k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			junk[k] = (unsigned char)x;
		}
		switch (i % 4) {
		case 0:		/* garbage of any length */
			len = 1 + (size_t)(x % sizeof(junk));
			raw_send_bytes(fd, junk, len);
			break;
		case 1:		/* a request's length, an op that is none */
			memcpy(&req, junk, sizeof(req));
			req.op = 7;
			raw_send_bytes(fd, &req, sizeof(req));
			break;
		case 2:		/* an OPEN of garbage */
			memset(&req, 0, sizeof(req));
			req.op = XDM_IPC_OPEN;
			memcpy(req.handle.bytes, junk, sizeof(req.handle.bytes));
			raw_send_bytes(fd, &req, sizeof(req));
			break;
		default:	/* the genuine handle, its secret wrong */
			memset(&req, 0, sizeof(req));
			req.op = XDM_IPC_OPEN;
			req.handle = a->h;
			req.handle.bytes[RAW_AT_SECRET] ^= 1;
			raw_reseal(&req.handle);
			raw_send_bytes(fd, &req, sizeof(req));
			break;
		}
		tried++;
		ended += raw_ended_by(fd, 10000, &fds);
		close(fd);
	}
	rep->v[0] = tried;
	rep->v[1] = ended;
	rep->v[2] = fds;
}

START_TEST(test_flood_of_bad_requests)
{
	struct hostile_arg ha;
	struct report rep;
	char hex[HEX_LEN + 1];
	struct block b;
	struct peer e;

	start(&e, &own, SHARED, att.name);
	b = share(&e, 0x11, hex, &ha.h);
	ha.conns = 400;
	agent_run(&att, agent_flood, &ha, &rep);
	ck_assert_msg(rep.v[0] >= 300 && rep.v[1] == rep.v[0] && rep.v[2] == 0,
		      "%lld bad requests, %lld connections ended, %lld descriptors", rep.v[0],
		      rep.v[1], rep.v[2]);
	own_importer_served(hex, b.bytes, 0x11);
	free_and_nothing_held(&e, &b);
	peer_stop(&e);
}
END_TEST

/* ---- servers that do not answer, or are not the exporter -------------------- */

/*
 * The exporter stopped (SIGSTOP): the importer's open ends within its
 * timeout with a sentence naming the exporter, and leaves nothing held
 * once the exporter runs again.
 */
START_TEST(test_exporter_does_not_answer)
{
	struct timespec t0;
	struct xdm_ipc_handle h;
	char hex[HEX_LEN + 1], want[96];
	struct peer e, l;
	struct block b;
	int stopped;

	start(&e, &own, SHARED, NULL);
	b = share(&e, 0x11, hex, &h);
	start_timeout(&l, &own, "500");
	ck_assert_int_eq(kill(e.pid, SIGSTOP), 0);
	/*
	 * Stopped only once every thread is: the thread that takes the signal
	 * stops the others, and until it runs (a loaded machine) the server
	 * thread serves on.  The parent hears of the stop when it is whole.
	 */
	ck_assert_int_eq(waitpid(e.pid, &stopped, WUNTRACED), e.pid);
	ck_assert(WIFSTOPPED(stopped));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(want, sizeof(want), "(process %d, uid %u) did not answer within 500 ms",
		 (int)e.pid, (unsigned)own.uid);
	open_refused(&l, hex, want);
	ck_assert_msg(ms_since(&t0) < SERVED_WITHIN_MS, "the open took %lld ms", ms_since(&t0));
	ck_assert_int_eq(kill(e.pid, SIGCONT), 0);
	own_importer_served(hex, b.bytes, 0x11);
	/* The stopped exporter, running again, reads the late request: its
	 * hold goes with the connection the importer gave up. */
	free_and_nothing_held(&e, &b);
	peer_stop(&l);
	peer_stop(&e);
}
END_TEST

struct squat_arg {
	uint64_t token;
};

/* What waits on the squatter's socket now: connections taken, bytes counted. */
static void squat_drain(int listen_fd, int *c, long long *conns, long long *bytes)
{
	for (;;) {
		unsigned char buf[1024];
		ssize_t got;

		if (*c < 0) {
			*c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (*c < 0)
				return;
			(*conns)++;
		}
		while ((got = recv(*c, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			*bytes += got;
		if (got < 0 && errno == EAGAIN)
			return;
		close(*c);
		*c = -1;
	}
}

/*
 * Bind the gone exporter's name; accept; count what anyone sends, as it
 * comes and, once told to finish, what is still waiting (so the count does
 * not depend on when this process ran).
 */
static void agent_squat(struct report *rep, const void *arg)
{
	const struct squat_arg *a = arg;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), n;
	long long bytes = 0, conns = 0;
	struct pollfd pfd[2];
	int c = -1;

	n = snprintf(addr.sun_path, sizeof(addr.sun_path), "%cxdm-ipc-%016llx", 0,
		     (unsigned long long)a->token);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) +
			   (size_t)n) || listen(fd, 8)) {
		note(rep, "cannot bind the name: %s", strerror(errno));
		agent_is_ready();
		return;
	}
	rep->v[2] = 1;
	agent_say_ready();
	pfd[0] = (struct pollfd){ .fd = agent_stop_fd, .events = POLLIN };
	for (;;) {
		pfd[1] = (struct pollfd){ .fd = c >= 0 ? c : fd, .events = POLLIN };
		if (poll(pfd, 2, -1) < 0 || pfd[0].revents)
			break;
		squat_drain(fd, &c, &conns, &bytes);
	}
	squat_drain(fd, &c, &conns, &bytes);
	rep->v[0] = conns;
	rep->v[1] = bytes;
}

/*
 * Once an exporter has gone, anyone may bind its socket's name: an
 * importer sends its handle's secret only to a server of the handle's
 * user.  Control: a squatter of that user is sent the request (and,
 * never answering, times the importer out): the check is the uid.
 */
START_TEST(test_squatter_gets_nothing)
{
	struct squat_arg sa;
	struct xdm_ipc_handle h;
	char hex[HEX_LEN + 1], want[96];
	struct agent a;
	struct peer e, l;

	start(&e, &own, SHARED, NULL);
	share(&e, 0x11, hex, &h);
	sa.token = raw_get(h.bytes + RAW_AT_TOKEN, 8);
	peer_stop(&e);
	start_timeout(&l, &own, "500");
	agent_start(&a, &att, agent_squat, &sa);
	agent_wait_ready(&a);
	ck_assert_msg(a.rep->v[2], "%s", a.rep->text);
	snprintf(want, sizeof(want), "of uid %u: its exporter has ended", (unsigned)att.uid);
	open_refused(&l, hex, want);
	agent_finish(&a);
	ck_assert_msg(a.rep->v[1] == 0, "the squatter was sent %lld bytes", a.rep->v[1]);

	agent_start(&a, &own, agent_squat, &sa);
	agent_wait_ready(&a);
	ck_assert_msg(a.rep->v[2], "%s", a.rep->text);
	open_refused(&l, hex, "did not answer within 500 ms");
	agent_finish(&a);
	ck_assert_msg(a.rep->v[1] == (long long)sizeof(struct xdm_ipc_request),
		      "the own-user squatter was sent %lld bytes", a.rep->v[1]);
	peer_stop(&l);
}
END_TEST

/* ---- the suite ------------------------------------------------------------- */

static Suite *ipc_users_suite(void)
{
	Suite *s = suite_create("ipc_users");
	TCase *who = tcase_create("who_gets_in");
	TCase *what = tcase_create("what_they_get");
	TCase *freeze = tcase_create("no_client_freezes");
	TCase *servers = tcase_create("servers");

	tcase_add_test(who, test_other_user_not_admitted);
	tcase_add_test(who, test_admitted_by_group);
	suite_add_tcase(s, who);
	tcase_add_test(what, test_forged_handles);
	tcase_add_test(what, test_nothing_beyond_the_block);
	suite_add_tcase(s, what);
	tcase_add_test(freeze, test_client_never_reads);
	tcase_add_test(freeze, test_connections_held);
	tcase_add_test(freeze, test_flood_of_bad_requests);
	suite_add_tcase(s, freeze);
	tcase_add_test(servers, test_exporter_does_not_answer);
	tcase_add_test(servers, test_squatter_gets_nothing);
	suite_add_tcase(s, servers);
	return s;
}

/* Whether own can run the build tree's peer (it must be readable by others). */
static bool users_can_run_peers(char *why, size_t len)
{
	const char *top = getenv("XDM_TOP_BUILDDIR");
	pid_t parent = getpid(), pid;
	char path[4096];
	int status;

	snprintf(path, sizeof(path), "%s/%s", top ? top : ".", PEER);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct xdm_runtime *rt;

		tu_become(&own, parent);
		if (access(path, X_OK) != 0 || xdm_runtime_create(0, "host", "host", &rt))
			_exit(77);
		xdm_runtime_destroy(rt);
		_exit(0);
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0)
		return true;
	snprintf(why, len, "%s cannot run the build tree's %s or build a runtime (is the build "
		 "tree readable by other users?)", own.name, PEER);
	return false;
}

int main(void)
{
	static const char *const roles[] = { "ipo", "ipa", "ipg", NULL };
	char why[512];

	if (!tu_users_init(roles, why, sizeof(why))) {
		printf("SKIP: check_ipc_users: %s\n", why);
		return 77;
	}
	if (!tu_group_make(&crew, "ipg") || !tu_user_make(&own, "ipo", NULL) ||
	    !tu_user_make(&att, "ipa", &crew)) {
		printf("SKIP: useradd or groupadd could not make the users and their group\n");
		return 77;
	}
	if (!users_can_run_peers(why, sizeof(why))) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	return tu_run_suite(ipc_users_suite());
}
