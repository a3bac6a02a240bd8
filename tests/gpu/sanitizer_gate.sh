#!/bin/sh
# SPDX-License-Identifier: MIT
#
# sanitizer_gate.sh - the Compute Sanitizer acceptance gate of the CUDA
# backends (issue 3; doc/sanitizer-gate.md says what it proves).
#
#  a. the GPU suite, scaled down, under memcheck must run clean: exit 0 and
#     "ERROR SUMMARY: 0 errors";
#  b. a write one byte past a 1000-byte cuda_direct block (tests/gpu/cuda_oob)
#     must be caught: exit 9 and an invalid __global__ write of size 1;
#  c. the same write on cuda_async is recorded, caught or not: evidence
#     for the docs, not a verdict.  So is a plain run of (b).
#
# Every report is kept in tests/gpu/sanitizer-*.log of the build tree.  Exit 0
# pass, 1 fail, 77 skip (no GPU, or no compute-sanitizer on PATH).  Run by
# make check from the build directory with XDM_TOP_BUILDDIR and
# XDM_MODULE_PATH set by the harness.

set -u

# The GPU lock for the whole gate, taken here: a program under
# compute-sanitizer must reach CUDA within the sanitizer's launch timeout
# (10 s), so it must not wait for the lock itself (XDM_GPU_LOCK_HELD tells
# it that its parent holds it; tests/lib/cudatest.c).
if command -v flock >/dev/null 2>&1; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
suite=$top/tests/gpu/check_cuda
oob=$top/tests/gpu/cuda_oob
logs=$top/tests/gpu

for prog in "$suite" "$oob"; do
	if [ ! -x "$prog" ]; then
		echo "SKIP: $prog is not built"
		exit 77
	fi
done

# The suite's own probe: the same decision check_cuda makes.
"$suite" --probe
rc=$?
case $rc in
0) ;;
77) echo "SKIP: no GPU here (tests/gpu/check_cuda --probe)"; exit 77 ;;
*) echo "FAIL: tests/gpu/check_cuda --probe exited $rc"; exit 1 ;;
esac
if ! command -v compute-sanitizer >/dev/null 2>&1; then
	echo "SKIP: compute-sanitizer is not on PATH (it ships with the CUDA toolkit, in bin/)"
	exit 77
fi

# memcheck LOG PROGRAM ARGS...: run under memcheck, keep everything in LOG,
# return the exit status.  A libtool wrapper script is not the program; the
# tests are linked -no-install so there is none, but should one appear,
# libtool --mode=execute runs the real binary with its library path.
memcheck() {
	log=$1
	shift
	if [ "$(head -c 2 "$1")" = '#!' ] && [ -x "$top/libtool" ]; then
		set -- "$top/libtool" --mode=execute \
			compute-sanitizer --tool memcheck --error-exitcode 9 "$@"
	else
		set -- compute-sanitizer --tool memcheck --error-exitcode 9 "$@"
	fi
	echo "\$ $*" >"$log"
	"$@" >>"$log" 2>&1
	status=$?
	echo "exit status: $status" >>"$log"
	return $status
}

# show LOG: the lines of LOG that matter.
interesting='ERROR SUMMARY|Invalid __global__|Program hit|Checks:|:[FE]:'
interesting="$interesting|^cuda_oob:|SKIP|ERROR:|watchdog"
show() {
	grep -E "$interesting" "$1" | sed 's/^/    /' | head -40
}

compute-sanitizer --version 2>&1 | sed -n '1,3p'
fail=0

# a. The suite under memcheck.  XDM_TEST_SANITIZER leaves out the tests
# that make the driver fail on purpose (memcheck counts a failed API call as
# an error) or that race on purpose; XDM_TEST_SCALE shrinks the churn.
a_log=$logs/sanitizer-suite.log
(
	XDM_TEST_SCALE=0.01 XDM_TEST_SANITIZER=1
	export XDM_TEST_SCALE XDM_TEST_SANITIZER
	memcheck "$a_log" "$suite"
)
rc=$?
if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$a_log"; then
	echo "gate a: the GPU suite under memcheck is clean (exit 0, ERROR SUMMARY: 0 errors)"
	show "$a_log"
else
	echo "gate a: FAIL: the GPU suite under memcheck exited $rc (want 0, no errors)"
	show "$a_log"
	echo "    --- last lines of $a_log"
	tail -40 "$a_log" | sed 's/^/    /'
	fail=1
fi

# a2. The virtual-memory backend's suites under memcheck, the same way:
# cuda_vmm alone, and the pool over it (releases under a held kernel).
for v in check_vmm_cuda check_pool_vmm_cuda; do
	v_log=$logs/sanitizer-$v.log
	(
		XDM_TEST_SANITIZER=1
		export XDM_TEST_SANITIZER
		memcheck "$v_log" "$top/tests/gpu/$v"
	)
	rc=$?
	if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$v_log"; then
		echo "gate a2: tests/gpu/$v under memcheck is clean (exit 0, ERROR SUMMARY: 0 errors)"
		show "$v_log"
	else
		echo "gate a2: FAIL: tests/gpu/$v under memcheck exited $rc (want 0, no errors)"
		show "$v_log"
		tail -40 "$v_log" | sed 's/^/    /'
		fail=1
	fi
done

# b. The planted write on cuda_direct must be caught.
b_log=$logs/sanitizer-oob-cuda_direct.log
memcheck "$b_log" "$oob" cuda_direct
rc=$?
if [ $rc -eq 9 ] && grep -qE 'Invalid __global__ write of size 1( |$)' "$b_log"; then
	echo "gate b: the planted write on cuda_direct is caught" \
	     "(exit 9, invalid __global__ write of size 1)"
	show "$b_log"
else
	echo "gate b: FAIL: the planted write on cuda_direct: exit $rc" \
	     "(want 9 and an invalid __global__ write of size 1)"
	show "$b_log"
	echo "    --- last lines of $b_log"
	tail -40 "$b_log" | sed 's/^/    /'
	fail=1
fi

# c. The same write inside cuda_async's pool: recorded either way.
c_log=$logs/sanitizer-oob-cuda_async.log
memcheck "$c_log" "$oob" cuda_async
rc=$?
if [ $rc -eq 9 ] && grep -qE 'Invalid __global__ write of size 1( |$)' "$c_log"; then
	echo "cuda_async planted write: caught (exit 9)"
else
	echo "cuda_async planted write: not caught (exit $rc)"
fi
show "$c_log"

# d. The same write over cuda_vmm, recorded: alone, a block is whole
# granules and the byte past it lands in the next, unmapped granule; under
# the pool it lands in the rest of a mapped granule.
for stack in cuda_vmm "pool | cuda_vmm"; do
	d_log=$logs/sanitizer-oob-$(echo "$stack" | tr -d ' |').log
	memcheck "$d_log" "$oob" "$stack"
	rc=$?
	if [ $rc -eq 9 ] && grep -qE 'Invalid __global__ write of size 1( |$)' "$d_log"; then
		echo "$stack planted write: caught (exit 9)"
	else
		echo "$stack planted write: not caught (exit $rc)"
	fi
	show "$d_log"
done

# And (b) without the sanitizer: what a plain run notices.
p_log=$logs/sanitizer-oob-plain.log
echo "\$ $oob cuda_direct" >"$p_log"
"$oob" cuda_direct >>"$p_log" 2>&1
rc=$?
echo "exit status: $rc" >>"$p_log"
echo "plain run of the planted write on cuda_direct, no sanitizer: exit $rc"
show "$p_log"

exit $fail
