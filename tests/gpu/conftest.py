"""Helpers of the GPU framework tests: every program runs in a python of its
own, because torch's allocator can be switched only before its first CUDA
allocation, and because the budget is shared between processes.

A child program prints its findings as ``WORD {json}`` lines; the test reads
them, may answer on the child's stdin, and asserts in its own process.
"""

import json
import os
import select
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

PYTHON = sys.executable

# Put in front of every child program.
PRELUDE = '''
import json, os, sys
import xdm

def report(word, **fields):
    print(word + " " + json.dumps(fields), flush=True)

def run_threads(target, count, timeout=240):
    """Run target(k) on count threads; how many had not ended by timeout."""
    import threading
    threads = [threading.Thread(target=target, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return sum(t.is_alive() for t in threads)

def tagged(runtime_dir="0"):
    """Bytes of the live blocks of a runtime in the tree, by tag."""
    out = {}
    for gen in xdm.tree.list(runtime_dir + "/blocks"):
        d = runtime_dir + "/blocks/" + gen
        tag = xdm.tree.show(d + "/tag").strip()
        out[tag] = out.get(tag, 0) + int(xdm.tree.show(d + "/bytes"))
    return out
'''


def program(code):
    return PRELUDE + textwrap.dedent(code)


class Child:
    """A python running one program, spoken to line by line."""

    def __init__(self, code, env=None, prefix=None):
        """prefix: a launcher the python runs under (xdm-run and its options)."""
        e = dict(os.environ)
        e.update(env or {})
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(list(prefix or []) + [PYTHON, "-c", program(code)],
                                     env=e, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err)
        self.lines = []
        self._pending = b""

    def stderr(self):
        self.err.seek(0)
        return self.err.read()[-6000:]

    def _line(self, left):
        """The child's next line, or None if none came in left seconds; ""
        at its end.  Read from the pipe's descriptor, so that no line waits
        in a buffer that select() cannot see."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                line, self._pending = self._pending, b""
                return line.decode(errors="replace")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode(errors="replace") + "\n"

    def expect(self, word, timeout=180):
        """The fields of the child's next line that starts with word."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            line = self._line(left) if left > 0 else None
            if line is None:
                self.kill()
                pytest.fail("no '%s' line from the child in %ds; it printed %r\n%s"
                            % (word, timeout, self.lines, self.stderr()))
            if not line:
                rc = self.proc.wait()
                pytest.fail("the child exited (%d) before a '%s' line; it printed %r\n%s"
                            % (rc, word, self.lines, self.stderr()))
            self.lines.append(line.rstrip("\n"))
            if line.startswith(word + " "):
                return json.loads(line[len(word) + 1:])

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout=120):
        """Close the child's stdin, read it to its end, and check it exited 0."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            line = self._line(left) if left > 0 else None
            if line is None:
                self.kill()
                pytest.fail("the child did not exit in %ds; it printed %r\n%s"
                            % (timeout, self.lines, self.stderr()))
            if not line:
                break
            self.lines.append(line.rstrip("\n"))
        rc = self.proc.wait()
        assert rc == 0, "the child exited %d; it printed %r\n%s" % (
            rc, self.lines, self.stderr())

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run(code, word="RESULT", env=None, timeout=300, prefix=None):
    """Run a program to its end; the fields of its word line."""
    child = Child(code, env, prefix)
    try:
        fields = child.expect(word, timeout)
        child.finish()
    finally:
        child.kill()
    return fields


@pytest.fixture
def budget_key():
    """A budget key of this test alone; its shared segment is removed after."""
    key = "gputest-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
    yield key
    try:
        os.unlink("/dev/shm/xdm-budget-" + key)
    except OSError:
        pass


@pytest.fixture
def config_file(tmp_path):
    """Write a config of one stack for every device; its path."""

    def write(stack):
        path = tmp_path / ("xdm-%s.conf" % uuid.uuid4().hex[:8])
        path.write_text("[device *]\nstack = %s\n" % stack)
        return str(path)

    return write
