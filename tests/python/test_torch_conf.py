"""torch's allocator settings under xdm (xdm.torch_conf, and the part of
xdm.torch that reads them), and xdm.torch's check of the torch version
the glue was built against.  No torch is needed: nothing here imports it
or installs an allocator."""

import os
import re

import pytest

import xdm
import xdm.torch
from xdm import torch_conf
from xdm.torch_conf import plan

ENV = "PYTORCH_ALLOC_CONF"


def refused(text, *fragments):
    """plan(text) raises InvalidArgument naming each fragment."""
    with pytest.raises(xdm.InvalidArgument) as info:
        plan(text)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


# ---- reading: what torch reads --------------------------------------------

def test_every_key_is_read_with_its_value():
    text = ("backend:native, max_split_size_mb:128, max_non_split_rounding_mb:64,"
            "roundup_power2_divisions:[256:1,512:2,>:4],"
            "garbage_collection_threshold:0.6, expandable_segments:False,"
            "release_lock_on_cudamalloc:True, release_lock_on_hipmalloc:False,"
            "pinned_use_cuda_host_register:True, pinned_use_hip_host_register:False,"
            "pinned_num_register_threads:8, pinned_use_background_threads:True,"
            "pinned_reserve_segment_size_mb:64, graph_capture_record_stream_reuse:True,"
            "per_process_memory_fraction:0.5, large_segment_size_mb:40")
    got = torch_conf.parse(text)
    assert got == {
        "backend": "native",
        "max_split_size_mb": 128,
        "max_non_split_rounding_mb": 64,
        "roundup_power2_divisions": ((256, 1), (512, 2), (">", 4)),
        "garbage_collection_threshold": 0.6,
        "expandable_segments": False,
        "release_lock_on_cudamalloc": True,
        "release_lock_on_hipmalloc": False,
        "pinned_use_cuda_host_register": True,
        "pinned_use_hip_host_register": False,
        "pinned_num_register_threads": 8,
        "pinned_use_background_threads": True,
        "pinned_reserve_segment_size_mb": 64,
        "graph_capture_record_stream_reuse": True,
        "per_process_memory_fraction": 0.5,
        "large_segment_size_mb": 40,
    }
    assert set(got) == torch_conf.KEYS


def test_reading_follows_torch():
    # Blanks go anywhere, a trailing comma is allowed, the last entry of a
    # key wins, a number is read by its leading digits, the scalar form of
    # roundup_power2_divisions is a power of two.
    assert torch_conf.parse(" expandable_segments : True , ") == {
        "expandable_segments": True}
    assert torch_conf.parse("max_split_size_mb:512,max_split_size_mb:256") == {
        "max_split_size_mb": 256}
    assert torch_conf.parse("max_split_size_mb:128MB") == {"max_split_size_mb": 128}
    assert torch_conf.parse("roundup_power2_divisions:4") == {
        "roundup_power2_divisions": 4}
    assert torch_conf.parse("roundup_power2_divisions:[>:0]") == {
        "roundup_power2_divisions": ((">", 0),)}
    assert torch_conf.parse("garbage_collection_threshold:.25") == {
        "garbage_collection_threshold": 0.25}
    assert torch_conf.parse("") == {}
    assert torch_conf.tokens("a:[1:2, >:4]") == [
        "a", ":", "[", "1", ":", "2", ",", ">", ":", "4", "]"]


def test_malformed_entries_are_refused_naming_them():
    refused("expandable_segments", "entry 'expandable_segments'", "':'")
    refused("expandable_segments:", "no value")
    refused("expandable_segments:,backend:native", "no value")
    refused("expandable_segments:true", "'expandable_segments:true'",
            "True or False")
    refused("expandable_segments:1", "True or False")
    refused("expandable_segments:[True]", "not a list")
    refused("max_split_size_mb:abc", "'max_split_size_mb:abc'", "not a number")
    refused("max_split_size_mb:-1", "negative")
    refused("max_split_size_mb:19", "at least 20")
    refused("max_non_split_rounding_mb:8", "at least 20")
    refused("garbage_collection_threshold:x", "not a number")
    refused("garbage_collection_threshold:0", "more than 0.0")
    refused("garbage_collection_threshold:1.0", "less than 1.0")
    refused("garbage_collection_threshold:nan", "more than 0.0")
    refused("garbage_collection_threshold:1e999", "out of range")
    refused("per_process_memory_fraction:1.01", "from 0.0 to 1.0")
    refused("per_process_memory_fraction:-0.1", "from 0.0 to 1.0")
    refused("backend:cudaMalloc", "'backend:cudaMalloc'",
            "native and cudaMallocAsync")
    refused("roundup_power2_divisions:3", "power of 2")
    refused("roundup_power2_divisions:[256:3]", "power of 2")
    refused("roundup_power2_divisions:[300:2]", "intervals")
    refused("roundup_power2_divisions:[256:1", "no closing ']'")
    refused("roundup_power2_divisions:[256]", "pairs")
    refused("pinned_num_register_threads:3", "power of 2")
    refused("pinned_num_register_threads:256", "at most 128")
    refused("pinned_reserve_segment_size_mb:0", "more than 0")
    refused("expandable_segments:True;backend:native", "True or False")
    refused("expandable_segments:True:x", "separated by ','")
    refused(",expandable_segments:True", "where a key was expected")
    refused("expandable_segments:True,,backend:native", "where a key was expected")


def test_unknown_keys_are_refused_as_torch_refuses_them():
    msg = refused("expandable_segments:True,max_split_size:128",
                  "unrecognized key 'max_split_size'")
    assert msg.startswith("xdm.torch: %s: entry 'max_split_size:128'" % ENV)
    refused("Expandable_Segments:True", "unrecognized key 'Expandable_Segments'")
    # A mistyped separator makes one unknown key, as in torch.
    refused("max_split_size_mb=128", "unrecognized key 'max_split_size_mb=128'")


def test_the_source_is_named():
    with pytest.raises(xdm.InvalidArgument) as info:
        plan("nope:1", source="PYTORCH_CUDA_ALLOC_CONF")
    assert str(info.value).startswith("xdm.torch: PYTORCH_CUDA_ALLOC_CONF: entry 'nope:1'")


# ---- the stack -------------------------------------------------------------

@pytest.mark.parametrize("stack, conf, want", [
    (None, "expandable_segments:True", "pool | cuda_vmm"),
    ("pool | cuda_async", "expandable_segments:True", "pool | cuda_vmm"),
    ("pool | cuda_direct", "expandable_segments:True", "pool | cuda_vmm"),
    ("budget key=team limit=8G | pool | cuda_async", "expandable_segments:True",
     "budget key=team limit=8G | pool | cuda_vmm"),
    ("logging path=\"/tmp/my log|x.csv\" | pool chunk=64M|cuda_async",
     "expandable_segments:True",
     "logging path=\"/tmp/my log|x.csv\" | pool chunk=64M | cuda_vmm"),
    (None, "backend:cudaMallocAsync", "pool | cuda_async"),
    ("budget limit=80% | pool | cuda_vmm", "backend:cudaMallocAsync",
     "budget limit=80% | pool | cuda_async"),
    (None, "backend:native", "pool | cuda_vmm"),
    ("pool | cuda_async", "expandable_segments:False", "pool | cuda_async"),
    (None, "per_process_memory_fraction:0.6", "pool max=60% | cuda_vmm"),
    (None, "per_process_memory_fraction:0.125", "pool max=12.5% | cuda_vmm"),
    (None, "per_process_memory_fraction:1", "pool max=100% | cuda_vmm"),
    ("budget limit=40G | pool trim_ms=200 | cuda_async",
     "expandable_segments:True,per_process_memory_fraction:0.5",
     "budget limit=40G | pool trim_ms=200 max=50% | cuda_vmm"),
    ("pool | logging | pool | cuda_vmm", "per_process_memory_fraction:0.3",
     "pool max=30% | logging | pool | cuda_vmm"),
])
def test_stack_rewrites(stack, conf, want):
    p = plan(conf, stack=stack)
    assert p.stack_in == (torch_conf.DEFAULT_STACK if stack is None else stack)
    assert p.stack == want
    assert p.stack_changed == (want != p.stack_in)
    assert len(p.changes) == (0 if not p.stack_changed else
                              conf.count(",") + 1)


def test_an_unchanged_stack_is_returned_as_given():
    p = plan("max_split_size_mb:128", stack="pool|cuda_async")
    assert p.stack == "pool|cuda_async" and not p.stack_changed and not p.changes


def test_explicit_stacks_win_with_a_warning():
    p = plan("expandable_segments:True", stack="pool | cuda_async pool=own")
    assert p.stack == "pool | cuda_async pool=own"
    assert p.warnings == (
        "PYTORCH_ALLOC_CONF expandable_segments:True: not applied: the stack's base "
        "'cuda_async pool=own' has parameters of its own; the explicit stack wins",)
    p = plan("per_process_memory_fraction:0.5", stack="pool max=8G | cuda_vmm")
    assert p.stack == "pool max=8G | cuda_vmm"
    assert "max=8G" in p.warnings[0] and "explicit stack wins" in p.warnings[0]
    p = plan("expandable_segments:True", stack="pool | host")
    assert p.stack == "pool | host"
    assert "base host is not one xdm.torch swaps for cuda_vmm" in p.warnings[0]


def test_backend_wins_over_expandable_segments_as_in_torch():
    p = plan("expandable_segments:True,backend:cudaMallocAsync", stack="pool | cuda_direct")
    assert p.stack == "pool | cuda_async"
    assert any("expandable_segments:True: ignored under backend:cudaMallocAsync" in w
               for w in p.warnings)


def test_fraction_without_a_pool_or_of_zero():
    p = plan("per_process_memory_fraction:0.5", stack="budget limit=8G | cuda_async")
    assert not p.stack_changed
    assert "no pool to bound" in p.warnings[0]
    assert "per_process_memory_fraction:0.5" in p.warnings[0]
    p = plan("per_process_memory_fraction:0")
    assert not p.stack_changed and "max=0 means no bound" in p.warnings[0]


def test_a_config_file_keeps_its_stacks():
    p = plan("expandable_segments:True,per_process_memory_fraction:0.5,"
             "backend:native", config="/etc/team.conf")
    assert p.stack is None and p.stack_in is None and not p.changes
    assert p.warnings == (
        "PYTORCH_ALLOC_CONF expandable_segments:True: not applied: the stacks of the "
        "configuration file /etc/team.conf win",
        "PYTORCH_ALLOC_CONF per_process_memory_fraction:0.5: not applied: the stacks "
        "of the configuration file /etc/team.conf win")


def test_a_stack_with_an_empty_layer_is_left_to_the_runtime():
    p = plan("expandable_segments:True", stack="pool || cuda_async")
    assert p.stack == "pool || cuda_async"
    assert "empty layer" in p.warnings[0]


# ---- warnings and information ------------------------------------------------

@pytest.mark.parametrize("entry", [
    "max_split_size_mb:128", "max_non_split_rounding_mb:64",
    "roundup_power2_divisions:[256:1,>:4]", "large_segment_size_mb:40",
    "graph_capture_record_stream_reuse:True", "garbage_collection_threshold:0.6",
])
def test_keys_without_an_equivalent_warn_naming_the_key(entry):
    key = entry.split(":")[0]
    p = plan(entry)
    assert not p.stack_changed and not p.infos
    assert len(p.warnings) == 1
    assert p.warnings[0].startswith("PYTORCH_ALLOC_CONF " + key)


@pytest.mark.parametrize("entry", [
    "release_lock_on_cudamalloc:True", "release_lock_on_hipmalloc:False"])
def test_release_lock_is_information(entry):
    p = plan(entry)
    assert not p.warnings and not p.stack_changed
    assert p.infos[0].startswith("PYTORCH_ALLOC_CONF %s: xdm's pool always calls "
                                 "the layer below" % entry.split(":")[0])


@pytest.mark.parametrize("entry", [
    "pinned_use_cuda_host_register:True", "pinned_use_hip_host_register:True",
    "pinned_num_register_threads:4", "pinned_use_background_threads:True",
    "pinned_reserve_segment_size_mb:128",
])
def test_host_allocator_keys_are_information(entry):
    key = entry.split(":")[0]
    p = plan(entry)
    assert not p.warnings and not p.changes and not p.stack_changed
    assert p.infos == ("PYTORCH_ALLOC_CONF %s: torch's pinned host-memory allocator's, "
                       "which xdm does not replace: torch applies it" % key,)


def test_garbage_collection_names_what_trims():
    over_vmm = plan("garbage_collection_threshold:0.6").warnings[0]
    assert "garbage_collection_threshold:0.6" in over_vmm
    assert "every 1000 ms (trim_ms)" in over_vmm
    set_ms = plan("garbage_collection_threshold:0.6",
                  stack="pool trim_ms=250 | cuda_async").warnings[0]
    assert "every 250 ms (trim_ms)" in set_ms
    none = plan("garbage_collection_threshold:0.6", stack="pool | cuda_async").warnings[0]
    assert "only when a growth fails" in none and "trim_ms=N" in none
    off = plan("garbage_collection_threshold:0.6", stack="pool trim_ms=0 | cuda_vmm")
    assert "only when a growth fails" in off.warnings[0]
    nopool = plan("garbage_collection_threshold:0.5", stack="cuda_async").warnings[0]
    assert "no pool" in nopool


def test_no_pool_parameter_is_invented():
    # Only pool parameters xdm-pool(7) documents are ever written.
    src = os.environ["XDM_TOP_SRCDIR"]
    with open(os.path.join(src, "man", "xdm-pool.7")) as f:
        page = f.read()
    for conf in ("per_process_memory_fraction:0.4", "garbage_collection_threshold:0.4"):
        stack = plan(conf, stack="pool | cuda_async").stack
        for param in re.findall(r"(\w+)=", stack):
            assert ".BI %s= " % param in page


def test_default_stack_is_the_cuda_platforms():
    src = os.environ["XDM_TOP_SRCDIR"]
    with open(os.path.join(src, "backends", "cuda", "platform.c")) as f:
        assert '.default_stack = "%s",' % torch_conf.DEFAULT_STACK in f.read()


# ---- xdm.torch: the environment and use() ------------------------------------

@pytest.fixture
def env(monkeypatch):
    """No allocator settings and no configuration file, to start from."""
    for name in torch_conf.ENV_NAMES + ("XDM_CONFIG",):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(xdm.torch, "_config_file", lambda: None)
    monkeypatch.setattr(xdm.torch, "_said", set())
    return monkeypatch


def test_the_environment_is_read_as_torch_reads_it(env):
    assert xdm.torch.alloc_conf_text() == (None, None)
    assert xdm.torch.alloc_conf_plan() is None
    env.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    assert xdm.torch.alloc_conf_text() == ("PYTORCH_CUDA_ALLOC_CONF",
                                           "expandable_segments:True")
    p = xdm.torch.alloc_conf_plan(stack="pool | cuda_async")
    assert p.source == "PYTORCH_CUDA_ALLOC_CONF" and p.stack == "pool | cuda_vmm"
    env.setenv("PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync")
    # Both set: torch's CUDA allocator takes backend (and the fraction) from
    # PYTORCH_CUDA_ALLOC_CONF, the rest (expandable_segments) from
    # PYTORCH_ALLOC_CONF, which here says nothing of it.
    p = xdm.torch.alloc_conf_plan()
    assert p.source == "PYTORCH_ALLOC_CONF + PYTORCH_CUDA_ALLOC_CONF", p
    assert p.stack is None or p.stack == "pool | cuda_vmm", p
    assert "backend" in p.infos[-1] and "from PYTORCH_CUDA_ALLOC_CONF" in p.infos[-1], p
    env.setenv("PYTORCH_CUDA_ALLOC_CONF",
               "backend:cudaMallocAsync,per_process_memory_fraction:0.5,"
               "expandable_segments:True")
    env.setenv("PYTORCH_ALLOC_CONF", "backend:native,per_process_memory_fraction:0.9,"
               "max_split_size_mb:64")
    assert xdm.torch.alloc_conf_text()[1] == ("max_split_size_mb:64,backend:cudaMallocAsync,"
                                              "per_process_memory_fraction:0.5")
    p = xdm.torch.alloc_conf_plan()
    assert p.stack == "pool max=50% | cuda_async", p
    # Given text, the environment is not read.
    p = xdm.torch.alloc_conf_plan("per_process_memory_fraction:0.25")
    assert p.stack == "pool max=25% | cuda_vmm"


def test_a_configured_file_keeps_its_stacks(env):
    env.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
    env.setattr(xdm.torch, "_config_file", lambda: "/etc/xdm.conf")
    p = xdm.torch.alloc_conf_plan()
    assert p.stack is None and "/etc/xdm.conf win" in p.warnings[0]
    # A stack given is still changed: it replaces the file.
    p = xdm.torch.alloc_conf_plan(stack="pool | cuda_async")
    assert p.stack == "pool | cuda_vmm"
    p = xdm.torch.alloc_conf_plan(config="/tmp/mine.conf")
    assert "/tmp/mine.conf win" in p.warnings[0]


def test_config_file_is_xdm_config(env):
    env.undo()
    env.setenv("XDM_CONFIG", "/tmp/some.conf")
    assert xdm.torch._config_file() == "/tmp/some.conf"


def test_use_applies_the_settings_once(env, capsys):
    env.setenv("PYTORCH_ALLOC_CONF",
               "expandable_segments:True,max_split_size_mb:128")
    assert xdm.torch._apply_alloc_conf(None, "pool | cuda_async") == "pool | cuda_vmm"
    assert xdm.torch._apply_alloc_conf(None, None) is None   # the default is vmm
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "xdm.torch: PYTORCH_ALLOC_CONF expandable_segments:True: the stack's base "
        "is cuda_vmm instead of cuda_async",
        "xdm.torch: PYTORCH_ALLOC_CONF max_split_size_mb: " +
        torch_conf._NO_EQUIVALENT["max_split_size_mb"],
    ]
    env.setenv("PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync")
    assert xdm.torch._apply_alloc_conf(None, None) == "pool | cuda_async"
    assert xdm.torch._apply_alloc_conf("/x.conf", None) is None
    assert capsys.readouterr().err.splitlines() == [
        "xdm.torch: PYTORCH_ALLOC_CONF backend:cudaMallocAsync: the stack's base is "
        "cuda_async instead of cuda_vmm",
        "xdm.torch: PYTORCH_ALLOC_CONF backend:cudaMallocAsync: not applied: the "
        "stacks of the configuration file /x.conf win",
    ]
    env.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:yes")
    with pytest.raises(xdm.InvalidArgument, match="expandable_segments:yes"):
        xdm.torch._apply_alloc_conf(None, None)
    # Once torch allocates through xdm, nothing is read.
    env.setitem(xdm.torch._state, "allocator", object())
    assert xdm.torch._apply_alloc_conf(None, "pool | cuda_async") == "pool | cuda_async"


def test_use_refuses_bad_settings_before_anything(env):
    # A refusal comes before the glue is looked for or torch imported.
    env.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segment:True")
    env.setenv("XDM_TORCH_LIBRARY", "/nonexistent/libxdm-torch.so")
    with pytest.raises(xdm.InvalidArgument,
                       match="PYTORCH_CUDA_ALLOC_CONF: entry 'expandable_segment:True'"):
        xdm.torch.use(stack="pool | cuda_async")


# ---- the torch version the glue was built against ------------------------------

def test_equal_torch_versions_pass():
    assert xdm.torch._check_torch_version("2.11.0+cu130", "2.11.0+cu130") is None
    assert xdm.torch._check_torch_version("2.11.0", "2.11.0") is None


@pytest.mark.parametrize("built, running", [
    ("2.11.0+cu130", "2.11.0+cu128"),
    ("2.11.0+cu130", "2.11.0"),
    ("2.10.0+cu130", "2.11.0+cu130"),
    ("2.11.0a0+git1234", "2.11.0"),
])
def test_other_torch_versions_are_refused(built, running):
    with pytest.raises(xdm.InvalidArgument) as info:
        xdm.torch._check_torch_version(built, running)
    msg = str(info.value)
    assert msg == ("xdm.torch: libxdm-torch.so was built against torch %s but this "
                   "process runs torch %s; rebuild xdm with ./configure --with-torch "
                   "against this torch" % (built, running))


def test_unknown_torch_versions_are_refused():
    with pytest.raises(xdm.InvalidArgument, match="--with-torch"):
        xdm.torch._check_torch_version("", "2.11.0")
    with pytest.raises(xdm.InvalidArgument, match="--with-torch"):
        xdm.torch._check_torch_version("2.11.0", None)
