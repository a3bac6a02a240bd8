#!/bin/sh
# SPDX-License-Identifier: MIT
#
# k8s_pods_gpu.sh - two Kubernetes pods on one real GPU, as
# xdm-device-plugin sets them up, without a kubelet: the plugin's own
# Allocate logic (tests/k8s/xdm_k8s_allocate, over the real NVML) answers
# for two containers of 2 units of 1 GiB each on the first GPU, and each
# "pod" starts with exactly that environment and those mounts, in PID,
# mount and IPC namespaces of its own (tests/k8s/pod.sh):
#
#  - pod a runs unmodified torch, which allocates 64 MiB blocks past its
#    slice under the shim: refused (torch.cuda.OutOfMemoryError) inside 2 GiB;
#  - pod b runs unmodified JAX the same way: refused (RESOURCE_EXHAUSTED)
#    inside 2 GiB (skipped with a line where JAX is not installed);
#  - while both hold, xdmctl on the host sees both groups, each within its
#    limit, and the sum within the GPU's budget;
#  - when both have left, their groups are gone.
#
# Needs only the build tree (configure && make; no gRPC).  Run from the top
# of the build tree, or with XDM_TOP_BUILDDIR (and XDM_TOP_SRCDIR) set.
# Exit 0 pass, 1 fail, 77 skip (no GPU; no namespaces when not root is not
# a skip: the pods then run without namespaces, with the same environment,
# as they also do with XDM_K8S_NO_NAMESPACES=1).
# Takes about a minute (two framework start-ups, side by side).

set -u

if command -v flock >/dev/null 2>&1 && [ -z "${XDM_GPU_LOCK_HELD:-}" ]; then
	exec 9>>"${TMPDIR:-/tmp}/xdm-gpu-tests.lock" && flock 9 &&
		XDM_GPU_LOCK_HELD=1 && export XDM_GPU_LOCK_HELD
fi

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
top=$(cd "$top" && pwd)
alloc=$top/tests/k8s/xdm_k8s_allocate
ctl=$top/tools/xdmctl/xdmctl
shim=$top/preload/.libs/libxdm-preload.so
probe=$top/tests/gpu/check_cuda
py=${PYTHON:-python3}
G=1073741824

say() { echo "k8s_pods_gpu: $*"; }
for f in "$alloc" "$ctl" "$shim"; do
	[ -e "$f" ] || { echo "FAIL: $f is not built (configure && make first)"; exit 1; }
done
if [ -x "$probe" ]; then
	"$probe" --probe >/dev/null 2>&1
	case $? in
	0) ;;
	77) echo "SKIP: no GPU here (tests/gpu/check_cuda --probe)"; exit 77 ;;
	*) echo "FAIL: tests/gpu/check_cuda --probe failed"; exit 1 ;;
	esac
fi

. "$src/tests/lib/background.sh"
scratch xdm-k8s-gpu
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
dump() {
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f"; tail -20 "$f"; }
	done
}

# Namespaces where this is root (as a container runtime makes them); the
# same environment without them otherwise, the shim then at its host path.
budget=$tmp/budget
if [ -z "${XDM_K8S_NO_NAMESPACES:-}" ] && [ "$(id -u)" -eq 0 ] && unshare --help 2>&1 | grep -q -- --kill-child &&
	unshare --ipc --pid --mount --fork --kill-child true 2>/dev/null; then
	ns=yes
	ctr_shim=$tmp/ctr/usr/lib/xdm/libxdm-preload.so
else
	ns=no
	ctr_shim=$shim
	say "not root or no namespaces here: the pods run without namespaces, with the same environment"
fi
flags="--unit 1G --budget-dir $budget --shim $shim --container-shim $ctr_shim"

# ---- what the plugin would advertise, from the real NVML --------------------
# shellcheck disable=SC2086
"$alloc" $flags --list >"$tmp/list" 2>"$tmp/list.err" || {
	cat "$tmp/list.err"; echo "FAIL: xdm_k8s_allocate --list"; exit 1; }
gpu=$(awk 'NR == 1 { sub(/-u[0-9]+$/, "", $1); print $1 }' "$tmp/list")
[ -n "$gpu" ] || { cat "$tmp/list.err"; echo "SKIP: NVML lists no GPU with a unit of 1 GiB"; exit 77; }
units=$(grep -c "^$gpu-u[0-9]* Healthy$" "$tmp/list")
say "GPU $gpu: $units Healthy units of 1 GiB ($(wc -l <"$tmp/list") devices on the node)"
[ "$units" -ge 4 ] || { echo "SKIP: $gpu has fewer than 4 GiB"; exit 77; }

# ---- Allocate for two containers: units 0-1 and 2-3 of that GPU -------------
# shellcheck disable=SC2086
"$alloc" $flags "$gpu-u0" "$gpu-u1" >"$tmp/a.env" 2>"$tmp/a.err" &&
	"$alloc" $flags "$gpu-u2" "$gpu-u3" >"$tmp/b.env" 2>>"$tmp/a.err" ||
	{ cat "$tmp/a.err"; echo "FAIL: xdm_k8s_allocate refused"; exit 1; }
val() { sed -n "s/^$1=//p" "$tmp/$2.env"; }
say "pod a: group $(val XDM_BUDGET_GROUP a), limit $(val XDM_BUDGET_GROUP_LIMIT a) bytes"
say "pod b: group $(val XDM_BUDGET_GROUP b), limit $(val XDM_BUDGET_GROUP_LIMIT b) bytes"
[ "$(val XDM_BUDGET_GROUP_LIMIT a)" = $((2 * G)) ] && [ "$(val CUDA_VISIBLE_DEVICES a)" = "$gpu" ] ||
	fail "Allocate's answer for pod a is not 2 GiB on $gpu: $(cat "$tmp/a.env")"

# run_pod NAME CODE: python3 -c CODE in pod NAME, its stdin a FIFO held
# here (the pod holds its memory until we close it).
run_pod() {
	mkfifo "$tmp/$1.in"
	if [ $ns = yes ]; then
		sh "$src/tests/k8s/pod.sh" "$tmp/$1.env" "$py" -c "$2" \
			<"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	else
		# The answer's variables, one a line (a value may hold a space).
		sh -c 'while IFS= read -r line; do
				case $line in mount\ *|"") ;; *=*) export "$line" ;; esac
			done <"$1"; shift; exec "$@"' pod "$tmp/$1.env" "$py" -c "$2" \
			<"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	fi
	pid=$!
	pids="$pids $pid"
}
# filled NAME PID: until pod NAME printed its result; false if it left
# without one (or took past the bound, a safety net).
filled() {
	wait_line "$tmp/$1.out" RESULT "$2"
}

TORCH='
import sys
import torch
free, total = torch.cuda.mem_get_info()
blocks, oom = [], None
try:
    while len(blocks) < 4096:
        blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError as e:
    oom = type(e).__name__
print("RESULT", len(blocks), oom, total, flush=True)
sys.stdin.readline()
'
JAX='
import sys
try:
    import jax, jax.numpy as jnp
except ImportError:
    print("SKIP no jax", flush=True)
    sys.exit(0)
blocks, error = [], None
try:
    while len(blocks) < 4096:
        blocks.append(jnp.ones((16 << 20,), dtype=jnp.float32))
        blocks[-1].block_until_ready()
except Exception as e:
    error = str(e).split("\n")[0][:200]
print("RESULT", len(blocks), "RESOURCE_EXHAUSTED" in str(error) or "out of memory" in str(error).lower(),
      jax.devices()[0], flush=True)
print("error:", error, flush=True)
sys.stdin.readline()
'
say "starting pod a (torch) and pod b (JAX), namespaces: $ns"
run_pod a "$TORCH"
pid_a=$pid
exec 4>"$tmp/a.in"
run_pod b "$JAX"
pid_b=$pid
exec 5>"$tmp/b.in"

# ---- each is refused past its slice ------------------------------------------
if filled a "$pid_a"; then
	set -- $(grep "^RESULT" "$tmp/a.out")
	say "pod a (torch): $2 blocks of 64 MiB, then $3; torch saw a total of $4 bytes"
	if [ "$3" = OutOfMemoryError ] && [ "$2" -ge 1 ] && [ $(($2 * 64)) -le 2048 ]; then
		pass "pod a (torch) refused past its 2 GiB slice, after $(($2 * 64)) MiB"
	else
		fail "pod a (torch) was not refused inside its 2 GiB slice"
	fi
else
	fail "pod a (torch) gave no result"
fi
jax=yes
if filled b "$pid_b"; then
	set -- $(grep "^RESULT" "$tmp/b.out")
	say "pod b (JAX on $4): $2 arrays of 64 MiB, then refused: $3 ($(sed -n 's/^error: //p' "$tmp/b.out"))"
	if [ "$3" = True ] && [ $(($2 * 64)) -le 2048 ]; then
		pass "pod b (JAX) refused past its 2 GiB slice, after $(($2 * 64)) MiB"
	else
		fail "pod b (JAX) was not refused inside its 2 GiB slice"
	fi
elif grep -q "^SKIP" "$tmp/b.out" 2>/dev/null; then
	jax=no
	say "pod b: no JAX in $py here: its part is skipped"
else
	fail "pod b (JAX) gave no result"
fi

# ---- the host sees both groups, and the sum within the GPU's budget ---------
"$ctl" --dir "$budget" ps || fail "xdmctl ps exited $?"
"$ctl" --dir "$budget" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err" || fail "xdmctl --json ps exited $?"
"$py" - "$tmp/ps.json" "$(val XDM_BUDGET_GROUP a)" "$(val XDM_BUDGET_GROUP b)" "$jax" <<'PY' &&
import json, sys

doc = json.load(open(sys.argv[1]))
[b] = doc["budgets"]
groups = {g["name"]: g for g in b["groups"]}
want = sys.argv[2:3] + (sys.argv[3:4] if sys.argv[4] == "yes" else [])
for name in want:
    g = groups[name]
    assert g["members"] >= 1 and g["used"] <= g["limit"] == 2 << 30, g
    print("k8s_pods_gpu: group %s holds %d of %d bytes" % (name, g["used"], g["limit"]))
assert b["used"] <= b["limit"], b
assert sum(g["used"] for g in groups.values()) <= b["used"], b
print("k8s_pods_gpu: the GPU's budget: %d of %d bytes used" % (b["used"], b["limit"]))
PY
	pass "xdmctl ps sees both groups, each within its limit, the sum within the GPU's budget" ||
	fail "xdmctl ps (above)"

# ---- both leave: their groups are gone ----------------------------------------
exec 4>&- 5>&-
wait
pids=""
"$ctl" --dir "$budget" --json ps >"$tmp/ps.json" 2>/dev/null
"$py" - "$tmp/ps.json" "$(val XDM_BUDGET_GROUP a)" "$(val XDM_BUDGET_GROUP b)" <<'PY' &&
import json, sys
budgets = json.load(open(sys.argv[1]))["budgets"]
assert all(g["name"] not in sys.argv[2:] for b in budgets for g in b["groups"]), budgets
PY
	pass "both pods left: their groups are gone" || fail "a group outlived its pod"

[ $failed -eq 0 ] || { dump; echo "FAIL: k8s_pods_gpu"; exit 1; }
echo "PASS: k8s_pods_gpu"
