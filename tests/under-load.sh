#!/bin/sh
# Run `make check` of a configured build tree several times while
# stress-ng keeps every core busy, and count the runs that failed.
#
#   tests/under-load.sh [-n RUNS] [-j JOBS] [-s STRESSORS] BUILDDIR
#
# A suite that passes on an idle machine and fails under load depends on
# how threads are scheduled; DESIGN-NOTES.md ("Tests never depend on
# scheduling") says what the suite may and may not assume.  Sanitizer
# options (ASAN_OPTIONS, ...) pass through the environment as ci.sh sets
# them.  The logs of each failed run are kept in BUILDDIR/under-load/N/.
# Exits 0 only when every run passed.  Needs stress-ng (Debian: stress-ng).
set -eu
runs=8
jobs=$(nproc 2>/dev/null || echo 2)
stressors=$jobs
while getopts n:j:s: opt; do
	case $opt in
	n) runs=$OPTARG ;;
	j) jobs=$OPTARG ;;
	s) stressors=$OPTARG ;;
	*) echo "usage: $0 [-n RUNS] [-j JOBS] [-s STRESSORS] BUILDDIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { echo "usage: $0 [-n RUNS] [-j JOBS] [-s STRESSORS] BUILDDIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
[ -f "$build/Makefile" ] || { echo "$0: $build is not a configured build tree" >&2; exit 2; }
command -v stress-ng >/dev/null ||
	{ echo "$0: stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }

# Build first, unloaded and once: the runs time the tests, not the compiler.
make -C "$build" -j"$jobs" >/dev/null

stress_pid=""
stop_stress() {
	[ -z "$stress_pid" ] || kill "$stress_pid" 2>/dev/null || true
	[ -z "$stress_pid" ] || wait "$stress_pid" 2>/dev/null || true
	stress_pid=""
}
trap 'stop_stress' EXIT
trap 'exit 130' INT TERM
stress-ng --cpu "$stressors" --timeout 0 --quiet &
stress_pid=$!

out="$build/under-load"
rm -rf "$out"
mkdir -p "$out"
failed=0
i=1
while [ "$i" -le "$runs" ]; do
	start=$(date +%s)
	if make -C "$build" -j"$jobs" check >"$out/make-$i.out" 2>&1; then
		verdict=pass
	else
		verdict=FAIL
		failed=$((failed + 1))
		mkdir -p "$out/$i"
		cp "$out/make-$i.out" "$build/test-suite.log" "$out/$i/" 2>/dev/null || true
		for log in "$build"/tests/*.log; do
			grep -qE '^(FAIL|ERROR)|:F:|:E:' "$log" 2>/dev/null && cp "$log" "$out/$i/"
		done
	fi
	bad=$(grep -hE '^(FAIL|ERROR|XPASS):' "$out/make-$i.out" | awk '{print $2}' | paste -sd' ')
	echo "under-load: run $i of $runs: $verdict in $(($(date +%s) - start)) s${bad:+ ($bad)}"
	i=$((i + 1))
done
stop_stress
echo "under-load: $runs runs of make check with $stressors CPU stressors, $failed failed"
[ "$failed" -eq 0 ]
