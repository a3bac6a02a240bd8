#!/bin/sh
# SPDX-License-Identifier: MIT
#
# gpu_python.sh - the framework tests on a GPU (tests/gpu/, pytest): torch,
# CuPy and Numba allocating through xdm, one budget across Python processes,
# and unmodified programs (a plain CUDA program, torch, CuPy, JAX) held to
# the budget by xdm-run (test_preload.py).
# Each torch test runs its program in a fresh python (torch's allocator can
# be switched only before its first CUDA allocation).
#
# Exit 0 pass, 1 fail, 77 skip: where python3 cannot import torch, sees no
# GPU through it, or has no pytest.  Where torch and a GPU are, the torch
# glue must have been built (configure --with-torch), or this fails.
# Run by make check with XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR and XDM_MODULE_PATH set;
# arguments go to pytest (-x, -k NAME, -rA).

set -u

# One GPU test program at a time, as tests/lib/cudatest.c's programs take it:
# GPU tests read the driver's free memory, which another program moves.
if command -v flock >/dev/null 2>&1; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-.}
py=${PYTHON:-python3}
# configure's PYTHON is ":" where it found none.
[ "$py" = ":" ] && py=python3

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
	echo "SKIP: $py cannot import torch"
	exit 77
fi
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
	>/dev/null 2>&1; then
	echo "SKIP: torch sees no CUDA device here"
	exit 77
fi
if ! "$py" -c 'import pytest' >/dev/null 2>&1; then
	echo "SKIP: $py has no pytest"
	exit 77
fi
glue=$top/frameworks/torch/.libs/libxdm-torch.so
if [ ! -f "$glue" ]; then
	echo "FAIL: torch and a GPU are here, but $glue was not built (see configure's" \
	     "'PyTorch glue' line; --with-torch)"
	exit 1
fi

PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
XDM_LIBRARY=$top/.libs/libxdm.so
XDM_TORCH_LIBRARY=$glue
# Nothing written into the source tree (distcheck makes it read-only).
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH XDM_LIBRARY XDM_TORCH_LIBRARY PYTHONDONTWRITEBYTECODE
# The suite's host.conf is for the CPU tests: each test here names its stack.
unset XDM_CONFIG
exec "$py" -m pytest -v -p no:cacheprovider -rs "$@" "$src/tests/gpu"
