#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_top.sh - xdmctl top in a real terminal (tmux): it shows a live
# worker of this run's budget and its tree, quits on q and on Ctrl-C, and
# leaves the terminal as it found it (canonical mode and echo back, the
# main screen back); --iterations prints plain frames without a terminal.
#
# Exit 0 pass, 1 fail, 77 skip (no tmux).  Run by make check from the
# build directory, with XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR and XDM_MODULE_PATH
# set.

set -u

if ! command -v tmux >/dev/null 2>&1; then
	echo "SKIP: tmux is not installed"
	exit 77
fi
name_of_test=xdmctl-top
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"
sock=xdmctl-top-$$
tm() { tmux -L "$sock" "$@"; }
kill_tmux() { tm kill-server 2>/dev/null; }
show_pane() { tm capture-pane -p -t top 2>/dev/null | sed 's/^/pane: /' >&2; }
cleanup_first=kill_tmux
fail_more=show_pane

# pane_has TEXT: until the pane shows TEXT (a grep -E pattern).
pane_has() {
	i=0
	until tm capture-pane -p -t top | grep -Eq "$1"; do
		[ "$i" -lt "$patience" ] || fail "the pane never showed '$1'"
		sleep 0.1
		i=$((i + 1))
	done
}

start_worker w 8388608 3 "$tmp/mnt"
w=$wpid

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
	tm send-keys -t top "clear; XDMCTL_TREES_UNDER='$tmp' '$ctl' top -d 0.2; echo top-ended-\$?; stty -a | tr ' ' '\\n' | grep -Ex -- '-?(icanon|echo)' | tr '\\n' ' '; echo" Enter
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
