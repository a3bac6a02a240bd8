"""python/sitedir.py, which configure runs to choose pythondir: for a
prefix, a site directory under PREFIX/lib this interpreter imports from.
(tests/python/install_check.sh checks configure's choice after make install.)"""

import os
import subprocess
import sys

import pytest

import sitedir

SCRIPT = os.path.join(os.environ["XDM_TOP_SRCDIR"], "python", "sitedir.py")
SITE_NAMES = ("site-packages", "dist-packages")


def live_site_dirs():
    return [os.path.normpath(p) for p in sys.path
            if os.path.basename(os.path.normpath(p)) in SITE_NAMES and os.path.isdir(p)]


def test_prefix_of_each_site_directory_gives_one_on_sys_path():
    live = live_site_dirs()
    assert live, "this interpreter imports from no site directory: %s" % sys.path
    for d in live:
        prefix = d[:d.index("/lib/")] or "/"
        rel = sitedir.sitedir(prefix)
        assert rel is not None and not rel.startswith("..")
        assert os.path.join(prefix, rel) in live


def test_debian_python_prefix_usr():
    # Debian's python3 (deb_system scheme) imports /usr's packages from
    # lib/python3/dist-packages, not lib/python3.X/dist-packages.
    if "/usr/lib/python3/dist-packages" not in live_site_dirs():
        pytest.skip("not Debian's python3: %s" % sys.executable)
    assert sitedir.sitedir("/usr") == "lib/python3/dist-packages"


def run(*args):
    return subprocess.run([sys.executable, "-E", SCRIPT] + list(args),
                          capture_output=True, text=True, timeout=60)


def test_prefix_it_does_not_import_from(tmp_path):
    proc = run(str(tmp_path))
    assert (proc.returncode, proc.stdout) == (1, "")


def test_bad_arguments():
    for args in ((), ("usr",), ("/usr", "/usr/local")):
        proc = run(*args)
        assert proc.returncode == 2 and "usage:" in proc.stderr, args
