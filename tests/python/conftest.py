"""Fixtures of the Python package's CPU tests (run by tests/python/python_tests.sh).

Everything runs on the host platform.  Budget stacks draw on shared-memory
segments of their own, keyed pytest-<pid>-<test>, so tests never see each
other's usage nor another process's; a segment a failed test leaves behind
is unlinked when the session ends.
"""

import glob
import os
import re
import subprocess
import sys

import pytest

import xdm

SHM_PREFIX = "/dev/shm/xdm-budget-pytest-%d-" % os.getpid()


def pytest_sessionfinish(session, exitstatus):
    for path in glob.glob(SHM_PREFIX + "*"):
        try:
            os.unlink(path)
        except OSError:
            pass


@pytest.fixture
def key(request):
    """A budget key of this test's own."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    return "pytest-%d-%s" % (os.getpid(), name)


@pytest.fixture
def make_runtime():
    """make_runtime(stack) -> a private host runtime, closed after the test."""
    made = []

    def make(stack="host", ordinal=0):
        rt = xdm.Runtime.create(ordinal, stack=stack, platform="host")
        made.append(rt)
        return rt

    yield make
    for rt in reversed(made):
        rt.close()


@pytest.fixture
def budget_rt(make_runtime, key):
    """A runtime with a strict 1 MiB budget of its own over a pool (credit=0:
    the tests read used to the byte)."""
    return make_runtime("budget key=%s limit=1M credit=0 | pool | host" % key)


def run_python(code, env=None):
    """Run code in a fresh interpreter (this one, with this environment plus
    env); return its stdout, failing the test with its stderr if it fails."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", code], env=full_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "child failed (%d):\n%s" % (proc.returncode, proc.stderr)
    return proc.stdout
