#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu-slice-demo: show that a container is held to its slice of a GPU.

Run in a pod that asked for xdm.io/gpu-memory (deploy/example-pods.yaml),
where xdm-device-plugin set LD_PRELOAD to xdm's shim and
XDM_BUDGET_GROUP_LIMIT to the slice.  The program knows nothing of xdm:
it allocates through the CUDA driver (ctypes, libcuda.so.1) in chunks
until the driver answers CUDA_ERROR_OUT_OF_MEMORY, says how much it got
against its slice, frees all but --hold of the slice, and sleeps, so that
`xdmctl ps` on the node shows it holding that much.  It exits 1 if it got
more than its slice, or much less, or no slice was set.
"""
import argparse
import ctypes
import os
import signal
import sys

CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2


def size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunk", type=size, default=size("256M"),
                    help="bytes per allocation (default 256M)")
    ap.add_argument("--hold", type=float, default=0.5,
                    help="the share of the slice to keep while sleeping (default 0.5)")
    ap.add_argument("--no-sleep", action="store_true", help="exit after the test")
    args = ap.parse_args()

    limit = int(os.environ.get("XDM_BUDGET_GROUP_LIMIT", "0") or 0)
    group = os.environ.get("XDM_BUDGET_GROUP", "")
    if not limit or "libxdm-preload" not in os.environ.get("LD_PRELOAD", ""):
        print("gpu-slice-demo: no slice: XDM_BUDGET_GROUP_LIMIT or LD_PRELOAD is not set "
              "(was the pod given xdm.io/gpu-memory?)", file=sys.stderr)
        return 1

    cuda = ctypes.CDLL("libcuda.so.1")

    def call(name, *a):
        rc = getattr(cuda, name)(*a)
        if rc != CUDA_SUCCESS and rc != CUDA_ERROR_OUT_OF_MEMORY:
            raise SystemExit("gpu-slice-demo: %s failed: CUDA error %d" % (name, rc))
        return rc

    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    call("cuInit", 0)
    call("cuDeviceGet", ctypes.byref(dev), 0)
    if hasattr(cuda, "cuDevicePrimaryCtxRetain"):   # every real driver; not the
        call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)   # test suite's fake
        call("cuCtxSetCurrent", ctx)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    print("gpu-slice-demo: group %s, slice %d bytes; the driver says %d free of %d"
          % (group, limit, free.value, total.value), flush=True)

    ptrs = []
    while True:
        p = ctypes.c_uint64()
        if call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(args.chunk)):
            break
        ptrs.append(p.value)
        if len(ptrs) * args.chunk > 2 * limit + args.chunk:
            break			# no refusal where there should have been one
    got = len(ptrs) * args.chunk
    ok = limit - args.chunk < got <= limit
    print("gpu-slice-demo: %s: got %d bytes in %d chunks of %d, then %s; the slice is %d"
          % ("held to its slice" if ok else "NOT held to its slice", got, len(ptrs),
             args.chunk, "CUDA_ERROR_OUT_OF_MEMORY" if got <= 2 * limit else "no refusal",
             limit), flush=True)

    keep = int(len(ptrs) * args.hold)
    for ptr in ptrs[keep:]:
        call("cuMemFree_v2", ctypes.c_uint64(ptr))
    print("gpu-slice-demo: holding %d bytes" % (keep * args.chunk), flush=True)
    if not args.no_sleep:
        signal.pause()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
