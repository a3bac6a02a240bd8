/* SPDX-License-Identifier: MIT */
/*
 * ipc_server.c - the exporting runtime's socket: who gets in, and the loop
 * that serves them without ever waiting on one of them.
 *
 * One thread per exporting runtime, started by its first export, serves a
 * SOCK_SEQPACKET Unix socket with an abstract name made of a random token
 * (no file to clean up, gone with the process).  An abstract name has no
 * permissions and is listed in /proc/net/unix for everyone, so the server
 * checks each connection's credentials (SO_PEERCRED) at accept: a process
 * of the exporter's user, or of one its allow-list names, becomes a peer;
 * any other is told why and closed.  Each peer is one importing runtime;
 * its requests are answered in ipc_serve_open.c, its answers sent in
 * ipc_peer.c.  The connection's end, whether the importer closed it, died
 * (the kernel closes its sockets) or was dropped, gives back every hold
 * that came over it.
 *
 * Nothing a client does can stop the loop: every socket is non-blocking;
 * a peer whose answer does not drain (it cannot be sent, or lies unread),
 * or that holds nothing and asks nothing, by its deadline is dropped; the table of peers is bounded,
 * with a share for other users and for each of them, and a connection
 * past a bound is answered with a sentence and closed; when the process
 * runs out of descriptors the pending connection is taken with a spare one
 * and closed, or the listener rests a moment, never spun on.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/internal.h"

/* Connections taken per turn of the loop, so that peers are served between. */
#define ACCEPTS_PER_TURN 16
/* How long the listener rests when accept() lacks a resource. */
#define ACCEPT_REST_NS 100000000ull

struct server {
	struct xdm_runtime *rt;
	struct xdm_ipc_peer peers[XDM_IPC_MAX_PEERS];
	unsigned int npeers;
	int spare_fd;			/* given up to take a connection at EMFILE */
	uint64_t rest_until_ns;		/* the listener is not polled before */
};

/* A random token from the kernel: it names the socket, and must not repeat. */
static uint64_t new_token(void)
{
	uint64_t t = 0;

	while (!t)
		if (getentropy(&t, sizeof(t)) != 0)
			t = ((uint64_t)getpid() << 32) ^ xdm_ipc_now_ns();
	return t;
}

/* A connection that is not taken is told why, once, without waiting, and closed. */
static void turn_away(int fd, enum xdm_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void turn_away(int fd, enum xdm_status st, const char *fmt, ...)
{
	struct xdm_ipc_reply rep;
	va_list ap;

	memset(&rep, 0, sizeof(rep));
	rep.status = st;
	va_start(ap, fmt);
	vsnprintf(rep.message, sizeof(rep.message), fmt, ap);
	va_end(ap);
	(void)!send(fd, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

/* Peers of uid (other: of any user but the exporter's). */
static unsigned int peers_of(const struct server *s, uid_t uid, bool other)
{
	uid_t self = s->rt->ipc.exp.uid;
	unsigned int n = 0;

	for (unsigned int i = 0; i < s->npeers; i++)
		n += other ? s->peers[i].uid != self : s->peers[i].uid == uid;
	return n;
}

/* A new connection: a peer, or turned away with the reason. */
static void admit(struct server *s, int fd)
{
	struct xdm_ipc_exporter *e = &s->rt->ipc.exp;
	struct xdm_ipc_peer *p;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		close(fd);
		return;
	}
	if (!xdm_ipc_allow_admits(&e->allow, e->uid, fd, cred.uid, cred.gid)) {
		turn_away(fd, XDM_E_INVALID, "exporter process %d (uid %u) does not admit uid %u: "
			  "its ipc_allow (xdm.conf(5), $XDM_IPC_ALLOW) names neither that user "
			  "nor a group of it", (int)getpid(), (unsigned int)e->uid,
			  (unsigned int)cred.uid);
		return;
	}
	if (s->npeers >= XDM_IPC_MAX_PEERS ||
	    (cred.uid != e->uid && (peers_of(s, 0, true) >= XDM_IPC_MAX_PEERS_OTHER ||
				    peers_of(s, cred.uid, false) >= XDM_IPC_MAX_PEERS_PER_UID))) {
		turn_away(fd, XDM_E_OUT_OF_MEMORY, "exporter process %d serves %u importers "
			  "already (%u of uid %u, whose share is full); try again once one has "
			  "closed", (int)getpid(), s->npeers, peers_of(s, cred.uid, false),
			  (unsigned int)cred.uid);
		return;
	}
	p = &s->peers[s->npeers++];
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->uid = cred.uid;
	p->pid = cred.pid;
	p->out.fd = -1;
	p->deadline_ns = xdm_ipc_mono_ns() + (uint64_t)s->rt->ipc.timeout_ms * 1000000ull;
}

/* accept() lacks a descriptor: take the connection with the spare one and close it. */
static void out_of_descriptors(struct server *s, int listen_fd)
{
	int c = -1;

	if (s->spare_fd >= 0) {
		close(s->spare_fd);
		c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c >= 0)
			turn_away(c, XDM_E_OUT_OF_MEMORY, "exporter process %d has no descriptor "
				  "left for another importer", (int)getpid());
		s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	/* No spare (or it was taken meanwhile): the listener rests. */
	if (c < 0 || s->spare_fd < 0)
		s->rest_until_ns = xdm_ipc_mono_ns() + ACCEPT_REST_NS;
}

static void accept_some(struct server *s)
{
	int listen_fd = s->rt->ipc.exp.listen_fd;

	for (int k = 0; k < ACCEPTS_PER_TURN; k++) {
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (c >= 0) {
			admit(s, c);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE)
			out_of_descriptors(s, listen_fd);
		else if (errno != EAGAIN && errno != EWOULDBLOCK)
			s->rest_until_ns = xdm_ipc_mono_ns() + ACCEPT_REST_NS;
		return;
	}
}

/* One message of a peer, never waiting; what becomes of the connection. */
static enum xdm_ipc_verdict read_request(struct server *s, struct xdm_ipc_peer *p)
{
	/* One byte more than a request: a longer message is seen as such. */
	unsigned char buf[sizeof(struct xdm_ipc_request) + 1];
	struct iovec iov = { buf, sizeof(buf) };
	/* No room for descriptors: any a client sends are closed by the kernel. */
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	do
		n = recvmsg(p->fd, &m, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return XDM_IPC_KEEP;
	if (n <= 0 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		return XDM_IPC_DROP;
	p->deadline_ns = xdm_ipc_mono_ns() + (uint64_t)s->rt->ipc.timeout_ms * 1000000ull;
	return xdm_ipc_serve_request(s->rt, p, buf, (size_t)n);
}

/*
 * Whether p's deadline counts: an answer is on its way, or went but lies
 * unread in its socket (an importer waits for each answer it asked for,
 * and reads it at once), or it holds nothing.  A connection that holds
 * blocks and has read every answer has no deadline: an import may last
 * as long as its importer likes.
 */
static bool has_deadline(const struct xdm_ipc_peer *p)
{
	int unread = 0;

	if (p->sending != XDM_IPC_IDLE || !p->holds)
		return true;
	return ioctl(p->fd, SIOCOUTQ, &unread) == 0 && unread > 0;
}

/* poll's timeout: the nearest deadline, or -1 for none. */
static int next_timeout_ms(const struct server *s, uint64_t now, bool resting)
{
	uint64_t nearest = resting ? s->rest_until_ns : UINT64_MAX;

	for (unsigned int i = 0; i < s->npeers; i++)
		if (s->peers[i].deadline_ns < nearest && has_deadline(&s->peers[i]))
			nearest = s->peers[i].deadline_ns;
	if (nearest == UINT64_MAX)
		return -1;
	/* Rounded up, so that a wake-up finds the deadline passed. */
	return nearest <= now ? 0 : (int)((nearest - now + 999999) / 1000000);
}

/* One connection after poll: its answer sent on, or its request read. */
static enum xdm_ipc_verdict serve_peer(struct server *s, struct xdm_ipc_peer *p, short revents,
				       uint64_t now)
{
	enum xdm_ipc_verdict v = XDM_IPC_KEEP;

	if (revents & (POLLERR | POLLNVAL))
		return XDM_IPC_DROP;
	if (p->sending != XDM_IPC_IDLE && (revents & (POLLOUT | POLLHUP)))
		v = xdm_ipc_peer_flush(s->rt, p);
	else if (p->sending == XDM_IPC_IDLE && (revents & (POLLIN | POLLHUP)))
		v = read_request(s, p);
	if (v == XDM_IPC_KEEP && p->deadline_ns <= now && has_deadline(p))
		v = XDM_IPC_DROP;
	return v;
}

static void *server_run(void *arg)
{
	struct server *s = arg;
	struct xdm_ipc_exporter *e = &s->rt->ipc.exp;
	struct pollfd fds[2 + XDM_IPC_MAX_PEERS];

	for (;;) {
		uint64_t now = xdm_ipc_mono_ns();
		bool resting = now < s->rest_until_ns;
		unsigned int polled = s->npeers;
		int timeout;

		fds[0] = (struct pollfd){ .fd = e->wake[0], .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = resting ? -1 : e->listen_fd, .events = POLLIN };
		for (unsigned int i = 0; i < polled; i++)
			fds[2 + i] = (struct pollfd){
				.fd = s->peers[i].fd,
				.events = s->peers[i].sending != XDM_IPC_IDLE ? POLLOUT : POLLIN,
			};
		timeout = next_timeout_ms(s, now, resting);
		if (poll(fds, 2 + polled, timeout) < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break;
		now = xdm_ipc_mono_ns();
		/* Backwards: a dropped peer takes the last one's place, which is done. */
		for (unsigned int i = polled; i-- > 0;) {
			if (serve_peer(s, &s->peers[i], fds[2 + i].revents, now) == XDM_IPC_KEEP)
				continue;
			xdm_ipc_peer_drop(s->rt, &s->peers[i]);
			s->peers[i] = s->peers[--s->npeers];
		}
		if (fds[1].revents & POLLIN)
			accept_some(s);
	}
	/* The runtime goes: what importers hold is theirs (xdm_ipc_fini). */
	for (unsigned int i = 0; i < s->npeers; i++) {
		xdm_ipc_object_close(&s->peers[i].out);
		close(s->peers[i].fd);
	}
	if (s->spare_fd >= 0)
		close(s->spare_fd);
	free(s);
	return NULL;
}

enum xdm_status xdm_ipc_serve(struct xdm_runtime *rt)
{
	struct xdm_ipc_exporter *e = &rt->ipc.exp;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	enum xdm_status st = XDM_OK;
	struct server *s = NULL;
	size_t len;
	int err;

	pthread_mutex_lock(&e->lock);
	if (e->running)
		goto out;
	if (!e->token)
		e->token = new_token();
	s = calloc(1, sizeof(*s));
	if (!s) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_export: no memory for the IPC "
				   "server");
		goto out;
	}
	s->rt = rt;
	s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	len = xdm_ipc_socket_name(e->token, addr.sun_path, sizeof(addr.sun_path));
	e->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (e->listen_fd < 0 || !len ||
	    bind(e->listen_fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + len) ||
	    listen(e->listen_fd, 64) || pipe2(e->wake, O_CLOEXEC)) {
		st = xdm_error_set(XDM_E_NOT_SUPPORTED, "xdm_ipc_export: cannot serve the socket "
				   "importers reach this runtime by: %s", strerror(errno));
		goto fail;
	}
	err = pthread_create(&e->thread, NULL, server_run, s);
	if (err) {
		st = xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_ipc_export: cannot start the IPC "
				   "server thread: %s", strerror(err));
		goto fail;
	}
	e->running = true;
	goto out;

fail:
	if (e->listen_fd >= 0)
		close(e->listen_fd);
	for (int i = 0; i < 2; i++)
		if (e->wake[i] >= 0)
			close(e->wake[i]);
	e->listen_fd = e->wake[0] = e->wake[1] = -1;
	if (s->spare_fd >= 0)
		close(s->spare_fd);
	free(s);
out:
	pthread_mutex_unlock(&e->lock);
	return st;
}

void xdm_ipc_stop(struct xdm_ipc_exporter *e)
{
	if (!e->running)
		return;
	(void)!write(e->wake[1], "x", 1);
	pthread_join(e->thread, NULL);
	close(e->listen_fd);
	close(e->wake[0]);
	close(e->wake[1]);
	e->listen_fd = e->wake[0] = e->wake[1] = -1;
	e->running = false;
}
