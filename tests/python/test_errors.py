"""xdm.errors against the header: one class per status, payloads, and the
ctypes structures laid out exactly as the C compiler lays them out."""

import ctypes
import os
import re
import shutil
import subprocess

import pytest

import xdm
from xdm import _lib, errors

from conftest import run_python

HEADER = os.path.join(os.environ["XDM_TOP_SRCDIR"], "include", "xdm", "xdm.h")


def header_enum(name):
    """The enumerators of enum name in xdm.h, in order."""
    with open(HEADER) as f:
        text = f.read()
    body = re.search(r"enum %s \{(.*?)\};" % name, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [e.split("=")[0].strip() for e in body.split(",") if e.strip()]


def test_status_names_follow_the_header():
    names = header_enum("xdm_status")
    assert names[-1] == "XDM_STATUS_COUNT"
    assert list(errors.STATUS_NAMES) == names[:-1]


def test_one_class_per_status():
    seen = set()
    for status in range(1, len(errors.STATUS_NAMES)):
        cls = errors.error_class(status)
        assert cls is not xdm.XdmError and cls.status == status
        assert cls not in seen
        seen.add(cls)
        assert getattr(xdm, cls.__name__) is cls
        # libxdm knows a sentence for it.
        assert _lib.lib().xdm_strerror(status) != b"unknown status"
    assert errors.error_class(99) is xdm.XdmError


def test_python_bases():
    assert issubclass(xdm.OutOfBudget, MemoryError)
    assert issubclass(xdm.OutOfMemory, MemoryError)
    assert issubclass(xdm.InvalidArgument, ValueError)
    assert issubclass(xdm.LibraryNotFound, OSError)
    for cls in (xdm.OutOfBudget, xdm.LibraryNotFound, xdm.ConfigError):
        assert issubclass(cls, xdm.XdmError)


def test_check_uses_the_threads_detail(budget_rt):
    errors.check(0)
    with pytest.raises(xdm.OutOfBudget):
        budget_rt.allocate(4 << 20)
    # A status the detail does not describe: the sentence of the status,
    # and no stale payload.
    with pytest.raises(xdm.DriverError) as e:
        errors.check(2)
    assert str(e.value) == "driver error" and e.value.driver_code == 0
    with pytest.raises(xdm.XdmError) as e:
        errors.check(77)
    assert e.value.status == 77 and e.value.status_name == "status 77"


def test_exceptions_are_built_without_the_library():
    e = xdm.OutOfBounds("canary", generation=9, side="after")
    assert (e.generation, e.side, e.status_name, str(e)) == (9, "after",
                                                            "XDM_E_OUT_OF_BOUNDS", "canary")
    e = xdm.UseAfterFree("gone", 12)
    assert e.generation == 12 and e.message == "gone"


def test_missing_library_is_named():
    out = run_python(
        "import xdm\n"
        "try:\n"
        "    xdm.version()\n"
        "except xdm.LibraryNotFound as e:\n"
        "    print(isinstance(e, OSError), e.tried[0][0])\n"
        "    print(e)\n",
        env={"XDM_LIBRARY": "/nonexistent/libxdm.so"})
    first, sentence = out.splitlines()[:2]
    assert first == "True /nonexistent/libxdm.so"
    assert "XDM_LIBRARY" in sentence and "/nonexistent/libxdm.so" in sentence


LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include <xdm/xdm.h>
#define F(s, f) printf("%s.%s %zu %zu\n", #s, #f, offsetof(struct s, f), \
			     sizeof(((struct s *)0)->f))
#define S(s) printf("%s %zu\n", #s, sizeof(struct s))
int main(void)
{
	S(xdm_error); F(xdm_error, code); F(xdm_error, requested); F(xdm_error, remaining);
	F(xdm_error, generation); F(xdm_error, side); F(xdm_error, driver_code);
	F(xdm_error, message);
	S(xdm_block); F(xdm_block, ptr); F(xdm_block, ordinal); F(xdm_block, stream);
	F(xdm_block, bytes); F(xdm_block, align); F(xdm_block, tag); F(xdm_block, generation);
	F(xdm_block, state);
	S(xdm_stats); F(xdm_stats, bytes_outstanding); F(xdm_stats, events_recorded);
	F(xdm_stats, bytes_allocated); F(xdm_stats, bytes_freed); F(xdm_stats, blocks_peak);
	S(xdm_device_info); F(xdm_device_info, name); F(xdm_device_info, uuid);
	F(xdm_device_info, total_bytes); F(xdm_device_info, platform);
	S(xdm_tree_node); F(xdm_tree_node, dir); F(xdm_tree_node, mode);
	return 0;
}
"""

STRUCTS = {"xdm_error": _lib.Error, "xdm_block": _lib.Block, "xdm_stats": _lib.Stats,
           "xdm_device_info": _lib.DeviceInfo, "xdm_tree_node": _lib.TreeNode}


def test_structures_match_the_compiler(tmp_path):
    cc = os.environ.get("CC", "cc").split()
    if not shutil.which(cc[0]):
        pytest.skip("no C compiler (%s) to lay the header out" % cc[0])
    src = tmp_path / "layout.c"
    exe = tmp_path / "layout"
    src.write_text(LAYOUT_C)
    include = os.path.join(os.environ["XDM_TOP_SRCDIR"], "include")
    # Not linked against libxdm, and never sanitized: only sizes matter.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(cc + ["-std=c11", "-I", include, str(src), "-o", str(exe)],
                   check=True, env=env)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                         env=env).stdout
    checked = 0
    for line in out.splitlines():
        name, *numbers = line.split()
        if "." in name:
            struct, field = name.split(".")
            desc = getattr(STRUCTS[struct], field)
            assert (desc.offset, desc.size) == tuple(map(int, numbers)), name
        else:
            assert ctypes.sizeof(STRUCTS[name]) == int(numbers[0]), name
        checked += 1
    assert checked == 31
