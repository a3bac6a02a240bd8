#!/bin/sh
# SPDX-License-Identifier: MIT
#
# pods.sh - two pods on one fake GPU, each started with exactly what
# xdm-device-plugin's Allocate answered (through fake_kubelet, as the
# kubelet would ask), each in namespaces of its own (tests/k8s/pod.sh),
# running an unmodified CUDA program (tests/preload/preload_user) on the
# preload tests' fake driver under the shim that Allocate mounted:
#
#  - the plugin packs both onto one GPU (best fit), one budget; the shim
#    and its libxdm.so.0, as installed on a node, are mounted read-only
#    and preloaded;
#  - each is refused past its own units (CUDA_ERROR_OUT_OF_MEMORY), the
#    other's room notwithstanding;
#  - xdmctl on the host sees both groups with the limits Allocate gave;
#  - pod A killed with SIGKILL: its group is gone and its bytes are given
#    back, exactly, once the next process attaches (a third pod).
#
# Skips (77) where the plugin is not built (no gRPC) or namespaces cannot
# be made (not root, no unshare --kill-child).  Run by make check with
# XDM_TOP_BUILDDIR and XDM_TOP_SRCDIR set.

set -u

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}
plugin=$top/tools/device-plugin/xdm-device-plugin
kubelet=$top/tests/k8s/fake_kubelet
user=$top/tests/preload/preload_user
ctl=$top/tools/xdmctl/xdmctl
shim=$top/preload/.libs/libxdm-preload.so
skip() {
	echo "SKIP: $*"
	exit 77
}
[ -x "$plugin" ] && [ -x "$kubelet" ] || skip "xdm-device-plugin is not built in this tree (configure found no gRPC C++, or a sanitizer build, or --without-device-plugin)"
[ "$(id -u)" -eq 0 ] || skip "making namespaces needs root"
command -v unshare >/dev/null 2>&1 || skip "no unshare(1) (util-linux)"
unshare --help 2>&1 | grep -q -- --kill-child || skip "unshare has no --kill-child"
unshare --ipc --pid --mount --fork --kill-child true 2>/dev/null ||
	skip "this machine refuses new namespaces (a container without CAP_SYS_ADMIN?)"
for f in "$user" "$ctl" "$shim" "$top/tests/preload/fake/.libs/libcuda.so.1"; do
	[ -e "$f" ] || { echo "FAIL: $f is not built"; exit 1; }
done

. "$src/tests/lib/background.sh"
scratch xdm-pods
mkdir -m 0700 "$tmp/kubelet"
fail() {
	echo "FAIL: $*"
	for f in "$tmp"/*.log "$tmp"/*.out "$tmp"/*.err "$tmp"/*.env; do
		[ -s "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	exit 1
}
M=1048576

# The node: two fake GPUs of 64M, 8 units of 8M each.
FAKE_CUDA_DEVICES=2 FAKE_CUDA_TOTAL=64M
export FAKE_CUDA_DEVICES FAKE_CUDA_TOTAL
budget=$tmp/budget
ctr_shim=$tmp/ctr/usr/lib/xdm/libxdm-preload.so
# The shim as installed on a node: libxdm.so.0 beside it, which Allocate
# mounts beside the container's shim and preloads first.
mkdir "$tmp/node-lib"
cp "$shim" "$tmp/node-lib/libxdm-preload.so"
cp "$top/.libs/libxdm.so.0" "$tmp/node-lib/libxdm.so.0" || { echo "FAIL: no libxdm.so.0 built"; exit 1; }
LD_LIBRARY_PATH="$top/tests/k8s/fake/.libs" "$plugin" --kubelet-dir "$tmp/kubelet" \
	--unit 8M --budget-dir "$budget" --shim "$tmp/node-lib/libxdm-preload.so" \
	--container-shim "$ctr_shim" 2>"$tmp/plugin.log" &
plugin_pid=$!
pids="$pids $plugin_pid"
"$kubelet" pods "$tmp/kubelet" 2 "$tmp/a.env" 3 "$tmp/b.env" 2 "$tmp/c.env" >"$tmp/kubelet.out" ||
	fail "the fake kubelet could not allocate three pods"
cat "$tmp/kubelet.out"
kill -TERM "$plugin_pid"
wait "$plugin_pid" || fail "the plugin exited $? on SIGTERM"
pids=""

val() { sed -n "s/^$1=//p" "$tmp/$2.env"; }
gpu=$(val CUDA_VISIBLE_DEVICES a)
[ "$(val CUDA_VISIBLE_DEVICES b)" = "$gpu" ] && [ "$(val CUDA_VISIBLE_DEVICES c)" = "$gpu" ] ||
	fail "the three pods are not packed onto one GPU"
[ "$(val XDM_BUDGET_GROUP_LIMIT a)" = $((16 * M)) ] && [ "$(val XDM_BUDGET_GROUP_LIMIT b)" = $((24 * M)) ] ||
	fail "the group limits are not 2 and 3 units of 8M"
[ "$(val LD_PRELOAD a)" = "$(dirname "$ctr_shim")/libxdm.so.0 $ctr_shim" ] &&
	grep -qx "mount $tmp/node-lib/libxdm.so.0 $(dirname "$ctr_shim")/libxdm.so.0 ro" "$tmp/a.env" ||
	fail "Allocate does not mount and preload the shim's libxdm.so.0"
echo "ok: Allocate put pods a (2 units) and b (3 units) on $gpu, one budget; the shim and its libxdm mounted read-only and preloaded"

# pod NAME OPS...: preload_user in a pod of NAME's answer, its stdin a FIFO
# held here (its "hold" ends when we close it).  Sets $pid (unshare's).
pod() {
	name=$1
	shift
	mkfifo "$tmp/$name.in"
	LD_LIBRARY_PATH="$top/tests/preload/fake/.libs" \
		sh "$src/tests/k8s/pod.sh" "$tmp/$name.env" "$user" "$@" \
		<"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pid=$!
	pids="$pids $pid"
}
held() {
	wait_line "$tmp/$1.out" hold "$2" || fail "pod $1 left (or hung) before it held"
}
# rc NAME N: the result code of pod NAME's N-th alloc line.
rc() { awk -v n="$2" '$1 == "alloc" { if (++k == n) print $3 }' "$tmp/$1.out"; }

# ---- each pod is refused past its own units -------------------------------
pod a alloc:8M alloc:8M alloc:1M hold
pid_a=$pid
exec 4>"$tmp/a.in"
held a "$pid_a"
[ "$(rc a 1)" = 0 ] && [ "$(rc a 2)" = 0 ] || fail "pod a was refused inside its 16M"
[ "$(rc a 3)" = 2 ] || fail "pod a was not refused 1M past its 16M (CUDA_ERROR_OUT_OF_MEMORY)"
pod b alloc:16M alloc:8M alloc:1M hold
pid_b=$pid
exec 5>"$tmp/b.in"
held b "$pid_b"
[ "$(rc b 1)" = 0 ] && [ "$(rc b 2)" = 0 ] || fail "pod b was refused inside its 24M"
[ "$(rc b 3)" = 2 ] || fail "pod b was not refused 1M past its 24M"
grep -q "refused" "$tmp/a.err" "$tmp/b.err" 2>/dev/null || true
echo "ok: pod a holds 16M and is refused 1M more; pod b holds 24M and is refused 1M more"

# ---- the host sees both groups ---------------------------------------------
ps_json() { "$ctl" --dir "$budget" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err"; }
ps_json || fail "xdmctl --json ps exited $?"
python3 - "$tmp/ps.json" "$(val XDM_BUDGET_GROUP a)" "$(val XDM_BUDGET_GROUP b)" <<'PY' ||
import json, sys

M = 2**20
doc = json.load(open(sys.argv[1]))
assert len(doc["budgets"]) == 1, doc["budgets"]
b = doc["budgets"][0]
groups = {g["name"]: g for g in b["groups"]}
for name, limit, held in ((sys.argv[2], 16 * M, 16 * M), (sys.argv[3], 24 * M, 24 * M)):
    g = groups[name]
    assert g["limit"] == limit, g
    assert g["members"] == 1, g
    assert held <= g["used"] <= limit, g
procs = [p for p in b["processes"] if p["state"] == "live"]
assert sorted(p["group"] for p in procs) == sorted(sys.argv[2:4]), procs
for p in procs:
    assert p["pid"] == 1, p             # as its own PID namespace sees it
PY
	fail "xdmctl ps does not show both pods' groups (above)"
echo "ok: xdmctl ps on the host: both groups, their limits, each pod pid 1 in its own namespace"

# ---- pod a dies by SIGKILL: its group and its bytes come back --------------
kill -9 "$pid_a"
wait "$pid_a" 2>/dev/null
exec 4>&-
# Across PID namespaces a death shows once the kernel has closed the dead
# process's files: wait for the host to see it (an event, with a bound).
i=0
until ps_json && python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["budgets"][0]
sys.exit(0 if [p["state"] for p in b["processes"] if p["group"] == sys.argv[2]] == ["dead"] else 1)
' "$tmp/ps.json" "$(val XDM_BUDGET_GROUP a)"; do
	i=$((i + 1))
	[ $i -lt 2400 ] || fail "the host never saw pod a dead"
	sleep 0.05
done
# The next process to attach settles the dead: pod c, which holds 8M.
pod c alloc:8M hold
pid_c=$pid
exec 6>"$tmp/c.in"
held c "$pid_c"
[ "$(rc c 1)" = 0 ] || fail "pod c was refused 8M"
ps_json || fail "xdmctl --json ps exited $?"
python3 - "$tmp/ps.json" "$(val XDM_BUDGET_GROUP a)" "$(val XDM_BUDGET_GROUP b)" "$(val XDM_BUDGET_GROUP c)" <<'PY' ||
import json, sys

M = 2**20
b = json.load(open(sys.argv[1]))["budgets"][0]
groups = {g["name"]: g for g in b["groups"]}
assert sys.argv[2] not in groups, groups          # a group lives while it has a member
assert set(groups) == set(sys.argv[3:5]), groups
assert all(p["group"] != sys.argv[2] for p in b["processes"]), b["processes"]
assert b["used"] == groups[sys.argv[3]]["used"] + groups[sys.argv[4]]["used"], b
assert b["used"] <= (24 + 2 * 8) * M, b            # b's and c's at most: none of a's 16M
PY
	fail "pod a's group or bytes were not given back (above)"
echo "ok: pod a killed with SIGKILL: its group is gone and its 16M are back in the GPU's budget"
exec 5>&- 6>&-
wait "$pid_b" "$pid_c"
echo "PASS: two pods, each held to its units, one given back by SIGKILL"
