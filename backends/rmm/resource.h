/* SPDX-License-Identifier: MIT */
/*
 * resource.h - what the rmm backend's C side (module.c: the xdm_ops, its
 * parameters and attributes) asks of its C++ side (resource.cpp: RMM's
 * resources).  No C++ type crosses it, and no exception: every RMM error
 * comes back as an xdm status with xdm's error set.
 */
#ifndef XDM_BACKENDS_RMM_RESOURCE_H
#define XDM_BACKENDS_RMM_RESOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xdm/module.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a stack line asks for (module.c parses, resource.cpp builds). */
struct rmm_choice {
	const char *resource;	/* cuda_async, cuda, pool, arena, binning, factory */
	const char *upstream;	/* under pool, arena, binning: cuda_async or cuda */
	const char *factory;	/* resource=factory: the symbol to call */
	uint64_t initial;	/* pool: its first size; 0: RMM's default */
	uint64_t max;		/* pool: its bound; 0: none */
	uint64_t arena;		/* arena: the global arena's size; 0: RMM's default */
	uint32_t ordinal;	/* the CUDA device */
};

/*
 * A user's resource, from resource=factory factory=SYMBOL: a function of
 * this type, found in the process (dlsym), returns the resource for the
 * device, which the program owns and keeps alive while the stack lives.
 * It returns an rmm::mr::device_memory_resource *.
 */
typedef void *(*xdm_rmm_factory_fn)(int device);

/* RMM's own figures, read where RMM keeps them. */
enum rmm_figure {
	RMM_BYTES_CURRENT,	/* bytes the resource has handed out and not back */
	RMM_BYTES_PEAK,
	RMM_BYTES_TOTAL,
	RMM_ALLOCATIONS_CURRENT,
	RMM_ALLOCATIONS_PEAK,
	RMM_ALLOCATIONS_TOTAL,
	RMM_POOL_SIZE,		/* resource=pool: what the pool holds from upstream */
};

struct rmm_backend;

enum xdm_status rmm_backend_new(const struct rmm_choice *c, struct rmm_backend **out);
void rmm_backend_free(struct rmm_backend *b);
/* Allocate bytes on the CUDA stream stream (a CUstream); *ptr the address. */
enum xdm_status rmm_backend_allocate(struct rmm_backend *b, size_t bytes, void *stream,
				     uint64_t *ptr);
/* Give the block back on stream, as RMM's deallocate (which cannot fail). */
void rmm_backend_deallocate(struct rmm_backend *b, uint64_t ptr, size_t bytes, void *stream);
/* A figure; false when this resource does not keep it. */
bool rmm_backend_figure(struct rmm_backend *b, enum rmm_figure which, uint64_t *out);
/* The resource's description, as "pool over cuda_async". */
const char *rmm_backend_describe(struct rmm_backend *b);
/* The RMM version the module was built against, as "25.12.00". */
const char *rmm_backend_version(void);

#ifdef __cplusplus
}
#endif

#endif
