"""xdm.Runtime on the host platform: counters, allocation by address, the
budget, and what bad arguments get."""

import os
import re
import threading

import pytest

import xdm

from conftest import run_python


def test_reset_peak_starts_from_what_is_held(make_runtime):
    rt = make_runtime("host")
    a = rt.allocate(8192)
    b = rt.allocate(4096)
    rt.free(a)
    assert rt.stats().bytes_peak == 8192 + 4096
    rt.reset_peak()
    assert rt.stats().bytes_peak == 4096
    c = rt.allocate(1024)
    rt.free(c)
    assert rt.stats().bytes_peak == 4096 + 1024
    rt.free(b)


def test_reset_totals_keeps_what_is_held(make_runtime):
    rt = make_runtime("host")
    a = rt.allocate(8192)
    b = rt.allocate(4096)
    rt.free(a)
    s = rt.stats()
    assert (s.allocs, s.frees, s.bytes_allocated, s.bytes_freed) == (2, 1, 8192 + 4096, 8192)
    assert s.bytes_outstanding == s.bytes_allocated - s.bytes_freed
    assert s.blocks_peak == 2
    rt.reset_totals()
    s = rt.stats()
    assert (s.allocs, s.frees, s.failures, s.bytes_allocated, s.bytes_freed) == (0, 0, 0, 0, 0)
    assert (s.blocks_outstanding, s.bytes_outstanding) == (1, 4096)
    assert (s.bytes_peak, s.blocks_peak) == (8192 + 4096, 2)
    c = rt.allocate(1024)
    rt.free(b)
    s = rt.stats()
    assert (s.allocs, s.frees, s.bytes_allocated, s.bytes_freed) == (1, 1, 1024, 4096)
    rt.reset_peak()
    assert (rt.stats().bytes_peak, rt.stats().blocks_peak) == (1024, 1)
    rt.free(c)


def test_runtimes_lists_the_built_singletons_and_builds_none(tmp_path):
    # In a fresh process: this one's singletons are built already.  Device
    # 1's runtime is built from C (as a framework's glue builds it), which
    # the package's own table does not see; the tree does.
    conf = tmp_path / "three.conf"
    conf.write_text("platform = host devices=3\n")
    out = run_python(
        "import ctypes, xdm\n"
        "from xdm import _lib\n"
        "print([rt.ordinal for rt in xdm.runtimes()])\n"
        "private = xdm.Runtime.create(0, stack='host')\n"
        "print(private.tree_path, [rt.ordinal for rt in xdm.runtimes()])\n"
        "xdm.runtime(2)\n"
        "handle = ctypes.c_void_p()\n"
        "assert _lib.lib().xdm_runtime_get(1, ctypes.byref(handle)) == 0\n"
        "rts = xdm.runtimes()\n"
        "print([rt.ordinal for rt in rts], all(rt.singleton for rt in rts),\n"
        "      rts[0] is xdm.runtime(1), rts[1] is xdm.runtime(2))\n"
        "print(sorted(n for n in xdm.tree.list('') if n[0].isdigit()))\n",
        env={"XDM_CONFIG": str(conf)})
    assert out.splitlines() == ["[]", "0 []", "[1, 2] True True True",
                                "['0', '1', '2']"]


def test_stats_follow_allocate_and_free(make_runtime):
    rt = make_runtime("host")
    before = rt.stats()
    assert before.allocs == 0 and before.bytes_outstanding == 0
    a = rt.allocate(4096)
    b = rt.allocate(1000)
    s = rt.stats()
    assert s.allocs == 2 and s.frees == 0
    assert s.blocks_outstanding == 2
    assert s.bytes_outstanding == 4096 + rt.lookup(b).bytes
    assert rt.bytes_outstanding == s.bytes_outstanding
    assert s.bytes_peak >= s.bytes_outstanding
    rt.free(a)
    rt.free(b)
    s = rt.stats()
    assert (s.allocs, s.frees, s.blocks_outstanding, s.failures) == (2, 2, 0, 0)
    rt.reap()
    assert rt.bytes_outstanding == 0


def test_block_lookup_matches_the_allocation(make_runtime):
    rt = make_runtime("host")
    p = rt.allocate(3000, tag="lookup")
    blk = rt.lookup(p)
    assert blk.ptr == p and blk.ordinal == 0
    assert blk.bytes >= 3000 and blk.align >= 256 and p % blk.align == 0
    assert blk.tag == "lookup" and blk.state == "live" and blk.generation > 0
    assert blk.stream == rt.stream_id(None)
    rt.free(p)
    with pytest.raises(xdm.InvalidArgument):
        rt.lookup(p)


def test_default_stream_is_imported_once(make_runtime):
    rt = make_runtime("host")
    first = rt.stream_id()
    assert rt.stream_id(None) == first == rt.stream_id(0)


def test_zero_bytes_and_null_free(make_runtime):
    rt = make_runtime("host")
    assert rt.allocate(0) == 0
    rt.free(None)
    rt.free(0)
    s = rt.stats()
    assert (s.allocs, s.frees, s.failures) == (0, 0, 0)


def test_foreign_pointer_free_frees_nothing(make_runtime):
    rt = make_runtime("host")
    p = rt.allocate(4096)
    before = rt.stats()
    foreign = bytearray(64)
    import ctypes
    address = ctypes.addressof((ctypes.c_char * 64).from_buffer(foreign))
    for bad in (address, p + 256):
        with pytest.raises(xdm.InvalidArgument) as e:
            rt.free(bad)
        assert "not the address of a live block" in str(e.value)
        assert e.value.status == xdm.InvalidArgument.status
    assert rt.stats() == before
    assert rt.lookup(p).state == "live"
    rt.free(p)


def test_double_free_is_typed(make_runtime):
    rt = make_runtime("host")
    p = rt.allocate(512)
    rt.free(p)
    with pytest.raises(xdm.InvalidArgument) as e:
        rt.free(p)
    assert e.value.status_name == "XDM_E_INVALID"
    assert rt.stats().frees == 1


def test_a_block_of_another_runtime_is_foreign(make_runtime):
    a, b = make_runtime("host"), make_runtime("host")
    p = a.allocate(256)
    with pytest.raises(xdm.InvalidArgument):
        b.free(p)
    with pytest.raises(xdm.InvalidArgument):
        b.record_use(p, None)
    a.record_use(p, None)       # its own stream: nothing to wait for
    a.free(p)


def test_description(make_runtime):
    rt = make_runtime("pool | host")
    assert rt.layers == ["pool", "host"]
    assert rt.stack == "pool | host"
    assert rt.ordinal == 0 and not rt.singleton
    dev = rt.device()
    assert dev.platform == "host" and dev.total_bytes > 0
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", dev.uuid)
    assert repr(rt).startswith("<xdm.Runtime 0 private 'pool | host'")


def test_layer_attributes(budget_rt, key):
    assert budget_rt.budget_layer == 0
    assert budget_rt.layer_attr(0, "limit") == str(1 << 20)
    assert budget_rt.layer_attr(0, "segment").endswith(key)
    with pytest.raises(xdm.InvalidArgument) as e:
        budget_rt.layer_attr(0, "no_such_attribute")
    assert "no_such_attribute" in str(e.value)
    with pytest.raises(xdm.InvalidArgument):
        budget_rt.layer_attr(7, "limit")
    with pytest.raises(xdm.NotSupported):
        budget_rt.set_layer_attr(0, "used", "0")


def test_budget_refusal_carries_its_payload(budget_rt):
    held = budget_rt.allocate(4096)
    with pytest.raises(xdm.OutOfBudget) as e:
        budget_rt.allocate(2 << 20)
    err = e.value
    assert isinstance(err, MemoryError)
    assert err.requested == 2 << 20
    assert err.remaining == (1 << 20) - 4096
    assert err.status_name == "XDM_E_OUT_OF_BUDGET"
    assert "%d bytes requested, %d remaining" % (2 << 20, (1 << 20) - 4096) in str(err)
    assert budget_rt.stats().failures == 1
    budget_rt.free(held)


def test_budget_limit_changes_live(budget_rt):
    assert budget_rt.budget_limit == 1 << 20
    p = budget_rt.allocate(768 << 10)
    with pytest.raises(xdm.OutOfBudget):
        budget_rt.allocate(512 << 10)
    budget_rt.budget_limit = "2M"
    assert budget_rt.budget_limit == 2 << 20
    q = budget_rt.allocate(512 << 10)
    # Lowered below what is held: the next request is refused, with
    # nothing remaining.
    budget_rt.budget_limit = 1 << 20
    with pytest.raises(xdm.OutOfBudget) as e:
        budget_rt.allocate(256)
    assert e.value.remaining == 0
    budget_rt.free(p)
    budget_rt.free(q)
    budget_rt.allocate(256)


def test_bad_budget_limit_changes_nothing(budget_rt):
    for bad in ("8Q", "", "-1", "1.5"):
        with pytest.raises(xdm.InvalidArgument) as e:
            budget_rt.budget_limit = bad
        assert repr(bad)[1:-1] in str(e.value) or bad == ""
    with pytest.raises(xdm.InvalidArgument):
        budget_rt.budget_limit = -1
    with pytest.raises(TypeError):
        budget_rt.budget_limit = 1.5
    assert budget_rt.budget_limit == 1 << 20
    budget_rt.budget_limit = "50%"
    assert budget_rt.budget_limit == budget_rt.device().total_bytes // 2


def test_budget_limit_needs_a_budget(make_runtime):
    rt = make_runtime("pool | host")
    assert rt.budget_layer is None
    with pytest.raises(xdm.NotSupported) as e:
        rt.budget_limit
    assert "no budget layer" in str(e.value)
    with pytest.raises(xdm.NotSupported):
        rt.budget_limit = "1G"


def test_keys_isolate_and_share(make_runtime, key):
    mine = make_runtime("budget key=%s-a limit=1M | host" % key)
    other = make_runtime("budget key=%s-b limit=1M | host" % key)
    same = make_runtime("budget key=%s-a limit=1M | host" % key)
    p = mine.allocate(1 << 20)
    # Another key has its whole limit; the same key sees the usage.
    q = other.allocate(1 << 20)
    with pytest.raises(xdm.OutOfBudget) as e:
        same.allocate(256)
    assert e.value.remaining == 0
    assert int(same.layer_attr(0, "used")) == 1 << 20
    mine.free(p)
    same.free(same.allocate(256))
    other.free(q)


def test_bad_stack_names_the_position():
    with pytest.raises(xdm.ConfigError) as e:
        xdm.Runtime.create(0, stack="budget limit=1M | bogus", platform="host")
    assert "<stack>:1:19" in str(e.value) and "bogus" in str(e.value)
    with pytest.raises(xdm.ConfigError) as e:
        xdm.Runtime.create(0, stack="budget limit=lots | host", platform="host")
    assert "<stack>:1:" in str(e.value)
    with pytest.raises(xdm.XdmError):
        xdm.Runtime.create(0, stack="host", platform="no_such_platform")


def test_bad_arguments(make_runtime):
    rt = make_runtime("host")
    with pytest.raises(xdm.InvalidArgument):
        rt.allocate(-1)
    with pytest.raises(xdm.InvalidArgument):
        rt.allocate(2**64)
    for bad in ("64", 1.0, True, None):
        with pytest.raises(TypeError):
            rt.allocate(bad)
    with pytest.raises(TypeError):
        rt.allocate(64, stream="default")
    with pytest.raises(TypeError):
        rt.allocate(64, tag=7)
    with pytest.raises(TypeError):
        rt.free("0x1000")
    with pytest.raises(TypeError):
        xdm.Runtime.create("0")
    with pytest.raises(xdm.InvalidArgument):
        xdm.Runtime.create(-1)
    with pytest.raises(TypeError):
        xdm.Runtime.create(0, stack=b"host")
    with pytest.raises(xdm.InvalidArgument):
        xdm.Runtime.create(0, stack="host\0pool")
    assert rt.stats().allocs == 0


def test_a_stream_that_is_not_one_is_refused(make_runtime):
    import ctypes
    rt = make_runtime("host")
    not_a_stream = ctypes.c_int(0)
    with pytest.raises(xdm.InvalidArgument) as e:
        rt.allocate(64, stream=ctypes.addressof(not_a_stream))
    assert "not a stream" in str(e.value)
    assert rt.stats().allocs == 0


def test_closed_runtime_refuses_calls():
    with xdm.Runtime.create(0, stack="host", platform="host") as rt:
        p = rt.allocate(128)
        assert rt.lookup(p).state == "live"
    assert rt.closed and repr(rt) == "<xdm.Runtime (closed)>"
    rt.close()          # again: nothing to do
    with pytest.raises(xdm.InvalidArgument) as e:
        rt.allocate(128)
    assert "closed" in str(e.value)
    with pytest.raises(xdm.InvalidArgument):
        rt.stats()


def test_singleton_is_one_object():
    rt = xdm.runtime(0)
    assert rt is xdm.runtime(0)
    assert rt.singleton and rt.ordinal == 0
    rt.close()          # a singleton lives until exit
    assert not rt.closed
    p = rt.allocate(64)
    rt.free(p)
    with pytest.raises(xdm.InvalidArgument):
        xdm.runtime(-1)


def test_query_id_is_per_thread():
    xdm.set_query_id(1234)
    seen = []
    t = threading.Thread(target=lambda: seen.append(xdm.query_id()))
    t.start()
    t.join()
    assert xdm.query_id() == 1234 and seen == [0]
    xdm.set_query_id(0)
    with pytest.raises(xdm.InvalidArgument):
        xdm.set_query_id(-5)


def test_parse_size():
    assert xdm.parse_size("8G") == 8 << 30
    assert xdm.parse_size("1.5K") == 1536
    assert xdm.parse_size("50%", 1000) == 500
    assert xdm.parse_size("max") == 2**64 - 1
    with pytest.raises(xdm.InvalidArgument) as e:
        xdm.parse_size("eight")
    assert "eight" in str(e.value)
    with pytest.raises(xdm.InvalidArgument):
        xdm.parse_size("50%")       # no base


def test_version_is_the_package_version():
    with open(os.path.join(os.environ["XDM_TOP_BUILDDIR"], "config.h")) as f:
        m = re.search(r'#define PACKAGE_VERSION "([^"]+)"', f.read())
    assert m and xdm.version() == m.group(1)


def test_library_is_the_build_tree_one():
    assert xdm.library_path() == os.environ["XDM_LIBRARY"]


def test_threads_allocate_concurrently(budget_rt):
    errors = []

    def work():
        try:
            for _ in range(200):
                budget_rt.free(budget_rt.allocate(1024))
        except Exception as e:          # reported below, with its thread's cause
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s = budget_rt.stats()
    assert s.allocs == s.frees == 800 and s.blocks_outstanding == 0


def test_runtimes_are_not_made_from_handles():
    with pytest.raises(TypeError) as e:
        xdm.Runtime(0x1000, False)
    assert "xdm.Runtime.create" in str(e.value)
