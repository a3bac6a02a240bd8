"""xdm.tree: the same files a mount shows, read and written in-process."""

import errno
import os
import stat as stat_module

import pytest

import xdm


def number(path):
    text = xdm.tree.show(path)
    assert text.endswith("\n") and text[:-1].isdigit(), (path, text)
    return int(text)


def test_root_and_runtime_directories(make_runtime):
    rt = make_runtime("pool | host")
    root = xdm.tree.list("")
    assert {"version", "pid"} <= set(root)
    assert rt.tree_path in root
    assert xdm.tree.show("pid") == "%d\n" % os.getpid()
    assert xdm.tree.show("version") == xdm.version() + "\n"
    names = xdm.tree.list(rt.tree_path)
    assert {"bytes_outstanding", "blocks", "streams", "layers", "stack"} <= set(names)
    assert xdm.tree.show(rt.tree_path + "/stack") == "pool | host\n"
    assert xdm.tree.list(rt.tree_path + "/layers") == ["0-pool", "1-host"]


def test_two_runtimes_have_two_directories(make_runtime):
    a, b = make_runtime("host"), make_runtime("pool | host")
    assert a.tree_path != b.tree_path
    assert xdm.tree.show(b.tree_path + "/stack") == "pool | host\n"


def test_counters_match_stats(make_runtime):
    rt = make_runtime("host")
    p = rt.allocate(8192)
    d = rt.tree_path
    s = rt.stats()
    for field in ("bytes_outstanding", "blocks_outstanding", "allocs", "frees",
                  "bytes_peak", "bytes_allocated", "bytes_freed", "blocks_peak"):
        assert number("%s/%s" % (d, field)) == getattr(s, field), field
    blk = rt.lookup(p)
    assert xdm.tree.list(d + "/blocks") == [str(blk.generation)]
    assert number("%s/blocks/%d/bytes" % (d, blk.generation)) == blk.bytes
    rt.free(p)
    assert number(d + "/frees") == 1


def test_reset_totals_through_the_tree(make_runtime):
    rt = make_runtime("host")
    p = rt.allocate(8192)
    d = rt.tree_path
    assert xdm.tree.stat(d + "/reset_totals").mode == 0o200
    with pytest.raises(OSError) as e:
        xdm.tree.store(d + "/reset_totals", "0")
    assert e.value.errno == errno.EINVAL
    assert number(d + "/allocs") == 1
    xdm.tree.store(d + "/reset_totals", "1\n")
    assert number(d + "/allocs") == number(d + "/bytes_allocated") == 0
    assert number(d + "/bytes_outstanding") == 8192
    rt.free(p)
    assert number(d + "/bytes_freed") == 8192


def test_store_the_budget_limit(budget_rt):
    path = budget_rt.tree_path + "/budget/limit"
    assert number(path) == 1 << 20
    xdm.tree.store(path, "2M\n")            # what `echo 2M >` writes
    assert number(path) == 2 << 20 == budget_rt.budget_limit
    xdm.tree.store(path, 3 << 20)
    assert budget_rt.budget_limit == 3 << 20
    with pytest.raises(OSError) as e:
        xdm.tree.store(path, "lots")
    assert e.value.errno == errno.EINVAL and e.value.filename == path
    with pytest.raises(OSError) as e:
        xdm.tree.store(path, "1M\0junk")
    assert e.value.errno == errno.EINVAL
    assert budget_rt.budget_limit == 3 << 20


def test_errors_are_errnos(budget_rt):
    d = budget_rt.tree_path
    cases = [
        (lambda: xdm.tree.show(d + "/no_such_file"), errno.ENOENT),
        (lambda: xdm.tree.show(d + "/blocks"), errno.EISDIR),
        (lambda: xdm.tree.list(d + "/stack"), errno.ENOTDIR),
        (lambda: xdm.tree.store(d + "/budget/used", "0"), errno.EACCES),
        (lambda: xdm.tree.store(d + "/no/such/file", "0"), errno.ENOENT),
    ]
    for call, code in cases:
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == code
    with pytest.raises(FileNotFoundError):
        xdm.tree.stat("no_such_runtime")


def test_stat(budget_rt):
    d = budget_rt.tree_path
    assert xdm.tree.stat(d) == (True, 0o555)
    assert xdm.tree.stat(d + "/budget/limit") == (False, 0o644)
    assert xdm.tree.stat(d + "/budget/used") == (False, 0o444)


def test_bad_arguments():
    with pytest.raises(TypeError):
        xdm.tree.show(b"pid")
    with pytest.raises(TypeError):
        xdm.tree.store("0/budget/limit", 1.5)
    with pytest.raises(TypeError):
        xdm.tree.store("0/budget/limit", True)
    with pytest.raises(TypeError):
        xdm.mount(None)


def test_unmount_without_a_mount():
    assert xdm.mount_point() is None
    with pytest.raises(xdm.InvalidArgument):
        xdm.unmount()


def fuse_usable():
    return os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK)


@pytest.mark.skipif(not fuse_usable(), reason="no usable /dev/fuse")
def test_mount_shows_the_same_files(budget_rt, tmp_path):
    where = str(tmp_path / "mnt")
    try:
        xdm.mount(where)
    except xdm.NotSupported as e:
        pytest.skip("libxdm has no FUSE front end here: %s" % e)
    try:
        assert xdm.mount_point() == where
        assert stat_module.S_ISDIR(os.stat(os.path.join(where, budget_rt.tree_path)).st_mode)
        with open(os.path.join(where, budget_rt.tree_path, "budget", "limit")) as f:
            assert f.read() == "%d\n" % (1 << 20)
        with pytest.raises(xdm.InvalidArgument):
            xdm.mount(str(tmp_path / "second"))
    finally:
        xdm.unmount()
    assert xdm.mount_point() is None
