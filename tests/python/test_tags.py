"""Tags: the thread's tag reaches the block, the tree shows it, and the
context manager nests and restores."""

import threading

import pytest

import xdm


def block_tag_file(rt, ptr):
    gen = rt.lookup(ptr).generation
    return xdm.tree.show("%s/blocks/%d/tag" % (rt.tree_path, gen))


def test_tag_reaches_the_block_and_the_tree(make_runtime):
    rt = make_runtime("pool | host")
    with xdm.tag("activations"):
        p = rt.allocate(4096)
    q = rt.allocate(4096)
    assert rt.lookup(p).tag == "activations"
    assert block_tag_file(rt, p) == "activations\n"
    assert rt.lookup(q).tag == "untagged"
    assert block_tag_file(rt, q) == "untagged\n"
    rt.free(p)
    rt.free(q)


def test_an_explicit_tag_wins(make_runtime):
    rt = make_runtime("host")
    with xdm.tag("thread"):
        p = rt.allocate(64, tag="explicit")
    assert rt.lookup(p).tag == "explicit"
    rt.free(p)


def test_tags_nest_and_restore():
    assert xdm.current_tag() is None
    with xdm.tag("outer") as name:
        assert name == "outer" and xdm.current_tag() == "outer"
        with xdm.tag("inner"):
            assert xdm.current_tag() == "inner"
            with xdm.tag(None):
                assert xdm.current_tag() is None
            assert xdm.current_tag() == "inner"
        assert xdm.current_tag() == "outer"
        with pytest.raises(RuntimeError):
            with xdm.tag("raising"):
                raise RuntimeError("inside")
        assert xdm.current_tag() == "outer"
    assert xdm.current_tag() is None


def test_set_tag():
    xdm.set_tag("weights")
    try:
        assert xdm.current_tag() == "weights"
    finally:
        xdm.set_tag(None)
    assert xdm.current_tag() is None


def test_tag_is_per_thread():
    seen = []
    with xdm.tag("main-thread"):
        t = threading.Thread(target=lambda: seen.append(xdm.current_tag()))
        t.start()
        t.join()
    assert seen == [None]


def test_bad_tags_change_nothing():
    with xdm.tag("kept"):
        for bad in ("x" * 129, "", "a,b", "two\nlines", "nul\0"):
            with pytest.raises(xdm.InvalidArgument):
                xdm.set_tag(bad)
            with pytest.raises(xdm.InvalidArgument):
                with xdm.tag(bad):
                    pass
        for bad in (b"bytes", 7):
            with pytest.raises(TypeError):
                xdm.set_tag(bad)
        assert xdm.current_tag() == "kept"
    with xdm.tag("y" * 128):        # the longest allowed
        assert len(xdm.current_tag()) == 128


def test_a_bad_allocation_tag_allocates_nothing(make_runtime):
    rt = make_runtime("host")
    with pytest.raises(xdm.InvalidArgument):
        rt.allocate(64, tag="z" * 200)
    assert rt.stats().allocs == 0


def test_unicode_tags(make_runtime):
    rt = make_runtime("host")
    with xdm.tag("Aktivierungen-ü"):
        p = rt.allocate(64)
    assert rt.lookup(p).tag == "Aktivierungen-ü"
    # The tree is ASCII (sysfs rules): each byte outside it shows as '?'.
    assert block_tag_file(rt, p) == "Aktivierungen-??\n"
    rt.free(p)
