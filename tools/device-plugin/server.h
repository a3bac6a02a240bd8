/* SPDX-License-Identifier: MIT */
/*
 * server.h - the gRPC layer of xdm-device-plugin (server.cc), as the C
 * main loop (main.c) sees it: serve the DevicePlugin service on a socket,
 * tell ListAndWatch that health changed, and register with the kubelet.
 * Only this layer is C++; it holds the lock that the state's readers (the
 * kubelet's calls) and its one writer (the health probe) share.
 */
#ifndef XDM_DEVICE_PLUGIN_SERVER_H
#define XDM_DEVICE_PLUGIN_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "tools/device-plugin/dp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Serves s (which outlives the server) on the Unix socket path, mode 0600. */
int xdm_dp_serve_start(struct xdm_dp_state *s, const char *path, char *err, size_t errlen);
/* Ends every ListAndWatch stream and the server; the socket is left. */
void xdm_dp_serve_stop(void);
/* Probes the GPUs' health; a change goes to every ListAndWatch stream. */
bool xdm_dp_serve_refresh(void);
/* Register on the kubelet's socket: our endpoint (a name in its dir). */
int xdm_dp_register(const char *kubelet_socket, const char *endpoint, const char *resource,
		    char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* XDM_DEVICE_PLUGIN_SERVER_H */
