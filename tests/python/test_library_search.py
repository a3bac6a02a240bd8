"""How a package without the build tree's XDM_LIBRARY finds libxdm
(xdm/_lib.py): _paths.py's libdir (make install), the dynamic loader, then
the default libdirs of `make install`; and what LibraryNotFound says when
all fail, as a pip-installed package (no _paths.py) meets it."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import xdm
import xdm._lib

SRC = os.environ["XDM_TOP_SRCDIR"]
# Prints what loading gave, as one JSON line, whether it worked or not.
REPORT = (
    "import json, xdm, xdm._lib\n"
    "try:\n"
    "    out = {'path': xdm.library_path(), 'version': xdm.version()}\n"
    "except xdm.LibraryNotFound as e:\n"
    "    out = {'tried': e.tried, 'message': str(e)}\n"
    "out['paths'] = xdm._lib._paths() is not None\n"
    "print(json.dumps(out))\n")


def package_copy(tmp_path, libdir=None):
    """A copy of the package as pip installs it (no _paths.py), or as make
    install does when libdir is given; returns the directory to import from."""
    site = tmp_path / "site"
    (site / "xdm").mkdir(parents=True)
    for name in os.listdir(os.path.join(SRC, "python", "xdm")):
        if name.endswith(".py") and name != "_paths.py":
            shutil.copyfile(os.path.join(SRC, "python", "xdm", name),
                            site / "xdm" / name)
    if libdir is not None:
        (site / "xdm" / "_paths.py").write_text(
            "libdir = %r\npkglibdir = %r\n" % (str(libdir), str(libdir)))
    return site


def lib_dir(tmp_path):
    """A directory holding libxdm.so.0, a link to the build's libxdm."""
    d = tmp_path / "lib"
    d.mkdir()
    os.symlink(os.path.realpath(os.environ["XDM_LIBRARY"]), d / xdm._lib.SONAME)
    return d


def load_in_child(site, code="", library=None):
    """Run REPORT in a fresh interpreter importing xdm from site, after
    code, with XDM_LIBRARY set to library (unset if None) and no
    LD_LIBRARY_PATH; return the report."""
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("XDM_LIBRARY", None)
    if library is not None:
        env["XDM_LIBRARY"] = library
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, "-c", code + REPORT], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def skip_if_installed(report):
    if "path" in report:
        pytest.skip("a libxdm is installed on this machine (%s): the search "
                    "cannot come up empty" % report["path"])


def test_default_libdirs():
    dirs = xdm._lib.default_libdirs()
    assert dirs[0] == "/usr/local/lib" and dirs[-1] == "/usr/lib"
    multiarch = sysconfig.get_config_var("MULTIARCH")
    assert dirs[1:-1] == (["/usr/lib/" + multiarch] if multiarch else [])


def test_pip_installed_package_says_where_it_looked(tmp_path):
    report = load_in_child(package_copy(tmp_path))
    skip_if_installed(report)
    assert report["paths"] is False
    tried = [path for path, _ in report["tried"]]
    assert tried == [xdm._lib.SONAME] + [os.path.join(d, xdm._lib.SONAME)
                                         for d in xdm._lib.default_libdirs()]
    message = report["message"]
    for path in tried:
        assert path in message
    assert "dynamic loader" in message
    assert "Install libxdm" in message and "set XDM_LIBRARY" in message


def test_default_libdir_is_searched_after_the_loader(tmp_path):
    lib = lib_dir(tmp_path)
    report = load_in_child(
        package_copy(tmp_path),
        "import xdm._lib\n"
        "xdm._lib.default_libdirs = lambda: [%r, %r]\n"
        % (str(tmp_path / "nothing"), str(lib)))
    if report.get("path") == xdm._lib.SONAME:
        pytest.skip("the dynamic loader finds an installed libxdm first")
    assert report["path"] == str(lib / xdm._lib.SONAME)
    assert report["version"] == xdm.version()


def test_paths_libdir_comes_first(tmp_path):
    lib = lib_dir(tmp_path)
    report = load_in_child(package_copy(tmp_path, libdir=lib))
    assert report["paths"] is True
    assert report["path"] == str(lib / xdm._lib.SONAME)


def test_xdm_library_is_the_only_candidate(tmp_path):
    # Even with a _paths.py that would have worked.
    site = package_copy(tmp_path, libdir=lib_dir(tmp_path))
    report = load_in_child(site, library="/nonexistent/libxdm.so.0")
    assert report["tried"] == [["/nonexistent/libxdm.so.0", "XDM_LIBRARY: no such file"]]
    assert "unset it" in report["message"]
