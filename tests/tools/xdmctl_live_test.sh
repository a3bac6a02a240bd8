# SPDX-License-Identifier: MIT
#
# xdmctl_live_test.sh - sourced, not run: what the tests of the xdmctl
# commands that look at live processes (ps, budget, top) share.  The
# sourcing script sets $name_of_test first.  It gets $ctl, $worker and
# $bench; $key, a budget key of this run only, and $stack on it; $tmp
# (removed at exit with every process in $pids, every tree mounted under
# it and the budget's segment); $tree, yes where trees can be mounted and
# checked; and fail, wait_for, start_worker, start_serve and check.

top=${XDM_TOP_BUILDDIR:-.}
ctl=$top/tools/xdmctl/xdmctl
worker=$top/tests/process/budget_worker
bench=$top/tools/bench/xdm-bench
key=$name_of_test-$$
# credit=0: the checks read what each worker holds, to the byte.
stack="budget key=$key limit=64M credit=0 | host"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name_of_test.XXXXXX") || exit 1
# xdmctl reads the trees of this run only: other tests mount trees beside
# this one, and a reader of theirs would be a process they do not expect
# (a fork while their server answers a stranger, say).
XDMCTL_TREES_UNDER=$tmp
export XDMCTL_TREES_UNDER
pids=
# cleanup_first: what the sourcing script undoes before the rest (a tmux
# server, say); empty by default.
cleanup_first=:
cleanup() {
	$cleanup_first
	exec 3>&- 4>&- 2>/dev/null
	for p in $pids; do
		kill -CONT "$p" 2>/dev/null
		kill -9 "$p" 2>/dev/null
	done
	for p in $pids; do
		wait "$p" 2>/dev/null
	done
	# A killed process leaves its tree mounted: take every one of ours
	# away (mountinfo, since a dead tree cannot even be stat'ed).
	awk -v t="$tmp/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
		while read -r d; do
			umount -l "$d" 2>/dev/null || fusermount3 -u -z "$d" 2>/dev/null
		done
	rm -f "/dev/shm/xdm-budget-$key"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

# fail SENTENCE: says it, then what the processes and commands wrote.
# fail_more: more to show first (a tmux pane, say); empty by default.
fail_more=:
fail() {
	echo "FAIL: $*" >&2
	$fail_more
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

tree=no
if [ -c /dev/fuse ] && [ -r /dev/fuse ] && [ -w /dev/fuse ] &&
	[ -e "$top/fusefs/.libs/fusefs.so" ]; then
	tree=yes
fi

# A generous bound on every wait: it only turns a hang into a failure.
patience=1200

# wait_for FILE TEXT: until FILE holds TEXT.
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		[ "$i" -lt "$patience" ] || fail "$1 never said '$2'"
		sleep 0.1
		i=$((i + 1))
	done
}

# start_worker NAME BYTES FD [MOUNT]: a worker on $stack holding BYTES,
# mounting its tree at MOUNT where trees can be mounted, alive until the
# script closes descriptor FD (3 or 4) or kills it.  Its pid in $wpid,
# once it is ready.
start_worker() {
	mkfifo "$tmp/$1.in" || fail "mkfifo"
	if [ -n "${4:-}" ] && [ "$tree" = yes ]; then
		XDM_MOUNT=$4 "$worker" hold host "$stack" "$2" \
			<"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	else
		"$worker" hold host "$stack" "$2" <"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	fi
	wpid=$!
	pids="$pids $wpid"
	eval "exec $3>\"\$tmp/\$1.in\""
	wait_for "$tmp/$1.out" ready
}

# start_serve NAME ADDR MS: xdmctl serve on ADDR, giving a client MS to
# send its request; its pid in $spid and, once it listens, the first
# address it names in $addr and that address's port in $port.
start_serve() {
	"$ctl" serve --listen "$2" --timeout "$3" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	spid=$!
	pids="$pids $spid"
	wait_for "$tmp/$1.out" "listening on"
	addr=$(sed -n 's/^xdmctl serve: listening on \([^ ]*\).*/\1/p' "$tmp/$1.out")
	port=${addr##*:}
}

# check NAME PYTHON: runs PYTHON with the JSON of `xdmctl --json ps` as doc
# and this run's budget as b (its processes by pid in p, its groups by name
# in g); an assert that fails names NAME.
check() {
	"$ctl" --json ps --timeout 300 >"$tmp/ps.json" 2>"$tmp/ps.err" ||
		fail "$1: xdmctl --json ps exited $?"
	KEY=$key python3 - "$tmp/ps.json" "$1" "$2" <<'PY' || fail "$1"
import json, os, sys
doc = json.load(open(sys.argv[1]))
bs = [b for b in doc["budgets"] if b["key"] == os.environ["KEY"]]
assert len(bs) == 1, "the budget %s is not listed once: %r" % (os.environ["KEY"], doc)
b = bs[0]
p = {q["pid"]: q for q in b.get("processes", [])}
g = {q["name"]: q for q in b.get("groups", [])}
try:
    exec(sys.argv[3])
except AssertionError as e:
    sys.exit("%s: %s\n%s" % (sys.argv[2], e, json.dumps(b, indent=1)))
PY
}
