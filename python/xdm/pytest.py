"""A pytest plugin: a test run under one xdm budget per GPU.

::

    pytest -p xdm.pytest --xdm-limit 12G -n 4 --xdm-worker-limit 4G

Loaded with ``-p xdm.pytest``, or by its entry point (``pytest11``, name
``xdm.pytest``) where the package was installed by pip.  Without an
``--xdm-*`` option it does nothing at all: no runtime is built, the
environment is left alone and libxdm is not loaded.  With one:

- every process of the run (the process, or each pytest-xdist worker)
  builds its runtimes from a config file the plugin writes and names in
  ``XDM_CONFIG`` at ``pytest_configure``: the global settings of the
  config in force (platform, module_dir, mount, streams) and, for every
  device, ``budget key=pytest-PID-TOKEN-%u limit=LIMIT group=WORKER
  group_limit=WORKER_LIMIT | STACK``.  The key is the run's own (the
  controller's pid and a random token), so the workers share one budget
  per GPU and no other run on the machine shares it;
- ``--xdm-limit`` is that budget's limit (default ``100%``), and
  ``--xdm-worker-limit`` the limit of each worker's group in it (``gw0``,
  ``gw1``, ...; ``main`` without xdist; default ``max``): an allocation
  must fit both;
- ``@pytest.mark.xdm_limit("2G")`` is a test's own cap: its worker's group
  limit during that test, put back after;
- a test refused by the budget fails with xdm's sentence, which the report
  also shows in a section of its own, and the other tests go on;
- the terminal summary lists the tests with the highest device memory
  peaks (``--xdm-peaks N``, default 10; 0: none) and the refused tests.

The frameworks' switches (``xdm.torch.use()``, ``xdm.cupy.use()``,
``xdm.numba.use()``) allocate through the process's runtimes, so a suite
whose conftest calls them runs under the budget; they may be called at
import, but nothing may build a runtime before ``pytest_configure``.  See
xdm-pytest(7).
"""

import ctypes
import os
import re
import tempfile

import pytest

from . import _lib
from . import tree as _tree
from .errors import InvalidArgument, OutOfBudget, XdmError
from .runtime import Runtime, parse_size, runtime as _runtime, runtimes as _runtimes

MARK = "xdm_limit"
DEFAULT_PEAKS = 10
SINGLE_GROUP = "main"
# Where the controller's plan travels to the xdist workers.
WORKERINPUT_KEY = "xdm_pytest"
SECTION = "xdm budget"
# A report's user_properties the runner adds, one of each per test.
PEAK_BYTES = "xdm_peak_bytes"
PEAK_DEVICE = "xdm_peak_device"
WORKER = "xdm_worker"

_OPTIONS = ("xdm_limit", "xdm_worker_limit", "xdm_stack", "xdm_platform", "xdm_peaks")
_MODULE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*$")
# xdm's refusal sentences, where a framework wrapped them in its own error.
# xdm's sentence inside a framework's own message, which may name the
# error ("... out of budget: budget: ...") before it: the last "budget: ".
_SENTENCE = re.compile(r"(?:budget: )*(budget: [^\n]*bytes requested[^\n]*)")


def pytest_addoption(parser):
    group = parser.getgroup("xdm", "xdm: the run under one device memory budget per GPU "
                            "(xdm-pytest(7))")
    group.addoption("--xdm-limit", metavar="SIZE", default=None,
                    help="the limit of the run's budget on each device, shared by all "
                    "its workers: 12G, 1.5G, 80%% of the device, max (default: 100%%)")
    group.addoption("--xdm-worker-limit", metavar="SIZE", default=None,
                    help="the limit of each worker (each pytest-xdist worker, or the "
                    "one process) inside the run's budget (default: max)")
    group.addoption("--xdm-stack", metavar="STACK", default=None,
                    help="the stack under the run's budget, in xdm.conf syntax "
                    "(default: 'pool | host' on the host platform, "
                    "'pool | cuda_vmm' on cuda)")
    group.addoption("--xdm-platform", metavar="PLATFORM", default=None,
                    help="the platform line of the run's config (default: the "
                    "configured one: XDM_CONFIG, the system's, or cuda, host)")
    group.addoption("--xdm-peaks", metavar="N", type=int, default=None,
                    help="list the N tests with the highest device memory peaks "
                    "(default: %d; 0: none)" % DEFAULT_PEAKS)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "%s(size): the test's own cap on the device memory its worker "
        "holds (12G, 512M, 10%%), under xdm.pytest's budget; without an --xdm-* "
        "option, nothing" % MARK)
    if not any(config.getoption(name) is not None for name in _OPTIONS):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        plan = workerinput.get(WORKERINPUT_KEY)
        if plan is None:
            raise pytest.UsageError(
                "xdm.pytest: this pytest-xdist worker was given no plan by its "
                "controller; load the plugin in the controller too (-p xdm.pytest)")
        config.pluginmanager.register(_Runner(config, plan, workerinput["workerid"]),
                                      "xdm-runner")
        return
    plan = make_plan(config)
    if getattr(config.option, "dist", "no") == "no":
        config.pluginmanager.register(_Runner(config, plan, SINGLE_GROUP), "xdm-runner")
    config.pluginmanager.register(_Reporter(config, plan), "xdm-reporter")


# ---- the plan: what every process of the run builds its runtimes from ----

def _usage(what, detail):
    return pytest.UsageError("xdm.pytest: %s: %s" % (what, detail))


def _size(option, value):
    """A size option's text, checked with xdm's parser (a UsageError if it is
    no size); None stays None."""
    if value is None:
        return None
    text = value.strip()
    if not text or any(c.isspace() for c in text):
        raise _usage(option, "%r is not a size (12G, 1.5G, 80%%, max)" % value)
    try:
        parse_size(text, 100)    # the syntax; a percentage is the device's
    except InvalidArgument as e:
        raise _usage(option, "%r is not a size: %s" % (value, e)) from None
    return text


def _one_line(option, value):
    if value is None:
        return None
    if not value.strip() or "\n" in value or "\0" in value:
        raise _usage(option, "%r is not one non-empty line" % value)
    return value.strip()


def _split(text, sep):
    """text split at sep outside double quotes (xdm.conf's quoting)."""
    parts, start, quoted, i = [], 0, False, 0
    while i < len(text):
        c = text[i]
        if quoted and c == "\\":
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == sep and not quoted:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def stack_modules(stack):
    """The module names of a stack's layers, top first; ValueError when a
    layer is empty or names no module."""
    names = []
    for layer in _split(stack, "|"):
        words = layer.split()
        if not words:
            raise ValueError("an empty layer in '%s'" % stack)
        if not _MODULE_NAME.match(words[0]):
            raise ValueError("'%s' is no module name (in '%s')" % (words[0], stack))
        names.append(words[0])
    return names


def read_config(text):
    """The parts of an xdm.conf text the plan needs: (global lines,
    platform value or None, numbers of the lines whose stack has a budget).

    Lines continued with a backslash are joined and comments dropped, as
    xdm.conf(5) reads them; the global lines are those before the first
    section header.
    """
    logical, pending, first = [], None, 0
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        body = _split(line, "#")[0]
        continued = len(body) == len(line) and body.endswith("\\")
        if continued:
            body = body[:-1]
        if pending is None:
            pending, first = body, number
        else:
            pending += body
        if not continued:
            logical.append((first, pending))
            pending = None
    if pending is not None:
        logical.append((first, pending))
    globals_, platform, budgets, in_section = [], None, [], False
    for number, line in logical:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("["):
            in_section = True
            continue
        key, _, value = stripped.partition("=")
        key = key.strip()
        if not in_section:
            globals_.append(stripped)
            if key == "platform":
                platform = value.strip()
        elif key == "stack":
            try:
                if "budget" in stack_modules(value.strip()):
                    budgets.append(number)
            except ValueError:
                pass        # libxdm says what is wrong with it, if it is used
    return globals_, platform, budgets


def _cuda_has_a_device():
    """Whether the cuda platform would initialize here: the driver loads,
    initializes and counts a device (no context is made)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return (cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0
                and count.value > 0)
    except (OSError, AttributeError):
        return False


def default_stack(platforms, cuda_probe=_cuda_has_a_device):
    """The stack under the run's budget when --xdm-stack is not given: a pool
    over the backend of the platform that would serve the devices, the first
    of the list that initializes (cuda where the driver counts a device)."""
    names = [entry.split()[0] for entry in _split(platforms, ",") if entry.split()]
    for n, name in enumerate(names):
        if name == "host":
            return "pool | host"
        if name == "cuda" and (n == len(names) - 1 or cuda_probe()):
            return "pool | cuda_vmm"
        if name != "cuda":
            raise _usage("the platform '%s'" % name,
                         "its default stack is not known to the plugin; give --xdm-stack")
    raise _usage("platform = %s" % platforms, "names no platform")


def _config_in_force(what=None):
    """(source, text) of the config a runtime built now would read (the
    singletons' own, where they are built); what names it in the usage
    error raised when it does not load."""
    try:
        shown = _tree.show("config")
    except OSError:
        if what is None:
            what = "the configuration in force (XDM_CONFIG=%s)" % os.environ.get(
                "XDM_CONFIG", "unset")
        raise pytest.UsageError("xdm.pytest: %s does not load: %s"
                                % (what, _why_config_fails())) from None
    first, _, text = shown.partition("\n")
    return (first[2:] if first.startswith("# ") else first), text


def _why_config_fails():
    """xdm's sentence on the configuration in force: a private runtime reads
    it afresh, and fails on it as the tree did."""
    try:
        Runtime.create(0, stack="host", platform="host").close()
    except XdmError as e:
        return str(e)
    return "libxdm gave no reason"


def _write_config(plan, group):
    """A config file of one process of the run; its path."""
    fd, path = tempfile.mkstemp(prefix="xdm-pytest-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(config_text(plan, group))
    return path


def _point_config(path):
    """Set XDM_CONFIG to path; the value it had (None: unset)."""
    previous = os.environ.get("XDM_CONFIG")
    os.environ["XDM_CONFIG"] = path
    return previous


def _unpoint_config(previous):
    if previous is None:
        os.environ.pop("XDM_CONFIG", None)
    else:
        os.environ["XDM_CONFIG"] = previous


def _built_too_early(source):
    return pytest.UsageError(
        "xdm.pytest: xdm's runtimes of this process were built before "
        "pytest_configure, from %s, so the run's budget cannot apply to them; a "
        "conftest may call xdm.torch.use() and the other switches at import, but "
        "must build no runtime (nor allocate) before the tests run" % source)


def _check_plan(plan):
    """Load a worker's config once, so that a mistake in --xdm-stack or
    --xdm-platform is a usage error here rather than in every worker (the
    modules and their parameters are checked when a runtime is built).
    Runtimes built already (by a conftest, at import) are one too: the
    workers import it as well."""
    path = _write_config(plan, "gw0")
    previous = _point_config(path)
    try:
        source, _ = _config_in_force("the run's config (--xdm-stack, --xdm-platform and "
                                     "the global settings of %s)" % plan["source"])
    finally:
        _unpoint_config(previous)
        os.unlink(path)
    if source != path:
        raise _built_too_early(source)


def make_plan(config):
    """The run's plan from its options and the config in force (a dict, sent
    to the xdist workers as it is); UsageError for bad input."""
    opt = config.option
    peaks = DEFAULT_PEAKS if opt.xdm_peaks is None else opt.xdm_peaks
    if peaks < 0:
        raise _usage("--xdm-peaks", "%d is below 0" % peaks)
    limit = _size("--xdm-limit", opt.xdm_limit)
    worker_limit = _size("--xdm-worker-limit", opt.xdm_worker_limit)
    platform = _one_line("--xdm-platform", opt.xdm_platform)
    stack = _one_line("--xdm-stack", opt.xdm_stack)
    if stack is not None:
        try:
            stack_modules(stack)
        except ValueError as e:
            raise _usage("--xdm-stack", str(e)) from None
    source, text = _config_in_force()
    globals_, configured_platform, budgets = read_config(text)
    if budgets and stack is None:
        raise pytest.UsageError(
            "xdm.pytest: the configuration %s stacks a budget (line %s); the run's "
            "config keeps its global settings and replaces its stacks, which would "
            "take the tests out of that budget.  Give --xdm-stack with the stack to "
            "run under the run's budget (it may hold that budget: 'budget "
            "limit=80%% | pool | cuda_vmm')"
            % (source, ", ".join(str(n) for n in budgets)))
    if platform is not None:
        globals_ = [line for line in globals_
                    if line.partition("=")[0].strip() != "platform"]
    if stack is None:
        stack = default_stack(platform or configured_platform or "cuda, host")
    plan = {
        "key": "pytest-%d-%s-%%u" % (os.getpid(), os.urandom(4).hex()),
        "limit": limit or "100%",
        "worker_limit": worker_limit,
        "stack": stack,
        "platform": platform,
        "globals": globals_,
        "source": source,
        "peaks": peaks,
    }
    _check_plan(plan)
    return plan


def budget_layer(plan, group):
    """The budget layer the run puts on top of every device's stack."""
    return "budget key=%s limit=%s group=%s group_limit=%s" % (
        plan["key"], plan["limit"], group, plan["worker_limit"] or "max")


def config_text(plan, group):
    """The config file of one process of the run (group: its worker)."""
    lines = ["# written by xdm.pytest for a pytest run, group %s; global settings "
             "from %s" % (group, plan["source"])]
    lines += plan["globals"]
    if plan["platform"] is not None:
        lines.append("platform = %s" % plan["platform"])
    lines += ["[device *]", "stack = %s | %s" % (budget_layer(plan, group), plan["stack"])]
    return "\n".join(lines) + "\n"


def budget_dir():
    """The directory of the budget segments, chosen as the budget layer
    chooses it: $XDM_BUDGET_DIR, else the budget directory the users of the
    machine share where it exists (configure --with-budget-dir; /run/xdm
    unless the installed package says otherwise), else /dev/shm."""
    given = os.environ.get("XDM_BUDGET_DIR")
    if given:
        return given
    shared = getattr(_lib._paths(), "budget_shared_dir", None) or "/run/xdm"
    try:
        os.stat(shared)
    except FileNotFoundError:
        return "/dev/shm"
    except OSError:
        pass
    return shared


def segment_prefix(plan):
    """The path prefix of the run's budget segments (one per device)."""
    directory = budget_dir()
    key = plan["key"].replace("%u", "")
    return os.path.join(directory, "xdm-budget-" + re.sub(r"[^A-Za-z0-9_-]", "_", key))


# ---- a process that runs tests: the process, or an xdist worker ----------

def _budget_sentence(exc):
    """xdm's refusal sentence behind an exception, or None."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OutOfBudget):
            return str(e)
        e = e.__cause__ or e.__context__
    m = _SENTENCE.search(str(exc))
    return m.group(1) if m else None


def human(nbytes):
    """Bytes in binary units: 512 B, 1.5 KiB, 3.0 MiB."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return "%d B" % nbytes if unit == "B" else "%.1f %s" % (value, unit)
        value /= 1024


class _Runner:
    """Points XDM_CONFIG at this process's config; around each test, the
    mark's cap and the peak."""

    def __init__(self, config, plan, group):
        self.plan = plan
        self.group = group
        self.restore = []
        self.path = _write_config(plan, group)
        self.previous = _point_config(self.path)
        try:
            source, _ = _config_in_force()
            if source != self.path:
                raise _built_too_early(source)
        except BaseException:
            self._undo()
            raise

    def _undo(self):
        _unpoint_config(self.previous)
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def pytest_unconfigure(self, config):
        self._undo()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.restore = []
        # Every report of the test names its worker (xdist's controller
        # sees the reports only).
        item.user_properties.append((WORKER, self.group))
        mark = item.get_closest_marker(MARK)
        if mark is not None:
            self._cap(item, mark)
        for rt in _runtimes():
            rt.reset_peak()

    def _cap(self, item, mark):
        args = mark.args
        if (len(args) != 1 or mark.kwargs or isinstance(args[0], bool)
                or not isinstance(args[0], (str, int))):
            pytest.fail("%s: @pytest.mark.%s takes one size (a str such as '2G', or "
                        "an int of bytes), not %s" % (item.nodeid, MARK, mark),
                        pytrace=False)
        text = str(args[0]).strip()
        try:
            parse_size(text, 100)
        except InvalidArgument as e:
            pytest.fail("%s: @pytest.mark.%s(%r): %s" % (item.nodeid, MARK, args[0], e),
                        pytrace=False)
        try:
            # The cap applies to the runtimes built so far: device 0's is
            # built now if none is, so that a test's first allocation is capped.
            for rt in _runtimes() or [_runtime(0)]:
                index = rt.budget_layer
                previous = rt.layer_attr(index, "group_limit")
                rt.set_layer_attr(index, "group_limit", text)
                self.restore.append((rt, index, previous))
        except XdmError as e:
            pytest.fail("%s: @pytest.mark.%s(%r) cannot be applied: %s"
                        % (item.nodeid, MARK, args[0], e), pytrace=False)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield
        restore, self.restore = self.restore, []
        for rt, index, previous in restore:
            rt.set_layer_attr(index, "group_limit", previous)
        peak, device = 0, None
        for rt in _runtimes():
            value = rt.stats().bytes_peak
            if device is None or value > peak:
                peak, device = value, rt.ordinal
        # Read by the reporter, in this process or in xdist's controller
        # (user_properties travel with the report).
        item.user_properties.extend([(PEAK_BYTES, peak), (PEAK_DEVICE, device)])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is None or not report.failed:
            return
        sentence = _budget_sentence(call.excinfo.value)
        if sentence is not None:
            report.sections.append((SECTION, "%s was refused by the budget: %s"
                                    % (item.nodeid, sentence)))


# ---- the process that reports: the process, or xdist's controller --------

class _Reporter:
    """The header, the run's cleanup, and the summary of peaks and refusals."""

    def __init__(self, config, plan):
        self.plan = plan
        self.peaks = []         # (peak, nodeid, worker, device)
        self.refused = []       # (nodeid, worker, the section's text)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput[WORKERINPUT_KEY] = self.plan

    def pytest_report_header(self, config):
        plan = self.plan
        return ["xdm: the run's budget, key %s: limit %s per device, %s per worker; "
                "stack %s" % (plan["key"], plan["limit"], plan["worker_limit"] or "max",
                              "budget | " + plan["stack"])]

    def pytest_runtest_logreport(self, report):
        props = dict(p for p in report.user_properties if len(p) == 2)
        worker = props.get(WORKER, "")
        if report.failed:
            for title, text in report.sections:
                if title == SECTION:
                    self.refused.append((report.nodeid, worker, text))
        if report.when == "teardown" and PEAK_BYTES in props:
            self.peaks.append((props[PEAK_BYTES], report.nodeid, worker,
                               props.get(PEAK_DEVICE)))

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.refused:
            tr.write_sep("=", "xdm: tests refused by the budget")
            for nodeid, worker, text in self.refused:
                sentence = text.partition(" was refused by the budget: ")[2]
                tr.write_line("%s [%s]: %s" % (nodeid, worker, sentence))
        count = self.plan["peaks"]
        if not count or not self.peaks:
            return
        held = sorted((p for p in self.peaks if p[0] > 0), key=lambda p: (-p[0], p[1]))
        tr.write_sep("=", "xdm: the %d highest device memory peaks of %d tests"
                     % (min(count, len(held)), len(self.peaks)))
        if not held:
            tr.write_line("no test held device memory")
            return
        tr.write_line("%10s  %6s  %-6s  %s" % ("peak", "device", "worker", "test"))
        for peak, nodeid, worker, device in held[:count]:
            tr.write_line("%10s  %6s  %-6s  %s" % (human(peak), device, worker, nodeid))

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        # The segments of the run's key: its processes are done with them
        # (xdist's workers have exited; this process detaches at exit).
        prefix = segment_prefix(self.plan)
        directory, name = os.path.split(prefix)
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for entry in names:
            if entry.startswith(name):
                try:
                    os.unlink(os.path.join(directory, entry))
                except OSError:
                    pass
