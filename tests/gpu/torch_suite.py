#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_suite.py: torch's own allocator tests, under torch's allocator and
under xdm, each test in a python of its own.

PyTorch's test/test_cuda.py (not shipped in the torch wheel: take the one
of the torch release installed, from its source tree) tests the CUDA
caching allocator through torch's public interface: memory stats and
snapshots, CUDA graphs and their private pools, MemPool, IPC, OOM
handling, record_stream, empty_cache.  Those tests are a second opinion on
how faithfully xdm serves that interface (python/xdm/torch.py).

This script reads the file with ``ast`` (no torch needed), selects every
test of TestCudaMallocAsync (TestCudaAllocator in later torch), TestMemPool
and TestBlockStateAbsorption, and those of TestCuda whose names match
KEYWORDS (or the ids of a selection file), and runs each selected test
once per mode in a fresh python, so that a crash, a hang or a poisoned
allocator takes down one test and no other:

- ``torch``: the file as it is, torch's own caching allocator;
- ``xdm``: ``import xdm.torch; xdm.torch.use()`` first (before torch
  touches CUDA), then the file.

A file newer than the torch installed may import helpers this torch
lacks: those become placeholders whose use skips the test, in both modes
alike, and each run's log names them ("bridged:"); so does a stand-in for
the expecttest package where it is missing.

Writes into the output directory: selection.txt (the ids chosen, to be
reviewed), logs/MODE/ID.log (each run's output), results.json (every
result) and summary.txt (counts per mode, and the tests that pass under
torch but not under xdm with the end of their xdm log).

From a build tree on the GPU machine::

    ./xdm-uninstalled env PYTHONPATH=python XDM_LIBRARY=.libs/libxdm.so \\
        XDM_TORCH_LIBRARY=frameworks/torch/.libs/libxdm-torch.so \\
        python3 tests/gpu/torch_suite.py /path/to/test_cuda.py -o OUTDIR -j 8

``--list`` prints the selection and runs nothing (no GPU needed).
"""

import argparse
import ast
import concurrent.futures
import functools
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import unittest

# The classes of test_cuda.py that exercise the allocator.  torch renamed
# TestCudaMallocAsync to TestCudaAllocator after 2.11; both are accepted.
CLASSES = ("TestCuda", "TestCudaMallocAsync", "TestCudaAllocator", "TestMemPool",
           "TestBlockStateAbsorption")

# A test is selected when its name (lower case) holds one of these.  They
# name what xdm serves in torch's stead: device memory and its statistics,
# the caching allocator's entry points, CUDA graphs (their private memory
# pools), cuDNN (its workspaces come from the allocator), MemPool, memory
# snapshots and allocation history, IPC handles of device memory, OOM and
# the memory fraction, record_stream and empty_cache.  Host (pinned) memory
# is torch's own allocator, not xdm's, but its tests match "memory" and
# stay: a pass under both modes costs nothing and shows xdm leaves it alone.
KEYWORDS = (
    "memory", "mem_", "mempool", "mem_pool", "alloc", "cach", "graph", "cudnn",
    "snapshot", "history", "trace", "ipc", "oom", "record_stream", "empty_cache",
    "stats", "segment", "expandable", "fraction", "pool", "leak", "free",
    "reserve", "storage", "fork",
)

# Decorators of a test that must have the GPU to itself: torch marks these
# serialTest (they size allocations by the device's total memory, or set
# the process's memory fraction), or largeTensorTest.
SERIAL_DECORATORS = ("serialTest", "largeTensorTest")
SERIAL_NAMES = ("out_of_memory", "memory_fraction", "oom")

# Decorators that make torch generate one test per parameter.
PARAMETRIZE_DECORATORS = ("parametrize", "subtest", "dtypes", "ops")

OUTCOMES = ("pass", "fail", "skip", "error", "timeout")

TAIL_LINES = 30


def decorator_name(node):
    """The name a decorator is called by: serialTest for @serialTest(),
    unittest.skipIf for @unittest.skipIf(...)."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def device_instantiated(tree):
    """Classes that instantiate_device_type_tests(Class, globals()) turns
    into ClassCUDA, whose tests then end in _cuda."""
    names = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call)
                and decorator_name(node).endswith("instantiate_device_type_tests")
                and node.args and isinstance(node.args[0], ast.Name)):
            names.add(node.args[0].id)
    return names


def list_tests(path):
    """Every test method of CLASSES in the file, as dicts: class (as
    unittest sees it), name, serial, parametrized."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    by_device = device_instantiated(tree)
    tests = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name not in CLASSES:
            continue
        cls = node.name + "CUDA" if node.name in by_device else node.name
        for item in node.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not item.name.startswith("test"):
                continue
            decorators = [decorator_name(d) for d in item.decorator_list]
            short = [d.rsplit(".", 1)[-1] for d in decorators]
            tests.append({
                "class": cls,
                "name": item.name,
                "serial": (any(d in SERIAL_DECORATORS for d in short)
                           or any(n in item.name for n in SERIAL_NAMES)),
                # A device-type class appends _cuda (and a dtype) to every name.
                "parametrized": (node.name in by_device
                                 or any(d in PARAMETRIZE_DECORATORS for d in short)),
            })
    return tests


def selected(test):
    """Every test of the allocator's own classes; TestCuda's by KEYWORDS."""
    if test["class"] != "TestCuda":
        return True
    name = test["name"].lower()
    return any(k in name for k in KEYWORDS)


def test_id(test):
    return "%s.%s" % (test["class"], test["name"])


def read_selection(path, tests):
    """The ids listed in a selection file (one per line, # comments),
    in the order of the file; an id that names no test is an error."""
    known = {test_id(t): t for t in tests}
    chosen = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line not in known:
                raise SystemExit("torch_suite: %s: %s is not a test of %s"
                                 % (path, line, ", ".join(CLASSES)))
            chosen.append(known[line])
    return chosen


def unittest_args(test):
    """The argv that selects exactly this test in unittest.main: the plain
    Class.name, or, for a method torch expands into Class.name_PARAM tests,
    an fnmatch pattern for those (unittest -k, Python 3.7+)."""
    if not test["parametrized"]:
        return [test_id(test)]
    return ["-k", "*.%s" % test_id(test), "-k", "*.%s_*" % test_id(test)]


# ---- the child: one test in this process ----------------------------------

# ---- a test file newer than the torch installed ------------------------------
#
# torch's test_cuda.py is read from torch's repository, and the copy at hand
# may be newer than the torch installed: it may import a helper that torch
# does not have yet (from torch.testing._internal...), and torch's test base
# needs the expecttest package, which a GPU machine may lack.  Such a name
# becomes a placeholder whose use skips the test that uses it (as a
# decorator, a context manager or a call), and reads as False as a flag; the
# same in both modes, so the comparison stays fair.  Each run says which.

BRIDGED_PREFIX = "torch.testing._internal"


class Missing:
    """A name this torch lacks: using it skips the test that uses it."""

    def __init__(self, where):
        self.where = where

    def skip(self):
        raise unittest.SkipTest("torch_suite: this torch has no %s" % self.where)

    def __call__(self, *args, **kwargs):
        # As a decorator of a test: the test skips.  As a decorator
        # factory (called with its arguments at import): itself again.
        if len(args) == 1 and not kwargs and callable(args[0]):
            test = args[0]

            @functools.wraps(test)
            def skipped(*a, **k):
                self.skip()
            return skipped
        return self

    def __enter__(self):
        self.skip()

    def __exit__(self, *exc):
        return False

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


def stand_in_expecttest():
    """A minimal expecttest (torch's TestCase derives from its TestCase):
    assertExpectedInline compares the text, and never rewrites a file."""
    module = types.ModuleType("expecttest")
    module.ACCEPT = False

    class TestCase(unittest.TestCase):
        longMessage = True

        def assertExpectedInline(self, actual, expect, skip=0):
            self.assertEqual(str(actual).strip(), str(expect).strip())

        def assertExpectedRaisesInline(self, exc_type, fn, expect, *args, **kwargs):
            with self.assertRaises(exc_type) as ctx:
                fn(*args, **kwargs)
            self.assertExpectedInline(str(ctx.exception), expect)

    module.TestCase = TestCase
    return module


def bridge_versions(path):
    """Placeholders for what the file imports from torch's test helpers
    and this torch lacks; a stand-in expecttest if it is missing.  Returns
    what was bridged."""
    bridged = []
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.modules["expecttest"] = stand_in_expecttest()
        bridged.append("expecttest (a stand-in)")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and
                node.module.startswith(BRIDGED_PREFIX)):
            continue
        try:
            module = importlib.import_module(node.module)
        except ImportError:
            continue        # the run then fails on it, and says so
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            where = "%s.%s" % (node.module, alias.name)
            setattr(module, alias.name, Missing(where))
            bridged.append(where)
    return bridged


def child(mode, path, args, stack):
    """Run the test file as __main__ with unittest's argv, after installing
    xdm in mode xdm.  torch's common_utils reads sys.argv when it is
    imported (its own options, the rest goes to unittest.main through
    run_tests()), so argv is set before the file runs."""
    import runpy

    if mode == "xdm":
        try:
            import xdm.torch
            if stack:
                xdm.torch.use(stack=stack)
            else:
                xdm.torch.use()
        except Exception as e:  # any failure to install is this run's result
            print("torch_suite: xdm.torch.use() failed: %s: %s"
                  % (type(e).__name__, e), flush=True)
            return 3
        print("torch_suite: xdm installed: %s" % xdm.torch.installed(), flush=True)
    sys.argv = [path] + list(args)
    # As `python3 test_cuda.py` would: the file's folder first on the path,
    # in place of this script's (tests/gpu holds test files of its own).
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    bridged = bridge_versions(path)
    if bridged:
        print("torch_suite: bridged: %s" % ", ".join(bridged), flush=True)
    runpy.run_path(path, run_name="__main__")
    return 0


# ---- the parent -------------------------------------------------------------

RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
VERDICT = re.compile(r"^(OK|FAILED|NO TESTS RAN)\b(?: \((.*)\))?\s*$", re.M)


def classify(returncode, output, timed_out):
    """(outcome, reason) of one run from its exit status and unittest's
    closing lines ("Ran N tests", then OK / FAILED with counts)."""
    if timed_out:
        return "timeout", "killed after the timeout"
    if "torch_suite: xdm.torch.use() failed" in output:
        return "error", "xdm could not be installed"
    ran = RAN.findall(output)
    verdicts = VERDICT.findall(output)
    if not ran or not verdicts:
        if returncode is not None and returncode < 0:
            return "error", "killed by signal %d, no unittest summary" % -returncode
        return "error", "exit status %s, no unittest summary" % returncode
    count = int(ran[-1])
    word, detail = verdicts[-1]
    counts = {}
    for part in detail.split(","):
        key, _, value = part.strip().partition("=")
        if value.isdigit():
            counts[key] = int(value)
    if word == "NO TESTS RAN" or count == 0:
        return "error", "no test ran (is the id right for this torch?)"
    if word == "FAILED":
        if counts.get("failures", 0) or counts.get("unexpected successes", 0):
            return "fail", "unittest: FAILED (%s)" % detail
        return "error", "unittest: FAILED (%s)" % detail
    if returncode:
        # unittest said OK, yet the process did not end well (a crash at exit).
        return "error", "unittest OK but exit status %s" % returncode
    if counts.get("skipped", 0) >= count:
        reason = re.findall(r"skipped ['\"](.*)['\"]$", output, re.M)
        return "skip", reason[-1] if reason else "skipped"
    return "pass", "unittest: OK" + (" (%s)" % detail if detail else "")


def safe_name(tid):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tid)


# Variables holding paths (lists joined by ':') that a child must still
# find from the test file's directory, where it runs.
PATH_VARIABLES = ("PYTHONPATH", "XDM_LIBRARY", "XDM_TORCH_LIBRARY", "XDM_MODULE_PATH",
                  "LD_LIBRARY_PATH")


def absolute_paths(environ):
    """A copy of environ whose relative paths in PATH_VARIABLES are absolute."""
    env = dict(environ)
    for name in PATH_VARIABLES:
        if env.get(name):
            env[name] = os.pathsep.join(os.path.abspath(p) if p else p
                                        for p in env[name].split(os.pathsep))
    return env


def run_one(test, mode, opts):
    tid = test_id(test)
    log_dir = os.path.join(opts.output, "logs", mode)
    log = os.path.join(log_dir, safe_name(tid) + ".log")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, opts.test_file]
    if opts.stack:
        cmd += ["--stack", opts.stack]
    cmd += ["--"] + unittest_args(test)
    env = absolute_paths(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    start = time.monotonic()
    timed_out = False
    with open(log, "w", encoding="utf-8") as out:
        out.write("$ %s\n" % " ".join(cmd))
        out.flush()
        # A session of its own: a test's own children die with it on timeout.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env,
                                cwd=os.path.dirname(os.path.abspath(opts.test_file)),
                                start_new_session=True)
        try:
            proc.wait(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    seconds = time.monotonic() - start
    with open(log, encoding="utf-8", errors="replace") as f:
        output = f.read()
    outcome, reason = classify(proc.returncode, output, timed_out)
    return {
        "id": tid, "mode": mode, "outcome": outcome, "reason": reason,
        "returncode": proc.returncode, "seconds": round(seconds, 2),
        "serial": test["serial"], "log": os.path.relpath(log, opts.output),
        "tail": output.splitlines()[-TAIL_LINES:],
    }


def run_all(tests, opts):
    """Every (test, mode) pair: the parallel ones -j at a time, then the
    serial ones alone.  The modes of one test run side by side, so that
    both see the same load."""
    for mode in opts.modes:
        os.makedirs(os.path.join(opts.output, "logs", mode), exist_ok=True)
    jobs = [(t, m) for t in tests if not t["serial"] for m in opts.modes]
    serial = [(t, m) for t in tests if t["serial"] for m in opts.modes]
    results = []
    done = 0
    total = len(jobs) + len(serial)
    # --deadline: no run starts after it; what did not start is left out
    # of the counts and named in the summary.
    stop_at = time.monotonic() + opts.deadline if opts.deadline else None

    def in_time(t, m):
        if stop_at is None or time.monotonic() < stop_at:
            return run_one(t, m, opts)
        return None

    # One line per result as it comes: a run cut short (the GPU machine's
    # time ran out) still leaves what it finished.
    progress = open(os.path.join(opts.output, "results.jsonl"), "w", encoding="utf-8")

    def note(r):
        nonlocal done
        if r is None:
            return
        done += 1
        results.append(r)
        progress.write(json.dumps({k: r[k] for k in ("id", "mode", "outcome", "seconds")})
                       + "\n")
        progress.flush()
        if not opts.quiet:
            print("[%d/%d] %-7s %-7s %s" % (done, total, r["mode"], r["outcome"], r["id"]),
                  flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        for fut in concurrent.futures.as_completed(
                [pool.submit(in_time, t, m) for t, m in jobs]):
            note(fut.result())
    for t, m in serial:
        note(in_time(t, m))
    progress.close()
    return results


def summarize(tests, results, opts):
    by = {(r["id"], r["mode"]): r for r in results}
    selected_count = len(tests)
    # Counted: the tests that ran in every mode (all of them, unless a
    # --deadline passed first).
    not_reached = [t for t in tests
                   if any((test_id(t), m) not in by for m in opts.modes)]
    tests = [t for t in tests if t not in not_reached]
    lines = ["torch_suite: %s" % opts.test_file,
             "%d tests selected; modes: %s" % (selected_count, ", ".join(opts.modes))]
    if not_reached:
        lines.append("%d not run in every mode before the deadline (%d s); the counts are "
                     "of the other %d: %s" % (len(not_reached), opts.deadline, len(tests),
                                              " ".join(test_id(t) for t in not_reached)))
    lines.append("")
    counts = {}
    for mode in opts.modes:
        c = {o: 0 for o in OUTCOMES}
        for t in tests:
            c[by[(test_id(t), mode)]["outcome"]] += 1
        counts[mode] = c
        lines.append("%s: %d passed, %d failed, %d skipped, %d errors, %d timeouts"
                     % (mode, c["pass"], c["fail"], c["skip"], c["error"], c["timeout"]))
    regressions = []
    if "torch" in opts.modes and "xdm" in opts.modes:
        for t in tests:
            a, b = by[(test_id(t), "torch")], by[(test_id(t), "xdm")]
            if a["outcome"] == "pass" and b["outcome"] != "pass":
                regressions.append(b)
        lines += ["", "%d pass under torch but not under xdm:" % len(regressions)]
        for r in regressions:
            lines += ["", "== %s: %s (%s), %s" % (r["id"], r["outcome"], r["reason"], r["log"])]
            lines += ["   " + x for x in r["tail"][-15:]]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(opts.output, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(opts.output, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"test_file": os.path.abspath(opts.test_file), "modes": opts.modes,
                   "counts": counts, "not_passing_under_xdm": [r["id"] for r in regressions],
                   "not_reached": [test_id(t) for t in not_reached],
                   "results": sorted(results, key=lambda r: (r["id"], r["mode"]))},
                  f, indent=1)
    return text


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        p = argparse.ArgumentParser(prog="torch_suite.py --child")
        p.add_argument("mode")
        p.add_argument("test_file")
        p.add_argument("--stack")
        p.add_argument("args", nargs=argparse.REMAINDER)
        a = p.parse_args(argv[1:])
        rest = a.args[1:] if a.args[:1] == ["--"] else a.args
        return child(a.mode, a.test_file, rest, a.stack)

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("test_file", help="torch's test/test_cuda.py")
    p.add_argument("-o", "--output", help="output directory (required unless --list)")
    p.add_argument("-j", "--jobs", type=int, default=8, help="tests at once (default 8)")
    p.add_argument("-s", "--selection",
                   help="file of test ids (Class.test_name, one a line) to run instead "
                        "of the keyword selection")
    p.add_argument("--modes", default="torch,xdm",
                   help="comma-separated: torch (its own allocator), xdm (default both)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per test (300)")
    p.add_argument("--stack", help="the stack given to xdm.torch.use() (its default if unset)")
    p.add_argument("--deadline", type=int, default=0,
                   help="seconds after which no run starts (0: none); the summary counts the "
                        "tests that ran in every mode and names the others")
    p.add_argument("--part", choices=("all", "parallel", "serial"), default="all",
                   help="run only the tests that may run side by side, or only those that "
                        "run alone (sized by the device's memory)")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per test")
    opts = p.parse_args(argv)
    opts.modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    for mode in opts.modes:
        if mode not in ("torch", "xdm"):
            p.error("unknown mode %r (torch, xdm)" % mode)
    if opts.jobs < 1:
        p.error("-j needs at least 1")

    tests = list_tests(opts.test_file)
    if opts.selection:
        chosen = read_selection(opts.selection, tests)
    else:
        chosen = [t for t in tests if selected(t)]
    if opts.part != "all":
        chosen = [t for t in chosen if t["serial"] == (opts.part == "serial")]
    per_class = {}
    for t in chosen:
        per_class[t["class"]] = per_class.get(t["class"], 0) + 1
    header = ["# %d of %d tests selected (%s)" % (
        len(chosen), len(tests),
        ", ".join("%s %d" % kv for kv in per_class.items()) or "none")]
    if not opts.selection:
        header.append("# keywords: %s" % " ".join(KEYWORDS))
    body = ["%s%s" % (test_id(t), "  # serial" if t["serial"] else "") for t in chosen]
    if opts.list:
        print("\n".join(header + body))
        return 0
    if not opts.output:
        p.error("-o OUTDIR is required")
    os.makedirs(opts.output, exist_ok=True)
    with open(os.path.join(opts.output, "selection.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(header + body) + "\n")
    if not chosen:
        print("torch_suite: no test selected", file=sys.stderr)
        return 1
    # One test first: a file that cannot even be imported with this torch
    # (a test_cuda.py newer than the torch installed, a missing psutil)
    # would otherwise fail every run of every test the same way.
    os.makedirs(os.path.join(opts.output, "logs", opts.modes[0]), exist_ok=True)
    probe = run_one(chosen[0], opts.modes[0], opts)
    if probe["outcome"] == "error" and any(
            re.search(r"\b(ImportError|ModuleNotFoundError|SyntaxError)\b", line)
            for line in probe["tail"]):
        print("torch_suite: %s does not import here (%s):\n%s"
              % (opts.test_file, probe["log"], "\n".join(probe["tail"][-10:])),
              file=sys.stderr)
        return 2
    results = run_all(chosen, opts)
    print(summarize(chosen, results, opts), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
