#!/bin/sh
# SPDX-License-Identifier: MIT
#
# pod.sh ANSWER CMD... - runs CMD as a container runtime would run a
# container that the device plugin's Allocate answered ANSWER for: in PID,
# mount and IPC namespaces of its own (its own /proc, /dev/shm), with
# exactly the answer's mounts (each made as a bind mount at its container
# path, read-only where it says ro) and the answer's environment on top of
# the caller's (the image's, here: PATH, and the driver's library path).
#
# ANSWER is what fake_kubelet pods or tests/k8s/xdm_k8s_allocate write:
# KEY=VALUE lines, then "mount HOST CONTAINER ro|rw" lines.  The container
# path of a mount is made (an empty file or a directory) where it is
# missing, as a runtime makes it in the container's root: tests name
# container paths under their own temporary directory.  Needs root and
# unshare(1) with --kill-child; killing this script's unshare kills CMD.

set -eu
answer=$1
shift
[ -r "$answer" ] || { echo "pod.sh: cannot read $answer" >&2; exit 125; }
exec unshare --ipc --pid --mount --fork --kill-child --mount-proc sh -eu -c '
	answer=$1
	shift
	mount --make-rprivate /
	mount -t tmpfs -o mode=1777 tmpfs /dev/shm
	while read -r word host ctr mode; do
		[ "$word" = mount ] || continue
		if [ -d "$host" ]; then
			mkdir -p "$ctr"
		elif [ ! -e "$ctr" ]; then
			mkdir -p "$(dirname "$ctr")"
			: >"$ctr"
		fi
		mount --bind "$host" "$ctr"
		[ "$mode" = rw ] || mount -o remount,bind,ro "$ctr"
	done <"$answer"
	# The answer'\''s environment, each line one variable, on top of ours.
	while IFS= read -r line; do
		case $line in
		mount\ *|"") ;;
		*=*) export "$line" ;;
		esac
	done <"$answer"
	exec "$@"' pod "$answer" "$@"
