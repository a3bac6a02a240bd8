#!/bin/sh
# SPDX-License-Identifier: MIT
#
# containers.sh - one budget across "containers": processes in namespaces
# of their own (IPC, PID and mount, each with its own /dev/shm and /proc),
# sharing only a directory, as pods share a hostPath volume.
#
#  - each is refused while the other holds, so the limit is one: a pid
#    seen from the other container (every worker here is pid 1 of its
#    own) never makes a live process look dead;
#  - xdmctl on the host sees both, with their containers' names and the
#    pids their containers see;
#  - a container killed with SIGKILL is settled from another one: its
#    bytes come back, exactly.
#
# Needs root and unshare(1) (util-linux) with --kill-child: skips (77)
# with a sentence otherwise.  Run by make check from the build directory,
# with XDM_TOP_BUILDDIR, XDM_MODULE_PATH and XDM_CONFIG set.  The workers
# run on the host platform over "host", or on XDM_CONTAINERS_PLATFORM over
# XDM_CONTAINERS_BELOW (tests/gpu/containers_gpu.sh: cuda, cuda_async).

set -u

top=${XDM_TOP_BUILDDIR:-.}
worker=$top/tests/process/budget_worker
ctl=$top/tools/xdmctl/xdmctl

skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" -eq 0 ] || skip "making namespaces needs root"
command -v unshare >/dev/null 2>&1 || skip "no unshare(1) (util-linux)"
unshare --help 2>&1 | grep -q -- --kill-child || skip "unshare has no --kill-child"
unshare --ipc --pid --mount --fork --kill-child true 2>/dev/null ||
	skip "this machine refuses new namespaces (a container without CAP_SYS_ADMIN?)"

. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/lib/background.sh"
scratch xdm-containers
shared=$tmp/shared
mkdir -m 0700 "$shared"
key=containers$$
platform=${XDM_CONTAINERS_PLATFORM:-host}
below=${XDM_CONTAINERS_BELOW:-host}

fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# container NAME BYTES: a worker holding BYTES in a namespace of its own
# (its /dev/shm a fresh tmpfs, its /proc its own), in group NAME, the
# budget in the shared directory.  Its stdin is a FIFO the test holds
# open: closing it makes the worker free and leave.  Sets $pid to the
# host's pid of unshare, whose death kills the worker (--kill-child).
container() {
	name=$1 bytes=$2
	# credit=0: each container's row is its block, to the byte.
	spec="budget key=$key dir=$shared limit=8M credit=0 group=$name container=$name"
	mkfifo "$tmp/$name.in"
	unshare --ipc --pid --mount --fork --kill-child --mount-proc sh -c '
		mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 125
		exec "$@"' container "$worker" hold "$platform" "$spec | $below" \
		"$bytes" <"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pid=$!
	pids="$pids $pid"
	# The write end, held here: the worker's EOF is ours to give.
	eval "exec $3<>\"$tmp/$name.in\""
}

# ready NAME: wait until the worker said ready (or left); a safety net,
# never a timing.
ready() {
	i=0
	while [ $i -lt 2400 ]; do
		grep -q '^ready$' "$tmp/$1.out" 2>/dev/null && return 0
		[ -s "$tmp/$1.err" ] && return 1
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# ---- A holds 6M: B is refused 4M, whatever pid A has in B's eyes ---------
container a 6291456 4
pid_a=$pid
ready a || fail "container a never got ready"
container b 4194304 5
pid_b=$pid
wait "$pid_b"
[ $? -ne 0 ] || fail "container b got 4M beside a's 6M under an 8M limit"
grep -q "the device refused" "$tmp/b.err" ||
	fail "b's refusal does not say the device refused: $(cat "$tmp/b.err")"
exec 5>&-

# ---- B with 1M fits; the host sees both ------------------------------------
rm -f "$tmp/b.in" "$tmp/b.out" "$tmp/b.err"
container b 1048576 5
pid_b=$pid
ready b || fail "container b never got ready with 1M"
XDMCTL_SHM_DIR=$shared "$ctl" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err" ||
	fail "xdmctl --json ps exited $?"
python3 - "$tmp/ps.json" "$key" <<'PY' || fail "xdmctl ps from the host (above)"
import json, sys

doc = json.load(open(sys.argv[1]))
budgets = [b for b in doc["budgets"] if b["key"] == sys.argv[2]]
assert len(budgets) == 1, budgets
b = budgets[0]
assert b["used"] == 7 * 2**20, b["used"]
procs = {p["container"]: p for p in b["processes"]}
assert set(procs) == {"a", "b"}, procs
for name, size in (("a", 6), ("b", 1)):
    p = procs[name]
    assert p["pid"] == 1, p            # as its own container sees it
    assert p["state"] == "live", p
    assert p["bytes"] == size * 2**20, p
PY

# ---- A dies by SIGKILL; C, in a third container, is settled A's share ------
kill -9 "$pid_a"
wait "$pid_a" 2>/dev/null
exec 4>&-
# Across pid namespaces a death shows when the kernel has closed the dead
# process's files, which may be a moment after its parent reaped it: wait
# for the host to see it (an event, with a safety net).
i=0
until XDMCTL_SHM_DIR=$shared "$ctl" --json ps 2>/dev/null | python3 -c '
import json, sys
b = [b for b in json.load(sys.stdin)["budgets"] if b["key"] == sys.argv[1]][0]
sys.exit(0 if [p["state"] for p in b["processes"] if p["container"] == "a"] == ["dead"] else 1)
' "$key"; do
	i=$((i + 1))
	[ $i -lt 2400 ] || fail "the host never saw container a dead"
	sleep 0.05
done
container c 7340032 6
pid_c=$pid
ready c || fail "container c was not given 7M after a died (a's 6M not settled)"
XDMCTL_SHM_DIR=$shared "$ctl" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err" ||
	fail "xdmctl --json ps exited $?"
python3 - "$tmp/ps.json" "$key" <<'PY' || fail "xdmctl ps after the kill (above)"
import json, sys

doc = json.load(open(sys.argv[1]))
b = [b for b in doc["budgets"] if b["key"] == sys.argv[2]][0]
assert b["used"] == 8 * 2**20, b["used"]
assert sorted(p["container"] for p in b["processes"]) == ["b", "c"], b["processes"]
PY

# ---- everyone leaves: nothing is left counted, the segment goes -----------
exec 5>&- 6>&-
wait "$pid_b" || fail "b did not leave cleanly"
wait "$pid_c" || fail "c did not leave cleanly"
[ ! -e "$shared/xdm-budget-$key" ] || fail "the last one out left the segment"
echo "PASS: two containers share one budget through $shared on $platform ($below);" \
	"a kill in one is settled in another"
