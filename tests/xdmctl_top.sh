#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_top.sh - xdmctl top in a real terminal (tmux): it shows a live
# worker of this run's budget and its tree, quits on q and on Ctrl-C, and
# leaves the terminal as it found it (canonical mode and echo back, the
# main screen back); --iterations prints plain frames without a terminal.
#
# Exit 0 pass, 1 fail, 77 skip (no tmux).  Run by make check from the
# build directory, with XDM_TOP_BUILDDIR and XDM_MODULE_PATH set.

set -u

top=${XDM_TOP_BUILDDIR:-.}
ctl=$top/tools/xdmctl
worker=$top/tests/budget_worker
key=xdmctl-top-$$
stack="budget key=$key limit=64M | host"

if ! command -v tmux >/dev/null 2>&1; then
	echo "SKIP: tmux is not installed"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xdmctl_top.XXXXXX") || exit 1
sock=xdmctl-top-$$
tm() { tmux -L "$sock" "$@"; }
pids=
cleanup() {
	tm kill-server 2>/dev/null
	exec 3>&- 2>/dev/null
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
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

fail() {
	echo "FAIL: $*" >&2
	tm capture-pane -p -t top 2>/dev/null | sed 's/^/pane: /' >&2
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

patience=1200
# pane_has TEXT: until the pane shows TEXT (a grep -E pattern).
pane_has() {
	i=0
	until tm capture-pane -p -t top | grep -Eq "$1"; do
		[ "$i" -lt "$patience" ] || fail "the pane never showed '$1'"
		sleep 0.1
		i=$((i + 1))
	done
}

mkfifo "$tmp/w.in" || fail "mkfifo"
if [ "$tree" = yes ]; then
	XDM_MOUNT="$tmp/mnt" "$worker" hold host "$stack" 8388608 \
		<"$tmp/w.in" >"$tmp/w.out" 2>"$tmp/w.err" &
else
	"$worker" hold host "$stack" 8388608 <"$tmp/w.in" >"$tmp/w.out" 2>"$tmp/w.err" &
fi
w=$!
pids="$pids $w"
exec 3>"$tmp/w.in"
i=0
until grep -q ready "$tmp/w.out" 2>/dev/null; do
	[ "$i" -lt "$patience" ] || fail "the worker never became ready"
	sleep 0.1
	i=$((i + 1))
done

# Batch mode: two plain frames, no escape sequences.
"$ctl" top -n 2 -d 0.1 >"$tmp/batch.out" 2>"$tmp/batch.err" || fail "top -n 2 exited $?"
[ "$(grep -c '^xdmctl top - ' "$tmp/batch.out")" -eq 2 ] || fail "top -n 2 did not print 2 frames"
grep -Eq "^ +$w budget_worker +live +8.0 MiB" "$tmp/batch.out" || fail "no row for $w"
if LC_ALL=C grep -q "$(printf '\033')" "$tmp/batch.out"; then
	fail "batch frames hold escape sequences"
fi
"$ctl" top -d 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--delay 0 does not exit 2"

# The terminal: a shell in tmux runs top; after it, stty says how the
# terminal was left.  "$ctl" is absolute so the shell finds it.
case $ctl in /*) ;; *) ctl=$(pwd)/$ctl ;; esac
tm new-session -d -s top -x 160 -y 40 sh || fail "tmux cannot start"
for how in q C-c; do
	tm send-keys -t top "clear; '$ctl' top -d 0.2; echo top-ended-\$?; stty -a | tr ' ' '\\n' | grep -Ex -- '-?(icanon|echo)' | tr '\\n' ' '; echo" Enter
	pane_has "^xdmctl top - .* - q quits"
	pane_has "^ +$w budget_worker +live +8.0 MiB"
	if [ "$tree" = yes ]; then
		pane_has "^ +$w budget_worker +live +8.0 MiB +8.0 MiB +1 .*$tmp/mnt"
	fi
	tm send-keys -t top "$how"
	pane_has "^top-ended-0"
	pane_has "^-?icanon -?echo"
	tm capture-pane -p -t top >"$tmp/pane.out"
	grep -q "^icanon echo" "$tmp/pane.out" || fail "after $how the terminal is not back in canonical mode with echo"
	grep -q "^xdmctl top" "$tmp/pane.out" && fail "after $how the frame is still on the main screen"
done
echo "xdmctl_top: pass (tree checked: $tree)"
exit 0
