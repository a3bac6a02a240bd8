#!/bin/sh
# SPDX-License-Identifier: MIT
#
# plugin.sh - xdm-device-plugin against a fake kubelet (fake_kubelet,
# built from the same api.proto) on two fake GPUs (tests/k8s/fake_nvml.c):
# registration and the socket's mode, the options, ListAndWatch's units,
# GetPreferredAllocation's packing, Allocate and its refusals, a kubelet
# restart (the plugin serves again and registers again), a GPU lost
# (Unhealthy in the stream), then SIGTERM (the socket removed, exit 0).
# Then the plugin's bad configurations: a unit bigger than a GPU, no GPU,
# a budget directory it cannot use: each said in a sentence, the plugin up.
#
# Skips (77) where the plugin is not built (configure found no gRPC).  Run
# by make check with XDM_TOP_BUILDDIR set.

set -u

top=${XDM_TOP_BUILDDIR:-.}
plugin=$top/tools/device-plugin/xdm-device-plugin
kubelet=$top/tests/k8s/fake_kubelet
nvml=$top/tests/k8s/fake/.libs
[ -x "$plugin" ] && [ -x "$kubelet" ] ||
	{ echo "SKIP: xdm-device-plugin is not built in this tree (configure found no gRPC C++, or a sanitizer build, or --without-device-plugin)"; exit 77; }
[ -e "$nvml/libnvidia-ml.so.1" ] || { echo "FAIL: $nvml/libnvidia-ml.so.1 is not built"; exit 1; }

# Unix socket paths are short (107 bytes): a short temporary directory.
tmp=$(mktemp -d /tmp/xdm-dp.XXXXXX) || exit 1
dir=$tmp/kubelet
mkdir -m 0700 "$dir" "$tmp/shim"
: >"$tmp/shim/libxdm-preload.so"
pid=""
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	echo "--- the plugin's log"
	cat "$tmp/plugin.log" 2>/dev/null
	exit 1
}

# start_plugin LOG FLAGS...: the plugin over the fake NVML's two 64M GPUs.
start_plugin() {
	log=$1
	shift
	FAKE_CUDA_DEVICES=${devices:-2} FAKE_CUDA_TOTAL=64M FAKE_NVML_LOST=$tmp/lost \
	LD_LIBRARY_PATH="$nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$plugin" --kubelet-dir "$dir" --budget-dir "$tmp/budget" \
		--shim "$tmp/shim/libxdm-preload.so" --health-interval 1 "$@" 2>"$log" &
	pid=$!
}

# wait_log LOG TEXT: until the plugin's log says TEXT (an event; the bound
# is a safety net for a plugin that never says it).
wait_log() {
	i=0
	until grep -q -- "$2" "$1"; do
		i=$((i + 1))
		[ $i -lt 1200 ] || fail "the plugin never logged '$2'"
		kill -0 "$pid" 2>/dev/null || fail "the plugin exited before logging '$2'"
		sleep 0.1
	done
}

# ---- the kubelet's view: 8 units of 8M on each GPU ----------------------
start_plugin "$tmp/plugin.log" --unit 8M
"$kubelet" scenario "$dir" "$tmp/lost" 8 || fail "the fake kubelet's scenario (above)"
sock=$dir/xdm.io-gpu-memory.sock
[ -S "$sock" ] || fail "the plugin's socket is gone before SIGTERM"

# Only root (the kubelet) may speak to the plugin: with the directory
# opened for a moment to everyone, another user is still refused by the
# socket itself; root, the control, connects.
connect='import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except PermissionError:
    print("refused")'
# The system's python: one under root's home is not another user's to run.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 && [ -x /usr/bin/python3 ]; then
	chmod 0711 "$dir"
	other=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "$connect" "$sock" 2>&1)
	own=$(/usr/bin/python3 -c "$connect" "$sock" 2>&1)
	chmod 0700 "$dir"
	[ "$own" = connected ] || fail "root could not connect to the plugin's socket: $own"
	[ "$other" = refused ] || fail "user 65534 reached the plugin's socket: $other"
	echo "ok: user 65534 is refused by the plugin's socket (mode 0600), root connects"
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc -eq 0 ] || fail "the plugin exited $rc on SIGTERM"
[ ! -e "$sock" ] || fail "the plugin left its socket $sock after SIGTERM"
echo "ok: SIGTERM: the plugin removed its socket and exited 0"
grep -q "budget directory $tmp/budget" "$tmp/plugin.log" || true
[ "$(stat -c %a "$tmp/budget")" = 700 ] || fail "the budget directory is not mode 0700"
echo "ok: the plugin made its budget directory, mode 0700"

# ---- bad configurations: a sentence each, and the plugin stays up --------
# A flag's bad value is a usage error that names the flag.
"$plugin" --unit lots 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--unit" "$tmp/bad.err" ||
	fail "--unit lots: exit $rc, '$(cat "$tmp/bad.err")'"
echo "ok: --unit lots: $(cat "$tmp/bad.err")"

# A unit bigger than a GPU: that GPU advertises 0 units, said once.
rm -f "$tmp/lost"
start_plugin "$tmp/big.log" --unit 128M
wait_log "$tmp/big.log" "serving 0 devices"
[ "$(grep -c "less than one unit" "$tmp/big.log")" -eq 2 ] ||
	fail "a unit bigger than the GPUs is not said once per GPU: $(cat "$tmp/big.log")"
kill -TERM "$pid"; wait "$pid"; pid=""
echo "ok: a unit bigger than a GPU: 0 units, said once per GPU"

# No GPU: 0 devices, a sentence, still serving.
devices=0 start_plugin "$tmp/none.log"
wait_log "$tmp/none.log" "serving 0 devices"
grep -q "NVML lists no GPU on this node" "$tmp/none.log" || fail "no GPU is not said: $(cat "$tmp/none.log")"
kill -TERM "$pid"; wait "$pid"; pid=""
echo "ok: no GPU: 0 devices, said in a sentence"

# A budget directory others may write in: said at start, the plugin up,
# and Allocate refuses with the sentence (tests/k8s/check_dp covers it).
chmod 0777 "$tmp/budget"
start_plugin "$tmp/dir.log" --unit 8M
wait_log "$tmp/dir.log" "serving 16 devices"
grep -q "writable by nobody else.*Allocate refuses every pod" "$tmp/dir.log" ||
	fail "a budget directory others may write in is not said: $(cat "$tmp/dir.log")"
kill -TERM "$pid"; wait "$pid"; pid=""
echo "ok: an unusable budget directory: said at start, the plugin serves"
echo "PASS: xdm-device-plugin against the fake kubelet"
