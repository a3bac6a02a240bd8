# SPDX-License-Identifier: MIT
# background.sh - sourced by the tests that start processes in the
# background (containers, Kubernetes pods): a scratch directory, the
# processes to kill however the test ends, and a wait for a line a process
# writes.
#
#   scratch NAME        $tmp: a new directory ${TMPDIR:-/tmp}/NAME.XXXXXX;
#                       $pids: none yet.  At exit every pid added to $pids
#                       is killed (SIGKILL) and $tmp removed.
#   wait_line FILE WORD PID
#                       until FILE has a line that starts with WORD; false
#                       when PID left without writing it.  After two minutes
#                       it gives up too: a safety net against a hung test,
#                       not a timing (each test bounds nothing by it).

scratch() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	pids=""
	trap scratch_cleanup EXIT
}

scratch_cleanup() {
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}

wait_line() {
	_tries=0
	until grep -q "^$2" "$1" 2>/dev/null; do
		_tries=$((_tries + 1))
		[ $_tries -lt 2400 ] || return 1
		kill -0 "$3" 2>/dev/null || grep -q "^$2" "$1" || return 1
		sleep 0.05
	done
}
