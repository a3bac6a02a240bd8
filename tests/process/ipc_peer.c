/* SPDX-License-Identifier: MIT */
/*
 * ipc_peer.c - one process of the IPC suite (check_ipc): it exports blocks
 * of its runtime, or opens another peer's, as the suite tells it, one
 * command a line on stdin, one answer a line on stdout.  The suite execs
 * it, so that each peer is a whole process with its own runtime, socket
 * and pid.  Built twice: ipc_peer touches memory with the CPU (the host
 * platform's), tests/gpu/ipc_peer_cuda (IPC_PEER_CUDA) with kernels on
 * the runtime's stream 0 (tests/lib/cudatest.h) and copies to the host,
 * for tests/gpu/check_ipc_cuda.
 *
 *	ipc_peer <ordinal> <platform> <stack>
 *
 * Commands (i: a block of this peer, j: an import), answered "ok ..." or
 * "err <status> <message>" (status: XDM_E_'s name, INVALID for XDM_E_INVALID):
 *	alloc <bytes>		-> ok <i> <ptr, hex> <generation> <block's bytes>
 *	free <i>		-> ok
 *	fill <i> <byte>		-> ok		(the block's bytes, by the CPU)
 *	check <i> <byte>	-> ok | bad <offset>
 *	export <i>		-> ok <handle, 512 hex digits>
 *	open <hex>		-> ok <j> <bytes>
 *	ifill <j> <byte>, icheck <j> <byte>	as fill and check, on an import
 *	close <j>		-> ok
 *	closeptr <hex ptr>	-> the answer of xdm_ipc_close on that pointer
 *	gate <j>		-> ok, once stream 0 stands at a gate, with a write
 *				   of 0x5a over import j queued behind it
 *	ungate			-> ok, once the gate ran
 *	outstanding		-> ok <xdm_bytes_outstanding: what the stack has
 *				   handed out>, once the frees queued on stream 0
 *				   have run and been reaped
 *	tree <path below the runtime>	-> ok <the file, newlines as '|'>
 *	nofile <n> [<hard>]	-> ok, the soft limit of RLIMIT_NOFILE now n (and
 *				   the hard one hard)
 *	nofile			-> ok <the soft limit> <the hard limit>
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <xdm/xdm.h>

#ifdef IPC_PEER_CUDA
#include "tests/lib/cudatest.h"
#endif

#define MAX_BLOCKS 64

struct peer {
	struct xdm_runtime *rt;
	struct xdm_block blocks[MAX_BLOCKS];
	unsigned int nblocks;
	struct {
		uint64_t ptr;
		size_t bytes;
	} imports[MAX_BLOCKS];
	unsigned int nimports;
	/* The gate on stream 0 (gate/ungate). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, open;
	/* A write queued behind it, on the host platform. */
	unsigned char *fill_target;
	size_t fill_bytes;
	int fill_value;
};

/* The status as the suite names it: the enum's name without XDM_E_. */
static const char *status_name(enum xdm_status st)
{
	static const char *const names[XDM_STATUS_COUNT] = {
		[XDM_OK] = "OK",
		[XDM_E_OUT_OF_BUDGET] = "OUT_OF_BUDGET",
		[XDM_E_DRIVER] = "DRIVER",
		[XDM_E_STREAM_MISUSE] = "STREAM_MISUSE",
		[XDM_E_USE_AFTER_FREE] = "USE_AFTER_FREE",
		[XDM_E_OUT_OF_BOUNDS] = "OUT_OF_BOUNDS",
		[XDM_E_INVALID] = "INVALID",
		[XDM_E_NO_DEVICE] = "NO_DEVICE",
		[XDM_E_NOT_SUPPORTED] = "NOT_SUPPORTED",
		[XDM_E_CONFIG] = "CONFIG",
		[XDM_E_MODULE] = "MODULE",
		[XDM_E_OUT_OF_MEMORY] = "OUT_OF_MEMORY",
	};

	return (unsigned)st < XDM_STATUS_COUNT && names[st] ? names[st] : "UNKNOWN";
}

static void answer_err(enum xdm_status st)
{
	printf("err %s %s\n", status_name(st), xdm_last_error_message());
}

static bool block_at(struct peer *p, const char *arg, struct xdm_block **b)
{
	unsigned long i = strtoul(arg, NULL, 10);

	if (i >= p->nblocks) {
		printf("err bad-index no block %lu\n", i);
		return false;
	}
	*b = &p->blocks[i];
	return true;
}

static bool import_at(struct peer *p, const char *arg, uint64_t *ptr, size_t *bytes)
{
	unsigned long j = strtoul(arg, NULL, 10);

	if (j >= p->nimports || !p->imports[j].ptr) {
		printf("err bad-index no import %lu\n", j);
		return false;
	}
	*ptr = p->imports[j].ptr;
	*bytes = p->imports[j].bytes;
	return true;
}

static void check_host(const unsigned char *mem, size_t bytes, int value)
{
	for (size_t k = 0; k < bytes; k++)
		if (mem[k] != (unsigned char)value) {
			printf("bad %zu\n", k);
			return;
		}
	printf("ok\n");
}

/* ---- the memory, touched as the platform's work would touch it ---------- */

#ifdef IPC_PEER_CUDA

static bool mem_setup(uint32_t ordinal)
{
	char why[256];
	CUresult r;

	if (ct_driver_open(why, sizeof(why))) {
		printf("err NO_DEVICE %s\n", why);
		return false;
	}
	r = ct_gpu_init((int)ordinal);
	if (r != CUDA_SUCCESS) {
		printf("err DRIVER the peer's own driver setup: %s\n", ct_result_text(r));
		return false;
	}
	return true;
}

/* A kernel on stream 0 writes it: queued, or (sync) run before the answer. */
static bool mem_fill(struct peer *p, uint64_t ptr, size_t bytes, int value, bool sync)
{
	void *stream = NULL;
	enum xdm_status st;
	CUresult r;

	st = xdm_stream_handle(p->rt, 0, &stream);
	if (st) {
		answer_err(st);
		return false;
	}
	r = ct_fill((CUstream)stream, (CUdeviceptr)ptr, bytes, (uint8_t)value);
	if (r != CUDA_SUCCESS) {
		printf("err DRIVER fill kernel: %s\n", ct_result_text(r));
		return false;
	}
	st = sync ? xdm_stream_synchronize(p->rt, 0) : XDM_OK;
	if (st) {
		answer_err(st);
		return false;
	}
	return true;
}

static void mem_check(struct peer *p, uint64_t ptr, size_t bytes, int value)
{
	unsigned char *host = malloc(bytes ? bytes : 1);
	enum xdm_status st = xdm_stream_synchronize(p->rt, 0);
	CUresult r;

	if (!host || st) {
		free(host);
		if (st)
			answer_err(st);
		else
			printf("err OUT_OF_MEMORY no host copy\n");
		return;
	}
	r = ct_ctx_current();
	if (r == CUDA_SUCCESS)
		r = ct_drv.cuMemcpyDtoH(host, (CUdeviceptr)ptr, bytes);
	if (r != CUDA_SUCCESS) {
		printf("err DRIVER copy to the host: %s\n", ct_result_text(r));
		free(host);
		return;
	}
	check_host(host, bytes, value);
	free(host);
}

#else

static bool mem_setup(uint32_t ordinal)
{
	(void)ordinal;
	return true;
}

/* The CPU writes it: at once, or (queued) from a host function on stream 0. */
static void host_fill_run(void *arg)
{
	struct peer *p = arg;

	memset(p->fill_target, p->fill_value, p->fill_bytes);
}

static bool mem_fill(struct peer *p, uint64_t ptr, size_t bytes, int value, bool sync)
{
	enum xdm_status st;

	if (sync) {
		memset((void *)(uintptr_t)ptr, value, bytes);
		return true;
	}
	p->fill_target = (unsigned char *)(uintptr_t)ptr;
	p->fill_bytes = bytes;
	p->fill_value = value;
	st = xdm_stream_launch_host(p->rt, 0, host_fill_run, p);
	if (st) {
		answer_err(st);
		return false;
	}
	return true;
}

static void mem_check(struct peer *p, uint64_t ptr, size_t bytes, int value)
{
	(void)p;
	check_host((const unsigned char *)(uintptr_t)ptr, bytes, value);
}

#endif

static void gate_run(void *arg)
{
	struct peer *p = arg;

	pthread_mutex_lock(&p->lock);
	p->entered = true;
	pthread_cond_broadcast(&p->cond);
	while (!p->open)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

static void cmd_export(struct peer *p, struct xdm_block *b)
{
	struct xdm_ipc_handle h;
	enum xdm_status st = xdm_ipc_export(p->rt, b, &h);

	if (st) {
		answer_err(st);
		return;
	}
	printf("ok ");
	for (size_t k = 0; k < sizeof(h.bytes); k++)
		printf("%02x", h.bytes[k]);
	printf("\n");
}

static void cmd_open(struct peer *p, const char *hex)
{
	struct xdm_ipc_handle h;
	enum xdm_status st;
	uint64_t ptr;
	size_t bytes;

	memset(&h, 0, sizeof(h));
	/* A short text leaves the rest zero: a handle cut short. */
	for (size_t k = 0; k < sizeof(h.bytes) && hex[2 * k] && hex[2 * k + 1]; k++) {
		unsigned int v;

		if (sscanf(hex + 2 * k, "%2x", &v) != 1)
			break;
		h.bytes[k] = (unsigned char)v;
	}
	if (p->nimports == MAX_BLOCKS) {
		printf("err full too many imports\n");
		return;
	}
	st = xdm_ipc_open(p->rt, &h, 0, &ptr, &bytes);
	if (st) {
		answer_err(st);
		return;
	}
	p->imports[p->nimports].ptr = ptr;
	p->imports[p->nimports].bytes = bytes;
	printf("ok %u %zu\n", p->nimports++, bytes);
}

static void cmd_tree(struct peer *p, const char *rest)
{
	char path[512], *text;
	size_t len;
	int err;

	snprintf(path, sizeof(path), "%s/%s", xdm_runtime_name(p->rt), rest);
	err = xdm_tree_show(path, &text, &len);
	if (err) {
		printf("err tree %s: %s\n", path, strerror(-err));
		return;
	}
	for (size_t k = 0; k < len; k++)
		if (text[k] == '\n')
			text[k] = '|';
	printf("ok %s\n", text);
	free(text);
}

static void cmd_nofile(const char *soft, const char *hard)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
		printf("err INVALID getrlimit: %s\n", strerror(errno));
		return;
	}
	if (!soft) {
		printf("ok %llu %llu\n", (unsigned long long)lim.rlim_cur,
		       (unsigned long long)lim.rlim_max);
		return;
	}
	lim.rlim_cur = strtoull(soft, NULL, 10);
	if (hard)
		lim.rlim_max = strtoull(hard, NULL, 10);
	if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
		printf("err INVALID setrlimit: %s\n", strerror(errno));
	else
		printf("ok\n");
}

static void serve(struct peer *p, char *line)
{
	char *cmd = strtok(line, " \n"), *a = strtok(NULL, " \n"), *b = strtok(NULL, " \n");
	struct xdm_block *blk;
	enum xdm_status st;
	uint64_t mem;
	size_t bytes;

	if (!cmd) {
		printf("err empty\n");
	} else if (!strcmp(cmd, "alloc") && a) {
		if (p->nblocks == MAX_BLOCKS) {
			printf("err full too many blocks\n");
			return;
		}
		st = xdm_allocate(p->rt, strtoull(a, NULL, 10), 0, "ipc_peer",
				  &p->blocks[p->nblocks]);
		if (st) {
			answer_err(st);
			return;
		}
		blk = &p->blocks[p->nblocks];
		printf("ok %u %llx %llu %zu\n", p->nblocks++, (unsigned long long)blk->ptr,
		       (unsigned long long)blk->generation, blk->bytes);
	} else if (!strcmp(cmd, "free") && a) {
		if (!block_at(p, a, &blk))
			return;
		st = xdm_deallocate(p->rt, blk);
		if (st)
			answer_err(st);
		else
			printf("ok\n");
	} else if (!strcmp(cmd, "fill") && a && b) {
		if (block_at(p, a, &blk) &&
		    mem_fill(p, blk->ptr, blk->bytes, (int)strtol(b, NULL, 0), true))
			printf("ok\n");
	} else if (!strcmp(cmd, "check") && a && b) {
		if (block_at(p, a, &blk))
			mem_check(p, blk->ptr, blk->bytes, (int)strtol(b, NULL, 0));
	} else if (!strcmp(cmd, "export") && a) {
		if (block_at(p, a, &blk))
			cmd_export(p, blk);
	} else if (!strcmp(cmd, "open")) {
		cmd_open(p, a ? a : "");
	} else if (!strcmp(cmd, "ifill") && a && b) {
		if (import_at(p, a, &mem, &bytes) &&
		    mem_fill(p, mem, bytes, (int)strtol(b, NULL, 0), true))
			printf("ok\n");
	} else if (!strcmp(cmd, "icheck") && a && b) {
		if (import_at(p, a, &mem, &bytes))
			mem_check(p, mem, bytes, (int)strtol(b, NULL, 0));
	} else if (!strcmp(cmd, "close") && a) {
		unsigned long j = strtoul(a, NULL, 10);

		if (!import_at(p, a, &mem, &bytes))
			return;
		st = xdm_ipc_close(p->rt, p->imports[j].ptr, 0);
		p->imports[j].ptr = 0;
		if (st)
			answer_err(st);
		else
			printf("ok\n");
	} else if (!strcmp(cmd, "closeptr") && a) {
		st = xdm_ipc_close(p->rt, strtoull(a, NULL, 16), 0);
		if (st)
			answer_err(st);
		else
			printf("ok\n");
	} else if (!strcmp(cmd, "gate") && a) {
		if (!import_at(p, a, &mem, &bytes))
			return;
		st = xdm_stream_launch_host(p->rt, 0, gate_run, p);
		if (st) {
			answer_err(st);
			return;
		}
		pthread_mutex_lock(&p->lock);
		while (!p->entered)
			pthread_cond_wait(&p->cond, &p->lock);
		pthread_mutex_unlock(&p->lock);
		/* The use the gate holds back: a write to the import. */
		if (mem_fill(p, mem, bytes, 0x5a, false))
			printf("ok\n");
	} else if (!strcmp(cmd, "ungate")) {
		pthread_mutex_lock(&p->lock);
		p->open = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		st = xdm_stream_synchronize(p->rt, 0);
		if (st)
			answer_err(st);
		else
			printf("ok\n");
	} else if (!strcmp(cmd, "outstanding")) {
		/*
		 * A free queued on the stream is not a free held back; and a
		 * stream-ordered backend (cuda_async) counts a free that ran
		 * only once a reap has seen it run.
		 */
		st = xdm_stream_synchronize(p->rt, 0);
		if (!st)
			st = xdm_reap_pending(p->rt);
		if (st)
			answer_err(st);
		else
			printf("ok %zu\n", xdm_bytes_outstanding(p->rt));
	} else if (!strcmp(cmd, "tree") && a) {
		cmd_tree(p, a);
	} else if (!strcmp(cmd, "nofile")) {
		cmd_nofile(a, b);
	} else {
		printf("err unknown command %s\n", cmd);
	}
}

int main(int argc, char **argv)
{
	static struct peer p;
	char line[1024];
	enum xdm_status st;

	if (argc != 4) {
		fprintf(stderr, "usage: %s <ordinal> <platform> <stack>\n", argv[0]);
		return 2;
	}
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cond, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!mem_setup((uint32_t)strtoul(argv[1], NULL, 10)))
		return 1;
	st = xdm_runtime_create((uint32_t)strtoul(argv[1], NULL, 10), argv[2], argv[3],
				&p.rt);
	if (st) {
		answer_err(st);
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		serve(&p, line);
	/* stdin closed: leave cleanly, whatever is still open or held. */
	st = xdm_runtime_destroy(p.rt);
	return st ? 1 : 0;
}
