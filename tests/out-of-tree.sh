#!/bin/sh
# SPDX-License-Identifier: MIT
#
# out-of-tree.sh - build examples/example.c the way a module author would:
# against an INSTALLED xdm, with nothing but its headers and pkg-config, then
# run the module under the installed xdm-bench.  Run by `make installcheck`
# (and so by `make distcheck`).
#
# usage: out-of-tree.sh ROOT SRCDIR
#   ROOT    where xdm is installed, $(DESTDIR)$(prefix)
#   SRCDIR  the source tree, for examples/example.c and the standalone
#           examples/Makefile.example when their installed copies (in
#           $(docdir)/examples) are not found under ROOT; nothing else is
#           taken from it
#
# Exits 0 on success, 77 when there is nothing to run it with (no installed
# xdm-bench, no pkg-config), anything else on failure.

set -eu

me='out-of-tree'
root=${1:?usage: out-of-tree.sh ROOT SRCDIR}
srcdir=${2:?usage: out-of-tree.sh ROOT SRCDIR}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CC=${CC:-cc}

fail() { echo "$me: FAIL: $*" >&2; exit 1; }
skip() { echo "$me: SKIP: $*" >&2; exit 77; }

case $root in /*) ;; *) root=$(cd "$root" && pwd) ;; esac
case $srcdir in /*) ;; *) srcdir=$(cd "$srcdir" && pwd) ;; esac

bench=$root/bin/xdm-bench
[ -x "$bench" ] || skip "no $bench installed"
command -v "$PKG_CONFIG" >/dev/null 2>&1 || skip "no $PKG_CONFIG"

# The copies installed for authors, else the source tree's.
exdir=$(find "$root" -path '*/examples/example.c' 2>/dev/null | head -n 1)
exdir=${exdir%/example.c}
[ -n "$exdir" ] && [ -f "$exdir/Makefile.example" ] || exdir=$srcdir/examples
[ -f "$exdir/example.c" ] || fail "no example.c installed under $root nor in $srcdir/examples"
echo "$me: building $exdir/example.c"

# The installed xdm.pc, and no other: PKG_CONFIG_LIBDIR replaces the default
# search path, so an xdm elsewhere on the machine cannot stand in for it.
pc=$(find "$root" -name xdm.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no pkgconfig/xdm.pc installed under $root"
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR

# Under DESTDIR the .pc still names the configured prefix; redefining prefix
# makes every path in it point into ROOT (without DESTDIR it changes nothing).
pkg() { "$PKG_CONFIG" --define-variable=prefix="$root" "$@" xdm; }
cflags=$(pkg --cflags) || fail "$PKG_CONFIG --cflags xdm failed"
libs=$(pkg --libs) || fail "$PKG_CONFIG --libs xdm failed"
libdir=$(pkg --variable=libdir)
moduledir=$(pkg --variable=moduledir)
configured_moduledir=$("$PKG_CONFIG" --variable=moduledir xdm)
[ -n "$moduledir" ] || fail "xdm.pc has no moduledir variable"
[ -f "$moduledir/host.so" ] || fail "the host module is not installed in $moduledir"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xdm-out-of-tree.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A copy, alone in its directory: no header of the source tree can be found
# next to it, and there is no config.h (example.c builds without one).
cp "$exdir/example.c" "$tmp/example.c"

echo "$me: $CC -shared -fPIC -fvisibility=hidden $cflags example.c -o example.so $libs"
# shellcheck disable=SC2086 # cflags and libs are lists of words
$CC -shared -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Werror \
	$cflags "$tmp/example.c" -o "$tmp/example.so" $libs ||
	fail "example.c does not build against the installed headers"

# -fvisibility=hidden and XDM_MODULE(): the entry symbol is the only export.
if command -v nm >/dev/null 2>&1; then
	exports=$(nm -D --defined-only "$tmp/example.so" |
		awk '$2 ~ /^[TDBR]$/ && $3 != "_init" && $3 != "_fini" { print $3 }')
	[ "$exports" = xdm_module_entry ] ||
		fail "example.so exports more than xdm_module_entry:" "$exports"
fi

# The standalone makefile shipped for authors builds the same file.
if command -v "${MAKE:-make}" >/dev/null 2>&1; then
	mkdir "$tmp/mk"
	cp "$exdir/Makefile.example" "$tmp/mk/Makefile"
	cp "$exdir/example.c" "$tmp/mk/example.c"
	# As an author runs it: not as a sub-make of xdm's own build.
	(unset MAKEFLAGS MFLAGS MAKELEVEL
	 "${MAKE:-make}" -s -C "$tmp/mk" \
		PKG_CONFIG="$PKG_CONFIG --define-variable=prefix=$root") ||
		fail "examples/Makefile.example does not build example.so"
	[ -f "$tmp/mk/example.so" ] || fail "examples/Makefile.example made no example.so"
fi

cat >"$tmp/xdm.conf" <<EOF
# written by $me: the example from module_dir, host from the installed modules
platform = host
module_dir = $tmp
[device 0]
stack = example label=oot | host
EOF

# The installed host module: found through the directory compiled into
# libxdm when it is where it was configured to be; under DESTDIR it is not,
# so name it in XDM_MODULE_PATH.
unset XDM_MODULE_PATH XDM_MOUNT
if [ "$moduledir" != "$configured_moduledir" ]; then
	XDM_MODULE_PATH=$moduledir
	export XDM_MODULE_PATH
fi
XDM_CONFIG=$tmp/xdm.conf
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDM_CONFIG LD_LIBRARY_PATH

echo "$me: $bench --config $tmp/xdm.conf --workload pair --iterations 100 --repeat 1"
rc=0
out=$("$bench" --config "$tmp/xdm.conf" --workload pair --iterations 100 --repeat 1 2>&1) ||
	rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || fail "xdm-bench exited $rc"
printf '%s\n' "$out" | grep -q example ||
	fail "xdm-bench's output does not name the example module in its stack"
echo "$me: PASS: the example built out of tree runs under the installed xdm-bench"
