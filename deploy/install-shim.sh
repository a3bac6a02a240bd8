#!/bin/sh
# install-shim DIR: copies xdm's preload shim, and the library it needs,
# from this image to DIR, a directory of the node (a hostPath of the
# DaemonSet in deploy/xdm-device-plugin.yaml), where the kubelet finds
# them to mount into the pods xdm-device-plugin answers for.
#
# Each file is written under a new name and renamed over the old one, so a
# pod that has the old file mounted keeps it whole and a pod started
# during the copy never sees half a file.
set -eu
if [ $# -ne 1 ]; then
	echo "usage: install-shim DIR" >&2
	exit 2
fi
dir=$1
libdir=${XDM_LIBDIR:-/usr/lib}
mkdir -p "$dir"
for f in libxdm-preload.so libxdm.so.0; do
	cp -L "$libdir/$f" "$dir/.$f.new"
	chmod 0644 "$dir/.$f.new"
	mv -f "$dir/.$f.new" "$dir/$f"
	echo "install-shim: $dir/$f"
done
