/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ipc_server.c - the exporter's server on any sequence of messages
 * from one connection: xdm_ipc_serve_request() and the sending of its
 * answers (core/ipc_serve_open.c, core/ipc_peer.c).
 *
 * The exporter is a runtime of the core alone with two exported blocks of
 * bytes (an object that needs no descriptor and no module): one that is
 * its memory's only block, one that shares its memory.  Each input is up
 * to eight messages, each a mode byte, a length byte and that many bytes:
 *
 *	mode & 3 == 0	the bytes as they are (any length)
 *	mode & 3 == 1	an OPEN of block (mode >> 2 & 1)'s genuine handle,
 *			the bytes XORed over the request from offset bytes[0],
 *			its checksum made right again (anyone can: a forger)
 *	mode & 3 == 2	a CLOSE of that block's generation
 *	mode & 3 == 3	an OPEN of the genuine handle, unchanged
 *
 * sent by a peer of the exporter's user or, when the input's first byte has
 * its high bit set, of another.  After each, the answer is sent through and read.
 * Properties: an OK answer only to a request that carries the block's own
 * secret and fields (and always with the block's payload), and to another user only for the only-block object;
 * a message that is not a request ends the connection; whatever happened,
 * once the connection is dropped no hold of it is left.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/internal.h"

#include "tests/fuzz/fuzz.h"
#include "tests/lib/ipc_raw.h"

#define TOKEN 0x5eed5eed5eed5eedull

static struct xdm_runtime *rt;
static struct xdm_ipc_handle genuine[2];

static void add_export(struct xdm_ipc_exporter *e, int i)
{
	struct xdm_ipc_export *x = calloc(1, sizeof(*x));
	struct xdm_ipc_ref r;

	FUZZ_ASSERT(x, "no memory");
	x->block.generation = (xdm_generation)(0x100 + i);
	x->block.ptr = 0x7f0000000000ull + ((uint64_t)i << 20);
	x->block.bytes = 4096;
	x->block.state = XDM_BLOCK_LIVE;
	x->obj.kind = XDM_IPC_BYTES;
	x->obj.fd = -1;
	x->obj.offset = i ? 512 : 0;
	x->obj.object_bytes = i ? 65536 : 4096;
	x->obj.payload_len = 8;
	memcpy(x->obj.payload, "fuzzpay", 8);
	x->obj.flags = i ? 0 : XDM_IPC_ONLY_BLOCK;
	for (int k = 0; k < XDM_IPC_SECRET_BYTES; k++)
		x->secret[k] = (unsigned char)(0xa5 ^ (k * 13 + i));
	x->next = e->exports;
	e->exports = x;

	memset(&r, 0, sizeof(r));
	snprintf(r.uuid, sizeof(r.uuid), "host-fuzz");
	r.token = TOKEN;
	r.exporter_pid = (uint32_t)getpid();
	r.exporter_uid = (uint32_t)e->uid;
	r.generation = x->block.generation;
	r.ptr = x->block.ptr;
	r.bytes = x->block.bytes;
	memcpy(r.secret, x->secret, sizeof(r.secret));
	r.obj = x->obj;
	xdm_ipc_encode(&r, &genuine[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	unsetenv("XDM_IPC_ALLOW");
	unsetenv("XDM_IPC_TIMEOUT_MS");
	rt = calloc(1, sizeof(*rt));
	FUZZ_ASSERT(rt, "no memory");
	FUZZ_ASSERT(xdm_ipc_init(&rt->ipc, NULL) == XDM_OK, "%s", xdm_last_error_message());
	rt->ipc.exp.token = TOKEN;
	add_export(&rt->ipc.exp, 0);
	add_export(&rt->ipc.exp, 1);
	return 0;
}

/* The holds of block i, all connections together. */
static uint64_t holds_of(int i)
{
	uint64_t n = 0;

	for (struct xdm_ipc_export *x = rt->ipc.exp.exports; x; x = x->next)
		if (x->block.generation == (xdm_generation)(0x100 + i)) {
			n = x->holds;
			FUZZ_ASSERT(!n == !x->holders, "holds %llu, holders %p",
				    (unsigned long long)n, (void *)x->holders);
		}
	return n;
}

/* Every message of the server's side read and its descriptors closed; OK replies counted. */
static unsigned int drain(int fd)
{
	unsigned char buf[sizeof(struct xdm_ipc_reply) + 16];
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * XDM_IPC_FDS_PER_MSG)];
	} ctl;
	unsigned int ok = 0;

	for (;;) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf) };
		ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
		struct xdm_ipc_reply rep;

		if (n <= 0)
			return ok;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int one;

				memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				close(one);
			}
		FUZZ_ASSERT(n == (ssize_t)sizeof(rep), "a message of %zd bytes", n);
		memcpy(&rep, buf, sizeof(rep));
		FUZZ_ASSERT(memchr(rep.message, '\0', sizeof(rep.message)), "an unended sentence");
		if (rep.status == XDM_OK) {
			FUZZ_ASSERT(rep.payload_len == 8 && !memcmp(rep.payload, "fuzzpay", 8),
				    "an OK reply without the block's payload");
			ok++;
		} else {
			FUZZ_ASSERT(rep.message[0], "a refusal with no sentence");
		}
	}
}

/*
 * Whether a request of len bytes opens block i with its credential: an
 * OPEN of a handle whose secret, token and block are the genuine one's
 * (the fields the server does not judge by, its pid, uid and device, may
 * say anything).
 */
static bool opens_with_secret(const unsigned char *msg, size_t len, int i)
{
	struct xdm_ipc_request req;
	struct xdm_ipc_ref r, g;

	if (len != sizeof(req))
		return false;
	memcpy(&req, msg, sizeof(req));
	if (req.op != XDM_IPC_OPEN || xdm_ipc_decode(&req.handle, &r) != XDM_OK)
		return false;
	FUZZ_ASSERT(xdm_ipc_decode(&genuine[i], &g) == XDM_OK, "the genuine handle");
	return !memcmp(r.secret, g.secret, sizeof(r.secret)) && r.token == g.token &&
	       r.generation == g.generation && r.ptr == g.ptr && r.bytes == g.bytes &&
	       r.obj.kind == g.obj.kind && r.obj.offset == g.obj.offset &&
	       r.obj.object_bytes == g.obj.object_bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char msg[sizeof(struct xdm_ipc_request) + 300];
	struct xdm_ipc_peer p;
	bool other, dropped = false;
	int sv[2];
	size_t at = 0;

	if (!size)
		return 0;
	other = data[0] & 0x80;
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
		    "socketpair: %s", strerror(errno));
	memset(&p, 0, sizeof(p));
	p.fd = sv[0];
	p.uid = other ? rt->ipc.exp.uid + 1 : rt->ipc.exp.uid;
	p.pid = getpid();
	p.out.fd = -1;
	for (int k = 0; k < 8 && !dropped && at + 2 <= size; k++) {
		unsigned int mode = data[at], n = data[at + 1], block = (mode >> 2) & 1;
		const uint8_t *bytes = data + at + 2;
		struct xdm_ipc_request req;
		enum xdm_ipc_verdict v;
		size_t len;
		bool good = false;

		if (n > size - at - 2)
			n = (unsigned int)(size - at - 2);
		at += 2 + n;
		memset(&req, 0, sizeof(req));
		switch (mode & 3) {
		case 0:
			len = n;
			memcpy(msg, bytes, n);
			break;
		case 2:
			req.op = XDM_IPC_CLOSE;
			req.generation = (xdm_generation)(0x100 + block);
			len = sizeof(req);
			memcpy(msg, &req, len);
			break;
		default:
			req.op = XDM_IPC_OPEN;
			req.handle = genuine[block];
			len = sizeof(req);
			memcpy(msg, &req, len);
			for (unsigned int b = 1; (mode & 3) == 1 && b < n; b++)
				msg[(bytes[0] + b - 1) % len] ^= bytes[b];
			if ((mode & 3) == 1) {
				memcpy(&req, msg, len);
				raw_reseal(&req.handle);
				memcpy(msg, &req, len);
			}
			break;
		}
		for (int i = 0; i < 2; i++)
			good |= opens_with_secret(msg, len, i) && (!other || i == 0);
		v = xdm_ipc_serve_request(rt, &p, msg, len);
		while (v == XDM_IPC_KEEP && p.sending != XDM_IPC_IDLE) {
			FUZZ_ASSERT(!drain(sv[1]) || good, "an OK answer to a request without the "
				    "secret of a block open to this peer");
			v = xdm_ipc_peer_flush(rt, &p);
		}
		FUZZ_ASSERT(!drain(sv[1]) || good, "an OK answer to a request without the "
			    "secret of a block open to this peer");
		if (len != sizeof(req))
			FUZZ_ASSERT(v == XDM_IPC_DROP, "a message of %zu bytes kept the connection",
				    len);
		dropped = v == XDM_IPC_DROP;
	}
	xdm_ipc_peer_drop(rt, &p);
	close(sv[1]);
	FUZZ_ASSERT(!holds_of(0) && !holds_of(1), "holds left after the connection was dropped: "
		    "%llu, %llu", (unsigned long long)holds_of(0), (unsigned long long)holds_of(1));
	return 0;
}
