#!/bin/sh
# dist-complete.sh TARBALL - every file git tracks is in the tarball, but
# for the repository's own plumbing (.ci/, .gitignore).  A file left out
# of EXTRA_DIST (or a _SOURCES list) would be missing from what users
# build, and a distcheck that runs the suite from the tarball would only
# notice where a test happened to need it; this notices always, in a
# second.  Run from the source tree by tests/ci.sh; exits 77 outside a git
# checkout.
set -eu
tarball=$1
top=$(cd "$(dirname "$0")/.." && pwd)
if ! git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "dist-complete: SKIP: $top is not a git checkout"
	exit 77
fi
tracked=$(mktemp) shipped=$(mktemp)
trap 'rm -f "$tracked" "$shipped"' EXIT
git -C "$top" ls-files | grep -v -e '^\.ci/' -e '^\.gitignore$' | sort >"$tracked"
tar -tzf "$tarball" | sed -e 's|^[^/]*/||' -e '/^$/d' -e '/\/$/d' | sort >"$shipped"
missing=$(comm -23 "$tracked" "$shipped")
if [ -n "$missing" ]; then
	echo "dist-complete: FAIL: tracked but not in $(basename "$tarball"):"
	echo "$missing" | sed 's/^/  /'
	exit 1
fi
echo "dist-complete: PASS: all $(wc -l <"$tracked") tracked files are in $(basename "$tarball")"
