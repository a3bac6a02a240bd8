/* SPDX-License-Identifier: MIT */
/*
 * ipc_importer.c - the other process of the ipc workload:
 *
 *	xdm-bench --ipc-importer FD ORDINAL PLATFORM STACK
 *
 * (PLATFORM "" for the configured one), started by ipc.c, never by hand.
 * It builds its runtime as the exporter's was built, says it is ready,
 * then opens and closes each handle that comes on FD, timing each call,
 * and answers with the times; the end of FD ends it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "ipc_wire.h"

static int answer(int fd, struct bench_ipc_answer *a, enum xdm_status st)
{
	a->status = st;
	if (st)
		snprintf(a->message, sizeof(a->message), "%s", xdm_last_error_message());
	return send(fd, a, sizeof(*a), MSG_NOSIGNAL) == (ssize_t)sizeof(*a) ? 0 : -1;
}

int bench_ipc_importer(int argc, char **argv)
{
	struct bench_ipc_answer a;
	struct xdm_runtime *rt = NULL;
	enum xdm_status st;
	struct xdm_ipc_handle h;
	int fd;

	if (argc != 6) {
		fprintf(stderr, "xdm-bench: --ipc-importer is the ipc workload's own: "
			"FD ORDINAL PLATFORM STACK\n");
		return BENCH_EXIT_USAGE;
	}
	fd = atoi(argv[2]);
	memset(&a, 0, sizeof(a));
	st = xdm_runtime_create((uint32_t)strtoul(argv[3], NULL, 10), argv[4][0] ? argv[4] : NULL,
				argv[5], &rt);
	if (answer(fd, &a, st) || st)
		return BENCH_EXIT_FAIL;
	while (recv(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h)) {
		uint64_t ptr = 0, t0, t1, t2;
		size_t bytes = 0;

		memset(&a, 0, sizeof(a));
		t0 = bench_now_ns();
		st = xdm_ipc_open(rt, &h, 0, &ptr, &bytes);
		t1 = bench_now_ns();
		if (!st)
			st = xdm_ipc_close(rt, ptr, 0);
		t2 = bench_now_ns();
		a.open_ns = t1 - t0;
		a.close_ns = t2 - t1;
		if (answer(fd, &a, st))
			break;
	}
	xdm_runtime_destroy(rt);
	return 0;
}
