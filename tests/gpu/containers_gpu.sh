#!/bin/sh
# SPDX-License-Identifier: MIT
#
# containers_gpu.sh - tests/process/containers.sh on a GPU: processes in
# namespaces of their own, each allocating device memory through
# budget | cuda_async, share one budget through a directory.
#
# Exit 0 pass, 1 fail, 77 skip (no GPU here, by tests/gpu/check_cuda --probe;
# or what containers.sh skips for: root, unshare).  Run by make check with
# XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR and XDM_MODULE_PATH set.

set -u

# One GPU test program at a time (tests/lib/cudatest.c says why).
if command -v flock >/dev/null 2>&1; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}
probe=$top/tests/gpu/check_cuda
if [ ! -x "$probe" ]; then
	echo "SKIP: $probe is not built"
	exit 77
fi
"$probe" --probe
rc=$?
case $rc in
0) ;;
77) echo "SKIP: no GPU here (tests/gpu/check_cuda --probe)"; exit 77 ;;
*) echo "FAIL: tests/gpu/check_cuda --probe exited $rc"; exit 1 ;;
esac

XDM_CONTAINERS_PLATFORM=cuda XDM_CONTAINERS_BELOW=cuda_async
export XDM_CONTAINERS_PLATFORM XDM_CONTAINERS_BELOW
exec sh "$src/tests/process/containers.sh"
