# SPDX-License-Identifier: MIT
#
# xdmctl_log_test.sh - sourced, not run: what the tests of the xdmctl
# commands that read a log share.  It finds xdmctl and python3 (or exits
# 77, skipped), makes $tmp (removed at exit) and defines fail and run.
# The sourcing script sets $name_of_test first; it gets $xdmctl, $python,
# $gen (tests/tools/timeline_gen.py) and $tmp.

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}
xdmctl=$top/tools/xdmctl/xdmctl
gen=$src/tests/tools/timeline_gen.py
if [ ! -x "$xdmctl" ]; then
	echo "SKIP: $xdmctl is not built"
	exit 77
fi
python=
for candidate in python3 /usr/bin/python3; do
	if command -v "$candidate" >/dev/null 2>&1; then
		python=$candidate
		break
	fi
done
if [ -z "$python" ]; then
	echo "SKIP: no python3 to generate logs and read what xdmctl writes"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name_of_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# fail SENTENCE: says it, with every non-empty stderr of xdmctl so far.
fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/err.*; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# run NAME ARGS...: xdmctl, stdout to $tmp/NAME, stderr to $tmp/err.NAME,
# its exit status in $rc.
run() {
	name=$1
	shift
	"$xdmctl" "$@" >"$tmp/$name" 2>"$tmp/err.$name"
	rc=$?
}
