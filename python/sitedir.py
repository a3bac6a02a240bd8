"""Print where this interpreter imports packages from under a prefix.

Usage: python3 sitedir.py PREFIX

Run by configure (as ``$PYTHON -E``) to choose ``pythondir``, the directory
``make install`` puts the package xdm in.  Prints the directory relative to
PREFIX (``lib/python3/dist-packages``) and exits 0, or prints nothing and
exits 1 when the interpreter imports from no such directory.

The directory is a ``site-packages`` or ``dist-packages`` under PREFIX/lib
that the interpreter searches: on ``sys.path``, or one of ``site``'s
directories, which are on ``sys.path`` once they exist (one already there
wins).  Where several are, the install schemes of ``sysconfig`` decide, the
default scheme first.  For Debian's /usr/bin/python3, PREFIX /usr gives
``lib/python3/dist-packages`` (its ``deb_system`` scheme) and PREFIX
/usr/local gives ``lib/python3.X/dist-packages``; for a venv or a python
built from source, its prefix gives its own ``lib/python3.X/site-packages``.
"""

import os
import site
import sys
import sysconfig

SITE_NAMES = ("site-packages", "dist-packages")


def site_dirs(dirs):
    """The site-packages and dist-packages of dirs, normalised."""
    dirs = [os.path.normpath(d) for d in dirs if d]
    return [d for d in dirs if os.path.basename(d) in SITE_NAMES]


def searched():
    """(on sys.path now, on it once they exist): this interpreter's site
    directories."""
    later = []
    if hasattr(site, "getsitepackages"):
        later += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        later.append(site.getusersitepackages())
    return site_dirs(sys.path), site_dirs(later)


def scheme_dirs(prefix):
    """purelib of each sysconfig install scheme for prefix, default first."""
    default = getattr(sysconfig, "get_default_scheme",
                      getattr(sysconfig, "_get_default_scheme", None))
    names = sorted(sysconfig.get_scheme_names())
    if default is not None:
        names.insert(0, default())
    prefix_vars = {"base": prefix, "platbase": prefix,
                   "installed_base": prefix, "installed_platbase": prefix}
    dirs = []
    for name in names:
        try:
            dirs.append(sysconfig.get_path("purelib", name, prefix_vars))
        except KeyError:
            continue
    return [os.path.normpath(d) for d in dirs]


def sitedir(prefix):
    """The directory relative to prefix, or None."""
    prefix = os.path.normpath(prefix)
    lib = os.path.join(prefix, "lib") + os.sep
    now, later = searched()
    schemes = scheme_dirs(prefix)
    # A directory already searched beats one that would be once made.
    for known in (now, now + later):
        for d in schemes + known:
            if d in known and d.startswith(lib):
                return os.path.relpath(d, prefix)
    return None


def main(argv):
    if len(argv) != 2 or not os.path.isabs(argv[1]):
        sys.stderr.write("usage: %s PREFIX (an absolute directory)\n" % argv[0])
        return 2
    found = sitedir(argv[1])
    if found is None:
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
