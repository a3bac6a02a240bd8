#!/bin/sh
# SPDX-License-Identifier: MIT
#
# devices_order.sh - one budget per physical device whatever the order a
# process sees the devices in, on the host platform: visible="1,0" orders
# host devices as CUDA_VISIBLE_DEVICES=1,0 orders GPUs.  tests/gpu/devices_gpu.sh
# runs the same test on two GPUs.
#
# Exit 0 pass, 1 fail.  Run by make check with XDM_TOP_BUILDDIR,
# XDM_TOP_SRCDIR and XDM_MODULE_PATH set.

set -u

backend=host
see_01=
see_10=
plat_01="host devices=2"
plat_10='host devices=2 visible="1,0"'
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/process/devices_order_body.sh"
devices_order_test
