"""The pytest plugin xdm.pytest (xdm-pytest(7)), driving pytest in a
subprocess on small generated suites, on the host platform (`platform =
host`, stack `pool | host` under the run's budget).

Where two workers must hold memory at the same time they meet at files
(gates) in a folder of the test's own: a worker waits for the other's file
to appear, polling, with a minute as a safety net that fails the test
with a sentence; no outcome depends on how long anything takes.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import pytest

import xdm.pytest as plugin

SRC = os.environ["XDM_TOP_SRCDIR"]
HAVE_XDIST = importlib.util.find_spec("xdist") is not None
needs_xdist = pytest.mark.skipif(
    not HAVE_XDIST, reason="pytest-xdist is not installed (Debian: python3-pytest-xdist, "
    "which tests/install-deps.sh installs): the worker tests need it")

# The gate helper the generated tests share (see the module's docstring).
GATES = '''
import os, pathlib, time

GATES = pathlib.Path(os.environ["GATES"])


def open_gate(name):
    (GATES / name).touch()


def wait_for(name):
    for _ in range(6000):       # a minute, a safety net only
        if (GATES / name).exists():
            return
        time.sleep(0.01)
    raise AssertionError("gate %s never opened: the other worker did not get there"
                         % name)
'''

KIB = 1 << 10
MIB = 1 << 20


def write_suite(tmp_path, files):
    """A folder of its own (its own rootdir) holding files {name: text}."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (suite / name).write_text(textwrap.dedent(text))
    return suite


def run_pytest(suite, *args, env=None):
    """pytest in a fresh interpreter on suite, on the host platform; the
    finished process, with .key the run's budget key (None if it printed
    no header).  The run must leave no budget segment behind."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("PYTEST_", "XDM_BUDGET_"))}
    conf = suite.parent / "host.conf"
    if not conf.exists():
        conf.write_text("platform = host\n")
    full_env["XDM_CONFIG"] = str(conf)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-o", "console_output_style=classic", *args],
                          cwd=str(suite), env=full_env, capture_output=True, text=True,
                          timeout=600)
    proc.output = proc.stdout + proc.stderr
    m = re.search(r"xdm: the run's budget, key (pytest-\S+)-%u:", proc.output)
    proc.key = m and m.group(1)
    if proc.key:
        leftover = [n for n in os.listdir("/dev/shm")
                    if n.startswith("xdm-budget-" + proc.key)]
        assert leftover == [], "the run left its segments: %s" % leftover
    return proc


def outcome(proc):
    """The closing line's counts, as {"passed": 3, ...}."""
    last = proc.stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


def peak_rows(output):
    """The rows of the peak table: (peak text, device, worker, test id)."""
    rows, inside = [], False
    for line in output.splitlines():
        if re.match(r"=+ xdm: the \d+ highest device memory peaks", line):
            inside = True
            continue
        if inside:
            if line.startswith("="):
                break
            m = re.match(r"\s*(\d+(?:\.\d)? (?:B|KiB|MiB|GiB))\s+(\d+)\s+(\S+)\s+(\S+)$",
                         line)
            if m:
                rows.append(m.groups())
    return rows


def refusal_lines(output):
    """test id -> (worker, sentence) from the summary of refused tests."""
    found, inside = {}, False
    for line in output.splitlines():
        if re.match(r"=+ xdm: tests refused by the budget", line):
            inside = True
            continue
        if inside:
            if line.startswith("="):
                break
            m = re.match(r"(\S+) \[(\S*)\]: (budget: .*)$", line)
            assert m, line
            found[m.group(1)] = (m.group(2), m.group(3))
    return found


# ---- doing nothing ----------------------------------------------------------

NOOP_CONFTEST = '''
import json, os, sys
import xdm._lib

BEFORE = dict(os.environ)


def pytest_unconfigure(config):
    after = dict(os.environ)
    changed = sorted(k for k in set(BEFORE) | set(after)
                     if BEFORE.get(k) != after.get(k) and k != "PYTEST_CURRENT_TEST")
    with open(os.environ["STATE"], "w") as f:
        json.dump({"plugin": config.pluginmanager.has_plugin("xdm.pytest"),
                   "libxdm": xdm._lib._lib is not None,
                   "changed": changed}, f)
'''

NOOP_TEST = '''
import pytest


@pytest.mark.xdm_limit("1M")
def test_marked_but_idle():
    pass
'''


def assert_idle(tmp_path, proc):
    assert proc.returncode == 0, proc.output
    assert outcome(proc) == {"passed": 1}
    with open(tmp_path / "state.json") as f:
        state = json.load(f)
    assert state == {"plugin": True, "libxdm": False, "changed": []}
    assert "xdm:" not in proc.output


def test_without_options_it_does_nothing(tmp_path):
    suite = write_suite(tmp_path, {"conftest.py": NOOP_CONFTEST,
                                   "test_idle.py": NOOP_TEST})
    # --strict-markers: the mark is registered even so.
    proc = run_pytest(suite, "-p", "xdm.pytest", "--strict-markers",
                      env={"STATE": str(tmp_path / "state.json")})
    assert_idle(tmp_path, proc)


def build_and_unpack_wheel(tmp_path):
    """The package's wheel, unpacked as pip would into a folder; its path."""
    spec = importlib.util.spec_from_file_location(
        "xdm_backend_for_plugin", os.path.join(SRC, "python", "pep517", "xdm_backend.py"))
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    out = tmp_path / "wheel"
    out.mkdir()
    name = backend.build_wheel(str(out))
    site = tmp_path / "site"
    with zipfile.ZipFile(out / name) as whl:
        whl.extractall(site)
    return site


def test_entry_point_loads_it_idle_and_active(tmp_path):
    site = build_and_unpack_wheel(tmp_path)
    env = {"PYTHONPATH": "%s:%s" % (site, os.environ.get("PYTHONPATH", "")),
           "STATE": str(tmp_path / "state.json")}
    suite = write_suite(tmp_path, {
        "conftest.py": NOOP_CONFTEST,
        "test_idle.py": NOOP_TEST,
    })
    # Loaded by its entry point alone, with no option: nothing at all.
    idle = run_pytest(suite, "--strict-markers", env=env)
    assert_idle(tmp_path, idle)
    # With an option it works: the mark's cap refuses nothing here, and
    # the header names the run's budget.
    active = run_pytest(suite, "--xdm-limit", "1M", env=env)
    assert active.returncode == 0, active.output
    assert active.key and active.key.startswith("pytest-")
    # -p xdm.pytest as well: one plugin (it is registered under the
    # entry point's name), not an error for registering it twice.
    both = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "1M", env=env)
    assert both.returncode == 0, both.output
    assert both.output.count("xdm: the run's budget") == 1


# ---- caps and refusals ------------------------------------------------------

def test_worker_cap_refuses_one_test_and_the_others_pass(tmp_path):
    suite = write_suite(tmp_path, {"test_cap.py": '''
        import xdm


        def hold(nbytes):
            rt = xdm.runtime(0)
            rt.free(rt.allocate(nbytes))


        def test_small():
            hold(512 << 10)


        def test_big():
            hold(2 << 20)


        def test_small_again():
            hold(1 << 20)
        '''})
    proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "8M",
                      "--xdm-worker-limit", "1M")
    assert proc.returncode == 1, proc.output
    assert outcome(proc) == {"failed": 1, "passed": 2}
    sentence = ("budget: group 'main' refused: 2097152 bytes requested, 1048576 "
                "remaining of the group's limit 1048576")
    # The failure's own section names the test and gives xdm's sentence ...
    assert re.search(r"-+ xdm budget -+\ntest_cap.py::test_big was refused by the "
                     r"budget: " + re.escape(sentence), proc.output), proc.output
    # ... and so does the summary, with the worker.
    refused = refusal_lines(proc.output)
    assert list(refused) == ["test_cap.py::test_big"]
    worker, text = refused["test_cap.py::test_big"]
    assert worker == "main" and text.startswith(sentence)
    assert "(the device " in text and "has 8388608 remaining of 8388608)" in text


def test_mark_caps_its_test_and_is_put_back(tmp_path):
    suite = write_suite(tmp_path, {"test_mark.py": '''
        import pytest
        import xdm


        def hold(nbytes):
            rt = xdm.runtime(0)
            rt.free(rt.allocate(nbytes))


        def group_limit():
            rt = xdm.runtime(0)
            return int(rt.layer_attr(rt.budget_layer, "group_limit"))


        @pytest.mark.xdm_limit("1M")
        def test_capped_refused():
            assert group_limit() == 1 << 20
            hold(2 << 20)


        def test_worker_limit_again():
            assert group_limit() == 4 << 20
            hold(3 << 20)


        @pytest.mark.xdm_limit(3 << 20)
        def test_capped_fits():
            assert group_limit() == 3 << 20
            hold(2 << 20)


        @pytest.mark.xdm_limit("lots")
        def test_bad_mark():
            pass


        def test_last():
            assert group_limit() == 4 << 20
        '''})
    proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-worker-limit", "4M")
    assert proc.returncode == 1, proc.output
    assert outcome(proc) == {"failed": 1, "passed": 3, "error": 1}
    refused = refusal_lines(proc.output)
    assert list(refused) == ["test_mark.py::test_capped_refused"]
    assert refused["test_mark.py::test_capped_refused"][1].startswith(
        "budget: group 'main' refused: 2097152 bytes requested, 1048576 remaining of "
        "the group's limit 1048576")
    assert re.search(r"ERROR at setup of test_bad_mark", proc.output)
    assert "test_mark.py::test_bad_mark: @pytest.mark.xdm_limit('lots'): " \
        "invalid size 'lots'" in proc.output


def test_peaks_are_listed_highest_first_with_their_values(tmp_path):
    suite = write_suite(tmp_path, {"test_peaks.py": '''
        import xdm


        def test_three():
            rt = xdm.runtime(0)
            rt.free(rt.allocate(3 << 20))


        def test_none():
            pass


        def test_two_at_once():
            rt = xdm.runtime(0)
            a = rt.allocate(1 << 20)
            b = rt.allocate(1 << 20)
            rt.free(a)
            rt.free(b)


        def test_one_and_a_half():
            rt = xdm.runtime(0)
            for _ in range(3):
                rt.free(rt.allocate(1536 << 10))


        def test_small():
            rt = xdm.runtime(0)
            rt.free(rt.allocate(4096))
        '''})
    proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "64M", "--xdm-peaks", "3")
    assert proc.returncode == 0, proc.output
    # The peaks were reset before each test: test_two_at_once, after
    # test_three, has its own 2 MiB.
    assert re.search(r"=+ xdm: the 3 highest device memory peaks of 5 tests =+",
                     proc.output), proc.output
    assert peak_rows(proc.output) == [
        ("3.0 MiB", "0", "main", "test_peaks.py::test_three"),
        ("2.0 MiB", "0", "main", "test_peaks.py::test_two_at_once"),
        ("1.5 MiB", "0", "main", "test_peaks.py::test_one_and_a_half"),
    ]
    every = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "64M")
    assert [r[3] for r in peak_rows(every.output)] == [
        "test_peaks.py::test_three", "test_peaks.py::test_two_at_once",
        "test_peaks.py::test_one_and_a_half", "test_peaks.py::test_small"]
    assert peak_rows(every.output)[-1][0] == "4.0 KiB"
    none = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "64M", "--xdm-peaks", "0")
    assert "highest device memory peaks" not in none.output
    assert none.returncode == 0


# ---- bad input --------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--xdm-limit", "8Q"], "xdm.pytest: --xdm-limit: '8Q' is not a size: invalid size "),
    (["--xdm-worker-limit", ""], "xdm.pytest: --xdm-worker-limit: '' is not a size"),
    (["--xdm-limit", "1 G"], "xdm.pytest: --xdm-limit: '1 G' is not a size"),
    (["--xdm-peaks", "-1"], "xdm.pytest: --xdm-peaks: -1 is below 0"),
    (["--xdm-stack", "pool | | host"], "xdm.pytest: --xdm-stack: an empty layer"),
    (["--xdm-stack", "pool initial= | host"],
     "xdm.pytest: the run's config (--xdm-stack, --xdm-platform and the global "
     "settings of "),
    (["--xdm-platform", "nosuch"], "xdm.pytest: the platform 'nosuch': its default "
     "stack is not known to the plugin; give --xdm-stack"),
])
def test_bad_input_is_a_usage_error(tmp_path, args, message):
    suite = write_suite(tmp_path, {"test_x.py": "def test_x():\n    pass\n"})
    proc = run_pytest(suite, "-p", "xdm.pytest", *args)
    assert proc.returncode == 4, proc.output
    assert "ERROR: " + message in proc.output


def test_a_config_with_a_budget_needs_an_explicit_stack(tmp_path):
    suite = write_suite(tmp_path, {"test_x.py": '''
        import xdm


        def test_x():
            rt = xdm.runtime(0)
            assert rt.layers == ["budget", "budget", "host"]
            assert "group=main" in rt.stack
        '''})
    (tmp_path / "host.conf").write_text(
        "platform = host  # the machine's\n[device *]\nstack = budget limit=1G \\\n"
        "  | host\n")
    refused = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "1M")
    assert refused.returncode == 4
    assert "ERROR: xdm.pytest: the configuration %s stacks a budget (line 3)" % (
        tmp_path / "host.conf") in refused.output
    # Given the stack (the machine's budget in it), the run goes on.
    # (Its key is one the suite's conftest removes at the end.)
    machine = "budget key=pytest-%d-machine limit=1G | host" % os.getpid()
    proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "1M",
                      "--xdm-stack", machine)
    assert proc.returncode == 0, proc.output


def test_a_runtime_built_before_configure_is_refused(tmp_path):
    suite = write_suite(tmp_path, {
        "conftest.py": "import xdm\nxdm.runtime(0)\n",
        "test_x.py": "def test_x():\n    pass\n",
    })
    # Under xdist too, where the controller imports the conftest as well and
    # says so before any worker starts.
    for xdist in ([], ["-n", "2"]) if HAVE_XDIST else ([],):
        proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "1M", *xdist)
        assert proc.returncode == 4, proc.output
        assert "ERROR: xdm.pytest: xdm's runtimes of this process were built before " \
            "pytest_configure, from %s" % (tmp_path / "host.conf") in proc.output


# ---- pytest-xdist -------------------------------------------------------------

@needs_xdist
def test_workers_share_the_run_budget(tmp_path):
    # --dist each: both workers run both tests, at once.  gw0 holds 768 KiB
    # of the run's 1 MiB; gw1 asks for as much while it does and is refused
    # by the device's budget (its own group has no cap), then, once gw0 has
    # freed, is given it.
    gates = tmp_path / "gates"
    gates.mkdir()
    suite = write_suite(tmp_path, {"gates.py": GATES, "test_shared.py": '''
        import os
        import xdm
        from gates import open_gate, wait_for

        ME = os.environ["PYTEST_XDIST_WORKER"]


        def test_hold_together():
            rt = xdm.runtime(0)
            if ME == "gw0":
                p = rt.allocate(768 << 10)
                open_gate("held")
                wait_for("asked")
                rt.free(p)
                open_gate("freed")
            else:
                wait_for("held")
                try:
                    rt.free(rt.allocate(768 << 10))
                finally:
                    open_gate("asked")


        def test_after_the_free():
            rt = xdm.runtime(0)
            if ME != "gw0":
                wait_for("freed")
                rt.free(rt.allocate(768 << 10))
        '''})
    proc = run_pytest(suite, "-p", "xdm.pytest", "-n", "2", "--dist", "each",
                      "--xdm-limit", "1M", env={"GATES": str(gates)})
    assert proc.returncode == 1, proc.output
    assert outcome(proc) == {"failed": 1, "passed": 3}
    refused = refusal_lines(proc.output)
    assert list(refused) == ["test_shared.py::test_hold_together"]
    worker, sentence = refused["test_shared.py::test_hold_together"]
    assert worker == "gw1"
    # gw0's draw took its block and, ahead, 1/16 of the room beside it
    # (credit=auto), which gw1 cannot ask back: 256 KiB - 16 KiB remain.
    assert sentence.startswith(
        "budget: the device refused: 786432 bytes requested, 245760 remaining of limit "
        "1048576 on device ")
    assert sentence.endswith("(group 'gw1' has 18446744073709551615 remaining of "
                             "18446744073709551615)")
    # Both workers' peaks reach the controller.
    rows = peak_rows(proc.output)
    assert ("768.0 KiB", "0", "gw0", "test_shared.py::test_hold_together") in rows
    assert ("768.0 KiB", "0", "gw1", "test_shared.py::test_after_the_free") in rows


@needs_xdist
def test_four_workers_caps_peaks_and_refusals(tmp_path):
    tests = "import xdm\n"
    for n in range(1, 9):
        tests += ("\n\ndef test_%d_mib():\n    rt = xdm.runtime(0)\n"
                  "    rt.free(rt.allocate(%d << 20))\n" % (n, n))
    tests += "\n\ndef test_past_the_worker_cap():\n    xdm.runtime(0).allocate(9 << 20)\n"
    suite = write_suite(tmp_path, {"test_many.py": tests})
    proc = run_pytest(suite, "-p", "xdm.pytest", "-n", "4", "--xdm-limit", "64M",
                      "--xdm-worker-limit", "8M", "--xdm-peaks", "20")
    assert proc.returncode == 1, proc.output
    assert outcome(proc) == {"failed": 1, "passed": 8}
    rows = peak_rows(proc.output)
    assert [(r[0], r[3]) for r in rows] == [
        ("%d.0 MiB" % n, "test_many.py::test_%d_mib" % n) for n in range(8, 0, -1)]
    assert all(re.match(r"gw[0-3]$", r[2]) for r in rows), rows
    refused = refusal_lines(proc.output)
    worker, sentence = refused["test_many.py::test_past_the_worker_cap"]
    assert re.match(r"gw[0-3]$", worker)
    assert sentence.startswith("budget: group '%s' refused: 9437184 bytes requested, "
                               "8388608 remaining of the group's limit 8388608" % worker)


def test_without_xdist_there_is_one_group(tmp_path):
    # -n 0 (or no xdist at all): the process is the group "main".
    suite = write_suite(tmp_path, {"test_one.py": '''
        import xdm


        def test_group():
            rt = xdm.runtime(0)
            assert rt.layer_attr(rt.budget_layer, "group") == "main"
            assert int(rt.layer_attr(rt.budget_layer, "group_limit")) == 3 << 20
            assert int(rt.layer_attr(rt.budget_layer, "limit")) == 5 << 20
        '''})
    args = ["-n", "0"] if HAVE_XDIST else []
    proc = run_pytest(suite, "-p", "xdm.pytest", "--xdm-limit", "5M",
                      "--xdm-worker-limit", "3M", *args)
    assert proc.returncode == 0, proc.output
    assert "stack budget | pool | host" in proc.output


# ---- the plugin's pieces, in this process ---------------------------------------

def test_default_stack_follows_the_platform():
    assert plugin.default_stack("host") == "pool | host"
    assert plugin.default_stack("host devices=2 memory=8G") == "pool | host"
    assert plugin.default_stack("cuda") == "pool | cuda_vmm"
    assert plugin.default_stack("cuda, host", cuda_probe=lambda: True) == \
        "pool | cuda_vmm"
    assert plugin.default_stack("cuda visible=\"1,0\", host",
                                cuda_probe=lambda: False) == "pool | host"
    with pytest.raises(pytest.UsageError, match="platform 'other'"):
        plugin.default_stack("other, host")


def test_read_config_keeps_the_global_lines_and_finds_budgets():
    text = ('# top\nplatform = host devices=2 \\\n  memory=1G  # two\n'
            'mount = "/tmp/a # b"\n[device 0]\nstack = logging path="x|y" | host\n'
            '[device *]\nstack = pool | \\\n budget limit=1G | host\n')
    globals_, platform, budgets = plugin.read_config(text)
    assert globals_ == ["platform = host devices=2   memory=1G",
                        'mount = "/tmp/a # b"']
    assert platform == "host devices=2   memory=1G"
    assert budgets == [8]


def test_config_text_puts_the_run_budget_on_top():
    plan = {"key": "pytest-1-ab-%u", "limit": "80%", "worker_limit": None,
            "stack": "pool | cuda_async", "platform": "cuda", "globals": ["streams = 4"],
            "source": "/etc/xdm.conf", "peaks": 10}
    text = plugin.config_text(plan, "gw3")
    assert text.splitlines()[1:] == [
        "streams = 4", "platform = cuda", "[device *]",
        "stack = budget key=pytest-1-ab-%u limit=80% group=gw3 group_limit=max | "
        "pool | cuda_async"]
    assert plugin.human(512) == "512 B"
    assert plugin.human(1536) == "1.5 KiB"
    assert plugin.human(3 << 30) == "3.0 GiB"


def test_budget_dir_is_chosen_as_the_budget_layer_chooses_it(tmp_path, monkeypatch):
    # $XDM_BUDGET_DIR, else the shared directory where it exists (the
    # installed package's, here one of the test's own), else /dev/shm.
    shared = tmp_path / "shared"

    class Paths:
        budget_shared_dir = str(shared)

    monkeypatch.setattr(plugin._lib, "_paths", lambda: Paths)
    monkeypatch.setenv("XDM_BUDGET_DIR", "/given")
    assert plugin.budget_dir() == "/given"
    monkeypatch.delenv("XDM_BUDGET_DIR")
    assert plugin.budget_dir() == "/dev/shm"
    shared.mkdir()
    assert plugin.budget_dir() == str(shared)
    plan = {"key": "pytest-1-x y-%u"}
    assert plugin.segment_prefix(plan) == str(shared / "xdm-budget-pytest-1-x_y-")


def test_sentence_found_in_a_frameworks_message():
    # torch's OutOfMemoryError from xdm's glue names the error before xdm's
    # sentence, which itself starts with "budget: ": the sentence is the last.
    import xdm.pytest as plugin

    sentence = ("budget: group 'gw0' refused: 2048 bytes requested, 1024 remaining of "
                "the group's limit 1024")
    exc = RuntimeError("xdm: torch allocation of 2048 bytes: out of budget: " + sentence)
    assert plugin._budget_sentence(exc) == sentence
    assert plugin._budget_sentence(RuntimeError("no budget here")) is None
