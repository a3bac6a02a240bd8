# SPDX-License-Identifier: MIT
#
# devices_order_body.sh - sourced, not run: two processes that see the same
# devices in different orders (ordinal 0 in one is ordinal 1 in the other)
# share one budget per physical device, found by its UUID.  The sourcing
# script sets $backend (the base layer of the stack), and the commands that
# make a process see the devices in the natural order ($see_01: the prefix
# of a command) and in the reverse order ($see_10), with $plat_01 and
# $plat_10 the platform strings for each; then calls devices_order_test.
#
# On the host platform the order is visible="1,0" (tests/process/devices_order.sh),
# on CUDA it is CUDA_VISIBLE_DEVICES=1,0 (tests/gpu/devices_gpu.sh).

top=${XDM_TOP_BUILDDIR:-.}
ctl=$top/tools/xdmctl/xdmctl
worker=$top/tests/process/budget_worker
tmp=$(mktemp -d "${TMPDIR:-/tmp}/xdm-devices.XXXXXX") || exit 1
# %u: each device's budget is its own segment, this run's only.
group=xdm-devices-$$
# credit=0: each device's used is its worker's block, to the byte.
stack="budget key=$group-%u limit=1G credit=0 | $backend"
pids=

cleanup() {
	exec 3>&- 4>&- 5>&- 2>/dev/null
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -f /dev/shm/xdm-budget-"$group"-*
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# A bound on every wait: it only turns a hang into a failure.
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		[ "$i" -lt 1200 ] || fail "$1 never said '$2'"
		sleep 0.1
		i=$((i + 1))
	done
}

# hold NAME FD ORDER ORDINAL BYTES: a process that sees the devices in ORDER
# (01 or 10) holds BYTES on ORDINAL until descriptor FD closes.
hold() {
	mkfifo "$tmp/$1.in" || fail "mkfifo"
	if [ "$3" = 01 ]; then
		env $see_01 "$worker" hold "$plat_01" "$stack" "$5" "$4" \
			<"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	else
		env $see_10 "$worker" hold "$plat_10" "$stack" "$5" "$4" \
			<"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	fi
	pids="$pids $!"
	eval "exec $2>\"\$tmp/\$1.in\""
	wait_for "$tmp/$1.out" ready
}

# budget_of UUID PYTHON: PYTHON runs with that device's budget as b.
budget_of() {
	"$ctl" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err" || fail "xdmctl --json ps exited $?"
	KEY="$group-$1" python3 - "$tmp/ps.json" "$2" <<'PY' || fail "budget of $1: $2"
import json, os, sys
doc = json.load(open(sys.argv[1]))
bs = [b for b in doc["budgets"] if b["key"] == os.environ["KEY"]]
b = bs[0] if bs else None
exec(sys.argv[2])
PY
}

devices_order_test() {
	env $see_01 "$worker" devices "$plat_01" "$backend" >"$tmp/d01.out" 2>"$tmp/d01.err" ||
		fail "budget_worker devices exited $?"
	env $see_10 "$worker" devices "$plat_10" "$backend" >"$tmp/d10.out" 2>"$tmp/d10.err" ||
		fail "budget_worker devices (reversed) exited $?"
	u0=$(awk '$1 == 0 { print $2 }' "$tmp/d01.out")
	u1=$(awk '$1 == 1 { print $2 }' "$tmp/d01.out")
	[ -n "$u0" ] && [ -n "$u1" ] && [ "$u0" != "$u1" ] ||
		fail "ordinals 0 and 1 are not two devices: $(cat "$tmp/d01.out")"
	# The reversed order names the same devices the other way round.
	[ "$(awk '$1 == 0 { print $2 }' "$tmp/d10.out")" = "$u1" ] &&
		[ "$(awk '$1 == 1 { print $2 }' "$tmp/d10.out")" = "$u0" ] ||
		fail "the reversed order does not swap the devices: $(cat "$tmp/d10.out")"

	# a: ordinal 0 in the natural order; b: ordinal 1 reversed, the same device.
	hold a 3 01 0 $((64 << 20))
	hold b 4 10 1 $((32 << 20))
	grep -q "^uuid $u0\$" "$tmp/a.out" || fail "a's ordinal 0 is not $u0"
	grep -q "^uuid $u0\$" "$tmp/b.out" || fail "b's ordinal 1 is not $u0"
	budget_of "$u0" "
assert b, 'no budget for $u0'
assert b['device'] == '$u0', b['device']
assert b['nprocesses'] == 2, b
assert b['used'] >= 96 << 20, b['used']
"
	# c: ordinal 0 reversed, the other device: a budget of its own.
	hold c 5 10 0 $((16 << 20))
	grep -q "^uuid $u1\$" "$tmp/c.out" || fail "c's ordinal 0 is not $u1"
	budget_of "$u1" "
assert b, 'no budget for $u1'
assert b['device'] == '$u1', b['device']
assert b['nprocesses'] == 1, b
assert b['used'] >= 16 << 20 and b['used'] < 32 << 20, b['used']
"
	budget_of "$u0" "assert b['nprocesses'] == 2, b"
	exec 3>&- 4>&- 5>&-
	for p in $pids; do
		wait "$p" || fail "a worker exited $?"
	done
	pids=
	echo "PASS: $u0 is one budget for ordinal 0 of one order and ordinal 1 of the other;" \
		"$u1 has its own"
}
