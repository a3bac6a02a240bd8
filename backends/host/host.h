/* SPDX-License-Identifier: MIT */
/*
 * host.h - the two ops tables of the host module, for module.c.
 *
 * The platform (streams, events, copies on worker threads) and the backend
 * (host memory as device memory) are separate tables of one shared object;
 * the core keys tables by kind and name, so both are called "host".
 */
#ifndef XDM_HOST_HOST_H
#define XDM_HOST_HOST_H

#include <xdm/module.h>

extern const struct xdm_ops host_platform_ops;
extern const struct xdm_ops host_backend_ops;

#endif /* XDM_HOST_HOST_H */
