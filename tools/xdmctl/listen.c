/* SPDX-License-Identifier: MIT */
/*
 * listen.c - the socket xdmctl serve listens on, from --listen ADDR.
 *
 * ADDR is HOST:PORT, with an IPv6 address in brackets ([::1]:9464), or
 * :PORT for every address of the machine: IPv6 and IPv4 on one dual-stack
 * socket where the kernel has IPv6, IPv4 alone where it has not.  HOST may
 * be a name, resolved once here; the first of its addresses that can be
 * bound is taken.  PORT 0 asks the kernel for a free port, and the address
 * it gave is what the caller prints.
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

/* addr split into host (maybe "") and port; 0, or -1 said. */
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
	return xdmctl_fail(-1, "serve", "--listen '%s' is not HOST:PORT, [IPV6]:PORT or :PORT",
			   addr);
}

/* A listening socket on sa, or -1 with errno set. */
static int listen_on(const struct sockaddr *sa, socklen_t salen, bool dual_stack)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0, err;

	if (fd < 0)
		return -1;
	/* A restart binds again at once, past the old connections' TIME_WAIT. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto fail;
	if (dual_stack && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0)
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
	int fd = listen_on((struct sockaddr *)&six, sizeof(six), true);

	if (fd >= 0 || errno != EAFNOSUPPORT)
		return fd;
	return listen_on((struct sockaddr *)&four, sizeof(four), false);
}

/* What fd is bound to, as HOST:PORT ([HOST]:PORT for IPv6). */
static void bound(int fd, char *shown, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
		snprintf(shown, len, "?");
		return;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(shown, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(shown, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	}
}

int xdmctl_listen(const char *addr, char *shown, size_t len, int *rc)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256], port[8];
	int fd = -1, err = 0;

	if (split(addr, host, sizeof(host), port, sizeof(port))) {
		*rc = XDMCTL_EXIT_USAGE;
		return -1;
	}
	if (!host[0]) {
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
			fd = listen_on(ai->ai_addr, ai->ai_addrlen, false);
			err = errno;
		}
		freeaddrinfo(res);
	}
	if (fd < 0) {
		*rc = xdmctl_fail(XDMCTL_EXIT_FAIL, "serve", "cannot listen on %s: %s", addr,
				  strerror(err));
		return -1;
	}
	bound(fd, shown, len);
	return fd;
}
