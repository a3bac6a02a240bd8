"""Where the Debian packages put libxdm and its modules, and the budget
directory the users of the machine share.  debian/rules installs this in
place of the _paths.py that make writes.

python3-xdm is Architecture: all, so it names no one architecture's
directory: libxdm0 is installed for the architecture of the python3 that
imports this, and that python3 knows its own multiarch triplet."""

import sysconfig

libdir = "/usr/lib/" + (sysconfig.get_config_var("MULTIARCH") or "")
pkglibdir = libdir.rstrip("/") + "/xdm"
budget_shared_dir = "@budget_shared_dir@"
