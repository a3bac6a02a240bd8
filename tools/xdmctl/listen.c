/* SPDX-License-Identifier: MIT */
/*
 * listen.c - the sockets xdmctl serve listens on, from --listen ADDR.
 *
 * ADDR is HOST:PORT, with an IPv6 address in brackets ([::1]:9464);
 * :PORT for this machine's loopback addresses, 127.0.0.1 and ::1; or
 * *:PORT for every address of the machine.  The metrics name every
 * process of the budgets xdmctl reads, with its command and container, so
 * the short form keeps them on the machine: a scraper elsewhere is let in
 * by asking for it (*:PORT, 0.0.0.0:PORT, [::]:PORT or an address of the
 * machine).  Loopback is two sockets, IPv4 and IPv6-only, on one port,
 * where the kernel has IPv6 (IPv4 alone where it has not), because
 * "localhost" resolves to either; every address is one dual-stack socket
 * (IPv4 alone without IPv6).  HOST may be a name, resolved once here; the
 * first of its addresses that can be bound is taken.  PORT 0 asks the
 * kernel for a free port, and the address it gave is what the caller
 * prints.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xdmctl.h"
#include "serve.h"

#define LISTEN_BACKLOG 16

/* addr split into host (maybe "", or "*") and port; 0, or -1 said. */
static int split(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
	const char *start = addr, *colon;
	size_t n;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':')
			goto bad;
		start = addr + 1;
		n = (size_t)(end - start);
		colon = end + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			goto bad;
		n = (size_t)(colon - addr);
		if (memchr(addr, ':', n))
			return xdmctl_fail(-1, "serve",
					   "--listen '%s': an IPv6 address goes in brackets, as in "
					   "[::1]:9464",
					   addr);
	}
	if (n >= hlen || (addr[0] == '[' && n == 0))
		goto bad;
	memcpy(host, start, n);
	host[n] = '\0';
	n = strlen(colon + 1);
	if (n == 0 || n >= plen || strspn(colon + 1, "0123456789") != n || atol(colon + 1) > 65535)
		return xdmctl_fail(-1, "serve",
				   "--listen '%s': the port must be a number from 0 to 65535", addr);
	memcpy(port, colon + 1, n + 1);
	return 0;
bad:
	return xdmctl_fail(-1, "serve",
			   "--listen '%s' is not HOST:PORT, [IPV6]:PORT, :PORT (loopback) or *:PORT "
			   "(every address)",
			   addr);
}

/* How v6 sockets are bound: with IPv4 too, or IPv6 alone, or as the system says. */
enum v6only { V6ONLY_SYSTEM, V6ONLY_NO, V6ONLY_YES };

/* A listening socket on sa, or -1 with errno set. */
static int listen_on(const struct sockaddr *sa, socklen_t salen, enum v6only v6only)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0, err;

	if (fd < 0)
		return -1;
	/* A restart binds again at once, past the old connections' TIME_WAIT. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto fail;
	if (v6only != V6ONLY_SYSTEM &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, v6only == V6ONLY_YES ? &one : &zero,
		       sizeof(one)) != 0)
		goto fail;
	if (bind(fd, sa, salen) != 0 || listen(fd, LISTEN_BACKLOG) != 0)
		goto fail;
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Every address, IPv6 and IPv4 together where IPv6 is there at all. */
static int listen_any(unsigned short port)
{
	struct sockaddr_in6 six = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				    .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in four = { .sin_family = AF_INET, .sin_port = htons(port),
				    .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd = listen_on((struct sockaddr *)&six, sizeof(six), V6ONLY_NO);

	if (fd >= 0 || errno != EAFNOSUPPORT)
		return fd;
	return listen_on((struct sockaddr *)&four, sizeof(four), V6ONLY_SYSTEM);
}

/* The port fd is bound to. */
static unsigned short port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
		return 0;
	return ntohs(sin.sin_port);
}

/* Port 0 asked: a free port for 127.0.0.1 may be taken on ::1; so many tries. */
#define LOOPBACK_TRIES 8

/*
 * 127.0.0.1 and ::1 on one port; 127.0.0.1 alone where the kernel has no
 * IPv6 or no ::1 (a container without it).  0, or -1 with errno set.
 */
static int listen_loopback(unsigned short port, struct xdmctl_listeners *l)
{
	struct sockaddr_in four = { .sin_family = AF_INET, .sin_port = htons(port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 six = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int err;

	for (int tries = 0; tries < LOOPBACK_TRIES; tries++) {
		l->fd[0] = listen_on((struct sockaddr *)&four, sizeof(four), V6ONLY_SYSTEM);
		if (l->fd[0] < 0)
			return -1;
		l->n = 1;
		six.sin6_port = htons(port_of(l->fd[0]));
		l->fd[1] = listen_on((struct sockaddr *)&six, sizeof(six), V6ONLY_YES);
		if (l->fd[1] >= 0) {
			l->n = 2;
			return 0;
		}
		if (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)
			return 0;
		err = errno;
		close(l->fd[0]);
		l->n = 0;
		errno = err;
		if (port || err != EADDRINUSE)
			return -1;
	}
	return -1;
}

/* What fd is bound to, as HOST:PORT ([HOST]:PORT for IPv6), after what shown holds. */
static void bound(int fd, char *shown, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	size_t at = strlen(shown);
	const char *and = at ? " and " : "";

	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
		snprintf(shown + at, len - at, "%s?", and);
		return;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(shown + at, len - at, "%s[%s]:%u", and, host,
			 (unsigned)ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(shown + at, len - at, "%s%s:%u", and, host, (unsigned)ntohs(a->sin_port));
	}
}

void xdmctl_listeners_close(struct xdmctl_listeners *l)
{
	for (size_t i = 0; i < l->n; i++)
		close(l->fd[i]);
	l->n = 0;
}

int xdmctl_listen(const char *addr, struct xdmctl_listeners *l, char *shown, size_t len,
		  int *rc)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256], port[8];
	int fd = -1, err = 0;

	l->n = 0;
	shown[0] = '\0';
	if (split(addr, host, sizeof(host), port, sizeof(port))) {
		*rc = XDMCTL_EXIT_USAGE;
		return -1;
	}
	if (!host[0]) {
		if (listen_loopback((unsigned short)atoi(port), l) != 0)
			err = errno;
	} else if (!strcmp(host, "*")) {
		fd = listen_any((unsigned short)atoi(port));
		err = errno;
	} else {
		err = getaddrinfo(host, port, &hints, &res);
		if (err) {
			*rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot listen on %s: %s", addr,
					  err == EAI_SYSTEM ? strerror(errno) : gai_strerror(err));
			return -1;
		}
		for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
			fd = listen_on(ai->ai_addr, ai->ai_addrlen, V6ONLY_SYSTEM);
			err = errno;
		}
		freeaddrinfo(res);
	}
	if (fd >= 0)
		l->fd[l->n++] = fd;
	if (!l->n) {
		*rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot listen on %s: %s", addr,
				  strerror(err));
		return -1;
	}
	for (size_t i = 0; i < l->n; i++)
		bound(l->fd[i], shown, len);
	return 0;
}
