#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Installing the Python package, from a configured and built tree:
#
# 1. For prefixes /usr and /usr/local, `make install DESTDIR=...`: the
#    directory the package went to, DESTDIR stripped, is one the configured
#    python imports from (on its sys.path, or one of its site directories,
#    which join sys.path once they exist), and the DESTDIR copy imports (that
#    directory replaced by its DESTDIR copy on sys.path, XDM_LIBRARY at the
#    DESTDIR's libxdm), with _paths.py naming the prefix's libdir, and
#    reports the tree's version.  The configured prefix gets a whole `make
#    install` and the directory configure chose; the other one, which
#    libtool will not install the modules for, `make install prefix=...` of
#    libxdm and the package, into the directory python/sitedir.py (what
#    configure asks) gives for it.
# 2. `pip install ./python` into a throwaway venv (--system-site-packages,
#    --no-index: offline): imports from the venv, without _paths.py, with
#    the version in its metadata and libxdm's, and the pytest plugin's
#    entry point (pytest11, xdm.pytest).
#
# Usage: sh tests/python/install_check.sh BUILDDIR (tests/ci.sh runs it on
# build/ci-plain; not in make check, as it runs make install).  Exits 0
# when all passed, 1 on a failure, 77 when a part could not run (no Python
# configured, no venv module, no pip, a python that imports from neither
# prefix), saying which.  A few seconds.
set -u
if [ $# -ne 1 ] || [ ! -f "$1/Makefile" ]; then
	echo "usage: install_check.sh BUILDDIR (a configured and built tree)" >&2
	exit 2
fi
build=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/xdm-install-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
# Only what is installed is imported: not the caller's PYTHONPATH (make
# check's points at the source tree), nor bytecode left in the sources.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP XDM_LIBRARY
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
cd "$tmp" || exit 1

failed=0 skipped=
fail() { echo "install_check: FAIL: $*" >&2; failed=1; }
skip() { echo "install_check: SKIP: $*"; skipped="$skipped${skipped:+; }$*"; }

# vars [VAR=VALUE...] '"$(a)" "$(b)"': the build's make variables, expanded
# (with those overrides), into $tmp/vars, one a line; var N prints the Nth.
# shellcheck disable=SC2016
printf 'xdm-install-check-print:\n\t@printf "%%s\\n" $(VARS)\n' >print.mk
vars() {
	make -s --no-print-directory -C "$build" -f Makefile -f "$tmp/print.mk" \
		xdm-install-check-print "$@" >"$tmp/vars" ||
		{ echo "install_check: cannot read the variables of $build/Makefile" >&2; exit 1; }
}
var() { sed -n "$1p" "$tmp/vars"; }
# A Makefile older than its sources is remade first, and quietly.
make -C "$build" Makefile >/dev/null 2>&1
# shellcheck disable=SC2016
vars VARS='"$(PYTHON)" "$(prefix)" "$(abs_top_srcdir)" "$(PACKAGE_VERSION)"'
python=$(var 1) configured_prefix=$(var 2) src=$(var 3) version=$(var 4)
if [ "$python" = : ] || [ -z "$python" ]; then
	echo "install_check: SKIP: $build was configured without Python 3.9"
	exit 77
fi
if [ ! -f "$build/.libs/libxdm.so.0" ]; then
	echo "install_check: $build/.libs/libxdm.so.0 is missing: build first" >&2
	exit 1
fi
echo "install_check: $python ($("$python" -c 'import sys; print(sys.version.split()[0])')), xdm $version"

# Imports xdm from $dest$dir in place of $dir; prints a sentence.
# The directory must be on sys.path, or else, where the interpreter has
# none of its own under the prefix yet, a site directory it adds once made.
check_import='
import os, site, sys
dir, dest, prefix, libdir, version = sys.argv[1:]
dirs = [os.path.normpath(p) for p in sys.path]
later = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
live = [p for p in dirs if p.startswith(prefix + "/lib/")
        and os.path.basename(p) in ("site-packages", "dist-packages")]
if dir not in dirs and (live or os.path.isdir(dir) or dir not in later):
    sys.exit("%s is not on sys.path (%s)" % (dir, os.pathsep.join(sys.path)))
how = "on sys.path" if dir in dirs else "a site directory, added once made"
copy = dest + dir
sys.path = [copy if p == dir else p for p in dirs] + ([] if dir in dirs else [copy])
import xdm, xdm._paths
if os.path.dirname(xdm.__file__) != os.path.join(copy, "xdm"):
    sys.exit("xdm was imported from %s, not %s" % (xdm.__file__, copy))
if xdm._paths.libdir != libdir:
    sys.exit("_paths.py says libdir %s, not %s" % (xdm._paths.libdir, libdir))
if xdm.library_path() != os.environ["XDM_LIBRARY"] or xdm.version() != version:
    sys.exit("loaded %s, version %s" % (xdm.library_path(), xdm.version()))
print("%s (%s); import xdm from DESTDIR: libdir %s, version %s"
      % (dir, how, libdir, xdm.version()))
'

ran=0
for prefix in /usr /usr/local; do
	dest=$tmp/dest$(echo "$prefix" | tr / -)
	if [ "$prefix" = "$configured_prefix" ]; then
		how="make install"
		targets=install
		set --
	else
		how="make install prefix=$prefix of libxdm and the package"
		if ! rel=$("$python" -E "$src/python/sitedir.py" "$prefix"); then
			skip "prefix $prefix: $python imports from nothing under $prefix/lib"
			continue
		fi
		targets="install-libLTLIBRARIES install-xdmpythonPYTHON install-nodist_xdmpythonPYTHON"
		set -- prefix="$prefix" pythondir="$prefix/$rel"
	fi
	# The overrides ("$@") are the same for vars below.
	# shellcheck disable=SC2086
	if ! make -C "$build" DESTDIR="$dest" "$@" $targets >"$tmp/make.out" 2>&1; then
		tail -20 "$tmp/make.out" >&2
		fail "prefix $prefix: $how DESTDIR=$dest failed"
		continue
	fi
	# shellcheck disable=SC2016
	vars VARS='"$(xdmpythondir)" "$(libdir)"' "$@"
	dir=$(var 1) libdir=$(var 2)
	dir=${dir%/xdm}
	if [ ! -f "$dest$dir/xdm/__init__.py" ] || [ ! -f "$dest$dir/xdm/_paths.py" ]; then
		fail "prefix $prefix: $how put no package in $dest$dir/xdm"
		continue
	fi
	ran=1
	if ! "$python" -E -c 'import os, site, sys
dirs = [os.path.normpath(p) for p in sys.path + site.getsitepackages()]
sys.exit(not any(p.startswith(sys.argv[1] + "/") and
                 os.path.basename(p) in ("site-packages", "dist-packages") for p in dirs))' \
		"$prefix/lib"; then
		# configure warned: this python searches nothing under the prefix.
		skip "prefix $prefix: $python imports from nothing under $prefix/lib"
		continue
	fi
	if out=$(XDM_LIBRARY="$dest$libdir/libxdm.so.0" "$python" -E -c "$check_import" \
		"$dir" "$dest" "$prefix" "$libdir" "$version" 2>&1); then
		echo "install_check: prefix $prefix: $how: $out"
	else
		fail "prefix $prefix: $how: $out"
	fi
done

# The build's own _paths.py again (the other prefix's install rewrote it).
make -s -C "$build" python/xdm/_paths.py >/dev/null 2>&1 ||
	fail "make python/xdm/_paths.py in $build failed"

# pip, into a venv that sees the system's packages (and so its pip).
venv=$tmp/venv
if ! "$python" -c 'import venv' 2>/dev/null; then
	skip "$python has no venv module (apt-get install python3-venv)"
elif ! "$python" -m venv --without-pip --system-site-packages "$venv" >"$tmp/venv.out" 2>&1; then
	cat "$tmp/venv.out" >&2
	fail "$python -m venv failed"
elif ! "$venv/bin/python" -c 'import pip' 2>/dev/null; then
	skip "$python has no pip (apt-get install python3-pip)"
elif ! "$venv/bin/python" -m pip --isolated install -q --no-index --no-deps \
	--disable-pip-version-check "$src/python" >"$tmp/pip.out" 2>&1; then
	cat "$tmp/pip.out" >&2
	fail "pip install --no-index $src/python failed"
else
	ran=1
	if out=$(XDM_LIBRARY="$build/.libs/libxdm.so.0" "$venv/bin/python" -E -c '
import importlib.metadata, os, sys
import xdm
here = os.path.dirname(xdm.__file__)
if not here.startswith(sys.prefix + "/"):
    sys.exit("xdm was imported from %s, not the venv %s" % (here, sys.prefix))
if os.path.exists(os.path.join(here, "_paths.py")):
    sys.exit("pip installed _paths.py, which make writes")
meta = importlib.metadata.version("xdm")
if meta != sys.argv[1] or xdm.version() != sys.argv[1]:
    sys.exit("versions: metadata %s, libxdm %s, tree %s" % (meta, xdm.version(), sys.argv[1]))
plugins = [(e.name, e.value) for e in importlib.metadata.distribution("xdm").entry_points
           if e.group == "pytest11"]
if plugins != [("xdm.pytest", "xdm.pytest")]:
    sys.exit("the pytest11 entry points are %s, not xdm.pytest" % plugins)
print("%s, version %s, pytest plugin %s" % (here, meta, plugins[0][0]))' "$version" 2>&1); then
		echo "install_check: pip install ./python: $out"
	else
		fail "pip install ./python: $out"
	fi
fi

if [ "$failed" -ne 0 ]; then
	exit 1
elif [ -n "$skipped" ]; then
	[ "$ran" -eq 0 ] || echo "install_check: the rest passed, but not all could run: $skipped"
	exit 77
fi
echo "install_check: PASS"
