/* SPDX-License-Identifier: MIT */
/*
 * ipc.c - the ipc workload: what sharing a block with another process
 * costs, call by call: xdm_ipc_export here, xdm_ipc_open and
 * xdm_ipc_close in an importer process.
 *
 * The importer is this program again (ipc_importer.c), started with
 * --ipc-importer on one end of a socket pair, with a runtime of the same
 * platform, device and stack: a real second process, as a consumer of a
 * handle is.  For each size, each round allocates a block, exports it
 * (timed here), sends the handle; the importer opens it and closes it
 * (each timed there) and sends the two times back; the block is freed.
 * A round before the timed ones starts the exporter's server and the
 * importer's connection, whose cost is paid once per process.  The rows
 * are medians and minimums over the rounds of one run, per call.
 *
 * Only an xdm runtime has handles: the driver anchors do not run it, and
 * there is no driver call of the same meaning to divide by; the figure to
 * compare is the same run on another build or another stack.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "ipc_wire.h"

extern char **environ;

#define IPC_DEFAULT_ROUNDS 1000u

static const char *ipc_lacks(const struct bench_subject *s)
{
	if (s->ops->runtime)
		return NULL;
	if (s->anchor)
		return "the driver's allocators have no xdm handles to share";
	return "it is no xdm runtime";
}

/* The importer process, on fds[1]; its pid, or -1 said. */
static pid_t start_importer(struct bench_subject *s, const struct bench_opts *o, int fd)
{
	struct xdm_runtime *rt = s->ops->runtime(s);
	char fdtext[16], ordinal[16], stack[1024];
	char *argv[] = { "xdm-bench", "--ipc-importer", fdtext, ordinal,
			 (char *)(o->platform ? o->platform : ""), stack, NULL };
	pid_t pid;
	int err;

	if (xdm_runtime_stack_spec(rt, stack, sizeof(stack)) != XDM_OK) {
		fprintf(stderr, "xdm-bench: %s: ipc: cannot read the stack spec: %s\n", s->name,
			xdm_last_error_message());
		return -1;
	}
	snprintf(fdtext, sizeof(fdtext), "%d", fd);
	snprintf(ordinal, sizeof(ordinal), "%u", xdm_runtime_ordinal(rt));
	err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
	if (err) {
		fprintf(stderr, "xdm-bench: %s: ipc: cannot start the importer: %s\n", s->name,
			strerror(err));
		return -1;
	}
	return pid;
}

/* One round: export a fresh block of bytes, the importer opens and closes it. */
static int round_trip(struct bench_subject *s, int fd, size_t bytes, double *export_ns,
		      struct bench_ipc_answer *ans)
{
	struct xdm_runtime *rt = s->ops->runtime(s);
	struct xdm_ipc_handle h;
	struct xdm_block blk;
	enum xdm_status st;
	uint64_t t0, t1;
	int rc = -1;

	if (s->ops->allocate(s, bytes, 0, &blk)) {
		bench_say_failure(s, "ipc", "allocate", bytes, 0);
		return -1;
	}
	t0 = bench_now_ns();
	st = xdm_ipc_export(rt, &blk, &h);
	t1 = bench_now_ns();
	if (st != XDM_OK) {
		fprintf(stderr, "xdm-bench: %s: ipc: xdm_ipc_export of a %zu-byte block failed: "
			"%s\n", s->name, bytes, xdm_last_error_message());
		goto out;
	}
	*export_ns = (double)(t1 - t0);
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h) ||
	    recv(fd, ans, sizeof(*ans), 0) != (ssize_t)sizeof(*ans)) {
		fprintf(stderr, "xdm-bench: %s: ipc: the importer went away\n", s->name);
		goto out;
	}
	ans->message[sizeof(ans->message) - 1] = '\0';
	if (ans->status) {
		fprintf(stderr, "xdm-bench: %s: ipc: the importer could not open a %zu-byte "
			"block: %s\n", s->name, bytes, ans->message);
		goto out;
	}
	rc = 0;
out:
	if (s->ops->deallocate(s, &blk) && rc == 0) {
		bench_say_failure(s, "ipc", "free", bytes, 0);
		rc = -1;
	}
	return rc;
}

static int report_row(struct bench_ctx *ctx, struct bench_subject *s, const char *call,
		      uint64_t bytes, const double *samples, uint64_t n)
{
	struct bench_result r = { .subject = s, .workload = BENCH_W_IPC };
	char size[16];

	bench_format_size(bytes, size, sizeof(size));
	snprintf(r.param, sizeof(r.param), "%s %s", call, size);
	r.bytes = bytes;
	r.threads = 1;
	r.ops = n;
	r.ops_requested = n;
	r.runs = 1;
	bench_summarize(samples, (size_t)n, &r.median_ns, &r.min_ns);
	r.ops_per_s = r.median_ns > 0 ? 1e9 / r.median_ns : 0;
	return bench_report_result(ctx, &r);
}

/* Every size, its rounds, its three rows. */
static int run_one(struct bench_ctx *ctx, struct bench_subject *s, int fd, uint64_t n)
{
	double *samples = calloc(3 * n, sizeof(double));
	int rc = BENCH_EXIT_FAIL;

	if (!samples) {
		fprintf(stderr, "xdm-bench: out of memory for %llu samples\n",
			(unsigned long long)n);
		return BENCH_EXIT_FAIL;
	}
	for (size_t z = 0; z < ctx->opts.nsizes; z++) {
		size_t bytes = (size_t)ctx->opts.sizes[z];
		struct bench_ipc_answer ans;
		double warm;

		if (round_trip(s, fd, bytes, &warm, &ans))
			goto out;
		for (uint64_t i = 0; i < n; i++) {
			if (round_trip(s, fd, bytes, &samples[i], &ans))
				goto out;
			samples[n + i] = (double)ans.open_ns;
			samples[2 * n + i] = (double)ans.close_ns;
		}
		if (report_row(ctx, s, "export", bytes, samples, n) ||
		    report_row(ctx, s, "open", bytes, samples + n, n) ||
		    report_row(ctx, s, "close", bytes, samples + 2 * n, n))
			goto out;
		if (s->ops->settle(s))
			goto out;
	}
	rc = 0;
out:
	free(samples);
	return rc;
}

int bench_run_ipc(struct bench_ctx *ctx)
{
	const struct bench_opts *o = &ctx->opts;
	uint64_t n = o->iterations_set ? o->iterations : IPC_DEFAULT_ROUNDS;
	bool run[BENCH_MAX_SUBJECTS];
	int rc;

	if (bench_select(ctx, BENCH_W_IPC, ipc_lacks, run, &rc) == 0)
		return rc;
	for (size_t k = 0; k < ctx->nsubjects && !rc; k++) {
		struct bench_subject *s = &ctx->subjects[k];
		struct bench_ipc_answer ready;
		int fds[2], status;
		pid_t pid;

		if (!run[k])
			continue;
		/* The importer inherits its end only. */
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) ||
		    fcntl(fds[1], F_SETFD, 0)) {
			fprintf(stderr, "xdm-bench: ipc: socketpair: %s\n", strerror(errno));
			return BENCH_EXIT_FAIL;
		}
		pid = start_importer(s, o, fds[1]);
		close(fds[1]);
		rc = BENCH_EXIT_FAIL;
		if (pid > 0 && recv(fds[0], &ready, sizeof(ready), 0) == (ssize_t)sizeof(ready)) {
			ready.message[sizeof(ready.message) - 1] = '\0';
			if (ready.status)
				fprintf(stderr, "xdm-bench: %s: ipc: the importer has no runtime: %s\n",
					s->name, ready.message);
			else
				rc = run_one(ctx, s, fds[0], n);
		}
		close(fds[0]);	/* the importer's end of input: it leaves */
		if (pid > 0 && (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
				WEXITSTATUS(status)) && !rc) {
			fprintf(stderr, "xdm-bench: %s: ipc: the importer ended badly (status "
				"0x%x)\n", s->name, status);
			rc = BENCH_EXIT_FAIL;
		}
	}
	return rc;
}
