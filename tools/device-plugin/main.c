/* SPDX-License-Identifier: MIT */
/*
 * main.c - xdm-device-plugin: flags, then one loop that keeps the plugin
 * registered with the kubelet and its GPUs' health current.
 *
 * The loop waits on three things: a signal (SIGTERM, SIGINT: remove the
 * socket and leave), the kubelet's directory (inotify: a kubelet that
 * restarts deletes every plugin's socket and makes kubelet.sock anew, and
 * the plugin then serves on a new socket and registers again), and the
 * health interval (NVML is asked whether each GPU still answers).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/device-plugin/dp.h"
#include "tools/device-plugin/server.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xdm-device-plugin [--unit SIZE] [--gpu-fraction PERCENT] [--budget-dir DIR]\n"
		"                         [--shim PATH] [--container-shim PATH] [--kubelet-dir DIR]\n"
		"                         [--resource NAME] [--health-interval SECONDS]\n"
		"Serves GPU memory to Kubernetes as the resource xdm.io/gpu-memory, one device per\n"
		"unit, each pod held to its units by xdm's budget (xdm-device-plugin(8)).\n");
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The socket's name in the kubelet's directory: the resource's, with the
 * slash made a dash (xdm.io/gpu-memory: xdm.io-gpu-memory.sock). */
static void endpoint_of(const char *resource, char *out, size_t len)
{
	size_t i;

	snprintf(out, len, "%s.sock", resource);
	for (i = 0; out[i]; i++)
		if (out[i] == '/')
			out[i] = '-';
}

static bool exists(const char *path)
{
	struct stat st;

	return !lstat(path, &st);
}

int main(int argc, char **argv)
{
	static struct xdm_dp_state s;
	char err[XDM_DP_ERR_MAX], endpoint[300], sock[PATH_MAX], kubelet[PATH_MAX];
	char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool need_register = true, said_wait = false;
	long long next_health;
	struct pollfd fds[2];
	sigset_t mask;
	int i, in_fd, sig_fd, rc = 1;

	xdm_dp_config_defaults(&s.cfg);
	for (i = 1; i < argc;) {
		int r;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--version")) {
			printf("xdm-device-plugin %s (device plugin API v1beta1)\n", PACKAGE_VERSION);
			return 0;
		}
		r = xdm_dp_config_flag(&s.cfg, argc, argv, &i, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "xdm-device-plugin: %s\n", err);
			return 2;
		}
		if (r == 0) {
			fprintf(stderr, "xdm-device-plugin: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	endpoint_of(s.cfg.resource, endpoint, sizeof(endpoint));
	if (snprintf(sock, sizeof(sock), "%s/%s", s.cfg.kubelet_dir, endpoint) >= 108 ||
	    snprintf(kubelet, sizeof(kubelet), "%s/kubelet.sock", s.cfg.kubelet_dir) >= 108) {
		fprintf(stderr,
			"xdm-device-plugin: --kubelet-dir %s is too long for a Unix socket's path (107 bytes)\n",
			s.cfg.kubelet_dir);
		return 2;
	}

	/* The signals are read from a descriptor; gRPC's threads, started
	 * below, inherit the mask and never take them. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	in_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (sig_fd < 0 || in_fd < 0) {
		fprintf(stderr, "xdm-device-plugin: signalfd or inotify: %s\n", strerror(errno));
		return 1;
	}
	if (inotify_add_watch(in_fd, s.cfg.kubelet_dir,
			      IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
		fprintf(stderr,
			"xdm-device-plugin: cannot watch the kubelet's directory %s (--kubelet-dir): %s\n",
			s.cfg.kubelet_dir, strerror(errno));
		return 1;
	}

	xdm_dp_log("starting: resource %s, unit %llu bytes, %u%% of each GPU, budget directory %s, shim %s (%s in pods)",
		   s.cfg.resource, s.cfg.unit, s.cfg.fraction, s.cfg.budget_dir, s.cfg.shim,
		   s.cfg.container_shim);
	xdm_dp_state_init(&s);
	/* A directory that cannot be used is said now, and again by every
	 * Allocate it refuses; the plugin stays up to say it. */
	if (xdm_dp_budget_dir_prepare(&s.cfg, err, sizeof(err)))
		xdm_dp_log("%s; Allocate refuses every pod until it is fixed", err);
	if (xdm_dp_serve_start(&s, sock, err, sizeof(err))) {
		xdm_dp_log("%s", err);
		goto out;
	}
	xdm_dp_log("serving %u devices on %s", xdm_dp_device_count(&s), sock);

	fds[0] = (struct pollfd){ .fd = sig_fd, .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = in_fd, .events = POLLIN };
	next_health = now_ms() + (long long)s.cfg.health_interval * 1000;
	for (;;) {
		bool restart = false;
		long long wait;

		if (need_register && exists(kubelet)) {
			if (!xdm_dp_register(kubelet, endpoint, s.cfg.resource, err, sizeof(err))) {
				xdm_dp_log("registered %s with the kubelet (%s)", s.cfg.resource,
					   kubelet);
				need_register = false;
				said_wait = false;
			} else {
				/* Tried again at the next event or health tick. */
				xdm_dp_log("%s", err);
			}
		} else if (need_register && !said_wait) {
			xdm_dp_log("waiting for the kubelet's %s", kubelet);
			said_wait = true;
		}
		wait = next_health - now_ms();
		if (poll(fds, 2, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR) {
			xdm_dp_log("poll: %s", strerror(errno));
			goto out_serve;
		}
		if (fds[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				xdm_dp_log("signal %u: leaving", si.ssi_signo);
			rc = 0;
			goto out_serve;
		}
		if (fds[1].revents & POLLIN) {
			ssize_t n;

			while ((n = read(in_fd, events, sizeof(events))) > 0) {
				char *p = events;

				while (p < events + n) {
					struct inotify_event *e = (struct inotify_event *)p;

					if (e->len && !strcmp(e->name, endpoint) &&
					    (e->mask & (IN_DELETE | IN_MOVED_FROM)))
						restart = true;
					if (e->len && !strcmp(e->name, "kubelet.sock") &&
					    (e->mask & (IN_CREATE | IN_MOVED_TO)))
						need_register = true;
					p += sizeof(*e) + e->len;
				}
			}
		}
		/* The kubelet deleted our socket (it does so when it starts):
		 * serve on a new one, and register once it listens. */
		if (restart && !exists(sock)) {
			xdm_dp_log("the kubelet removed %s: serving again", sock);
			xdm_dp_serve_stop();
			if (xdm_dp_serve_start(&s, sock, err, sizeof(err))) {
				xdm_dp_log("%s", err);
				goto out;
			}
			need_register = true;
		}
		if (now_ms() >= next_health) {
			xdm_dp_serve_refresh();
			next_health = now_ms() + (long long)s.cfg.health_interval * 1000;
		}
	}
out_serve:
	xdm_dp_serve_stop();
	unlink(sock);
	xdm_dp_log("removed %s", sock);
out:
	xdm_dp_state_fini(&s);
	return rc;
}
