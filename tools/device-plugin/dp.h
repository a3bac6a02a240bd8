/* SPDX-License-Identifier: MIT */
/*
 * dp.h - the logic of xdm-device-plugin (man/xdm-device-plugin.8), in C
 * and free of gRPC: the plugin's configuration, the GPUs it sees through
 * NVML (reached by dlopen, so that nothing here needs CUDA), the devices
 * it advertises (one per unit of memory per GPU), the packing of a
 * container's units onto one GPU, and the answer to Allocate (the
 * environment and the mounts that put the container under xdm's budget).
 *
 * Two programs link it: the plugin, whose gRPC layer (server.cc) only
 * translates between the kubelet's messages and these functions, and
 * tests/k8s/xdm_k8s_allocate, which prints Allocate's answer on machines
 * that have no gRPC (the GPU machine).
 *
 * Errors are sentences written into a caller's buffer (err, errlen); a
 * function that can fail returns 0 on success and -1 with that sentence.
 */
#ifndef XDM_DEVICE_PLUGIN_DP_H
#define XDM_DEVICE_PLUGIN_DP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XDM_DP_MAX_GPUS 64
#define XDM_DP_UUID_MAX 96
/* The kubelet refuses a device ID longer than this (api.proto, Device). */
#define XDM_DP_ID_MAX 63
#define XDM_DP_ERR_MAX 512
/* A group's name in the budget: one line of at most 63 bytes. */
#define XDM_DP_GROUP_MAX 63

struct xdm_dp_config {
	unsigned long long unit;	/* bytes of one device */
	unsigned int fraction;		/* percent of each GPU advertised, 1..100 */
	char budget_dir[PATH_MAX];	/* host path, the same inside pods */
	char shim[PATH_MAX];		/* host path of libxdm-preload.so */
	char container_shim[PATH_MAX];	/* where pods see it */
	char kubelet_dir[PATH_MAX];
	char resource[256];
	unsigned int health_interval;	/* seconds between NVML probes */
};

struct xdm_dp_gpu {
	char uuid[XDM_DP_UUID_MAX];	/* as NVML writes it: GPU-... */
	unsigned long long total;	/* bytes */
	unsigned int units;		/* floor(total * fraction / 100 / unit) */
	bool healthy;
};

struct xdm_dp_nvml;

struct xdm_dp_state {
	struct xdm_dp_config cfg;
	struct xdm_dp_gpu gpus[XDM_DP_MAX_GPUS];
	int ngpus;
	struct xdm_dp_nvml *nvml;	/* NULL where NVML could not be had */
};

/* One container's answer to Allocate. */
struct xdm_dp_env {
	const char *key;
	char value[PATH_MAX];
};

struct xdm_dp_mount {
	char host[PATH_MAX];
	char container[PATH_MAX];
	bool read_only;
};

#define XDM_DP_NENV 6
#define XDM_DP_NMOUNTS 3

struct xdm_dp_answer {
	struct xdm_dp_env env[XDM_DP_NENV];
	/* The budget directory (rw), the shim (ro), and the library the shim
	 * needs (libxdm.so.0, ro) where it is beside the shim on the host. */
	struct xdm_dp_mount mounts[XDM_DP_NMOUNTS];
	int nmounts;
	int gpu;			/* index into the state's gpus */
	unsigned int units;
};

/* config.c: defaults, and one flag at a time for both programs. */
void xdm_dp_config_defaults(struct xdm_dp_config *c);
/*
 * Takes argv[*i] if it is one of the plugin's flags (--flag VALUE or
 * --flag=VALUE), advancing *i past what it used: 1 taken, 0 not one of
 * ours (argv untouched), -1 a bad value (the sentence names the flag).
 */
int xdm_dp_config_flag(struct xdm_dp_config *c, int argc, char **argv, int *i,
		       char *err, size_t errlen);

/* log.c: one line on standard error, with the program's name and time. */
void xdm_dp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* nvml.c: NVML by dlopen("libnvidia-ml.so.1"). */
int xdm_dp_nvml_open(struct xdm_dp_nvml **out, char *err, size_t errlen);
void xdm_dp_nvml_close(struct xdm_dp_nvml *n);
/* Every GPU NVML lists, in its order: UUID and total memory. */
int xdm_dp_nvml_list(struct xdm_dp_nvml *n, struct xdm_dp_gpu *gpus, int max, int *count,
		     char *err, size_t errlen);
/* Whether the GPU of that UUID answers NVML now; why not, if not. */
bool xdm_dp_nvml_healthy(struct xdm_dp_nvml *n, const char *uuid, char *why, size_t whylen);

/* gpus.c: the GPUs and the devices they advertise. */
/* Opens NVML and lists the GPUs; says in the log what it found (0 GPUs is
 * not an error: the plugin then advertises no device). */
void xdm_dp_state_init(struct xdm_dp_state *s);
void xdm_dp_state_fini(struct xdm_dp_state *s);
/* Probes every GPU's health; true if any changed (each change is logged). */
bool xdm_dp_refresh_health(struct xdm_dp_state *s);
/* The ID of unit n of gpu: <UUID>-u<n>. */
void xdm_dp_device_id(const struct xdm_dp_gpu *gpu, unsigned int n, char id[XDM_DP_ID_MAX + 1]);
/* The GPU and unit an ID names, or -1 with a sentence. */
int xdm_dp_parse_id(const struct xdm_dp_state *s, const char *id, int *gpu, unsigned int *unit,
		    char *err, size_t errlen);
/* The number of devices advertised in all. */
unsigned int xdm_dp_device_count(const struct xdm_dp_state *s);

/* prefer.c: GetPreferredAllocation for one container. */
/*
 * Chooses size IDs from avail (which holds must), all on one GPU: must
 * first, then the lowest units of the GPU that still fits with the fewest
 * available units (best fit, so that large requests find a GPU later).
 * Writes pointers into avail to out.  Where no GPU fits, -1 with a
 * sentence (the kubelet then chooses by itself).
 */
int xdm_dp_prefer(const struct xdm_dp_state *s, const char *const *avail, size_t navail,
		  const char *const *must, size_t nmust, size_t size, const char **out,
		  char *err, size_t errlen);

/* allocate.c: Allocate for one container, and the budget directory. */
int xdm_dp_allocate(const struct xdm_dp_state *s, const char *const *ids, size_t nids,
		    struct xdm_dp_answer *a, char *err, size_t errlen);
/* Makes the budget directory if it is missing (the plugin's own, mode
 * 0700), then checks it as Allocate does. */
int xdm_dp_budget_dir_prepare(const struct xdm_dp_config *c, char *err, size_t errlen);
/* Whether the budget directory is one the pods can share safely: a
 * directory (not a link), this process's, writable by nobody else. */
int xdm_dp_budget_dir_check(const struct xdm_dp_config *c, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* XDM_DEVICE_PLUGIN_DP_H */
