#!/bin/sh
# SPDX-License-Identifier: MIT
#
# fusefs_lifecycle.sh - a mount outlives a killed process, and the next
# process at the same directory replaces it; a process that exits, or ends
# its --hold through SIGTERM, leaves no mount; a configured mount that
# cannot be made costs the program nothing but a line on stderr.
#
# What check_fusefs cannot do in one process: be killed with SIGKILL.
# Everything runs xdm-bench, whose --mount sets XDM_MOUNT, so the mount is
# made as any program's is, by the runtime when it is built.
#
# Exit 0 pass, 1 fail, 77 skip (no /dev/fuse, or fusefs.so not built).  Run
# by make check from the build directory, with XDM_TOP_BUILDDIR,
# XDM_MODULE_PATH and XDM_CONFIG (a host-platform config) set by the harness.

set -u

top=${XDM_TOP_BUILDDIR:-.}
bench=$top/tools/bench/xdm-bench
if [ ! -c /dev/fuse ] || [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
	echo "SKIP: /dev/fuse is missing or not usable"
	exit 77
fi
if [ ! -e "$top/fusefs/.libs/fusefs.so" ]; then
	echo "SKIP: $top/fusefs/.libs/fusefs.so is not built"
	exit 77
fi
if [ ! -x "$bench" ]; then
	echo "SKIP: $bench is not built"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fusefs_lifecycle.XXXXXX") || exit 1
D=$tmp/mnt
pids=

# Whatever happened: no bench of ours left running, no mount left at $D.
cleanup() {
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
	done
	for p in $pids; do
		wait "$p" 2>/dev/null
	done
	if is_mounted "$D"; then
		umount -l "$D" 2>/dev/null || fusermount3 -u -z "$D" 2>/dev/null
	fi
	if is_mounted "$D"; then
		echo "fusefs_lifecycle: cannot detach $D; $tmp is left" >&2
		return
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT PIPE TERM

fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/err.* "$tmp"/out.*; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# is_mounted DIR: DIR is a mount point in this namespace (mountinfo's fifth
# field; our paths have no characters that it escapes).
is_mounted() {
	awk -v d="$1" '$5 == d { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# mount_type DIR: the filesystem type of the mount at DIR.
mount_type() {
	awk -v d="$1" '$5 == d { for (i = 6; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
		/proc/self/mountinfo
}

# start NAME HOLD: xdm-bench in the background, mounting at $D and holding
# for HOLD seconds; its pid in $bpid.  The build tree's xdm-bench may be a
# libtool wrapper, which execs the program: the pid stays the same.
start() {
	"$bench" --platform host --stack host -w pair -n 100 -r 1 --mount "$D" \
		--hold "$2" >"$tmp/out.$1" 2>"$tmp/err.$1" &
	bpid=$!
	pids="$pids $bpid"
}

# Every wait below is for a condition, polled every 0.1 s; the bound (at
# least 120 s) only turns a hang into a failure.  A loaded machine can keep
# a starting xdm-bench off the cores for seconds, under ASan longer still.
patience=1200

# wait_for_tree PID: until $D/pid shows PID.
wait_for_tree() {
	i=0
	while [ "$i" -lt "$patience" ]; do
		if [ "$(cat "$D/pid" 2>/dev/null)" = "$1" ]; then
			return 0
		fi
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# end_hold NAME PID: once the bench has begun its --hold (it says so on
# stderr), end the hold with SIGTERM, which makes it exit normally.  (A
# SIGTERM before then ends the bench the default way, mount left behind.)
end_hold() {
	i=0
	until grep -q "holding the runtime" "$tmp/err.$1"; do
		[ "$i" -lt "$patience" ] || fail "the $1 bench never began its hold"
		kill -0 "$2" 2>/dev/null || fail "the $1 bench ended before its hold"
		sleep 0.1
		i=$((i + 1))
	done
	kill -TERM "$2"
}

# reap PID: wait for it; its exit status in $rc.
reap() {
	wait "$1" 2>/dev/null
	rc=$?
	pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

# ---- killed: the mount stays, dead ---------------------------------------
# The holds are long and ended by a signal: a hold that ran out by itself
# while this script waited for a core would end the bench too early.
start killed 3600
wait_for_tree "$bpid" || fail "the first bench never showed its tree at $D"
[ "$(mount_type "$D")" = fuse.xdm ] || fail "$D is not a fuse.xdm mount: $(mount_type "$D")"
[ -f "$D/version" ] || fail "$D/version is missing"
kill -9 "$bpid"
reap "$bpid"
[ "$rc" -eq 137 ] || fail "the killed bench's status is $rc, not 137"
is_mounted "$D" || fail "the killed bench's mount went away by itself (nothing to test)"
if LC_ALL=C stat "$D" >"$tmp/out.stat" 2>&1; then
	fail "stat $D works after its server was killed"
fi
grep -q "Transport endpoint is not connected" "$tmp/out.stat" ||
	fail "stat of the dead mount: $(cat "$tmp/out.stat"), not ENOTCONN"

# ---- the next process at the same directory replaces it -------------------
start second 3600
second=$bpid
wait_for_tree "$second" || fail "the second bench never showed its tree over the stale mount"
[ "$(mount_type "$D")" = fuse.xdm ] || fail "$D is not a fuse.xdm mount under the second bench"
[ "$(cat "$D/pid")" = "$second" ] || fail "$D/pid is $(cat "$D/pid"), not $second"
[ -d "$D/0" ] || fail "$D/0 is missing under the second bench"
[ "$(cat "$D/0/platform")" = host ] || fail "$D/0/platform is not host"
end_hold second "$second"
reap "$second"
[ "$rc" -eq 0 ] || fail "the second bench exited $rc"
grep -q "the tree is mounted at $D" "$tmp/err.second" ||
	fail "the second bench did not say where it mounted"
# One mount replaced the dead one: none is left at $D, stale or live.  The
# directory stays: the killed bench made it, the second found it there.
is_mounted "$D" && fail "a mount is left at $D after the second bench exited"
[ -d "$D" ] || fail "$D, there before the second bench, was removed"
[ -z "$(ls -A "$D")" ] || fail "$D is not empty after the second bench exited"
rmdir "$D" || fail "cannot remove $D"

# ---- SIGTERM during --hold: a normal exit, no mount ------------------------
# The tree is up before the workload runs; the hold, which takes SIGTERM,
# begins after it: end_hold waits for the bench to say so.
start term 3600
term=$bpid
wait_for_tree "$term" || fail "the third bench never showed its tree"
end_hold term "$term"
reap "$term"
[ "$rc" -eq 0 ] || fail "the bench ended by SIGTERM during --hold exited $rc, not 0"
is_mounted "$D" && fail "a mount is left at $D after SIGTERM ended the hold"
[ -e "$D" ] && fail "$D, made by the bench, is left after SIGTERM ended the hold"

# ---- a configured mount that cannot be made -------------------------------
# XDM_MOUNT names a directory whose parent does not exist: the runtime
# says so on stderr once and serves memory all the same.
bad=$tmp/no-such-parent/mnt
XDM_MOUNT=$bad "$bench" --platform host --stack host -w pair -n 100 -r 1 \
	>"$tmp/out.bad" 2>"$tmp/err.bad"
rc=$?
[ "$rc" -eq 0 ] || fail "xdm-bench with XDM_MOUNT=$bad exited $rc, not 0"
[ "$(grep -c "^xdm: cannot mount" "$tmp/err.bad")" -eq 1 ] ||
	fail "no single 'xdm: cannot mount' line on stderr with XDM_MOUNT=$bad"
grep "^xdm: cannot mount" "$tmp/err.bad" | grep -qF "$bad" ||
	fail "the 'cannot mount' line does not name $bad"
grep -q "^xdm " "$tmp/out.bad" || fail "the workload's table is missing with XDM_MOUNT=$bad"
[ -e "$bad" ] && fail "$bad was made"

# An empty XDM_MOUNT turns the configured mount off: not a word.
XDM_MOUNT= "$bench" --platform host --stack host -w pair -n 100 -r 1 \
	>"$tmp/out.empty" 2>"$tmp/err.empty"
rc=$?
[ "$rc" -eq 0 ] || fail "xdm-bench with an empty XDM_MOUNT exited $rc, not 0"
grep -q "mount" "$tmp/err.empty" && fail "an empty XDM_MOUNT still tried a mount"

# ---- --read-tree: the bench reads its own tree between runs -------------
# The subject xdm+tree is timed while a thread of the bench walks the whole
# mount: it must read every file without an error and be compared with xdm.
# Each timed run of xdm+tree starts once the reader has begun a walk, so
# there are walks to count however slowly the reader's thread is scheduled.
"$bench" --platform host --stack "budget key=lifecycle$$ limit=1G | host" -w pair \
	--sizes 4K -n 200 -r 3 --mount "$D" --read-tree 200 \
	>"$tmp/out.read" 2>"$tmp/err.read"
rc=$?
[ "$rc" -eq 0 ] || fail "xdm-bench --read-tree exited $rc, not 0"
grep -q "^xdm+tree pair" "$tmp/out.read" || fail "no xdm+tree row with --read-tree"
grep -q "^pair *4K *xdm+tree *xdm " "$tmp/out.read" || fail "no xdm+tree / xdm ratio"
grep -Eq "tree reader: [1-9][0-9]* walks .*, [1-9][0-9.]* files a walk, 0 errors" \
	"$tmp/err.read" || fail "the tree reader did not walk the tree cleanly"
is_mounted "$D" && fail "a mount is left at $D after --read-tree"
rm -f "/dev/shm/xdm-budget-lifecycle$$"

echo "PASS: stale mount replaced, no mount left by exit or SIGTERM, bad XDM_MOUNT harmless, --read-tree reads"
exit 0
