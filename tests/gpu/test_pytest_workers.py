"""The pytest plugin on a GPU: a pytest-xdist run of torch tests shares one
budget, each worker is a group with a cap, and a test that goes over its
worker's cap is refused and named while the rest pass.

The generated suite switches torch to xdm in its conftest with the one line
a user writes (xdm.torch.use()), which picks up the run's config that the
plugin made; every worker is a python of its own, as torch needs.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

PYTHON = sys.executable

CONFTEST = '''
import xdm.torch

xdm.torch.use()
'''

TESTS = '''
import torch

MIB = 1 << 20


def hold(nbytes):
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    assert int(x[-1]) == 1
    del x


def test_a():
    hold(64 * MIB)


def test_b():
    hold(96 * MIB)


def test_c():
    hold(128 * MIB)


def test_d():
    hold(32 * MIB)


def test_too_big():
    hold(1536 * MIB)
'''


def test_xdist_workers_share_a_budget_with_caps(tmp_path):
    pytest.importorskip("xdist", reason="python3 has no pytest-xdist")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_gpu_suite.py").write_text(textwrap.dedent(TESTS))
    env = dict(os.environ)
    env.pop("XDM_CONFIG", None)
    proc = subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "xdm.pytest", "-p", "no:cacheprovider", "-n", "2",
         "--xdm-limit", "8G", "--xdm-worker-limit", "1G", "--xdm-stack", "pool | cuda_async",
         "-rA", str(tmp_path)],
        cwd=str(tmp_path), env=env, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, timeout=600)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert re.search(r"\b1 failed, 4 passed\b", out), out
    # The refused test is named with its worker and xdm's sentence: its
    # worker's group refused (torch's OutOfMemoryError carries it).
    assert re.search(r"test_gpu_suite\.py::test_too_big \[gw[01]\]: budget: group 'gw[01]' "
                     r"refused: 1610612736 bytes requested, 1073741824 remaining of the "
                     r"group's limit 1073741824", out), out
    # The others ran beside it: the peaks table lists them, largest first.
    peaks = re.findall(r"(test_gpu_suite\.py::test_[a-d])\b", out.split(
        "highest device memory peaks", 1)[-1])
    assert peaks[:4] == ["test_gpu_suite.py::test_c", "test_gpu_suite.py::test_b",
                         "test_gpu_suite.py::test_a", "test_gpu_suite.py::test_d"], out
