/* SPDX-License-Identifier: MIT */
/*
 * cudatest.h - the GPU tests' own way to the device: the driver entry points
 * they call, reached through dlopen("libcuda.so.1"), and a few hand-written
 * PTX kernels that really touch memory.
 *
 * The tests link libcuda no more than libxdm does: a machine without the
 * driver (every CI machine) must build them and run them to a skip.  Nothing
 * here uses libcheck, so that tests/gpu/cuda_oob, which is no check suite, can
 * share it.
 */
#ifndef XDM_CUDATEST_H
#define XDM_CUDATEST_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/*
 * The driver calls the tests make.  cuda.h maps several plain names to
 * versioned ABI symbols (cuMemcpyDtoH is cuMemcpyDtoH_v2); the members below
 * are spelled with the plain names, so they expand exactly as the toolkit
 * means them, and cudatest.c looks up the expanded name.  Each member's type
 * is taken from cuda.h's own prototype, so no signature is retyped here.
 */
#define CT_DRIVER_SYMBOLS(X)		\
	X(cuInit)			\
	X(cuGetErrorName)		\
	X(cuGetErrorString)		\
	X(cuDeviceGet)			\
	X(cuDevicePrimaryCtxRetain)	\
	X(cuCtxSetCurrent)		\
	X(cuCtxSynchronize)		\
	X(cuModuleLoadDataEx)		\
	X(cuModuleGetFunction)		\
	X(cuLaunchKernel)		\
	X(cuMemcpyDtoH)			\
	X(cuMemcpyHtoD)			\
	X(cuMemsetD8Async)		\
	X(cuMemGetInfo)			\
	X(cuStreamCreate)		\
	X(cuStreamDestroy)		\
	X(cuStreamSynchronize)		\
	X(cuDeviceGetCount)		\
	X(cuDeviceCanAccessPeer)	\
	X(cuMemGetAccess)		\
	X(cuMemPoolGetAccess)		\
	X(cuPointerGetAttribute)		\
	X(cuStreamBeginCapture)		\
	X(cuStreamEndCapture)		\
	X(cuStreamIsCapturing)		\
	X(cuThreadExchangeStreamCaptureMode) \
	X(cuGraphInstantiateWithFlags)	\
	X(cuGraphLaunch)		\
	X(cuGraphExecDestroy)		\
	X(cuGraphDestroy)		\
	X(cuMemsetD32Async)		\
	X(cuMemcpyDtoDAsync)		\
	X(cuLaunchHostFunc)

struct ct_driver {
#define CT_MEMBER(fn) __typeof__(fn) *fn;
	CT_DRIVER_SYMBOLS(CT_MEMBER)
#undef CT_MEMBER
};

/* The kernels of ct_kernels_ptx, by index into ct_gpu.fn. */
enum ct_kernel {
	CT_FILL,		/* fill(ptr, n, value) */
	CT_SPIN_FILL,		/* spin_fill(ptr, n, value, cycles): spin, then fill */
	CT_COPY,		/* copy(dst, src, n) */
	CT_SPIN_COPY,		/* spin_copy(dst, src, n, cycles): a slow reader */
	CT_OOB_WRITE,		/* oob_write(ptr, offset, value): one byte at ptr + offset */
	CT_KERNEL_COUNT
};

/* The device the tests launch on: its primary context and the kernels. */
struct ct_gpu {
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn[CT_KERNEL_COUNT];
	char jit_log[4096];	/* the JIT's complaint if the PTX was refused */
};

extern struct ct_driver ct_drv;
extern struct ct_gpu ct_gpu;
extern const char ct_kernels_ptx[];

/*
 * SM clock cycles per millisecond, for spins.  An H200 runs at about
 * 1.98 GHz under load; a slower clock only makes a spin longer, which never
 * hides a missing wait.
 */
#define CT_CYCLES_PER_MS 2000000ULL

/*
 * dlopen libcuda.so.1 and resolve every symbol above.  0, or -1 with the
 * reason in why.  Calls nothing in the driver: no cuInit.
 */
int ct_driver_open(char *why, size_t len);

/*
 * cuInit, the device of ordinal, its primary context retained (for good:
 * the context must outlive every runtime a test makes and destroys) and made
 * current on this thread, and the kernels loaded.
 */
CUresult ct_gpu_init(int ordinal);

/* Make the primary context current on the calling thread. */
CUresult ct_ctx_current(void);

/* "CUDA_ERROR_NAME (the driver's sentence)" of r, in a static buffer. */
const char *ct_result_text(CUresult r);

/*
 * What every GPU test program does before its suite: ct_probe returns 0 if
 * the cuda platform serves stack here, 77 without a GPU (the skip), 99 for a
 * broken setup; ct_take_gpu_lock runs one GPU suite at a time on the machine
 * (released at exit; taken before the probe, whose context another suite's
 * reading of free memory must not see); ct_start_watchdog ends a run whose wait never completes
 * (CK_NOFORK has no per-test timeout).
 */
int ct_probe(const char *stack);
void ct_take_gpu_lock(void);
void ct_start_watchdog(unsigned int seconds);

/* Kernel launches on stream s; n counts bytes. */
CUresult ct_fill(CUstream s, CUdeviceptr p, size_t n, uint8_t value);
CUresult ct_spin_fill(CUstream s, CUdeviceptr p, size_t n, uint8_t value, uint64_t cycles);
CUresult ct_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult ct_spin_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n, uint64_t cycles);
CUresult ct_oob_write(CUstream s, CUdeviceptr p, size_t offset, uint8_t value);

#endif /* XDM_CUDATEST_H */
