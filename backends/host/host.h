/* SPDX-License-Identifier: MIT */
/*
 * host.h - the ops tables of the host module, for module.c.
 *
 * The platform (streams, events, copies on worker threads) and the backend
 * (host memory as device memory) are separate tables of one shared object;
 * the core keys tables by kind and name, so both are called "host".
 * host_vmm (vmm.c) is a second backend: one reserved address range mapped a
 * granule at a time, the host twin of cuda_vmm.
 */
#ifndef XDM_HOST_HOST_H
#define XDM_HOST_HOST_H

#include <xdm/module.h>

extern const struct xdm_ops host_platform_ops;
extern const struct xdm_ops host_backend_ops;
extern const struct xdm_ops host_vmm_ops;

#endif /* XDM_HOST_HOST_H */
