"""The PEP 517 build backend of the package xdm, standard library only.

``pyproject.toml`` names it with ``backend-path``, so ``pip install
./python`` needs nothing but pip: no setuptools, no network, no build
isolation to set up.  The package is pure Python, so a wheel is a zip of
``xdm/*.py`` with its ``.dist-info`` (``entry_points.txt`` among them, from
``[project.entry-points.*]``: the pytest plugin's); an sdist is a tarball of
what the wheel is built from.

The version is xdm's own, read from ``AC_INIT`` in ``../configure.ac`` (the
source tree's), the one place it is written; an sdist records it in its
``PKG-INFO``, which is read instead when there is one.  The ``[project]``
table of ``pyproject.toml`` gives the rest of the metadata; a key this
backend does not know is refused rather than silently left out.

Not built: ``xdm/_paths.py``, which ``make`` writes for ``make install``
(a pip-installed package finds libxdm by the loader's and the default
install paths; see ``xdm/_lib.py``).  No editable installs: from a source
tree, ``PYTHONPATH=python`` (what ``./xdm-uninstalled`` sets) does that.
"""

import base64
import hashlib
import io
import json
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "xdm"
# The modules make writes, which a wheel or an sdist must not carry.
GENERATED = ("_paths.py",)
# The [project] keys this backend turns into metadata.
PROJECT_KEYS = ("name", "description", "readme", "requires-python", "license",
                "dynamic", "entry-points")
# PEP 621: these groups are [project.scripts] and [project.gui-scripts],
# which this backend does not write.
SCRIPT_GROUPS = ("console_scripts", "gui_scripts")
# An entry point's object reference, "module" or "module:attr" (dotted).
OBJECT_REF_RE = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")
GROUP_RE = re.compile(r"^[\w.-]+$")
# Public PEP 440 versions in canonical form (what AC_INIT should hold).
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?"
                        r"(\.post[0-9]+)?(\.dev[0-9]+)?$")
AC_INIT_RE = re.compile(r"^AC_INIT\(\[([^]]*)\],\s*\[([^]]*)\]", re.M)


class BackendError(Exception):
    """The tree cannot be built; the message says why."""


# ---- pyproject.toml --------------------------------------------------------

def _toml_value(text, where):
    """A TOML value of the forms pyproject.toml uses here: a basic string,
    an array of them, or an inline table of them (Python < 3.11 has no
    tomllib)."""
    text = text.strip()
    if text.startswith('"'):
        m = re.match(r'("(?:[^"\\]|\\.)*")\s*(?:#.*)?$', text)
        try:
            # TOML's basic strings escape as JSON's do (but for \U).
            return json.loads(m.group(1))
        except (AttributeError, ValueError):
            raise BackendError("%s: cannot read the string %s" % (where, text))
    if text.startswith("[") and text.endswith("]"):
        return [_toml_value(i, where)
                for i in re.findall(r'"(?:[^"\\]|\\.)*"', text)]
    if text.startswith("{") and text.endswith("}"):
        table = {}
        for part in text[1:-1].split(","):
            if part.strip():
                key, _, value = part.partition("=")
                table[key.strip()] = _toml_value(value, where)
        return table
    raise BackendError("%s: only strings, arrays and inline tables of strings "
                       "are read, not %s" % (where, text))


def parse_project(text):
    """The [project] table of pyproject.toml's text, as a dict.

    Uses tomllib where there is one (3.11); else reads the one-line
    ``key = value`` forms the file keeps to (see :func:`_toml_value`).
    """
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        return tomllib.loads(text).get("project", {})
    return parse_project_fallback(text)


_TABLE_KEY_RE = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+)\s*(\.|$)')


def _table_keys(header, where):
    """The dotted keys of a table header, quoted parts unquoted:
    [project.entry-points."a.b"] gives ["project", "entry-points", "a.b"]."""
    text, keys, pos, last = header[1:-1], [], 0, "."
    while last == "." and pos <= len(text):
        m = _TABLE_KEY_RE.match(text, pos)
        if not m:
            raise BackendError("%s: cannot read the table header %s" % (where, header))
        key, last = m.group(1), m.group(2)
        keys.append(json.loads(key) if key.startswith('"') else key)
        pos = m.end()
    if last == "." or pos != len(text):
        raise BackendError("%s: cannot read the table header %s" % (where, header))
    return keys


def parse_project_fallback(text):
    """parse_project without tomllib (public so that a test compares).

    Reads [project] and its subtables ([project.entry-points.pytest11]);
    other tables are skipped.
    """
    project = {}
    table = None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        where = "pyproject.toml:%d" % n
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            keys = _table_keys(line.split("#")[0].strip(), where)
            table = None
            if keys[0] == "project":
                table = project
                for key in keys[1:]:
                    table = table.setdefault(key, {})
            continue
        if table is None:
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise BackendError("%s: expected key = value" % where)
        table[key.strip().strip('"')] = _toml_value(value, where)
    return project


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        project = parse_project(f.read())
    unknown = sorted(set(project) - set(PROJECT_KEYS))
    if unknown:
        raise BackendError("pyproject.toml: [project] keys %s are not known to "
                           "python/pep517/xdm_backend.py; teach it them"
                           % ", ".join(unknown))
    if project.get("name") != PACKAGE or project.get("dynamic") != ["version"]:
        raise BackendError('pyproject.toml: [project] must have name = "%s" and '
                           'dynamic = ["version"] (the version is configure.ac\'s)'
                           % PACKAGE)
    entry_points_txt(project)       # refuses what it cannot write
    return project


def entry_points_txt(project):
    """The text of the wheel's entry_points.txt, from [project.entry-points]
    (None when there are none): one section per group, sorted."""
    groups = project.get("entry-points")
    if groups is None:
        return None
    if not isinstance(groups, dict):
        raise BackendError("pyproject.toml: [project] entry-points is a table of "
                           "groups ([project.entry-points.GROUP])")
    sections = []
    for group in sorted(groups):
        entries = groups[group]
        where = "pyproject.toml: [project.entry-points.%s]" % group
        if group in SCRIPT_GROUPS:
            raise BackendError("%s: scripts are [project.scripts] and "
                               "[project.gui-scripts] (PEP 621), which this backend "
                               "does not write" % where)
        if not GROUP_RE.match(group) or not isinstance(entries, dict) or not entries:
            raise BackendError("%s: a group is a table of name = \"module:attr\""
                               % where)
        lines = ["[%s]" % group]
        for name in sorted(entries):
            ref = entries[name]
            if (not isinstance(ref, str) or not OBJECT_REF_RE.match(ref)
                    or "=" in name or name != name.strip() or not name
                    or name.startswith("[")):
                raise BackendError("%s: %s = %r is not name = \"module\" or "
                                   "\"module:attr\"" % (where, name, ref))
            lines.append("%s = %s" % (name, ref))
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


# ---- the version -----------------------------------------------------------

def read_version(root=ROOT):
    """xdm's version: PKG-INFO's in an sdist, else AC_INIT's in configure.ac."""
    pkg_info = os.path.join(root, "PKG-INFO")
    configure_ac = os.path.join(root, os.pardir, "configure.ac")
    if os.path.exists(pkg_info):
        with open(pkg_info, encoding="utf-8") as f:
            m = re.search(r"^Version: *(\S+)$", f.read(), re.M)
        where, version = pkg_info, m and m.group(1)
    elif os.path.exists(configure_ac):
        with open(configure_ac, encoding="utf-8") as f:
            m = AC_INIT_RE.search(f.read())
        if m and m.group(1) != PACKAGE:
            raise BackendError("%s: AC_INIT names %r, not %s: this python/ is not "
                               "xdm's" % (configure_ac, m.group(1), PACKAGE))
        where, version = configure_ac, m and m.group(2)
    else:
        raise BackendError("cannot tell xdm's version: neither %s (an sdist's) nor "
                           "%s (the source tree's) exists; build from xdm's "
                           "source tree or from an sdist of it"
                           % (pkg_info, os.path.normpath(configure_ac)))
    if not version:
        raise BackendError("%s: no version found" % where)
    if not VERSION_RE.match(version):
        raise BackendError("%s: version %r is not a public PEP 440 version "
                           "(such as 1.2.0 or 1.2.0rc1)" % (where, version))
    return version


# ---- metadata and archives -------------------------------------------------

def _metadata(project, version):
    lines = ["Metadata-Version: 2.1", "Name: %s" % PACKAGE, "Version: %s" % version]
    if "description" in project:
        lines.append("Summary: %s" % project["description"])
    license = project.get("license")
    if isinstance(license, dict) and "text" in license:
        lines.append("License: %s" % license["text"])
    if "requires-python" in project:
        lines.append("Requires-Python: %s" % project["requires-python"])
    body = ""
    if "readme" in project:
        with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def _sources():
    """(archive name, path) of the package's modules, sorted."""
    folder = os.path.join(ROOT, PACKAGE)
    return [("%s/%s" % (PACKAGE, name), os.path.join(folder, name))
            for name in sorted(os.listdir(folder))
            if name.endswith(".py") and name not in GENERATED]


def _epoch():
    # Reproducible archives: SOURCE_DATE_EPOCH, else 1980 (zip's first date).
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", 315532800)), 315532800)


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 517: write xdm-VERSION-py3-none-any.whl, return its name."""
    project = _project()
    version = read_version()
    dist_info = "%s-%s.dist-info" % (PACKAGE, version)
    name = "%s-%s-py3-none-any.whl" % (PACKAGE, version)
    files = []
    for arcname, path in _sources():
        with open(path, "rb") as f:
            files.append((arcname, f.read()))
    files.append((dist_info + "/METADATA", _metadata(project, version).encode()))
    entry_points = entry_points_txt(project)
    if entry_points is not None:
        files.append((dist_info + "/entry_points.txt", entry_points.encode()))
    files.append((dist_info + "/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: xdm_backend (python/pep517)\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()))
    record = "".join("%s,%s,%d\n" % (arcname, _record_hash(data), len(data))
                     for arcname, data in files)
    files.append((dist_info + "/RECORD", (record + dist_info + "/RECORD,,\n").encode()))
    date = time.gmtime(_epoch())[:6]
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    os.replace(path + ".tmp", path)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """PEP 517: write xdm-VERSION.tar.gz, return its name.

    It holds PKG-INFO (with the version, as it has no configure.ac),
    pyproject.toml, README.md, this backend and the modules.
    """
    project = _project()
    version = read_version()
    top = "%s-%s" % (PACKAGE, version)
    files = [("PKG-INFO", _metadata(project, version).encode())]
    for rel in ("pyproject.toml", project.get("readme"),
                "pep517/" + os.path.basename(__file__)):
        if rel:
            with open(os.path.join(ROOT, rel), "rb") as f:
                files.append((rel, f.read()))
    for arcname, path in _sources():
        with open(path, "rb") as f:
            files.append((arcname, f.read()))
    name = top + ".tar.gz"
    path = os.path.join(sdist_directory, name)
    with tarfile.open(path + ".tmp", "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arcname, data in files:
            info = tarfile.TarInfo("%s/%s" % (top, arcname))
            info.size, info.mode, info.mtime = len(data), 0o644, _epoch()
            tar.addfile(info, io.BytesIO(data))
    os.replace(path + ".tmp", path)
    return name


def get_requires_for_build_wheel(config_settings=None):
    """PEP 517: nothing beyond the standard library."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """PEP 517: nothing beyond the standard library."""
    return []
