#!/bin/sh
# Install what building and testing xdm needs on Debian 12 (bookworm).
# Runs apt-get as root, or through sudo when run by another user.  clang and
# libclang-rt-14-dev (libFuzzer's runtime, libclang_rt.fuzzer) are for the
# fuzz targets of tests/fuzz only; tmux drives xdmctl top in a real terminal
# (tests/tools/xdmctl_top.sh); curl scrapes xdmctl serve, and prometheus
# brings promtool, which checks what it serves (tests/tools/xdmctl_serve.sh;
# without promtool that check is skipped with a sentence).  On a machine
# run by systemd the prometheus package also enables a Prometheus server;
# `systemctl disable --now prometheus` where it is not wanted.
set -eu
# libtsan2: ThreadSanitizer's runtime for --enable-tsan (GCC 12 pulls it in
# already; named because tests/ci.sh's TSan stage needs it).  python3-pip:
# tests/python/install_check.sh's `pip install ./python` (into a venv made
# --without-pip, so python3-venv is not needed).  python3-pytest-xdist: the
# pytest plugin's tests of workers sharing a budget (tests/python/
# test_pytest_plugin.py; they skip without it).  debhelper (which brings
# dh-autoreconf), dh-python and lintian: tests/deb/packages.sh
# builds the Debian packages with dpkg-buildpackage, lints them, and
# installs them into a throwaway root; the rest of debian/control's
# Build-Depends is above.
pkgs="build-essential autoconf automake libtool pkg-config check libsubunit-dev
      libfuse3-dev fuse3 python3 python3-pytest python3-pytest-xdist python3-pip libtsan2
      clang libclang-rt-14-dev tmux curl prometheus
      debhelper dh-python lintian"
# gRPC's C++ library, protobuf and their compilers: xdm-device-plugin, the
# Kubernetes device plugin (tools/device-plugin), and the fake kubelet of
# its tests (tests/k8s); configure leaves both out without them.
pkgs="$pkgs libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc"
# xdm-common's postinst makes /run/xdm with systemd-tmpfiles: systemd's,
# or, where systemd is not installed (a container), the standalone one,
# which is never asked for beside systemd (it would replace systemd's).
# adduser makes its group.
pkgs="$pkgs adduser"
dpkg-query -W -f '${db:Status-Status}' systemd 2>/dev/null | grep -qx installed ||
	pkgs="$pkgs systemd-standalone-tmpfiles"
as_root=""
[ "$(id -u)" -eq 0 ] || as_root="sudo"
export DEBIAN_FRONTEND=noninteractive
$as_root apt-get update -qq
# shellcheck disable=SC2086
$as_root apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
echo "install-deps: installed $(echo $pkgs | wc -w) packages"
