"""tests/gpu/torch_suite.py on the CPU: its selection, its per-test
processes and its classification, against a small unittest file shaped
like torch's test_cuda.py (no torch), and a stand-in xdm.torch whose use()
only records that it ran."""

import json
import os
import subprocess
import sys
import textwrap

SRC = os.environ.get("XDM_TOP_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
RUNNER = os.path.join(SRC, "tests", "gpu", "torch_suite.py")

# XDM_UNDER tells a test which mode it runs under: the stand-in xdm.torch
# sets it, so a test can pass under torch and fail under xdm.
FAKE_TESTS = textwrap.dedent('''
    import os
    import sys
    import time
    import unittest

    UNDER_XDM = os.environ.get("XDM_UNDER") == "xdm"


    def parametrize(*args):
        def wrap(f):
            return f
        return wrap


    class TestCuda(unittest.TestCase):
        def test_memory_stats(self):
            pass

        def test_memory_stats_multigpu(self):
            self.skipTest("only one GPU")

        def test_graph_capture(self):
            self.assertFalse(UNDER_XDM, "graph pools differ under xdm")

        def test_cudnn_broken(self):
            self.assertEqual(1, 2)

        def test_empty_cache_raises(self):
            raise RuntimeError("not an assertion")

        def test_caching_allocator_crash(self):
            os.abort()

        def test_record_stream_hangs(self):
            time.sleep(60)

        def test_out_of_memory(self):
            pass

        def test_unrelated_name(self):
            pass

        def helper_memory(self):
            pass


    class TestMemPool(unittest.TestCase):
        @parametrize("size", [1, 2])
        def test_mempool_sizes(self):
            pass


    # Made by parametrize in torch: the runner must reach them by pattern.
    TestMemPool.test_mempool_sizes_1 = TestMemPool.test_mempool_sizes
    TestMemPool.test_mempool_sizes_2 = TestMemPool.test_mempool_sizes
    del TestMemPool.test_mempool_sizes


    class TestOther(unittest.TestCase):
        def test_memory_elsewhere(self):
            pass


    if __name__ == "__main__":
        unittest.main()
''')

FAKE_XDM_TORCH = textwrap.dedent('''
    import os


    def use(**kwargs):
        os.environ["XDM_UNDER"] = "xdm"


    def installed():
        return True
''')


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(args, fake_path=None, cwd=None):
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if fake_path:
        env["PYTHONPATH"] = fake_path
    return subprocess.run([sys.executable, RUNNER] + args, env=env, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120)


def test_list_selects_by_keyword_in_the_known_classes(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    r = run([str(tests), "--list"])
    assert r.returncode == 0, r.stdout
    ids = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith("#")]
    assert ids == [
        "TestCuda.test_memory_stats", "TestCuda.test_memory_stats_multigpu",
        "TestCuda.test_graph_capture", "TestCuda.test_cudnn_broken",
        "TestCuda.test_empty_cache_raises", "TestCuda.test_caching_allocator_crash",
        "TestCuda.test_record_stream_hangs", "TestCuda.test_out_of_memory",
        "TestMemPool.test_mempool_sizes",
    ]
    assert "TestCuda.test_out_of_memory  # serial" in r.stdout
    assert "# 9 of 10 tests selected (TestCuda 8, TestMemPool 1)" in r.stdout


def test_both_modes_classified_and_summarized(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    fake = tmp_path / "fake"
    write(str(fake / "xdm" / "__init__.py"), "")
    write(str(fake / "xdm" / "torch.py"), FAKE_XDM_TORCH)
    out = tmp_path / "out"
    r = run([str(tests), "-o", str(out), "-j", "4", "--timeout", "5", "-q"], str(fake))
    assert r.returncode == 0, r.stdout

    with open(str(out / "results.json")) as f:
        doc = json.load(f)
    got = {(x["id"], x["mode"]): x["outcome"] for x in doc["results"]}
    want = {
        "TestCuda.test_memory_stats": "pass",
        "TestCuda.test_memory_stats_multigpu": "skip",
        "TestCuda.test_cudnn_broken": "fail",
        "TestCuda.test_empty_cache_raises": "error",
        "TestCuda.test_caching_allocator_crash": "error",
        "TestCuda.test_record_stream_hangs": "timeout",
        "TestCuda.test_out_of_memory": "pass",
        "TestMemPool.test_mempool_sizes": "pass",
    }
    for tid, outcome in want.items():
        assert got[(tid, "torch")] == outcome, (tid, got[(tid, "torch")])
        assert got[(tid, "xdm")] == outcome, (tid, got[(tid, "xdm")])
    assert got[("TestCuda.test_graph_capture", "torch")] == "pass"
    assert got[("TestCuda.test_graph_capture", "xdm")] == "fail"

    assert doc["counts"]["torch"] == {"pass": 4, "fail": 1, "skip": 1, "error": 2,
                                      "timeout": 1}
    assert doc["counts"]["xdm"] == {"pass": 3, "fail": 2, "skip": 1, "error": 2,
                                    "timeout": 1}
    assert doc["not_passing_under_xdm"] == ["TestCuda.test_graph_capture"]

    summary = (out / "summary.txt").read_text()
    assert "torch: 4 passed, 1 failed, 1 skipped, 2 errors, 1 timeouts" in summary
    assert "xdm: 3 passed, 2 failed, 1 skipped, 2 errors, 1 timeouts" in summary
    # The reason can be read in the summary: the end of the xdm log.
    assert "graph pools differ under xdm" in summary
    assert (out / "selection.txt").read_text().count("TestCuda.") == 8
    assert (out / "logs" / "xdm" / "TestCuda.test_graph_capture.log").exists()


def test_relative_pythonpath_reaches_the_children(tmp_path):
    # A child runs in the test file's directory: PYTHONPATH=python, as
    # written from a build tree, must still find the package there.
    tests = tmp_path / "torchtests" / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    write(str(tmp_path / "fake" / "xdm" / "__init__.py"), "")
    write(str(tmp_path / "fake" / "xdm" / "torch.py"), FAKE_XDM_TORCH)
    sel = tmp_path / "sel.txt"
    write(str(sel), "TestCuda.test_memory_stats\n")
    out = tmp_path / "out"
    r = run([str(tests), "-o", str(out), "-s", str(sel), "--modes", "xdm", "-q"],
            "fake", cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout
    assert "xdm: 1 passed, 0 failed" in r.stdout, r.stdout


def test_deadline_counts_what_ran_and_names_the_rest(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    sel = tmp_path / "sel.txt"
    # One at a time: the second run cannot start before the first has
    # timed out (3 s), well past the 1 s deadline.
    write(str(sel), "TestCuda.test_record_stream_hangs\nTestCuda.test_cudnn_broken\n")
    out = tmp_path / "out"
    r = run([str(tests), "-o", str(out), "-s", str(sel), "--modes", "torch", "-j", "1",
             "--timeout", "3", "--deadline", "1", "-q"])
    assert r.returncode == 0, r.stdout
    assert "not run in every mode before the deadline (1 s)" in r.stdout, r.stdout
    with open(str(out / "results.json")) as f:
        doc = json.load(f)
    assert "TestCuda.test_cudnn_broken" in doc["not_reached"], doc
    assert all(x["id"] != "TestCuda.test_cudnn_broken" for x in doc["results"]), doc
    total = sum(doc["counts"]["torch"].values())
    assert total == 2 - len(doc["not_reached"]), doc


def test_part_splits_serial_from_parallel(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    r = run([str(tests), "--list", "--part", "serial"])
    assert r.returncode == 0, r.stdout
    ids = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith("#")]
    assert ids == ["TestCuda.test_out_of_memory"], r.stdout
    r = run([str(tests), "--list", "--part", "parallel"])
    ids = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith("#")]
    assert len(ids) == 8 and "TestCuda.test_out_of_memory" not in ids, r.stdout


def test_selection_file_and_torch_mode_alone(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_TESTS)
    sel = tmp_path / "sel.txt"
    write(str(sel), "# two of them\nTestCuda.test_unrelated_name\nTestCuda.test_cudnn_broken\n")
    out = tmp_path / "out"
    r = run([str(tests), "-o", str(out), "-s", str(sel), "--modes", "torch", "-q"])
    assert r.returncode == 0, r.stdout
    assert "torch: 1 passed, 1 failed, 0 skipped, 0 errors, 0 timeouts" in r.stdout
    with open(str(out / "results.json")) as f:
        assert len(json.load(f)["results"]) == 2

    write(str(sel), "TestCuda.test_no_such_test\n")
    r = run([str(tests), "-o", str(out), "-s", str(sel)])
    assert r.returncode != 0
    assert "test_no_such_test is not a test" in r.stdout


def test_a_file_that_does_not_import_stops_the_run(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), "import no_such_module_for_torch_suite\n" + FAKE_TESTS)
    r = run([str(tests), "-o", str(tmp_path / "out"), "--modes", "torch", "-q"])
    assert r.returncode == 2, r.stdout
    assert "does not import here" in r.stdout
    assert "ModuleNotFoundError" in r.stdout


# A test file newer than the torch at hand: it imports a helper this torch
# lacks, and torch's test base needs expecttest, absent here.
FAKE_NEWER = textwrap.dedent('''
    import unittest

    import expecttest
    from torch.testing._internal.common_fake import (HAS, missing_context,
                                                     missing_decorator, MISSING_FLAG)


    class TestCuda(expecttest.TestCase):
        @missing_decorator
        def test_memory_uses_a_missing_decorator(self):
            pass

        @missing_decorator(3, key="value")
        def test_memory_uses_a_missing_decorator_factory(self):
            pass

        def test_memory_reads_a_missing_flag(self):
            self.assertFalse(MISSING_FLAG)
            self.assertEqual(HAS, 1)

        def test_memory_enters_a_missing_context(self):
            with missing_context():
                pass

        def test_memory_expects_inline(self):
            self.assertExpectedInline("a b\\n", """a b""")


    if __name__ == "__main__":
        unittest.main()
''')


def test_names_this_torch_lacks_skip_the_tests_that_use_them(tmp_path):
    tests = tmp_path / "test_cuda.py"
    write(str(tests), FAKE_NEWER)
    # A torch of its own beside the file: the file's folder leads the path.
    write(str(tmp_path / "torch" / "__init__.py"), "__version__ = '0.fake'\n")
    write(str(tmp_path / "torch" / "testing" / "__init__.py"), "")
    write(str(tmp_path / "torch" / "testing" / "_internal" / "__init__.py"), "")
    write(str(tmp_path / "torch" / "testing" / "_internal" / "common_fake.py"), "HAS = 1\n")
    out = tmp_path / "out"
    r = run([str(tests), "-o", str(out), "--modes", "torch", "-q"])
    assert r.returncode == 0, r.stdout
    with open(str(out / "results.json")) as f:
        got = {x["id"]: x["outcome"] for x in json.load(f)["results"]}
    assert got == {
        "TestCuda.test_memory_uses_a_missing_decorator": "skip",
        "TestCuda.test_memory_uses_a_missing_decorator_factory": "skip",
        "TestCuda.test_memory_reads_a_missing_flag": "pass",
        "TestCuda.test_memory_enters_a_missing_context": "skip",
        "TestCuda.test_memory_expects_inline": "pass",
    }, got
    log = (out / "logs" / "torch" / "TestCuda.test_memory_enters_a_missing_context.log")
    text = log.read_text()
    assert "bridged: expecttest (a stand-in), " in text
    for name in ("missing_context", "missing_decorator", "MISSING_FLAG"):
        assert "torch.testing._internal.common_fake.%s" % name in text
    assert "common_fake.HAS" not in text
