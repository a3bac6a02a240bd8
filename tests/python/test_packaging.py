"""The build backend of python/pyproject.toml (python/pep517/xdm_backend.py):
the wheel and the sdist it makes, the version they carry (configure.ac's, the
same libxdm reports), and its clear refusals.  pip itself runs it in
tests/python/install_check.sh."""

import base64
import hashlib
import importlib.util
import os
import re
import shutil
import tarfile
import zipfile

import pytest

import xdm

SRC = os.environ["XDM_TOP_SRCDIR"]
BACKEND = os.path.join("pep517", "xdm_backend.py")


def backend(root):
    """The backend module of the tree at root (a fresh module each time)."""
    spec = importlib.util.spec_from_file_location("xdm_backend_under_test",
                                                  os.path.join(root, BACKEND))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree_copy(tmp_path, configure_ac=True):
    """A writable copy of python/ (and configure.ac beside it); its path."""
    root = tmp_path / "src" / "python"
    for rel in ("pyproject.toml", "README.md", BACKEND):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(os.path.join(SRC, "python", rel), root / rel)
    (root / "xdm").mkdir()
    for name in os.listdir(os.path.join(SRC, "python", "xdm")):
        if name.endswith(".py"):
            shutil.copyfile(os.path.join(SRC, "python", "xdm", name), root / "xdm" / name)
    if configure_ac:
        shutil.copyfile(os.path.join(SRC, "configure.ac"),
                        tmp_path / "src" / "configure.ac")
    return root


def modules():
    return sorted("xdm/" + name for name in os.listdir(os.path.join(SRC, "python", "xdm"))
                  if name.endswith(".py") and name != "_paths.py")


def test_wheel_carries_the_modules_and_libxdm_version(tmp_path):
    root = tree_copy(tmp_path)
    # As an in-tree build (./configure in the source directory) leaves it.
    (root / "xdm" / "_paths.py").write_text("libdir = '/usr/local/lib'\n")
    out = tmp_path / "out"
    out.mkdir()
    version = xdm.version()        # config.h's PACKAGE_VERSION, through libxdm
    name = backend(root).build_wheel(str(out))
    assert name == "xdm-%s-py3-none-any.whl" % version
    with zipfile.ZipFile(out / name) as whl:
        names = whl.namelist()
        info = "xdm-%s.dist-info/" % version
        assert sorted(n for n in names if not n.startswith(info)) == modules()
        metadata = whl.read(info + "METADATA").decode()
        assert re.search(r"^Version: %s$" % re.escape(version), metadata, re.M)
        assert re.search(r"^Name: xdm$", metadata, re.M)
        assert "Root-Is-Purelib: true" in whl.read(info + "WHEEL").decode()
        record = whl.read(info + "RECORD").decode().splitlines()
        assert sorted(line.split(",")[0] for line in record) == sorted(names)
        for line in record:
            path, digest, size = line.split(",")
            if path == info + "RECORD":
                assert digest == size == ""
                continue
            data = whl.read(path)
            expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
            assert digest == "sha256=" + expect.rstrip(b"=").decode()
            assert int(size) == len(data)


def test_wheel_from_the_sdist_is_the_same(tmp_path):
    root = tree_copy(tmp_path)
    (tmp_path / "out").mkdir()
    module = backend(root)
    from_tree = module.build_wheel(str(tmp_path / "out"))
    sdist = module.build_sdist(str(tmp_path / "out"))
    assert sdist == "xdm-%s.tar.gz" % xdm.version()
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tmp_path / "out" / sdist) as tar:
        # The "data" filter where there is one (3.12, and backports).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(unpacked, **safe)
    top = unpacked / ("xdm-%s" % xdm.version())
    # No configure.ac there: the version comes from PKG-INFO.
    assert not os.path.exists(unpacked / "configure.ac")
    (tmp_path / "again").mkdir()
    from_sdist = backend(top).build_wheel(str(tmp_path / "again"))
    assert from_sdist == from_tree
    with open(tmp_path / "out" / from_tree, "rb") as a, \
            open(tmp_path / "again" / from_sdist, "rb") as b:
        assert a.read() == b.read()


def test_version_must_be_found_and_valid(tmp_path):
    root = tree_copy(tmp_path, configure_ac=False)
    out = str(tmp_path)
    module = backend(root)
    with pytest.raises(module.BackendError,
                       match="cannot tell xdm's version.*configure.ac"):
        module.build_wheel(out)
    configure_ac = tmp_path / "src" / "configure.ac"
    configure_ac.write_text("AC_INIT([xdm], [0.2.0-beta], [], [xdm])\n")
    with pytest.raises(module.BackendError, match="not a public PEP 440 version"):
        module.build_wheel(out)
    configure_ac.write_text("AC_INIT([other], [1.0], [], [other])\n")
    with pytest.raises(module.BackendError, match="names 'other', not xdm"):
        module.build_wheel(out)
    assert os.listdir(out) == ["src"]       # no wheel, not even half of one


def edit_project(root, add):
    """Put a line into pyproject.toml's [project] table (the file ends with
    a subtable, where an appended line would land)."""
    path = root / "pyproject.toml"
    text = path.read_text()
    assert "\n[project]\n" in text
    path.write_text(text.replace("\n[project]\n", "\n[project]\n%s\n" % add, 1))


def test_unknown_project_key_is_refused(tmp_path):
    root = tree_copy(tmp_path)
    edit_project(root, 'dependencies = ["numpy"]')
    module = backend(root)
    with pytest.raises(module.BackendError, match="dependencies are not known"):
        module.build_wheel(str(tmp_path))


def test_wheel_carries_the_entry_points(tmp_path):
    # [project.entry-points.pytest11] becomes the wheel's entry_points.txt,
    # listed in RECORD, which is how pytest finds the plugin of a pip install.
    root = tree_copy(tmp_path)
    with open(root / "pyproject.toml", "a") as f:
        f.write('\n[project.entry-points."other.group"]\nb = "xdm.tree:show"\n'
                'a = "xdm"\n')
    name = backend(root).build_wheel(str(tmp_path))
    info = "xdm-%s.dist-info/" % xdm.version()
    with zipfile.ZipFile(tmp_path / name) as whl:
        text = whl.read(info + "entry_points.txt").decode()
        record = whl.read(info + "RECORD").decode()
    assert text == ("[other.group]\na = xdm\nb = xdm.tree:show\n\n"
                    "[pytest11]\nxdm.pytest = xdm.pytest\n")
    assert info + "entry_points.txt," in record


def test_wheel_without_entry_points_has_no_file(tmp_path):
    root = tree_copy(tmp_path)
    text = (root / "pyproject.toml").read_text()
    text = text[:text.index("[project.entry-points.pytest11]")]
    (root / "pyproject.toml").write_text(text)
    name = backend(root).build_wheel(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as whl:
        assert not [n for n in whl.namelist() if n.endswith("entry_points.txt")]


@pytest.mark.parametrize("table, match", [
    ('[project.entry-points.console_scripts]\nx = "xdm:version"',
     r"scripts are \[project.scripts\]"),
    ('[project.entry-points.other]\nx = "not a reference"',
     "is not name = \"module\" or \"module:attr\""),
    ('[project.entry-points.other]\nx = ["xdm"]',
     "is not name = \"module\""),
])
def test_bad_entry_points_are_refused(tmp_path, table, match):
    root = tree_copy(tmp_path)
    with open(root / "pyproject.toml", "a") as f:
        f.write("\n%s\n" % table)
    module = backend(root)
    with pytest.raises(module.BackendError, match=match):
        module.build_wheel(str(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".whl")]


def test_fallback_reader_agrees_with_tomllib():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(SRC, "python", "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    project = tomllib.loads(text)["project"]
    assert backend(os.path.join(SRC, "python")).parse_project_fallback(text) == project
    assert project["name"] == "xdm" and project["dynamic"] == ["version"]
    assert project["entry-points"] == {"pytest11": {"xdm.pytest": "xdm.pytest"}}


def test_fallback_reader_reads_subtables_and_refuses_bad_headers():
    module = backend(os.path.join(SRC, "python"))
    text = ('[build-system]\nrequires = []\n[project]\nname = "xdm"\n'
            '[project.entry-points."a.b"]\nx = "m:f" # c\n[tool.other]\ny = "z"\n')
    assert module.parse_project_fallback(text) == {
        "name": "xdm", "entry-points": {"a.b": {"x": "m:f"}}}
    with pytest.raises(module.BackendError, match="cannot read the table header"):
        module.parse_project_fallback("[project..x]\n")
