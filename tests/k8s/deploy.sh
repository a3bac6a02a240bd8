#!/bin/sh
# deploy.sh: deploy/ (the DaemonSet, the image, the example pods, the
# Prometheus job) is well-formed and true to xdm-device-plugin: its flags,
# its paths and its Allocate, and to doc/kubernetes.md.  deploy_check.py
# says what it checks; this script runs it with this tree's source and
# build directories.
set -eu
src=${XDM_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${XDM_TOP_BUILDDIR:-}
python=${PYTHON:-python3}
case $python in :|'') python=python3 ;; esac
if ! command -v "$python" >/dev/null 2>&1; then
	echo "deploy.sh: no python3 to read the manifests with" >&2
	exit 77
fi
exec "$python" "$src/tests/k8s/deploy_check.py" "$src" ${build:+"$build"}
