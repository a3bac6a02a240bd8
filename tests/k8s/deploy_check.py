#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""deploy_check.py - deploy/ is well-formed, and true to the plugin.

Usage: deploy_check.py SRCDIR [BUILDDIR]

Reads the manifests of deploy/ with a reader of the small part of YAML
they are written in (python's standard library has none; where PyYAML is
installed, it must read every file the same way), then checks that what
they say matches what the rest of the tree says:

- every flag the DaemonSet passes to xdm-device-plugin is one of the
  plugin's (its man page, and its --help where it was built), and every
  path it names (the kubelet's directory, the budget directory, the shim)
  is a hostPath mounted at that same path in the plugin's container, as
  the plugin and the kubelet need;
- the kubelet's device plugin directory is the kubelet's own;
- the init container installs the shim where --shim says, from where the
  image's Dockerfile put it, and the commands exist in that image;
- the example pods ask for the resource the DaemonSet advertises, in whole
  units, and set none of the variables Allocate sets;
- Allocate's answer (tests/k8s/xdm_k8s_allocate, where it was built, run
  with the DaemonSet's own flags over a fake NVML) mounts the budget
  directory and the shim where the DaemonSet and doc/kubernetes.md say,
  and gives each pod the slice it asked for;
- the Prometheus job keeps the DaemonSet's pods and port, and promtool
  accepts the file where promtool is installed;
- every XDM_ variable the manifests and doc/kubernetes.md name is one the
  man pages document, and every deploy/ file the doc names exists.

Each failure is a sentence on standard error; the exit status is 1 if
there was any, 0 if none.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# ---------------------------------------------------------------------------
# A reader of the YAML that deploy/ is written in, and nothing more:
# block mappings and block sequences (a sequence may sit at its key's
# indentation), "- key: value" items, plain, single- and double-quoted
# scalars, [] flow lists of scalars, {} (empty), comments, and documents
# separated by "---".  It refuses everything else (anchors, aliases,
# tags, block scalars, non-empty flow mappings, tabs, duplicate keys) and
# every plain scalar that another YAML reader could take for another type
# (yes/no/on/off, True, 0755, 1.5, 1e3, 0x1f, 12:30, ...): quote those.


class YamlError(Exception):
    pass


INT_RE = re.compile(r"-?(0|[1-9][0-9]*)\Z")
# Plain scalars YAML 1.1 or 1.2 would read as something other than a
# string or a decimal integer.
AMBIGUOUS_RE = re.compile(
    r"(?i)(y|n|yes|no|on|off|true|false|null|~|\.inf|-\.inf|\.nan)\Z"
    r"|[-+]?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?\Z"
    r"|[-+]?\.[0-9]+([eE][-+]?[0-9]+)?\Z"
    r"|[-+]?0[xob][0-9a-fA-F_]+\Z"
    r"|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?\Z"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")


def _strip_comment(text, where):
    """The line without its comment; quotes are honoured."""
    quote = None
    for k, ch in enumerate(text):
        if quote:
            if ch == "\\" and quote == '"':
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'" and (k == 0 or text[k - 1] in " [,:-"):
            quote = ch
        elif ch == "#" and (k == 0 or text[k - 1] in " \t"):
            return text[:k].rstrip()
    if quote:
        raise YamlError("%s: an unterminated %s quote" % (where, quote))
    return text.rstrip()


def _scalar(text, where):
    t = text.strip()
    if not t:
        raise YamlError("%s: an empty value (write \"\" or null)" % where)
    if t[0] == '"':
        if len(t) < 2 or t[-1] != '"':
            raise YamlError("%s: a double-quoted scalar must end its line" % where)
        try:
            return json.loads(t)
        except ValueError as e:
            raise YamlError("%s: %s: %s" % (where, t, e))
    if t[0] == "'":
        if len(t) < 2 or t[-1] != "'" or "'" in t[1:-1].replace("''", ""):
            raise YamlError("%s: a single-quoted scalar must end its line" % where)
        return t[1:-1].replace("''", "'")
    if t[0] == "[":
        if t[-1] != "]":
            raise YamlError("%s: a flow list must end its line" % where)
        inner = t[1:-1].strip()
        if not inner:
            return []
        if "[" in inner or "{" in inner:
            raise YamlError("%s: only flow lists of scalars are read" % where)
        items, cur, quote = [], "", None
        for ch in inner:
            if quote:
                cur += ch
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
                cur += ch
            elif ch == ",":
                items.append(cur)
                cur = ""
            else:
                cur += ch
        items.append(cur)
        return [_scalar(i, where) for i in items]
    if t == "{}":
        return {}
    if t[0] in "&*!|>%@`{?":
        raise YamlError("%s: '%s' is outside the YAML this reader takes" % (where, t))
    if ": " in t or t.endswith(":") or " #" in t:
        raise YamlError("%s: quote '%s' (it reads as a mapping or a comment)" % (where, t))
    if t == "null":
        return None
    if t in ("true", "false"):
        return t == "true"
    if INT_RE.match(t):
        return int(t)
    if AMBIGUOUS_RE.match(t):
        raise YamlError("%s: quote '%s': another YAML reader may not take it as this "
                        "one would" % (where, t))
    return t


def _split_key(content, where):
    """(key, rest) of 'key: rest' or 'key:'; None if not a mapping entry."""
    if content[0] in "\"'":
        end = content.find(content[0], 1)
        if end < 0:
            return None
        key, after = _scalar(content[:end + 1], where), content[end + 1:]
        if not (after == ":" or after.startswith(": ")):
            return None
        return key, after[1:]
    m = re.match(r"([^\s:#][^:#]*?)(:$|: )", content)
    if not m:
        return None
    key = m.group(1)
    if key[0] in "&*!|>%@`{[?-" and not key.startswith("-"):
        raise YamlError("%s: key '%s' is outside the YAML this reader takes" % (where, key))
    return key, content[m.end() - (0 if m.group(2) == ":" else 1):]


class _Reader:
    def __init__(self, lines, name):
        self.lines = lines      # [(lineno, indent, content)]
        self.name = name

    def where(self, i):
        if i < len(self.lines):
            return "%s:%d" % (self.name, self.lines[i][0])
        return "%s: at the end" % self.name

    def block(self, i, indent):
        _, ind, content = self.lines[i]
        if ind != indent:
            raise YamlError("%s: indentation %d where %d was expected"
                            % (self.where(i), ind, indent))
        if content == "-" or content.startswith("- "):
            return self.seq(i, indent)
        if _split_key(content, self.where(i)) is not None:
            return self.mapping(i, indent)
        value = _scalar(content, self.where(i))
        return value, i + 1

    def nested(self, i, parent_indent, allow_same_seq):
        """The block value that starts at line i, below a key or a '-'."""
        if i >= len(self.lines):
            raise YamlError("%s: a key or '-' with no value" % self.where(i - 1))
        _, ind, content = self.lines[i]
        if ind > parent_indent:
            return self.block(i, ind)
        if allow_same_seq and ind == parent_indent and (content == "-" or
                                                       content.startswith("- ")):
            return self.seq(i, ind)
        raise YamlError("%s: a key or '-' with no value" % self.where(i - 1))

    def seq(self, i, indent):
        out = []
        while i < len(self.lines):
            lineno, ind, content = self.lines[i]
            if ind < indent:
                break
            if ind > indent:
                raise YamlError("%s: unexpected indentation" % self.where(i))
            if not (content == "-" or content.startswith("- ")):
                break
            rest = content[1:]
            if not rest.strip():
                value, i = self.nested(i + 1, indent, False)
            else:
                pad = len(rest) - len(rest.lstrip(" "))
                inner = rest.lstrip(" ")
                sub = indent + 1 + pad
                if inner.startswith("- ") or _split_key(inner, self.where(i)) is not None:
                    # The item is a block that starts on the dash's line.
                    self.lines[i] = (lineno, sub, inner)
                    value, i = self.block(i, sub)
                else:
                    value, i = _scalar(inner, self.where(i)), i + 1
            out.append(value)
        return out, i

    def mapping(self, i, indent):
        out = {}
        while i < len(self.lines):
            _, ind, content = self.lines[i]
            if ind < indent:
                break
            if ind > indent:
                raise YamlError("%s: unexpected indentation" % self.where(i))
            if content == "-" or content.startswith("- "):
                break
            kv = _split_key(content, self.where(i))
            if kv is None:
                raise YamlError("%s: '%s' is not 'key: value'" % (self.where(i), content))
            key, rest = kv
            if not isinstance(key, str):
                raise YamlError("%s: key %r is not a string" % (self.where(i), key))
            if key in out:
                raise YamlError("%s: key '%s' twice" % (self.where(i), key))
            if rest.strip():
                out[key], i = _scalar(rest, self.where(i)), i + 1
            else:
                out[key], i = self.nested(i + 1, indent, True)
        return out, i


def yaml_load_all(text, name):
    """The documents of a file, as Python values."""
    docs, cur = [], []
    for lineno, raw in enumerate(text.split("\n"), 1):
        where = "%s:%d" % (name, lineno)
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise YamlError("%s: a tab in the indentation" % where)
        if raw.rstrip() == "---":
            docs.append(cur)
            cur = []
            continue
        if raw.startswith("%") or raw.startswith("..."):
            raise YamlError("%s: directives and '...' are not read" % where)
        content = _strip_comment(raw, where)
        if not content.strip():
            continue
        cur.append((lineno, len(content) - len(content.lstrip(" ")), content.strip()))
    docs.append(cur)
    out = []
    for lines in docs:
        if not lines:
            continue
        r = _Reader(lines, name)
        value, i = r.block(0, lines[0][1])
        if i != len(lines):
            raise YamlError("%s: unexpected line" % r.where(i))
        out.append(value)
    return out


# ---------------------------------------------------------------------------
# The checks.

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("deploy_check: " + msg, file=sys.stderr)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def load(src, rel):
    path = os.path.join(src, rel)
    text = read(path)
    try:
        docs = yaml_load_all(text, rel)
    except YamlError as e:
        fail(str(e))
        return []
    try:
        import yaml  # a second opinion where PyYAML is installed
    except ImportError:
        return docs
    try:
        theirs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        fail("%s: PyYAML refuses it: %s" % (rel, e))
        return docs
    if theirs != docs:
        fail("%s: PyYAML reads it differently from this check's reader" % rel)
    return docs


def man_text(src, page):
    """A man page's source with its escapes undone, for searching."""
    t = read(os.path.join(src, "man", page))
    t = t.replace("\\-", "-").replace("\\(em", "-").replace("\\e", "\\")
    return re.sub(r"\\f[BIRP]|\\f\(..|\\&", "", t)


def plugin_flags(man):
    """The long flags the plugin's man page documents in its OPTIONS."""
    m = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH )", man, re.M | re.S)
    if not m:
        fail("man/xdm-device-plugin.8 has no OPTIONS section")
        return set()
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(1)))


def split_args(args):
    """{flag: value} of ['--flag=value', ...] (or '--flag', 'value')."""
    out, k = {}, 0
    while k < len(args):
        a = args[k]
        if not a.startswith("--"):
            fail("the plugin's argument '%s' is not a flag" % a)
            k += 1
            continue
        if "=" in a:
            flag, value = a.split("=", 1)
            k += 1
        else:
            flag, value = a, args[k + 1] if k + 1 < len(args) else None
            k += 2
        if flag in out:
            fail("the plugin is given %s twice" % flag)
        out[flag] = value
    return out


def by_name(items, what):
    out = {}
    for it in items or []:
        name = it.get("name")
        if name in out:
            fail("two %s named %s" % (what, name))
        out[name] = it
    return out


def host_path_of(container, volumes, path):
    """The hostPath volume mounted in the container at a mount point that
    holds path, checked to be the same path on the node; the mount, or None."""
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m.get("mountPath", "")
        if path == mp or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) > len(best.get("mountPath", "")):
                best = m
    if best is None:
        fail("container %s: nothing is mounted at %s" % (container.get("name"), path))
        return None
    vol = volumes.get(best.get("name"))
    if not vol or "hostPath" not in vol:
        fail("container %s: %s is not a hostPath volume" % (container.get("name"),
                                                           best.get("mountPath")))
        return None
    if vol["hostPath"].get("path") != best.get("mountPath"):
        fail("container %s: volume %s is the node's %s mounted at %s: the plugin gives "
             "the kubelet its own paths, which must be the node's"
             % (container.get("name"), best.get("name"), vol["hostPath"].get("path"),
                best.get("mountPath")))
    return best


def plugin_install_dir(src):
    """bin or sbin: where make install puts xdm-device-plugin."""
    mk = os.path.join(src, "tools", "device-plugin", "local.mk")
    if not os.path.exists(mk):
        return None
    t = read(mk)
    if re.search(r"^sbin_PROGRAMS\s*\+?=.*xdm-device-plugin", t, re.M):
        return "sbin"
    if re.search(r"^bin_PROGRAMS\s*\+?=.*xdm-device-plugin", t, re.M):
        return "bin"
    return None


def check_plugin_daemonset(src, build, ds, man, dockerfile):
    spec = ds["spec"]["template"]["spec"]
    volumes = by_name(spec.get("volumes"), "volumes")
    containers = by_name(spec.get("containers"), "containers")
    inits = by_name(spec.get("initContainers"), "init containers")
    plugin = containers.get("plugin")
    if not plugin:
        fail("the DaemonSet has no container named plugin")
        return None
    known = plugin_flags(man)
    cmd = plugin.get("command") or []
    where = plugin_install_dir(src)
    if where and cmd[:1] != ["/usr/%s/xdm-device-plugin" % where]:
        fail("the plugin's command is %s, but make install puts xdm-device-plugin in "
             "$(%sdir), /usr/%s in the image" % (cmd, where, where))
    flags = split_args(plugin.get("args") or [])
    for flag in flags:
        if flag not in known:
            fail("the DaemonSet passes %s, which man/xdm-device-plugin.8 does not "
                 "document" % flag)
    exe = os.path.join(build, "tools", "device-plugin", "xdm-device-plugin") if build else ""
    if exe and os.access(exe, os.X_OK):
        out = subprocess.run([exe, "--help"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True).stdout
        for flag in flags:
            if flag not in out:
                fail("xdm-device-plugin --help does not know %s, which the DaemonSet "
                     "passes" % flag)
    DS_FLAGS.update(flags)
    cfg = dict(flags)
    for flag in EXPLICIT:
        if not cfg.get(flag):
            fail("the DaemonSet leaves %s to its default: say it (the pods, the node and "
                 "this check need the value)" % flag)
            cfg[flag] = ""
    if cfg["--kubelet-dir"] != "/var/lib/kubelet/device-plugins":
        fail("--kubelet-dir is %s: the kubelet's device plugin directory is "
             "/var/lib/kubelet/device-plugins (DevicePluginPath of its API)"
             % cfg["--kubelet-dir"])
    for flag, writable in (("--kubelet-dir", True), ("--budget-dir", True),
                           ("--shim", False)):
        path = cfg[flag]
        if not path or not path.startswith("/"):
            fail("%s is not an absolute path: %r" % (flag, path))
            continue
        m = host_path_of(plugin, volumes, path)
        if m and writable and m.get("readOnly"):
            fail("the plugin mounts %s read-only; %s must be writable" % (path, flag))
    # The budget directory is a hostPath of its own: the pods mount that
    # exact directory, never its parent.
    bm = host_path_of(plugin, volumes, cfg["--budget-dir"])
    if bm and bm.get("mountPath") != cfg["--budget-dir"]:
        fail("the budget directory %s is mounted as part of %s: mount it alone"
             % (cfg["--budget-dir"], bm.get("mountPath")))
    # The shim: installed on the node by the init container, from the image.
    shim_dir = os.path.dirname(cfg["--shim"])
    inst = inits.get("install-shim")
    if not inst:
        fail("the DaemonSet has no init container install-shim: nothing puts the shim "
             "at %s on the node" % cfg["--shim"])
    else:
        icmd = inst.get("command") or []
        if icmd[1:] != [shim_dir]:
            fail("install-shim installs into %s, but --shim is %s" % (icmd[1:], cfg["--shim"]))
        m = host_path_of(inst, volumes, shim_dir)
        if m and m.get("readOnly"):
            fail("install-shim mounts %s read-only" % shim_dir)
        pm = host_path_of(plugin, volumes, shim_dir)
        if m and pm and m.get("name") != pm.get("name"):
            fail("install-shim and the plugin mount different volumes at %s" % shim_dir)
        script = read(os.path.join(src, "deploy", "install-shim.sh"))
        if os.path.basename(cfg["--shim"]) not in script:
            fail("deploy/install-shim.sh does not install %s" % os.path.basename(cfg["--shim"]))
        if icmd[:1] and ("/out" + icmd[0]) not in dockerfile:
            fail("install-shim's command %s is not where deploy/Dockerfile installs it"
                 % icmd[:1])
    for c in list(containers.values()) + list(inits.values()):
        image = c.get("image", "")
        if not image.startswith("registry.example/xdm-device-plugin:"):
            fail("container %s runs %s, not the image of deploy/Dockerfile"
                 % (c.get("name"), image))
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            fail("container %s is privileged: nothing in it needs that" % c.get("name"))
        if sc.get("allowPrivilegeEscalation") is not False:
            fail("container %s may escalate privileges" % c.get("name"))
    for c in containers.values():
        for e in c.get("env") or []:
            check_env_name(e.get("name"), "the DaemonSet")
    metrics = containers.get("metrics")
    if metrics:
        margs = metrics.get("args") or []
        if "--dir" not in margs or margs[margs.index("--dir") + 1:][:1] != [cfg["--budget-dir"]]:
            fail("xdmctl serve does not read the budget directory %s: %s"
                 % (cfg["--budget-dir"], margs))
        host_path_of(metrics, volumes, cfg["--budget-dir"])
        listen = margs[margs.index("--listen") + 1] if "--listen" in margs else ""
        ports = [p.get("containerPort") for p in metrics.get("ports") or []]
        if not listen.startswith("*:") or [int(listen[2:] or 0)] != ports:
            fail("xdmctl serve listens on '%s', but the container's port is %s"
                 % (listen, ports))
    for name, v in volumes.items():
        if "hostPath" in v and not any(
                m.get("name") == name
                for c in list(containers.values()) + list(inits.values())
                for m in c.get("volumeMounts") or []):
            fail("volume %s is mounted by no container" % name)
    return cfg


ALLOCATE_SETS = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD",
                 "XDM_BUDGET_DIR", "XDM_BUDGET_GROUP", "XDM_BUDGET_GROUP_LIMIT"}
DOCUMENTED_ENV = set()
NVIDIA_ENV = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def check_env_name(name, where):
    if name in NVIDIA_ENV:
        return
    if name.startswith("XDM_") and name not in DOCUMENTED_ENV:
        fail("%s sets %s, which no man page documents" % (where, name))
    elif not name.startswith("XDM_"):
        fail("%s sets %s, a variable this check does not know" % (where, name))


def size_bytes(text):
    m = re.match(r"([0-9]+)([KMGT]?)(i?B?)\Z", text or "")
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def check_pods(pods, cfg):
    units = {}
    for p in pods:
        name = p["metadata"]["name"]
        if p.get("kind") != "Pod":
            fail("deploy/example-pods.yaml holds a %s" % p.get("kind"))
            continue
        for c in p["spec"]["containers"]:
            res = c.get("resources") or {}
            lim = (res.get("limits") or {}).get(cfg["--resource"])
            req = (res.get("requests") or {}).get(cfg["--resource"])
            if lim is None:
                fail("pod %s does not ask for %s" % (name, cfg["--resource"]))
                continue
            if req is not None and str(req) != str(lim):
                fail("pod %s: an extended resource's request must equal its limit" % name)
            if not re.match(r"[1-9][0-9]*\Z", str(lim)):
                fail("pod %s asks for %r of %s: units are whole" % (name, lim,
                                                                   cfg["--resource"]))
                continue
            units[name] = int(str(lim))
            for e in c.get("env") or []:
                if e.get("name") in ALLOCATE_SETS:
                    fail("pod %s sets %s, which Allocate sets" % (name, e["name"]))
                check_env_name(e.get("name"), "pod " + name)
            sc = c.get("securityContext") or {}
            psc = p["spec"].get("securityContext") or {}
            uid = sc.get("runAsUser", psc.get("runAsUser", 0))
            if uid != 0 or sc.get("runAsNonRoot") or psc.get("runAsNonRoot"):
                fail("pod %s does not run as root, the owner of the budget directory "
                     "(mode 0700): its allocations would all be refused" % name)
    if len(set(units.values())) < 2:
        fail("the example pods should ask for two different slices, not %s" % units)
    return units


def run_allocate(build, cfg, units):
    """Allocate's answer for each example pod, from xdm_k8s_allocate (the
    plugin's own code) with the DaemonSet's flags over the fake NVML: one
    GPU, big enough for every pod.  The node's paths are not this
    machine's, so the budget directory and the shim are temporary ones
    here, and the answer is checked to use them as the DaemonSet's would
    be used.  None where the program or the fake NVML was not built."""
    if not build:
        return None
    prog = os.path.join(build, "tests", "k8s", "xdm_k8s_allocate")
    nvml = os.path.join(build, "tests", "k8s", "fake", ".libs")
    if not (os.access(prog, os.X_OK) and os.path.exists(os.path.join(nvml,
                                                                     "libnvidia-ml.so.1"))):
        return None
    unit = size_bytes(cfg["--unit"])
    answers = {}
    with tempfile.TemporaryDirectory() as tmp:
        budget = os.path.join(tmp, "budget")
        # The shim's directory as install-shim leaves it on the node: the
        # shim and the libxdm.so.0 it needs, which Allocate mounts too.
        shim = os.path.join(tmp, "libxdm-preload.so")
        for f in (shim, os.path.join(tmp, "libxdm.so.0")):
            open(f, "w").close()
        env = dict(os.environ, FAKE_CUDA_DEVICES="1",
                   FAKE_CUDA_TOTAL=str(sum(units.values()) * unit * 2))
        env["LD_LIBRARY_PATH"] = nvml + (":" + env["LD_LIBRARY_PATH"]
                                         if env.get("LD_LIBRARY_PATH") else "")
        flags = ["%s=%s" % (k, v) for k, v in sorted(DS_FLAGS.items())
                 if k not in ("--budget-dir", "--shim") and v is not None]
        flags += ["--budget-dir=" + budget, "--shim=" + shim]
        r = subprocess.run([prog] + flags + ["--list"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        ids = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
        if r.returncode != 0 or not ids:
            fail("xdm_k8s_allocate --list with the DaemonSet's flags: %s%s"
                 % (r.stderr.strip(), "" if ids else " (no device)"))
            return {}
        first = 0
        for name, n in sorted(units.items()):
            r = subprocess.run([prog] + flags + ids[first:first + n], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            first += n
            if r.returncode != 0:
                fail("Allocate refuses pod %s's %d units: %s" % (name, n, r.stderr.strip()))
                continue
            ans = {"env": {}, "mounts": []}
            for line in r.stdout.splitlines():
                if line.startswith("mount "):
                    ans["mounts"].append(line.split()[1:])
                elif "=" in line:
                    k, v = line.split("=", 1)
                    ans["env"][k] = v
            answers[name] = (ans, budget, shim)
        check_allocate(answers, cfg, units)
        run_demo(build, answers, env)
    return answers


def run_demo(build, answers, env):
    """deploy/gpu-slice-demo.py, the example pods' program, with each pod's
    answer, under this build's shim over the preload tests' fake driver:
    each must be held to its own slice (exit 0, 'held to its slice')."""
    shim = os.path.join(build, "preload", ".libs", "libxdm-preload.so")
    lib = os.path.join(build, ".libs", "libxdm.so.0")
    cuda = os.path.join(build, "tests", "preload", "fake", ".libs")
    if not (os.path.exists(shim) and os.path.exists(lib) and
            os.path.exists(os.path.join(cuda, "libcuda.so.1"))):
        print("deploy_check: the shim or the fake driver is not built: the demo not run")
        return
    with open(shim, "rb") as f:
        if re.search(rb"__(asan|tsan)_init", f.read()):
            print("deploy_check: a sanitizer build's shim: the demo not run under python")
            return
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                        "gpu-slice-demo.py")
    for name, (ans, _, _) in sorted(answers.items()):
        denv = dict(env)
        denv.update(ans["env"])
        # The files Allocate mounts, in its order: libxdm.so.0, the shim.
        denv["LD_PRELOAD"] = "%s %s" % (lib, shim)
        denv["LD_LIBRARY_PATH"] = cuda
        denv["XDM_BUDGET_CONTAINER"] = name
        r = subprocess.run([sys.executable, demo, "--no-sleep"], env=denv,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120)
        if r.returncode != 0 or "held to its slice" not in r.stdout:
            fail("pod %s's program, run with Allocate's answer over the fake driver, was "
                 "not held to its slice (exit %d):\n%s" % (name, r.returncode, r.stdout))


def check_allocate(answers, cfg, units):
    """Each pod's answer: the slice it asked for, and the budget directory
    and the shim where the DaemonSet and the doc say the pods see them."""
    unit = size_bytes(cfg["--unit"])
    groups = set()
    for name, (ans, budget, shim) in sorted(answers.items()):
        env, mounts = ans["env"], ans["mounts"]
        if set(env) != ALLOCATE_SETS:
            fail("Allocate sets %s; this check and the doc know %s"
                 % (sorted(env), sorted(ALLOCATE_SETS)))
        if env.get("XDM_BUDGET_GROUP_LIMIT") != str(units[name] * unit):
            fail("pod %s: Allocate gives a slice of %s bytes for %d units of %s"
                 % (name, env.get("XDM_BUDGET_GROUP_LIMIT"), units[name], cfg["--unit"]))
        groups.add(env.get("XDM_BUDGET_GROUP"))
        if env.get("XDM_BUDGET_DIR") != budget:
            fail("pod %s: XDM_BUDGET_DIR is %s, not the budget directory %s"
                 % (name, env.get("XDM_BUDGET_DIR"), budget))
        cdir = os.path.dirname(cfg["--container-shim"])
        preload = "%s/libxdm.so.0 %s" % (cdir, cfg["--container-shim"])
        if env.get("LD_PRELOAD") != preload:
            fail("pod %s: LD_PRELOAD is %s, not '%s': libxdm.so.0, which the shim "
                 "needs, then the shim (--container-shim)"
                 % (name, env.get("LD_PRELOAD"), preload))
        if env.get("CUDA_VISIBLE_DEVICES") != env.get("NVIDIA_VISIBLE_DEVICES"):
            fail("pod %s: CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES name different "
                 "GPUs" % name)
        want = [[budget, budget, "rw"], [shim, cfg["--container-shim"], "ro"],
                [os.path.realpath(os.path.join(os.path.dirname(shim), "libxdm.so.0")),
                 cdir + "/libxdm.so.0", "ro"]]
        if sorted(mounts) != sorted(want):
            fail("pod %s: Allocate mounts %s; the DaemonSet and the doc expect %s (the "
                 "budget directory at its own path, read-write; the shim read-only at "
                 "--container-shim, and libxdm.so.0 beside it)" % (name, mounts, want))
    if len(groups) != len(answers):
        fail("two pods share a budget group: %s" % sorted(groups))


def check_doc(src, cfg, units):
    doc = read(os.path.join(src, "doc", "kubernetes.md"))
    for rel in sorted(set(re.findall(r"\bdeploy/[A-Za-z0-9_.-]+", doc))):
        if not os.path.exists(os.path.join(src, rel)):
            fail("doc/kubernetes.md names %s, which does not exist" % rel)
    for name in sorted(set(re.findall(r"\bXDM_[A-Z0-9_]+", doc))):
        if name not in DOCUMENTED_ENV:
            fail("doc/kubernetes.md names %s, which no man page documents" % name)
    # The schedulers' variables: as xdm-preload(7), SCHEDULERS, names them.
    m = re.search(r"^## Where HAMi or KAI Scheduler already run\n(.*?)(?=^## )", doc,
                  re.M | re.S)
    if not m:
        fail("doc/kubernetes.md has no section 'Where HAMi or KAI Scheduler already run'")
    else:
        preload = man_text(src, "xdm-preload.7")
        names = set(re.findall(r"`([A-Z][A-Z0-9_]*[A-Z0-9])(?:_<i>)?`", m.group(1)))
        if not re.search(r"^\.SH SCHEDULERS", preload, re.M):
            print("deploy_check: xdm-preload(7) has no SCHEDULERS section yet: the "
                  "schedulers' variables of doc/kubernetes.md not checked")
        else:
            for name in sorted(names):
                if name not in preload:
                    fail("doc/kubernetes.md says the shim reads %s; xdm-preload(7) "
                         "does not name it" % name)
    check_doc_blocks(doc, cfg)
    for path in (cfg["--budget-dir"], cfg["--kubelet-dir"], cfg["--shim"],
                 cfg["--container-shim"], cfg["--resource"]):
        if path not in doc:
            fail("doc/kubernetes.md never says %s, which the DaemonSet uses" % path)
    for name, n in units.items():
        if name not in doc:
            fail("doc/kubernetes.md does not show pod %s" % name)
        limit = n * size_bytes(cfg["--unit"])
        if str(limit) not in doc:
            fail("doc/kubernetes.md does not show pod %s's slice, %d bytes" % (name, limit))


def check_doc_blocks(doc, cfg):
    """The doc's YAML and JSON blocks are well-formed, and the DRA section's
    objects agree with each other and its CDI spec with Allocate."""
    objs = {}
    for n, (lang, body) in enumerate(re.findall(r"^```(yaml|json)\n(.*?)^```", doc,
                                                re.M | re.S)):
        where = "doc/kubernetes.md, %s block %d" % (lang, n + 1)
        try:
            docs = yaml_load_all(body, where) if lang == "yaml" else [json.loads(body)]
        except (YamlError, ValueError) as e:
            fail("%s: %s" % (where, e))
            continue
        for d in docs:
            if isinstance(d, dict):
                objs.setdefault("cdi" if "cdiVersion" in d else d.get("kind"), []).append(d)
    slices, claims = objs.get("ResourceSlice", []), objs.get("ResourceClaimTemplate", [])
    classes, cdi = objs.get("DeviceClass", []), objs.get("cdi", [])
    if not (slices and claims and classes and cdi):
        fail("doc/kubernetes.md's DRA section lacks a ResourceSlice, a DeviceClass, a "
             "ResourceClaimTemplate or a CDI spec")
        return
    for d in slices + claims + classes:
        if d.get("apiVersion") != "resource.k8s.io/v1":
            fail("doc/kubernetes.md: a %s of %s, not resource.k8s.io/v1"
                 % (d.get("kind"), d.get("apiVersion")))
    sl = slices[0]["spec"]
    dev = sl["devices"][0]
    if dev.get("allowMultipleAllocations") is not True:
        fail("doc/kubernetes.md: the ResourceSlice's device is not allowMultipleAllocations")
    caps = set(dev.get("capacity", {}))
    req = claims[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    if not set(req.get("capacity", {}).get("requests", {})) <= caps:
        fail("doc/kubernetes.md: the claim requests a capacity the slice does not have")
    if req.get("deviceClassName") != classes[0]["metadata"]["name"]:
        fail("doc/kubernetes.md: the claim names a class the doc does not define")
    if sl.get("driver") not in classes[0]["spec"]["selectors"][0]["cel"]["expression"]:
        fail("doc/kubernetes.md: the class does not select the slice's driver")
    edits = cdi[0]["devices"][0]["containerEdits"]
    env = dict(e.split("=", 1) for e in edits.get("env", []))
    if set(env) != ALLOCATE_SETS:
        fail("doc/kubernetes.md: the CDI spec sets %s, Allocate %s"
             % (sorted(env), sorted(ALLOCATE_SETS)))
    cdir, hdir = os.path.dirname(cfg["--container-shim"]), os.path.dirname(cfg["--shim"])
    if env.get("XDM_BUDGET_DIR") != cfg["--budget-dir"] or \
            env.get("LD_PRELOAD") != "%s/libxdm.so.0 %s" % (cdir, cfg["--container-shim"]):
        fail("doc/kubernetes.md: the CDI spec's budget directory or preload is not "
             "Allocate's for the DaemonSet")
    mounts = sorted((m["hostPath"], m["containerPath"]) for m in edits.get("mounts", []))
    if mounts != sorted([(cfg["--budget-dir"], cfg["--budget-dir"]),
                         (cfg["--shim"], cfg["--container-shim"]),
                         (hdir + "/libxdm.so.0", cdir + "/libxdm.so.0")]):
        fail("doc/kubernetes.md: the CDI spec mounts %s, not what Allocate mounts" % mounts)


def check_prometheus(src, prom, ds):
    labels = ds["spec"]["template"]["metadata"]["labels"]
    app = labels.get("app.kubernetes.io/name")
    ports = [p.get("name") for c in ds["spec"]["template"]["spec"]["containers"]
             for p in c.get("ports") or []]
    jobs = by_name([dict(j, name=j.get("job_name")) for j in prom.get("scrape_configs", [])],
                   "jobs")
    job = jobs.get("xdm")
    if not job:
        fail("deploy/prometheus.yml has no job xdm")
        return
    keep = {}
    for r in job.get("relabel_configs", []):
        if r.get("action") == "keep":
            keep[tuple(r.get("source_labels", []))] = r.get("regex")
    if keep.get(("__meta_kubernetes_pod_label_app_kubernetes_io_name",)) != app:
        fail("deploy/prometheus.yml does not keep the pods labelled %s" % app)
    if keep.get(("__meta_kubernetes_pod_container_port_name",)) not in ports:
        fail("deploy/prometheus.yml keeps port %s; the DaemonSet's are %s"
             % (keep.get(("__meta_kubernetes_pod_container_port_name",)), ports))
    ns = ds["metadata"]["namespace"]
    sd = job.get("kubernetes_sd_configs", [{}])[0]
    if ns not in sd.get("namespaces", {}).get("names", []):
        fail("deploy/prometheus.yml does not look in namespace %s" % ns)
    promtool = shutil.which("promtool")
    if not promtool:
        print("deploy_check: promtool is not installed: deploy/prometheus.yml read, "
              "not checked by Prometheus")
        return
    path = os.path.join(src, "deploy", "prometheus.yml")
    r = subprocess.run([promtool, "check", "config", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode == 0:
        return
    if "field kubernetes_sd_configs not found" not in r.stdout:
        fail("promtool refuses deploy/prometheus.yml:\n" + r.stdout)
        return
    # Debian's Prometheus is built without Kubernetes discovery: check the
    # rest of the file with a static target in its place.
    text = read(path)
    start = text.index("    kubernetes_sd_configs:")
    end = text.index("    relabel_configs:")
    with tempfile.TemporaryDirectory() as tmp:
        alt = os.path.join(tmp, "prometheus.yml")
        with open(alt, "w") as f:
            f.write(text[:start] + "    static_configs:\n      - targets:\n"
                    "          - \"localhost:9470\"\n" + text[end:])
        r = subprocess.run([promtool, "check", "config", alt], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            fail("promtool refuses deploy/prometheus.yml (its Kubernetes discovery "
                 "swapped for a static target, which this promtool lacks):\n" + r.stdout)
        else:
            print("deploy_check: promtool has no Kubernetes discovery; the rest of "
                  "deploy/prometheus.yml passes promtool check config")


# What the DaemonSet must say itself rather than leave to a default: the
# paths the pods and the node see, and the resource the pods ask for.
EXPLICIT = ("--resource", "--unit", "--budget-dir", "--shim", "--container-shim",
            "--kubelet-dir")
DS_FLAGS = {}


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) == 3 else ""
    for page in os.listdir(os.path.join(src, "man")):
        if re.match(r".*\.[1-8]\Z", page):
            DOCUMENTED_ENV.update(re.findall(r"\bXDM_[A-Z0-9_]+", man_text(src, page)))
    if not os.path.exists(os.path.join(src, "man", "xdm-device-plugin.8")):
        print("deploy_check: man/xdm-device-plugin.8 is not in this tree: there is no "
              "plugin to check deploy/ against")
        return 77
    man = man_text(src, "xdm-device-plugin.8")
    dockerfile = read(os.path.join(src, "deploy", "Dockerfile"))

    ds_docs = load(src, "deploy/xdm-device-plugin.yaml")
    pods = load(src, "deploy/example-pods.yaml")
    prom = load(src, "deploy/prometheus.yml")
    if len(ds_docs) != 1 or ds_docs[0].get("kind") != "DaemonSet":
        fail("deploy/xdm-device-plugin.yaml should hold one DaemonSet")
        return 1
    ds = ds_docs[0]
    cfg = check_plugin_daemonset(src, build, ds, man, dockerfile)
    if cfg is None:
        return 1
    units = check_pods(pods, cfg)
    if run_allocate(build, cfg, units) is None:
        print("deploy_check: tests/k8s/xdm_k8s_allocate is not built: Allocate's answer "
              "not compared")
    if prom:
        check_prometheus(src, prom[0], ds)
    check_doc(src, cfg, units)
    if "--with-device-plugin=yes" not in dockerfile:
        fail("deploy/Dockerfile does not ask configure for the plugin by name")
    # The commands the DaemonSet runs are where the image's make install put
    # them: prefix /usr, libdir /usr/lib (where install-shim looks).
    if "--prefix=/usr " not in dockerfile or "--libdir" in dockerfile:
        fail("deploy/Dockerfile must configure --prefix=/usr and the default libdir: "
             "the DaemonSet runs /usr/bin/... and install-shim reads /usr/lib")
    if "${XDM_LIBDIR:-/usr/lib}" not in read(os.path.join(src, "deploy", "install-shim.sh")):
        fail("deploy/install-shim.sh does not read the shim from /usr/lib, the image's libdir")
    print("deploy_check: %d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
