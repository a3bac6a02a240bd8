#!/bin/sh
# SPDX-License-Identifier: MIT
#
# budget_gpu.sh - the budget's multi-process test on a GPU: 8 worker
# processes x 4 threads draw on one budget through budget | cuda_async,
# watched from outside (tests/process/check_budget, test many_processes_never_exceed).
# The suite's own process never touches CUDA; every worker is an exec.
#
# Exit 0 pass, 1 fail, 77 skip (no GPU here, by tests/gpu/check_cuda --probe).
# Run by make check with XDM_TOP_BUILDDIR and XDM_MODULE_PATH set.

set -u

# One GPU test program at a time, as tests/lib/cudatest.c's programs take it:
# GPU tests read the driver's free memory, which another program moves.
if command -v flock >/dev/null 2>&1; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
probe=$top/tests/gpu/check_cuda
suite=$top/tests/process/check_budget

for prog in "$probe" "$suite"; do
	if [ ! -x "$prog" ]; then
		echo "SKIP: $prog is not built"
		exit 77
	fi
done

"$probe" --probe
rc=$?
case $rc in
0) ;;
77) echo "SKIP: no GPU here (tests/gpu/check_cuda --probe)"; exit 77 ;;
*) echo "FAIL: tests/gpu/check_cuda --probe exited $rc"; exit 1 ;;
esac

XDM_BUDGET_TEST_PLATFORM=cuda
XDM_BUDGET_TEST_STACK=${XDM_BUDGET_TEST_STACK:-cuda_async}
CK_RUN_CASE=multiprocess
export XDM_BUDGET_TEST_PLATFORM XDM_BUDGET_TEST_STACK CK_RUN_CASE
echo "budget | $XDM_BUDGET_TEST_STACK on the cuda platform, 8 processes x 4 threads"
"$suite"
rc=$?
if [ $rc -ne 0 ]; then
	echo "FAIL: tests/process/check_budget (multiprocess, $XDM_BUDGET_TEST_STACK) exited $rc"
	exit 1
fi
echo "PASS: budget | $XDM_BUDGET_TEST_STACK never exceeded its limit"
exit 0
