/* SPDX-License-Identifier: MIT */
/*
 * ipc_wire.h - what the ipc workload and its importer process say to each
 * other over their socket pair: the exporter sends a handle
 * (struct xdm_ipc_handle), the importer answers each with this, and once
 * at its start (status 0: its runtime is up).
 */
#ifndef XDM_TOOLS_BENCH_IPC_WIRE_H
#define XDM_TOOLS_BENCH_IPC_WIRE_H

#include <stdint.h>

struct bench_ipc_answer {
	int32_t status;			/* enum xdm_status of the first call that failed */
	uint32_t pad;
	uint64_t open_ns;		/* xdm_ipc_open */
	uint64_t close_ns;		/* xdm_ipc_close */
	char message[448];		/* the failure's sentence */
};

/* ipc_importer.c: the importer's whole life; its exit status. */
int bench_ipc_importer(int argc, char **argv);

#endif /* XDM_TOOLS_BENCH_IPC_WIRE_H */
