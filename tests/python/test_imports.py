"""Importing xdm and its framework switches imports no framework and loads
no library: each is asked for only when a switch is used."""

import os

import xdm

from conftest import run_python

FRAMEWORKS = ("torch", "cupy", "numba")


def switches():
    """The switch modules this tree has (xdm.torch comes with its glue)."""
    here = os.path.dirname(xdm.__file__)
    return ["xdm." + name for name in FRAMEWORKS
            if os.path.exists(os.path.join(here, name + ".py"))]


def test_switches_import_no_framework():
    mods = switches()
    assert "xdm.cupy" in mods and "xdm.numba" in mods
    out = run_python(
        "import sys\n"
        "import xdm, %s\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))\n"
        "print(xdm._lib._lib is None)\n" % (", ".join(mods), FRAMEWORKS))
    loaded, lib_untouched = out.splitlines()
    assert loaded == "[]"
    assert lib_untouched == "True"


def test_numba_plugin_attribute_is_lazy():
    # Without Numba (or with a stub that fails), only the plugin attribute
    # asks for it; other attributes are plain AttributeErrors.
    out = run_python(
        "import sys\n"
        "sys.modules['numba'] = None   # an import of numba now fails\n"
        "import xdm.numba\n"
        "try:\n"
        "    xdm.numba.no_such_thing\n"
        "except AttributeError as e:\n"
        "    print('attribute', e)\n"
        "try:\n"
        "    xdm.numba._numba_memory_manager\n"
        "except ImportError:\n"
        "    print('import')\n")
    assert out.splitlines() == [
        "attribute module 'xdm.numba' has no attribute 'no_such_thing'", "import"]


def test_every_file_is_distributed():
    # A file missing from python/local.mk (the package) or tests/local.mk
    # (its tests) would be left out of the tarball, and `make distcheck`
    # would test without it and pass.
    src = os.environ["XDM_TOP_SRCDIR"]
    listed = set()
    for makefile in ("python/local.mk", "tests/local.mk"):
        with open(os.path.join(src, makefile)) as f:
            listed |= set(f.read().replace("\\\n", " ").split())
    for folder in ("python", "python/xdm", "python/pep517", "tests/python"):
        for name in sorted(os.listdir(os.path.join(src, folder))):
            if (name.endswith((".py", ".py.in", ".toml", ".md", ".sh"))
                    and name != "_paths.py"):
                assert "%s/%s" % (folder, name) in listed, name


def test_the_package_does_not_import_pytest():
    # xdm.pytest is pytest's to import (-p xdm.pytest, or its entry point):
    # importing the package, or a switch, brings neither it nor pytest.
    out = run_python(
        "import sys\n"
        "import xdm, xdm.cupy, xdm.numba\n"
        "print(sorted(m for m in sys.modules if m == 'xdm.pytest'\n"
        "             or m.split('.')[0] in ('pytest', '_pytest')))\n")
    assert out.strip() == "[]"
