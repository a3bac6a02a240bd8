"""What torch's allocator settings mean under xdm: ``plan(text, stack)``.

torch configures its caching allocator with ``PYTORCH_ALLOC_CONF`` (or its
older name ``PYTORCH_CUDA_ALLOC_CONF``), a comma-separated list of
``key:value`` entries such as
``expandable_segments:True,garbage_collection_threshold:0.6``.  Once
``xdm.torch.use()`` makes xdm torch's CUDA allocator, that allocator is no
longer used, but a program moved over to xdm still carries the variable:
:func:`plan` reads it and says what each entry becomes under xdm.

- Entries with an xdm equivalent change the stack:
  ``expandable_segments:True`` makes the base ``cuda_vmm``,
  ``backend:cudaMallocAsync`` makes it ``cuda_async``, and
  ``per_process_memory_fraction:F`` sets the topmost pool's ``max=`` to F
  of the device, as a percentage (xdm-pool(7), xdm-cuda(7)).
- Entries without one give a warning that names the key and says why.
- The pinned-memory keys belong to torch's host allocator, which xdm does
  not replace: torch still applies them, so they are told as information,
  not as a warning; so is release_lock_on_cudamalloc, whose effect is
  xdm's behaviour already.
- What torch refuses, this refuses too, with
  :class:`xdm.errors.InvalidArgument` naming the entry: an unknown key, an
  entry without ``:value``, a bool that is not ``True`` or ``False``, a
  number that does not read, a value out of torch's range.

The parse follows torch's own (c10's allocator config, torch 2.11): blanks
are dropped anywhere, ``,`` ``:`` ``[`` ``]`` separate tokens, a later
entry for a key replaces an earlier one, and a trailing comma is allowed.
A number is read from its leading digits, as torch's ``std::stoull`` and
``std::stod`` read it (``128MB`` is 128); a negative count, which torch
would read as a huge unsigned number, is refused.

A stack's base with parameters of its own (``cuda_async pool=own``) is the
user's explicit choice, which swapping the module would drop: it is kept,
with a warning that the explicit stack wins; a bare base is swapped.  The
same holds for a pool that sets ``max=`` itself.

This module is pure: it reads no environment, loads no library and
imports no framework.  ``xdm.torch.alloc_conf_plan()`` applies it to the
process's environment and configuration.
"""

import dataclasses
import re

from .errors import InvalidArgument

# torch reads the first of these that is set (PYTORCH_CUDA_ALLOC_CONF is
# the older name, kept for compatibility) for its settings of every
# device allocator...
ENV_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")

# ...but its CUDA allocator's own settings are read by a config of their
# own, which looks at PYTORCH_CUDA_ALLOC_CONF first: when both variables
# are set, these keys come from it and the others from PYTORCH_ALLOC_CONF
# (torch 2.11).
CUDA_FIRST_KEYS = frozenset((
    "backend",
    "per_process_memory_fraction",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
))


def combine(alloc_conf, cuda_alloc_conf):
    """The settings torch acts on, as one text, given the values of
    PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF (None where unset):
    either one when only it is set; when both are, the CUDA_FIRST_KEYS
    entries of PYTORCH_CUDA_ALLOC_CONF and the other entries of
    PYTORCH_ALLOC_CONF.  Raises InvalidArgument, naming the variable and
    the entry, for what torch's tokenizer refuses in either."""
    if alloc_conf is None or cuda_alloc_conf is None:
        return cuda_alloc_conf if alloc_conf is None else alloc_conf
    picked = [(k, v) for k, v in entries(alloc_conf, ENV_NAMES[0])
              if k not in CUDA_FIRST_KEYS]
    picked += [(k, v) for k, v in entries(cuda_alloc_conf, ENV_NAMES[1])
               if k in CUDA_FIRST_KEYS]
    return ",".join("%s:%s" % kv for kv in picked)

# The cuda platform's default stack (backends/cuda/platform.c), the stack
# of every device when the configuration names none.
DEFAULT_STACK = "pool | cuda_vmm"

# torch's smallest max_split_size_mb and max_non_split_rounding_mb: its
# large buffer, 20 MiB.
_MIN_SPLIT_MB = 20
# torch's bound on pinned_num_register_threads.
_MAX_REGISTER_THREADS = 128

_BOOL_KEYS = frozenset((
    "expandable_segments",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_use_background_threads",
    "graph_capture_record_stream_reuse",
))
_COUNT_KEYS = frozenset((
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "large_segment_size_mb",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
))
_FRACTION_KEYS = frozenset(("garbage_collection_threshold",
                            "per_process_memory_fraction"))

# Every key torch's CUDA build recognizes; any other is refused, as torch
# refuses it.
KEYS = _BOOL_KEYS | _COUNT_KEYS | _FRACTION_KEYS | frozenset(
    ("backend", "roundup_power2_divisions"))

# Keys of torch's pinned (host) memory allocator, which xdm leaves alone.
HOST_KEYS = frozenset((
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb",
))

# Why a key has no xdm equivalent: the warning's text after the key.
_NO_EQUIVALENT = {
    "max_split_size_mb":
        "xdm's pool has no bound on which free pieces it splits: it cuts "
        "any request from the best-fitting free piece and merges a freed "
        "block with its neighbours at once (xdm-pool(7), Larger blocks)",
    "max_non_split_rounding_mb":
        "xdm's pool never hands out a larger free block whole: every block "
        "is cut to its rounded size (xdm-pool(7), Block sizes)",
    "roundup_power2_divisions":
        "xdm's pool rounds by fixed size classes, multiples of 256 bytes up "
        "to 4 KiB and eight per doubling above, up to small_max, and larger "
        "blocks to 256 bytes (xdm-pool(7), Size classes)",
    "large_segment_size_mb":
        "not applied; the pool's chunk= parameter, in the stack, is the "
        "size it grows by (xdm-pool(7))",
    "graph_capture_record_stream_reuse":
        "not applied; inside a capture xdm orders the reuse of a block that "
        "record_stream named by its own tracking, with no switch for it "
        "(xdm-torch(7), CUDA GRAPHS)",
}

# Keys whose effect is xdm's behaviour already: information, not warnings.
_ALREADY = {
    "release_lock_on_cudamalloc":
        "xdm's pool always calls the layer below without the locks its "
        "arenas' allocations take (only under its growth lock), so the "
        "allocations it serves from what it holds go on meanwhile; nothing "
        "to set",
}
_ALREADY["release_lock_on_hipmalloc"] = _ALREADY["release_lock_on_cudamalloc"]

_VMM_BASES = frozenset(("cuda_vmm", "host_vmm"))


@dataclasses.dataclass(frozen=True)
class AllocConfPlan:
    """What an allocator-config string means under xdm.

    source: where the text came from (an environment variable's name).
    text: the string read.  settings: each key torch would set, with the
    value it reads (bool, int, float, str, or for
    roundup_power2_divisions an int or a tuple of (interval, divisions)
    pairs), in the order of the text, later entries having replaced
    earlier ones.  stack_in: the stack the plan started from (None when a
    configuration file's stacks are used).  stack: the stack to use
    (stack_in itself when nothing changes it).  changes: one
    sentence per change made to the stack.  warnings: one line per entry
    whose effect xdm does not give, each naming its key.  infos: lines
    about entries that need nothing of xdm (torch's host allocator's,
    settings that are xdm's behaviour already).
    """

    source: str
    text: str
    settings: dict
    stack_in: str
    stack: str
    changes: tuple = ()
    warnings: tuple = ()
    infos: tuple = ()

    @property
    def stack_changed(self):
        """True when the settings change the stack."""
        return self.stack != self.stack_in


def _fail(source, entry, why):
    raise InvalidArgument("xdm.torch: %s: entry '%s': %s" % (source, entry, why))


def tokens(text):
    """torch's tokens of a config string: blanks dropped, each of
    ``,:[]`` a token of its own, every other run of characters one."""
    out = []
    word = []
    for ch in text:
        if ch in ",:[]":
            if word:
                out.append("".join(word))
                word = []
            out.append(ch)
        elif ch not in " \t\n\v\f\r":
            word.append(ch)
    if word:
        out.append("".join(word))
    return out


def entries(text, source="PYTORCH_ALLOC_CONF"):
    """The (key, value) pairs of a config string, raw, in order (a
    generator, so that a caller checking each value refuses the first bad
    entry first, as torch does).

    A value is one token, or for a list the tokens from ``[`` to ``]``
    joined.  Raises InvalidArgument, naming the entry, for what torch's
    tokenizer cannot read as key:value entries separated by commas, and
    for a key torch does not know.
    """
    toks = tokens(text)
    i = 0
    n = len(toks)
    while i < n:
        key = toks[i]
        if key in ",:[]":
            _fail(source, "".join(toks[i:i + 3]),
                  "'%s' where a key was expected" % key)
        if key not in KEYS:
            _fail(source, "".join(toks[i:i + 3]),
                  "unrecognized key '%s' (torch refuses it too)" % key)
        if i + 1 >= n or toks[i + 1] != ":":
            _fail(source, key, "a key takes ':' and a value")
        i += 2
        if i >= n or toks[i] in ",:]":
            _fail(source, key + ":", "no value")
        if toks[i] == "[":
            if "]" not in toks[i:]:
                _fail(source, key + ":" + "".join(toks[i:]), "no closing ']'")
            end = toks.index("]", i)
            value = "".join(toks[i:end + 1])
            i = end + 1
        else:
            value = toks[i]
            i += 1
        yield key, value
        if i < n:
            if toks[i] != ",":
                _fail(source, key + ":" + value + "".join(toks[i:i + 2]),
                      "entries are separated by ','")
            i += 1


_COUNT = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                   r"|inf(?:inity)?|nan)", re.IGNORECASE)


def _count(source, entry, value):
    """An unsigned count from the leading digits of value, as torch reads."""
    m = _COUNT.match(value)
    if not m:
        _fail(source, entry, "'%s' is not a number" % value)
    n = int(m.group(0))
    if n < 0:
        _fail(source, entry, "a count cannot be negative")
    if n >= 1 << 64:
        _fail(source, entry, "'%s' is out of range" % value)
    return n


def _real(source, entry, value):
    """A float from the leading characters of value, as torch reads."""
    m = _REAL.match(value)
    if not m:
        _fail(source, entry, "'%s' is not a number" % value)
    text = m.group(0)
    x = float(text)
    if x in (float("inf"), float("-inf")) and "inf" not in text.lower():
        _fail(source, entry, "'%s' is out of range" % value)
    return x


def _power_of_two(n):
    return n > 0 and n & (n - 1) == 0


def _roundup(source, entry, value):
    """roundup_power2_divisions: a power of two for every size, or a list
    of interval:divisions pairs, ``>`` for all larger intervals."""
    if not value.startswith("["):
        n = _count(source, entry, value)
        if not _power_of_two(n):
            _fail(source, entry, "the divisions must be a power of 2")
        return n
    toks = tokens(value)[1:-1]
    pairs = []
    i = 0
    while i < len(toks):
        if i + 2 >= len(toks) or toks[i + 1] != ":":
            _fail(source, entry, "a list holds interval:divisions pairs")
        interval, divisions = toks[i], toks[i + 2]
        div = _count(source, entry, divisions)
        if div != 0 and not _power_of_two(div):
            _fail(source, entry, "the divisions must be a power of 2, or 0")
        if interval != ">":
            interval = _count(source, entry, interval)
            if not _power_of_two(interval):
                _fail(source, entry, "the intervals must be powers of 2")
        pairs.append((interval, div))
        i += 3
        if i < len(toks):
            if toks[i] != ",":
                _fail(source, entry, "list pairs are separated by ','")
            i += 1
    return tuple(pairs)


def _value(source, key, value):
    """The value torch reads for key, or InvalidArgument as torch refuses."""
    entry = key + ":" + value
    if value.startswith("[") and key != "roundup_power2_divisions":
        _fail(source, entry, "%s takes one value, not a list" % key)
    if key in _BOOL_KEYS:
        if value not in ("True", "False"):
            _fail(source, entry, "%s takes True or False (torch accepts no "
                  "other spelling), not '%s'" % (key, value))
        return value == "True"
    if key == "backend":
        if value not in ("native", "cudaMallocAsync"):
            _fail(source, entry, "unknown allocator backend '%s': the options "
                  "are native and cudaMallocAsync" % value)
        return value
    if key == "roundup_power2_divisions":
        return _roundup(source, entry, value)
    if key in _COUNT_KEYS:
        n = _count(source, entry, value)
        if key in ("max_split_size_mb", "max_non_split_rounding_mb") \
                and n < _MIN_SPLIT_MB:
            _fail(source, entry, "%s must be at least %d" % (key, _MIN_SPLIT_MB))
        if key == "pinned_num_register_threads" and \
                (not _power_of_two(n) or n > _MAX_REGISTER_THREADS):
            _fail(source, entry, "the number of register threads is a power "
                  "of 2 of at most %d" % _MAX_REGISTER_THREADS)
        if key == "pinned_reserve_segment_size_mb" and n == 0:
            _fail(source, entry, "the pinned reserve segment size is more than 0")
        return n
    x = _real(source, entry, value)
    if key == "garbage_collection_threshold" and not 0.0 < x < 1.0:
        _fail(source, entry, "garbage_collection_threshold must be more than 0.0 "
              "and less than 1.0")
    if key == "per_process_memory_fraction" and not 0.0 <= x <= 1.0:
        _fail(source, entry, "per_process_memory_fraction must be from 0.0 to 1.0")
    return x


def parse(text, source="PYTORCH_ALLOC_CONF"):
    """The settings torch reads from text: a dict of key to value, in the
    order of the text, a later entry replacing an earlier one.  Raises
    InvalidArgument naming the entry for whatever torch refuses."""
    if not isinstance(text, str):
        raise InvalidArgument("xdm.torch: %s is a str, not %r" % (source, text))
    settings = {}
    for key, value in entries(text, source):
        settings.pop(key, None)
        settings[key] = _value(source, key, value)
    return settings


class _Stack:
    """A one-line stack as layers of words, enough to swap its base and
    add a parameter to its pool; the runtime checks the rest.

    Words are split at blanks outside double quotes, layers at ``|``
    outside them, and a ``#`` outside them ends the line (xdm.conf(5)).
    """

    def __init__(self, text):
        self.layers = [[]]
        word = []
        quoted = False
        i = 0
        while i < len(text):
            ch = text[i]
            if quoted:
                word.append(ch)
                if ch == "\\" and i + 1 < len(text):
                    word.append(text[i + 1])
                    i += 1
                elif ch == '"':
                    quoted = False
            elif ch == '"':
                quoted = True
                word.append(ch)
            elif ch == "#":
                break
            elif ch == "|" or ch in " \t":
                if word:
                    self.layers[-1].append("".join(word))
                    word = []
                if ch == "|":
                    self.layers.append([])
            else:
                word.append(ch)
            i += 1
        if word:
            self.layers[-1].append("".join(word))

    def well_formed(self):
        """Every layer has a name: nothing for the runtime to refuse here."""
        return all(self.layers)

    def base(self):
        """The bottom layer's words."""
        return self.layers[-1]

    def pool(self):
        """The topmost pool layer's words, or None."""
        for words in self.layers:
            if words[0] == "pool":
                return words
        return None

    def __str__(self):
        return " | ".join(" ".join(words) for words in self.layers)


def _params(words):
    """A layer's parameters: key to raw value."""
    out = {}
    for word in words[1:]:
        key, _, value = word.partition("=")
        out[key] = value
    return out


def _percent(fraction):
    """fraction of the device as an xdm size: "60%", or None when it is too
    small to write."""
    text = ("%.6f" % (fraction * 100.0)).rstrip("0").rstrip(".")
    return None if text == "0" else text + "%"


def _swap_base(stack, source, want, key_entry, replaceable, changes, warnings):
    """Make the stack's base want, where it is a bare one of replaceable."""
    words = stack.base()
    name = words[0]
    if name == want:
        return
    if name not in replaceable:
        warnings.append("%s %s: not applied: the stack's base %s is not one "
                        "xdm.torch swaps for %s" % (source, key_entry, name, want))
        return
    if len(words) > 1:
        warnings.append("%s %s: not applied: the stack's base '%s' has "
                        "parameters of its own; the explicit stack wins"
                        % (source, key_entry, " ".join(words)))
        return
    words[0] = want
    changes.append("%s %s: the stack's base is %s instead of %s"
                   % (source, key_entry, want, name))


def _gc_warning(stack, source, threshold):
    """The line for garbage_collection_threshold: xdm has no usage
    threshold, and what gives idle memory back depends on the stack."""
    head = ("%s garbage_collection_threshold:%g: xdm has no usage threshold "
            "that starts giving cached memory back" % (source, threshold))
    if stack is None or not stack.well_formed():
        return (head + "; the pools of the stacks used give idle memory back "
                "as their trim_ms says (xdm-pool(7))")
    words = stack.pool()
    if words is None:
        return head + "; this stack has no pool, so nothing is cached"
    trim_ms = _params(words).get("trim_ms")
    vmm = stack.base()[0] in _VMM_BASES
    if trim_ms is None and vmm:
        trim_ms = "1000"
    if trim_ms not in (None, "0"):
        return (head + "; the pool's trimmer gives idle memory back every "
                "%s ms (trim_ms) whatever the usage, and the pool trims before "
                "a growth fails" % trim_ms)
    return (head + "; this stack's pool gives idle chunks back only when a "
            "growth fails, at empty_cache(), or every N ms with trim_ms=N in "
            "the stack (xdm-pool(7))")


def plan(text, stack=None, config=None, source="PYTORCH_ALLOC_CONF"):
    """What text, an allocator-config string of torch's, means under xdm.

    stack: the stack it applies to (None: DEFAULT_STACK, the stack a device
    gets when the configuration names none).  config: when the runtimes'
    stacks come from a configuration file, its path: the stack is then left
    alone and each entry that would change it is a warning that the file's
    stacks win.  source: the variable's name, for the messages.

    Returns an :class:`AllocConfPlan`; raises InvalidArgument, naming the
    entry, for whatever torch refuses.
    """
    settings = parse(text, source)
    stack_in = DEFAULT_STACK if stack is None else stack
    st = _Stack(stack_in)
    changes, warnings, infos = [], [], []
    editable = config is None and st.well_formed()
    if config is None and not st.well_formed():
        warnings.append("%s: not applied to the stack '%s', which has an "
                        "empty layer (the runtime says so when it is built)"
                        % (source, stack_in))

    backend = settings.get("backend")
    expandable = settings.get("expandable_segments")
    fraction = settings.get("per_process_memory_fraction")

    def not_applied(entry):
        warnings.append("%s %s: not applied: the stacks of the configuration "
                        "file %s win" % (source, entry, config))

    if backend == "native":
        infos.append("%s backend:native: xdm is torch's allocator; nothing to "
                     "change" % source)
    if backend == "cudaMallocAsync":
        if expandable:
            warnings.append("%s expandable_segments:True: ignored under "
                            "backend:cudaMallocAsync, as torch ignores it"
                            % source)
        if config is not None:
            not_applied("backend:cudaMallocAsync")
        elif editable:
            _swap_base(st, source, "cuda_async", "backend:cudaMallocAsync",
                       ("cuda_vmm", "cuda_direct"), changes, warnings)
    elif expandable:
        if config is not None:
            not_applied("expandable_segments:True")
        elif editable:
            _swap_base(st, source, "cuda_vmm", "expandable_segments:True",
                       ("cuda_async", "cuda_direct"), changes, warnings)
    if expandable is False:
        infos.append("%s expandable_segments:False: the stack's base is kept "
                     "as it is" % source)

    if fraction is not None:
        entry = "per_process_memory_fraction:%g" % fraction
        pct = _percent(fraction)
        if pct is None:
            warnings.append("%s %s: not applied: a pool's max= cannot be 0 of "
                            "the device (max=0 means no bound)" % (source, entry))
        elif config is not None:
            not_applied(entry)
        elif editable:
            pool = st.pool()
            if pool is None:
                warnings.append("%s %s: not applied: the stack has no pool to "
                                "bound (a budget's limit= is the bound every "
                                "process on its key shares)" % (source, entry))
            elif "max" in _params(pool):
                warnings.append("%s %s: not applied: the stack's pool sets max=%s "
                                "itself; the explicit stack wins"
                                % (source, entry, _params(pool)["max"]))
            else:
                pool.append("max=" + pct)
                changes.append("%s %s: the pool's max is %s of the device"
                               % (source, entry, pct))

    if "garbage_collection_threshold" in settings:
        warnings.append(_gc_warning(st if config is None else None, source,
                                    settings["garbage_collection_threshold"]))
    for key in settings:
        if key in _NO_EQUIVALENT:
            warnings.append("%s %s: %s" % (source, key, _NO_EQUIVALENT[key]))
        elif key in _ALREADY:
            infos.append("%s %s: %s" % (source, key, _ALREADY[key]))
        elif key in HOST_KEYS:
            infos.append("%s %s: torch's pinned host-memory allocator's, which "
                         "xdm does not replace: torch applies it" % (source, key))

    if config is not None:
        stack_in = None
    return AllocConfPlan(
        source=source, text=text, settings=settings, stack_in=stack_in,
        stack=str(st) if changes else stack_in, changes=tuple(changes),
        warnings=tuple(warnings), infos=tuple(infos))
