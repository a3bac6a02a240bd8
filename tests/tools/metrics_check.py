# SPDX-License-Identifier: MIT
"""metrics_check.py METRICS PS_JSON KEY - that a scrape of xdmctl metrics
says what `xdmctl --json ps` says of the budget KEY, metric by metric.

The text is read by a parser of the exposition format 0.0.4 written here
from the format's rules (standard library only): every sample after its
family's one HELP and TYPE, label values unescaped (backslash, double
quote, newline), the text UTF-8.  Exit 0, or a sentence naming what
differs.
"""
import json
import re
import sys

SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')
UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}

COUNTERS = {"xdm_budget_refusals_total", "xdm_budget_group_refusals_total"}
BUDGET = {"xdm_budget_limit_bytes": "limit", "xdm_budget_used_bytes": "used",
          "xdm_budget_peak_bytes": "peak", "xdm_budget_refusals_total": "refusals"}
GROUP = {"xdm_budget_group_limit_bytes": "limit", "xdm_budget_group_used_bytes": "used",
         "xdm_budget_group_peak_bytes": "peak",
         "xdm_budget_group_refusals_total": "refusals",
         "xdm_budget_group_members": "members"}
PROCESS = {"xdm_process_held_bytes", "xdm_process_live"}


def labels_of(body):
    labels, i = {}, 0
    while i < len(body):
        m = LABEL.match(body, i)
        assert m, "no label at %r" % body[i:]
        i, value = m.end(), ""
        while body[i] != '"':
            if body[i] == "\\":
                value += UNESCAPE[body[i + 1]]
                i += 2
            else:
                value += body[i]
                i += 1
        assert m.group(1) not in labels, "label %s twice" % m.group(1)
        labels[m.group(1)] = value
        i += 1
        if i < len(body):
            assert body[i] == ",", "no comma at %r" % body[i:]
            i += 1
    return labels


def parse(text):
    """{name: {"type", "help", "samples": [(labels, value)]}}, families in order."""
    families, current = {}, None
    for line in text.split("\n"):
        if not line or (line.startswith("#") and not line.startswith(("# HELP ", "# TYPE "))):
            continue
        if line.startswith("# HELP "):
            name, text_ = line[7:].split(" ", 1)
            assert name not in families, "a second HELP of %s" % name
            families[name] = {"help": text_, "samples": []}
            current = name
            continue
        if line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert name == current and "type" not in families[name], line
            families[name]["type"] = kind
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample: %r" % line
        assert m.group(1) == current, "%s outside its family" % m.group(1)
        families[current]["samples"].append((labels_of(m.group(2)), m.group(3)))
    return families


def value(v):
    return 2**64 - 1 if v == "+Inf" else int(v)


def main():
    text = open(sys.argv[1], "rb").read().decode("utf-8")
    doc = json.load(open(sys.argv[2]))
    key = sys.argv[3]
    fams = parse(text)
    want = set(BUDGET) | set(GROUP) | PROCESS
    assert set(fams) == want, "families %s, not %s" % (sorted(fams), sorted(want))
    for name, fam in fams.items():
        assert fam["type"] == ("counter" if name in COUNTERS else "gauge"), (name, fam["type"])
        assert name.startswith("xdm_") and fam["help"], name
    budgets = [b for b in doc["budgets"] if b["key"] == key]
    assert len(budgets) == 1, "ps lists the budget %s %d times" % (key, len(budgets))
    b = budgets[0]
    base = {"gpu": b["device"], "key": key}

    def ours(name):
        return [(l, v) for l, v in fams[name]["samples"] if l["key"] == key]

    for name, field in BUDGET.items():
        s = ours(name)
        assert len(s) == 1 and s[0][0] == base, (name, s)
        assert value(s[0][1]) == b[field], (name, s[0][1], b[field])
    for name, field in GROUP.items():
        s = {l["group"]: (l, v) for l, v in ours(name)}
        assert len(s) == len(ours(name)) == len(b["groups"]), (name, s, b["groups"])
        for g in b["groups"]:
            l, v = s[g["name"]]
            assert l == dict(base, group=g["name"]), (name, l)
            assert value(v) == g[field], (name, g["name"], v, g[field])
    for name in PROCESS:
        s = ours(name)
        assert len(s) == len(b["processes"]), (name, s, b["processes"])
        for q in b["processes"]:
            want_labels = dict(base, pid=str(q["pid"]), pidns=str(q["pidns"]),
                               container=q["container"], group=q["group"] or "",
                               command=q["command"], via=q["via"])
            got = [v for l, v in s if l == want_labels]
            assert len(got) == 1, (name, want_labels, s)
            want_value = q["bytes"] if name == "xdm_process_held_bytes" else \
                int(q["state"] != "dead")
            assert int(got[0]) == want_value, (name, q, got[0])


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit("metrics_check: %s" % (e,))
