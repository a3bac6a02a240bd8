#!/bin/sh
# SPDX-License-Identifier: MIT
#
# devices_gpu.sh - on two GPUs: two processes that see them in different
# CUDA_VISIBLE_DEVICES orders (0,1 and 1,0) share one budget per physical
# GPU, found by its UUID, and the other GPU keeps a budget of its own.
# tests/process/devices_order.sh runs the same test on host devices.
#
# Exit 0 pass, 1 fail, 77 skip (fewer than two GPUs).  Run by make check with
# XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR and XDM_MODULE_PATH set.

set -u

# One GPU test program at a time (tests/lib/cudatest.c's lock).
if command -v flock >/dev/null 2>&1; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
"$top/tests/gpu/check_cuda" --probe
case $? in
0) ;;
77) echo "SKIP: no GPU here (tests/gpu/check_cuda --probe)"; exit 77 ;;
*) echo "FAIL: tests/gpu/check_cuda --probe failed"; exit 1 ;;
esac
n=$("$top/tests/process/budget_worker" devices cuda cuda_async 2>/dev/null |
	awk '$1 == "devices" { print $2 }')
if [ "${n:-0}" -lt 2 ]; then
	echo "SKIP: needs 2 GPUs to show that two CUDA_VISIBLE_DEVICES orders share one" \
		"budget per physical GPU; this machine has ${n:-0}"
	exit 77
fi

backend=cuda_async
see_01=CUDA_VISIBLE_DEVICES=0,1
see_10=CUDA_VISIBLE_DEVICES=1,0
plat_01=cuda
plat_10=cuda
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/process/devices_order_body.sh"
devices_order_test
