#!/bin/sh
# SPDX-License-Identifier: MIT
#
# packages.sh TARBALL [WORKDIR] - xdm's Debian packages, made the way a
# distribution makes them, from the release tarball as it is:
#
# 1. The source package (dpkg-source -b, the tarball as the .orig) and the
#    binary packages (dpkg-buildpackage -us -uc -b) from the unpacked
#    tarball, in a plain environment (no PATH of the caller's: the
#    distribution's python3 and compilers).  The build itself checks
#    libxdm's exported symbols against debian/libxdm0.symbols.
# 2. lintian on both: no error and no warning that is not overridden in
#    debian/*.lintian-overrides (where each says why).
# 3. What the packages declare: libxdm0 provides the module ABI of
#    include/xdm/module.h, and ships its symbols file.
# 4. The packages installed into a throwaway root: an overlay whose lower
#    layer is this machine's own root and whose upper layer is a tmpfs, so
#    that nothing of the install reaches the machine and the upper layer
#    holds exactly what the packages changed.  There, with the system's
#    python3 and compiler and nothing of the build tree: the files where
#    policy puts them, the shared budget directory made with its group,
#    xdm-bench on the embedded default, import xdm, README's example
#    compiled against pkg-config's flags and run, xdmctl ps, a member of
#    the group sharing a budget in the directory (and root refused there,
#    as designed).  Then the packages are purged, and the upper layer must
#    hold nothing but what policy keeps: dpkg's database and log, the
#    loader's and man-db's caches, and account files equal to the
#    machine's own.
#
# Usage: sh tests/deb/packages.sh TARBALL [WORKDIR] (tests/ci.sh runs it
# on make distcheck's tarball; WORKDIR, default a new /tmp/xdm-deb.*, is
# emptied first and keeps the logs).  DEB_BUILD_OPTIONS and
# DEB_BUILD_PROFILES are the caller's when set (pkg.xdm.cuda builds
# libxdm0-cuda: debian/rules), else "nocheck parallel=NPROC" and "nocheck".
# Part 4 needs root and an overlay mount; without them it is skipped, with
# the reason, and the script exits 77.  Exits 0 when every check passed,
# 1 on a failure; the last line counts the checks.
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -f "$1" ]; then
	echo "usage: packages.sh TARBALL [WORKDIR]" >&2
	exit 2
fi
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
# A run killed with its throwaway root mounted leaves the mounts behind,
# /dev among them: undo them, deepest first, before anything is removed,
# and never let rm cross into another file system.
unmount_under() {
	awk -v d="$1/" 'index($5 "/", d) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m"; done
}
if [ $# -eq 2 ]; then
	work=$(realpath -m "$2")
	unmount_under "$work"
	rm -rf --one-file-system "$work" && mkdir -p "$work" || exit 1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/xdm-deb.XXXXXX") || exit 1
fi
work=$(cd "$work" && pwd)

passed=0 failed=0 skipped='' lint_pid='' began=$(date +%s)
pass() { echo "deb: PASS: $*"; passed=$((passed + 1)); }
fail() { echo "deb: FAIL: $*"; failed=$((failed + 1)); }
finish() {
	[ -z "$lint_pid" ] || lint_verdict
	[ -z "$skipped" ] || echo "deb: SKIP: $skipped"
	echo "deb: took $(($(date +%s) - began)) s"
	echo "deb: $passed passed, $failed failed"
	if [ "$failed" -ne 0 ]; then
		exit 1
	elif [ -n "$skipped" ]; then
		exit 77
	fi
	exit 0
}
# Last lines of a log, indented, after a failure.
show() { tail -n "${2:-25}" "$1" | sed 's/^/    /'; }

for tool in dpkg-buildpackage dpkg-source dpkg-parsechangelog lintian; do
	if ! command -v "$tool" >/dev/null; then
		fail "no $tool here: tests/install-deps.sh installs it"
		finish
	fi
done

# The environment of every build and of the installed root: the
# distribution's programs only.
plain_path=/usr/sbin:/usr/bin:/sbin:/bin
jobs=$(nproc 2>/dev/null || echo 2)
build_options=${DEB_BUILD_OPTIONS-nocheck parallel=$jobs}
build_profiles=${DEB_BUILD_PROFILES-nocheck}
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)

# ---- 1. the source and binary packages, from the tarball -----------------
tar -xzf "$tarball" -C "$work" || { fail "cannot unpack $tarball"; finish; }
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
if [ ! -f "$src/debian/changelog" ]; then
	fail "$tarball has no debian/changelog (EXTRA_DIST in Makefile.am)"
	finish
fi
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
upstream=${version%-*}
if [ "$(basename "$src")" != "xdm-$upstream" ]; then
	fail "debian/changelog's version is $version, but the tarball is $(basename "$src"): add a debian/changelog entry for the release"
	finish
fi
cp "$tarball" "$work/xdm_$upstream.orig.tar.gz"

if (cd "$work" && env -i PATH="$plain_path" HOME="$work" LC_ALL=C.UTF-8 \
	dpkg-source -b "$(basename "$src")") >"$work/source.log" 2>&1; then
	pass "source package xdm_$version.dsc"
else
	fail "dpkg-source -b failed ($work/source.log)"
	show "$work/source.log"
fi
start=$(date +%s)
if (cd "$src" && env -i PATH="$plain_path" HOME="$work" LC_ALL=C.UTF-8 \
	DEB_BUILD_OPTIONS="$build_options" DEB_BUILD_PROFILES="$build_profiles" \
	dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	pass "dpkg-buildpackage -us -uc -b in $(($(date +%s) - start)) s" \
		"(DEB_BUILD_OPTIONS='$build_options' DEB_BUILD_PROFILES='$build_profiles'):" \
		"$(for f in "$work"/*.deb; do f=${f##*/}; echo "${f%%_*}"; done | paste -sd' ')"
else
	fail "dpkg-buildpackage -us -uc -b failed ($work/build.log)"
	show "$work/build.log" 40
	finish
fi
changes=$work/xdm_${version}_$arch.changes

# ---- 2. lintian ------------------------------------------------------------
# It runs beside the checks below (it takes one core for a quarter of a
# minute, and they mostly wait on dpkg), and is reported by finish.
lint_files=$changes
[ -f "$work/xdm_$version.dsc" ] && lint_files="$lint_files $work/xdm_$version.dsc"
# shellcheck disable=SC2086
lintian --show-overrides $lint_files >"$work/lintian.log" 2>&1 &
lint_pid=$!
# The verdict is read from the tags: E: and W: are what is not overridden
# (O:, each printed after its reason).  lintian's status says nothing of
# warnings unless --fail-on names them, and 2.116 then counts overridden
# ones too when --show-overrides prints them.  Its status 2 is an error
# tag; 1 is lintian itself failing.
lint_verdict() {
	lint_rc=0
	wait "$lint_pid" || lint_rc=$?
	lint_pid=
	grep -v '^running with root privileges' "$work/lintian.log" | sed 's/^/    /'
	if [ "$lint_rc" -ne 0 ] && [ "$lint_rc" -ne 2 ]; then
		fail "lintian did not run to its end (exit $lint_rc)"
	elif grep -qE '^(E|W): ' "$work/lintian.log"; then
		fail "lintian: $(grep -cE '^E: ' "$work/lintian.log") errors," \
			"$(grep -cE '^W: ' "$work/lintian.log") warnings not overridden"
	else
		pass "lintian: no error, no warning left" \
			"($(grep -c '^O: ' "$work/lintian.log") overridden, each with its reason)"
	fi
}

# ---- 3. what the packages declare ------------------------------------------
deb() {
	for f in "$work/${1}_${version}"_*.deb; do
		[ -f "$f" ] && echo "$f"
		return
	done
}
abi_major=$(sed -n 's/^#define XDM_ABI_MAJOR \([0-9][0-9]*\)$/\1/p' "$src/include/xdm/module.h")
abi_minor=$(sed -n 's/^#define XDM_ABI_MINOR \([0-9][0-9]*\)$/\1/p' "$src/include/xdm/module.h")
abi="xdm-abi-$abi_major (= $abi_major.$abi_minor)"
provides=$(dpkg-deb -f "$(deb libxdm0)" Provides)
if [ "$provides" = "$abi" ]; then
	pass "libxdm0 provides the module ABI of include/xdm/module.h: $provides"
else
	fail "libxdm0 provides '$provides', not '$abi' (include/xdm/module.h)"
fi
if [ -n "$(deb libxdm0-cuda)" ]; then
	if dpkg-deb -f "$(deb libxdm0-cuda)" Depends | grep -qF "xdm-abi-$abi_major (>= $abi_major.$abi_minor)"; then
		pass "libxdm0-cuda depends on xdm-abi-$abi_major (>= $abi_major.$abi_minor)"
	else
		fail "libxdm0-cuda does not depend on xdm-abi-$abi_major (>= $abi_major.$abi_minor)"
	fi
fi
mkdir "$work/control"
dpkg-deb -e "$(deb libxdm0)" "$work/control"
listed=$(grep -c '^ xdm_' "$src/debian/libxdm0.symbols")
shipped=$(grep -c '^ xdm_' "$work/control/symbols" 2>/dev/null)
if [ "${shipped:-0}" -gt 0 ] && [ "$shipped" -eq "$listed" ]; then
	pass "libxdm0 ships its symbols file: $shipped symbols of libxdm.so.0, as debian/libxdm0.symbols lists"
else
	fail "libxdm0's symbols file has ${shipped:-no} symbols, debian/libxdm0.symbols $listed"
fi

# ---- 4. installed into a throwaway root, used, purged ----------------------
ovl=$work/overlay
root=$ovl/root
mounted=
# shellcheck disable=SC2317 # (run by the trap)
cleanup() {
	for m in $mounted; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	mounted=
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
# Mounts are undone last first.
mount_at() {
	target=$1; shift
	mount "$@" "$target" && mounted="$target $mounted"
}
overlay() {
	[ "$(id -u)" -eq 0 ] || { echo "not root, which mounting an overlay needs"; return 1; }
	command -v chroot >/dev/null || { echo "no chroot here"; return 1; }
	mkdir -p "$ovl" || return 1
	# The upper layer on a file system of its own: overlayfs refuses one
	# inside its lower layer.
	mount_at "$ovl" -t tmpfs -o mode=0755 xdm-deb 2>&1 || return 1
	mkdir "$ovl/upper" "$ovl/work" "$root" || return 1
	mount_at "$root" -t overlay -o "lowerdir=/,upperdir=$ovl/upper,workdir=$ovl/work" \
		xdm-deb 2>&1 || return 1
	# Kernel file systems, and fresh ones where the machine's own would be
	# written: /run (where /run/xdm is made), /tmp, /dev/shm.
	mount_at "$root/proc" -t proc proc &&
		mount_at "$root/dev" --bind /dev &&
		mount_at "$root/dev/shm" -t tmpfs -o mode=1777 xdm-deb &&
		mount_at "$root/run" -t tmpfs -o mode=0755 xdm-deb &&
		mount_at "$root/tmp" -t tmpfs -o mode=1777 xdm-deb
}
# A command in the installed root, in the distribution's environment.
in_root() {
	chroot "$root" env -i PATH="$plain_path" HOME=/root LC_ALL=C.UTF-8 "$@"
}

if ! overlay >"$work/overlay.out" 2>&1; then
	skipped="installing into a throwaway root: $(paste -sd' ' "$work/overlay.out")"
	skipped="${skipped%: }"
	finish
fi
mkdir "$root/tmp/debs"
pkgs=
for f in "$work"/*_"$version"_*.deb; do
	case $f in *-dbgsym_*) continue ;; esac
	cp "$f" "$root/tmp/debs/"
	pkgs="$pkgs $(dpkg-deb -f "$f" Package)"
done

start=$(date +%s)
if in_root sh -c 'dpkg -i /tmp/debs/*.deb' >"$work/install.log" 2>&1; then
	pass "dpkg -i in a throwaway root:$pkgs ($(($(date +%s) - start)) s)"
	installed=1
else
	fail "dpkg -i failed ($work/install.log)"
	show "$work/install.log"
	installed=0
fi

if [ "$installed" -eq 1 ]; then
	# Where policy puts things, and the shared budget directory.
	moduledir=$(in_root pkg-config --variable=moduledir xdm)
	if [ "$moduledir" = "/usr/lib/$multiarch/xdm" ] && [ -f "$root$moduledir/host.so" ] &&
		[ -f "$root/usr/lib/$multiarch/libxdm.so.0" ]; then
		pass "libxdm.so.0 in /usr/lib/$multiarch, the modules in $moduledir, which xdm.pc names"
	else
		fail "pkg-config --variable=moduledir xdm says '$moduledir', not /usr/lib/$multiarch/xdm with host.so in it"
	fi
	dir_is=$(in_root stat -c '%U:%G %a' /run/xdm 2>&1)
	if [ "$dir_is" = "root:xdm 2770" ]; then
		pass "postinst made the group xdm and /run/xdm (root:xdm, mode 2770)"
	else
		fail "/run/xdm after install: '$dir_is', not 'root:xdm 2770'"
	fi

	# The embedded default: no config file, no XDM_* variable.  Root is
	# fine here: that stack (pool | host on a machine without a GPU) has
	# no budget layer, so the shared directory is never opened.
	if in_root xdm-bench -w pair -n 1000 -r 1 >"$work/bench.out" 2>&1 &&
		grep -q '^stack  *pool | host$' "$work/bench.out"; then
		pass "xdm-bench on the embedded default ($(sed -n 's/^stack  *//p' "$work/bench.out"))"
	else
		fail "xdm-bench on the embedded default:"
		show "$work/bench.out"
	fi

	# The system's python3, with nothing of the build tree.
	# shellcheck disable=SC2016
	if out=$(in_root python3 -c '
import os, sys
import xdm, xdm._paths
libdir, version = sys.argv[1:]
here = os.path.dirname(xdm.__file__)
if here != "/usr/lib/python3/dist-packages/xdm":
    sys.exit("xdm imported from %s" % here)
if xdm.library_path() != os.path.join(libdir, "libxdm.so.0") or xdm.version() != version:
    sys.exit("loaded %s, version %s" % (xdm.library_path(), xdm.version()))
if xdm._paths.pkglibdir != os.path.join(libdir, "xdm"):
    sys.exit("_paths.pkglibdir is %s" % xdm._paths.pkglibdir)
if xdm._paths.budget_shared_dir != "/run/xdm":
    sys.exit("_paths.budget_shared_dir is %s" % xdm._paths.budget_shared_dir)
print("%s %s from %s" % (sys.executable, xdm.version(), xdm.library_path()))' \
		"/usr/lib/$multiarch" "$upstream" 2>&1); then
		pass "import xdm: $out"
	else
		fail "import xdm with the system's python3: $out"
	fi

	# README's example, as a program: its includes first, the rest as
	# the body of main.
	awk '/^## Using it/ { part = 1 } part && /^```c$/ { code = 1; next }
		code && /^```$/ { exit } code { print }' "$src/README.md" >"$work/readme.txt"
	{
		echo '#include <stdio.h>'
		grep '^#include' "$work/readme.txt"
		echo 'int main(void)'
		echo '{'
		grep -v '^#include' "$work/readme.txt"
		echo '	return 0;'
		echo '}'
	} >"$root/tmp/app.c"
	# shellcheck disable=SC2016
	if [ -s "$work/readme.txt" ] && in_root sh -c 'cd /tmp &&
		cc -Wall -Werror $(pkg-config --cflags xdm) app.c $(pkg-config --libs xdm) -o app &&
		./app' >"$work/readme.out" 2>&1; then
		pass "README's example compiled with pkg-config --cflags --libs xdm, and run"
	else
		fail "README's example (README.md, 'Using it') against the installed packages:"
		sed 's/^/    /' "$root/tmp/app.c"
		show "$work/readme.out"
	fi

	# A module package of someone else's, made with nothing but what
	# libxdm-dev installs (its example module and Makefile.example):
	# dpkg takes it when it depends on the module ABI that libxdm0
	# provides, and a stack then loads it from the module directory; it
	# refuses the same module asking for the next minor, a libxdm newer
	# than this one.
	# shellcheck disable=SC2016
	if in_root sh -c 'set -e; mkdir /tmp/mod; cd /tmp/mod
		cp /usr/share/doc/libxdm-dev/examples/example.c .
		cp /usr/share/doc/libxdm-dev/examples/Makefile.example Makefile
		make >make.out 2>&1
		for v in "$2" "$3"; do
			rm -rf pkg && make install DESTDIR=pkg >>make.out
			mkdir pkg/DEBIAN
			printf "%s\n" "Package: xdm-module-example" "Version: 1.$v" \
				"Architecture: $1" "Maintainer: xdm tests <root@localhost>" \
				"Depends: xdm-abi-$4 (>= $4.$v)" \
				"Description: the example module of libxdm-dev" >pkg/DEBIAN/control
			dpkg-deb --root-owner-group --build pkg "needs-$4.$v.deb" >>make.out
		done' sh "$arch" "$abi_minor" "$((abi_minor + 1))" "$abi_major" >"$work/module.out" 2>&1; then
		if in_root dpkg -i "/tmp/mod/needs-$abi_major.$abi_minor.deb" >>"$work/module.out" 2>&1 &&
			in_root xdm-bench -p host -s "example | pool | host" -w pair -n 1000 -r 1 \
				>>"$work/module.out" 2>&1 &&
			in_root dpkg --purge xdm-module-example >>"$work/module.out" 2>&1; then
			pass "a module package that depends on xdm-abi-$abi_major (>= $abi_major.$abi_minor) installs, and its module loads"
		else
			fail "a module package of the example module, on xdm-abi-$abi_major (>= $abi_major.$abi_minor):"
			show "$work/module.out"
		fi
		next=$abi_major.$((abi_minor + 1))
		if in_root dpkg -i "/tmp/mod/needs-$next.deb" >"$work/module-next.out" 2>&1; then
			fail "dpkg installed a module package that needs xdm-abi-$abi_major (>= $next) beside libxdm0's $abi_major.$abi_minor"
		elif grep -q "xdm-abi-$abi_major (>= $next)" "$work/module-next.out"; then
			pass "dpkg refuses a module package that needs xdm-abi-$abi_major (>= $next): $(grep -m1 'Version of xdm-abi' "$work/module-next.out" | sed 's/^ *//')"
		else
			fail "a module package that needs xdm-abi-$abi_major (>= $next) failed for another reason:"
			show "$work/module-next.out"
		fi
		in_root dpkg --purge xdm-module-example >>"$work/module-next.out" 2>&1
	else
		fail "the example module of libxdm-dev, built and packaged in the root:"
		show "$work/module.out"
		in_root cat /tmp/mod/make.out 2>/dev/null | tail -20 | sed 's/^/    /'
	fi

	if in_root xdmctl ps >"$work/xdmctl.out" 2>&1; then
		pass "xdmctl ps: $(head -1 "$work/xdmctl.out")"
	else
		fail "xdmctl ps:"
		show "$work/xdmctl.out"
	fi

	# A member of the group shares a budget in the directory the package
	# made, by default, and xdmctl finds it there while it is attached.
	# The user lives in the throwaway root only, and is removed before
	# the purge, whose check then also sees the account files restored.
	member=xdm-deb-member
	# shellcheck disable=SC2016
	if ! in_root useradd --system --no-create-home --shell /usr/sbin/nologin \
		--groups xdm "$member" >"$work/member.out" 2>&1; then
		fail "useradd $member in the throwaway root:"
		show "$work/member.out"
	elif out=$(in_root runuser -u "$member" -- python3 -c '
import grp, json, os, stat, subprocess, sys
import xdm
rt = xdm.Runtime.create(0, stack="budget limit=64M | pool | host", platform="host")
layer = rt.budget_layer
where = rt.layer_attr(layer, "dir")
path = where + rt.layer_attr(layer, "segment")  # the name starts with a slash
block = rt.allocate(1 << 20)
st = os.stat(path)
ps = json.loads(subprocess.run(["xdmctl", "--json", "ps"], check=True,
                               capture_output=True, text=True).stdout)
rt.free(block)
rt.close()
if where != sys.argv[1]:
    sys.exit("the budget layer chose %s, not %s" % (where, sys.argv[1]))
if os.getpid() not in [p.get("pid") for b in ps["budgets"] for p in b.get("processes", [])]:
    sys.exit("xdmctl ps does not list this process: %s" % ps)
if stat.S_IMODE(st.st_mode) != 0o660 or st.st_gid != grp.getgrnam("xdm").gr_gid:
    sys.exit("%s: mode %o, gid %d: not 0660 of group xdm" % (path, st.st_mode, st.st_gid))
print("%s (mode 0660, group xdm)" % path)' /run/xdm 2>&1); then
		pass "a member of xdm shares a budget in /run/xdm by default, seen by xdmctl ps: $out"
	else
		fail "a member of xdm with a budget: $out"
	fi
	# Root does not use a directory a group shares (SECURITY.md): the
	# refusal is also the proof that the package's directory is one.
	if out=$(in_root python3 -c '
import sys, xdm
try:
    xdm.Runtime.create(0, stack="budget limit=64M | pool | host", platform="host")
except xdm.XdmError as e:
    said = str(e)
    if "root does not use it" in said:
        print(said[:said.index("root does not use it") + 20])
        sys.exit(0)
    sys.exit("refused for another reason: %s" % e)
sys.exit("root was given a budget in the shared directory")' 2>&1); then
		pass "root is refused a budget in /run/xdm, as designed: $out"
	else
		fail "root and the shared directory: $out"
	fi
	in_root userdel "$member" >>"$work/member.out" 2>&1 ||
		fail "userdel $member in the throwaway root ($work/member.out)"
fi

# Purge, then nothing may be left but what policy keeps.
start=$(date +%s)
# shellcheck disable=SC2086
if in_root dpkg --purge $pkgs >"$work/purge.log" 2>&1; then
	pass "dpkg --purge ($(($(date +%s) - start)) s)"
else
	fail "dpkg --purge failed ($work/purge.log)"
	show "$work/purge.log"
fi
# shellcheck disable=SC2016,SC2086
known=$(in_root dpkg-query -W -f '${binary:Package} ${db:Status-Abbrev}\n' $pkgs 2>/dev/null)
if in_root test -e /run/xdm || in_root getent group xdm >/dev/null || [ -n "$known" ]; then
	fail "after the purge: /run/xdm $(in_root test -e /run/xdm && echo is || echo is not) there," \
		"group xdm $(in_root getent group xdm >/dev/null && echo is || echo is not) there, dpkg knows: ${known:-nothing}"
else
	pass "after the purge dpkg knows none of them, and /run/xdm and the group xdm are gone"
fi
# The upper layer is what install, use and purge changed in the root.
(cd "$ovl/upper" && find . -mindepth 1 | sort) >"$work/upper.txt"
left=$(cd "$ovl/upper" && find . -mindepth 1 | sort | while read -r p; do
	f=${p#.}
	if [ -c "$p" ]; then
		echo "$f (removed from the machine's root)"
	elif [ -d "$p" ]; then
		# A directory the machine has is only copied up; a new one is left over.
		[ -d "$f" ] || echo "$f/"
	else
		case $f in
		/var/lib/dpkg/* | /var/log/dpkg.log | /var/log/alternatives.log) ;; # dpkg's database and log
		/etc/ld.so.cache | /var/cache/ldconfig/*) ;; # the loader's cache, rebuilt
		/var/cache/man/*) ;; # man-db's index, rebuilt
		/etc/.pwd.lock | /etc/group- | /etc/gshadow- | /etc/passwd- | /etc/shadow- | \
			/etc/subuid- | /etc/subgid-) ;; # the account tools' lock and backups
		/etc/group | /etc/gshadow | /etc/passwd | /etc/shadow | /etc/subuid | /etc/subgid)
			cmp -s "$p" "$f" || echo "$f (differs from the machine's)" ;;
		*) echo "$f" ;;
		esac
	fi
done)
if [ -z "$left" ]; then
	pass "the purge left nothing but dpkg's database and log, the loader's and man-db's caches, and account files equal to the machine's"
else
	fail "the purge left behind:"
	echo "$left" | sed 's/^/    /'
fi
finish
